"""Imports TensorFlow without its start-up chatter, for processes that print logs.

The PyPI wheel prints a CUDA probe error and oneDNN notices on CPU machines;
`import_tensorflow_quietly()` sends them to /dev/null and turns TensorFlow's
Python warnings off (e.g. "triggered tf.function retracing" from evaluation
batches of new shapes). Set T2T_VERBOSE_TF=1 to see all of it. Before the
import it points XLA's persistent compilation cache at a per-CPU directory
(`t2t_keras.xla_cache`; T2T_XLA_CACHE= turns it off). Every binary and every
child process of a sweep calls it first.

TensorFlow imports Keras, and Keras imports matplotlib.pyplot for its image-gallery plots
(`keras.visualization`), a large part of TensorFlow's import time (docs/notebook.md, the
suite's time), which no t2t-keras process calls: matplotlib is hidden while TensorFlow
imports, and our own plots (learning curves, attention maps, sweep reports) import it
when they draw. Only `keras.visualization.plot_*_gallery` then report matplotlib as
missing.
"""

import os
import sys

from t2t_keras import xla_cache


def import_tensorflow_quietly():
  """Imports TensorFlow (once) with stderr silenced; later calls do nothing."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  xla_cache.configure()
  if os.environ.get("T2T_VERBOSE_TF"):
    _import_tensorflow()
    return
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    tensorflow = _import_tensorflow()
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  tensorflow.get_logger().setLevel("ERROR")


def _import_tensorflow():
  """`import tensorflow` with matplotlib hidden (see the module's docstring) unless this
  process has imported it already; returns the module."""
  if "matplotlib" in sys.modules:
    import tensorflow  # pylint: disable=import-outside-toplevel
    return tensorflow
  sys.modules["matplotlib"] = None  # `import matplotlib...` raises ImportError meanwhile
  try:
    import tensorflow  # pylint: disable=import-outside-toplevel
  finally:
    if sys.modules.get("matplotlib", 0) is None:
      del sys.modules["matplotlib"]
  return tensorflow
