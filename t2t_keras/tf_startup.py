"""Imports TensorFlow without its start-up chatter, for processes that print logs.

The PyPI wheel prints a CUDA probe error and oneDNN notices on CPU machines;
`import_tensorflow_quietly()` sends them to /dev/null and turns TensorFlow's
Python warnings off (e.g. "triggered tf.function retracing" from evaluation
batches of new shapes). Set T2T_VERBOSE_TF=1 to see all of it. Before the
import it points XLA's persistent compilation cache at a per-CPU directory
(`t2t_keras.xla_cache`; T2T_XLA_CACHE= turns it off). Every binary and every
child process of a sweep calls it first.
"""

import os

from t2t_keras import xla_cache


def import_tensorflow_quietly():
  """Imports TensorFlow (once) with stderr silenced; later calls do nothing."""
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  xla_cache.configure()
  if os.environ.get("T2T_VERBOSE_TF"):
    import tensorflow  # noqa: F401  pylint: disable=import-outside-toplevel
    return
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    import tensorflow  # pylint: disable=import-outside-toplevel
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  tensorflow.get_logger().setLevel("ERROR")
