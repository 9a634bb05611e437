"""The console scripts' entry points: `t2t-trainer` calls `launcher.trainer()`, and so on.

Each imports its binary (`t2t_keras.bin.<module>`) and runs it, with two things done
before TensorFlow is imported:

    t2t-trainer --version      prints `version_line` and exits 0 (no TensorFlow start-up)
    a part that cannot be imported (a broken or partial install) prints one line naming
        the missing module and how to reinstall, and exits 1, instead of a traceback.

This module imports only the standard library. setup.py reads BINARIES (without
importing it) for the console scripts, each pointing at the function of its module's name.
"""

import importlib
import importlib.metadata
import platform
import sys

from t2t_keras import __version__

# module of t2t_keras.bin -> the console script's name
BINARIES = {"datagen": "t2t-datagen", "trainer": "t2t-trainer", "decoder": "t2t-decoder",
            "exporter": "t2t-exporter", "avg_all": "t2t-avg-all", "bleu": "t2t-bleu",
            "evalb": "t2t-evalb", "param_table": "t2t-param-table", "sweep": "t2t-sweep",
            "serve": "t2t-serve", "data_service": "t2t-data-service",
            "t2t_import": "t2t-import"}


def version_line(name):
  """`<name> <version> (t2t-keras; TensorFlow x, Keras y, Python z)`, without importing
  TensorFlow (the installed distributions' versions)."""
  def installed(distribution):
    try:
      return importlib.metadata.version(distribution)
    except importlib.metadata.PackageNotFoundError:
      return "not installed"
  return (f"{name} {__version__} (t2t-keras; TensorFlow {installed('tensorflow')}, "
          f"Keras {installed('keras')}, Python {platform.python_version()})")


# The top-level modules of setup.py's install_requires: a ModuleNotFoundError naming one of
# them (or a part of t2t_keras) is a broken install; any other is the caller's own code's
# (a --t2t_usr_dir import) and keeps its traceback.
DEPENDENCIES = ("tensorflow", "keras", "tensorflow_text", "tensorflow_datasets", "sacrebleu",
                "sacremoses", "absl", "tensorboard", "sentencepiece", "num2words",
                "matplotlib", "nltk", "starlette", "uvicorn", "prometheus_client", "yaml")


def launch(module, argv=None):
  """Runs binary `module` (a key of BINARIES) as its console script; returns only for a
  test's patched `run`. argv: the command line (default sys.argv)."""
  name = BINARIES[module]
  argv = sys.argv if argv is None else argv
  if "--version" in argv[1:]:
    print(version_line(name))
    sys.exit(0)
  try:
    binary = importlib.import_module(f"t2t_keras.bin.{module}")
  except ModuleNotFoundError as e:
    if not is_broken_install(e):
      raise
    sys.exit(missing_module_message(name, e.name))
  return binary.run()


def is_broken_install(error):
  """Whether ModuleNotFoundError `error` names a part of t2t_keras or a dependency."""
  top = (error.name or "").split(".")[0]
  return top == "t2t_keras" or top in DEPENDENCIES


def missing_module_message(name, missing):
  """The one line a binary prints when `missing` (a dotted module name of t2t_keras or of a
  dependency) cannot be imported."""
  if missing.split(".")[0] == "t2t_keras":
    return (f"{name}: error: this installation of t2t-keras has no {missing}: reinstall the "
            f"package (`pip install --force-reinstall --no-deps .` in its source tree, or "
            f"the same with its wheel)")
  return (f"{name}: error: {missing}, which t2t-keras needs, is not installed: install "
          f"t2t-keras's dependencies (`pip install -c requirements.lock .` in its source tree)")


def _entry_point(module):
  def entry_point():
    return launch(module)
  entry_point.__name__ = module
  entry_point.__doc__ = f"`{BINARIES[module]}`: t2t_keras.bin.{module}.run()"
  return entry_point


datagen = _entry_point("datagen")
trainer = _entry_point("trainer")
decoder = _entry_point("decoder")
exporter = _entry_point("exporter")
avg_all = _entry_point("avg_all")
bleu = _entry_point("bleu")
evalb = _entry_point("evalb")
param_table = _entry_point("param_table")
sweep = _entry_point("sweep")
serve = _entry_point("serve")
data_service = _entry_point("data_service")
t2t_import = _entry_point("t2t_import")
