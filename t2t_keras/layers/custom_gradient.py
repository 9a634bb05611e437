"""`tf.custom_gradient` whose gradient, inside a tf.function, lives as long as the graph.

In graph mode `tf.custom_gradient` registers each call's gradient function in
TensorFlow's process-wide gradient registry under a fresh name ("CustomGradient-<uid>")
and never removes it (tensorflow/python/ops/custom_gradient.py, `_graph_mode_decorator`).
The entry's closure holds the traced tensors, so every graph traced through a custom
gradient (a training step, an evaluation, a search) stays in memory until the process
ends: about 100 MB per `transformer_tiny` training run in one process, which is what a
sweep, a server's hot reload or a test suite does (docs/notebook.md, "The suite's memory").

`custom_gradient(f)` is `tf.custom_gradient(f)`; after a graph-mode call it moves the
gradient functions the call registered onto the graph being traced and leaves in the
registry a function that holds them weakly. The gradient is looked up while its graph is
differentiated, so it is there whenever it can be used; once the graph is collected, its
registry entries go with it. The call's entries are the registry's new names, so another
thread registering custom gradients during the same trace would have its entries held by
this graph (the package traces on one thread). The registry has no public API:
`ops._gradient_registry` is TensorFlow's, and tests/layers/test_custom_gradient.py fails if
it changes.
"""

import functools
import weakref

import tensorflow as tf
from tensorflow.python.framework import ops  # pylint: disable=no-name-in-module

_REGISTRY = ops._gradient_registry._registry  # pylint: disable=protected-access
_PREFIX = "CustomGradient-"
_HELD = "_t2t_custom_gradients"  # the graph's attribute holding its gradient functions


def custom_gradient(f):
  """Decorator: as `tf.custom_gradient(f)`; f(*tensors) -> (outputs, grad_fn)."""
  decorated = tf.custom_gradient(f)

  @functools.wraps(f)
  def call(*args):
    if tf.executing_eagerly():
      return decorated(*args)
    before = set(_REGISTRY)
    outputs = decorated(*args)
    graph = ops.get_default_graph()
    if not hasattr(graph, _HELD):
      setattr(graph, _HELD, [])
    held = getattr(graph, _HELD)
    for name in set(_REGISTRY) - before:
      if name.startswith(_PREFIX):
        entry = _REGISTRY[name]
        held.append(entry["type"])
        entry["type"] = _weakly_held(name, entry["type"])
    return outputs

  return call


def _weakly_held(name, gradient):
  """A registry entry calling `gradient` while it lives; its death removes the entry."""
  ref = weakref.ref(gradient, lambda _: _REGISTRY.pop(name, None))

  def call(op, *grads):
    live = ref()
    if live is None:
      raise LookupError(f"the graph that registered {name} was collected")
    return live(op, *grads)

  return call
