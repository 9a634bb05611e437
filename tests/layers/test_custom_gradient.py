"""layers/custom_gradient.py: tf.custom_gradient's gradients, without keeping every traced
graph in TensorFlow's gradient registry for the life of the process."""

import gc
import weakref

import numpy as np
import tensorflow as tf
from tensorflow.python.framework import ops  # pylint: disable=no-name-in-module

from t2t_keras.layers.custom_gradient import custom_gradient

REGISTRY = ops._gradient_registry._registry  # pylint: disable=protected-access


def _cube_with_gradient_two(x):
  """x**3 whose gradient is declared 2 * dy (not 3x**2): only a custom gradient gives it."""
  return x ** 3, lambda dy: 2.0 * dy


def _custom_entries():
  return {name for name in REGISTRY if name.startswith("CustomGradient-")}


def _trace_and_differentiate(decorator):
  """(a weakref to the traced graph, the registry entries its trace added, d/dx at x=[1, 2])."""
  cube = decorator(_cube_with_gradient_two)

  @tf.function(autograph=False)
  def grad(x):
    with tf.GradientTape() as tape:
      tape.watch(x)
      y = tf.reduce_sum(cube(x * 1.0))
    return tape.gradient(y, x)

  before = _custom_entries()
  concrete = grad.get_concrete_function(tf.TensorSpec([2], tf.float32))
  value = concrete(tf.constant([1.0, 2.0])).numpy()
  added = _custom_entries() - before
  return weakref.ref(concrete.graph), added, value


def test_gradients_are_tf_custom_gradients_in_a_function_and_eagerly():
  _, _, ours = _trace_and_differentiate(custom_gradient)
  _, _, theirs = _trace_and_differentiate(tf.custom_gradient)
  np.testing.assert_array_equal(ours, [2.0, 2.0])
  np.testing.assert_array_equal(theirs, ours)
  x = tf.constant([3.0])
  with tf.GradientTape() as tape:
    tape.watch(x)
    y = custom_gradient(_cube_with_gradient_two)(x)
  np.testing.assert_array_equal(y.numpy(), [27.0])
  np.testing.assert_array_equal(tape.gradient(y, x).numpy(), [2.0])


def test_the_graph_and_its_registry_entries_go_when_the_function_goes():
  graph, added, _ = _trace_and_differentiate(custom_gradient)
  gc.collect()
  assert added, "the trace registered no custom gradient: the test checks nothing"
  assert graph() is None
  assert not added & set(REGISTRY)


def test_tf_custom_gradient_still_keeps_its_graphs():
  """Why the module exists: if this fails, TensorFlow frees these graphs itself and
  layers/custom_gradient.py can be deleted in favour of tf.custom_gradient."""
  graph, added, _ = _trace_and_differentiate(tf.custom_gradient)
  gc.collect()
  assert graph() is not None
  assert added <= set(REGISTRY)
