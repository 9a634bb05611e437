"""Command-line binaries. They only parse flags and call library functions.

Importing this package imports TensorFlow with its start-up chatter (the CUDA
probe and oneDNN notices the PyPI wheel prints on CPU machines) sent to
/dev/null, and TensorFlow's Python warnings off (e.g. "triggered tf.function
retracing": the trainer traces once per batch shape on purpose), so binaries
print clean logs. Set T2T_VERBOSE_TF=1 to see all of it.
"""

import os


def _import_tensorflow_quietly():
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if os.environ.get("T2T_VERBOSE_TF"):
    import tensorflow  # noqa: F401
    return
  saved = os.dup(2)
  devnull = os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    import tensorflow
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  tensorflow.get_logger().setLevel("ERROR")


_import_tensorflow_quietly()


def app_run(main):
  """absl.app.run(main) with absl logging at WARNING unless --verbosity is given.

  Parts of TensorFlow log through absl at INFO (e.g. "Sharding callback
  duration" at every checkpoint); app.run sets INFO, so this lowers it after.
  """
  from absl import app, flags
  from absl import logging as absl_logging

  def quiet_main(argv):
    if not flags.FLAGS["verbosity"].present:
      absl_logging.set_verbosity(absl_logging.WARNING)
    return main(argv)

  app.run(quiet_main)


def define_flag(kind, name, default, help_text, **kwargs):
  """flags.DEFINE_<kind> unless another binary imported in this process defined `name`.

  The binaries share flag names (--problem, --output_dir, --t2t_usr_dir, ...);
  absl refuses a second definition, which breaks importing two binaries in one
  process (notebooks, tests). The first definition wins.
  """
  from absl import flags
  if name not in flags.FLAGS:
    getattr(flags, f"DEFINE_{kind}")(name, default, help_text, **kwargs)
