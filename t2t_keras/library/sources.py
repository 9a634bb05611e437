"""What `t2t_keras.load` was given: a run, an ensemble of runs, a SavedModel export, or a
model from elsewhere (tensor2tensor, Marian, Hugging Face) imported into a temporary run.

    kind, where = resolve("opus-mt-en-de")   # ("run", "/tmp/t2t_keras_import_.../run")

Each kind is recognised by the file its writer always leaves: run.json (t2t-trainer,
t2t-avg-all, t2t-import), saved_model.pb (t2t-exporter, here or in a numbered version
directory), flags.txt beside model.ckpt-* files (t2t-trainer of tensor2tensor), a
decoder.yml or *.npz (an OPUS-MT release), config.json (the Hugging Face hub's layout).
"""

import glob
import os
import shutil
import tempfile

from t2t_keras import fileio, runs
from t2t_keras.errors import InputError

KINDS = ("a run directory (run.json)", "runs separated by commas (an ensemble)",
         "a SavedModel export (saved_model.pb, or numbered versions of it)",
         "a tensor2tensor output_dir (flags.txt, model.ckpt-*)",
         "a Marian / OPUS-MT release (decoder.yml or *.npz)",
         "a Hugging Face model directory (config.json)")


def kind(path):
  """What `path` holds, read from its files without loading or importing anything: "run"
  (a run directory or "a,b" runs), "export" (a SavedModel) or "foreign" (a model
  t2t-import reads). InputError listing what is recognised."""
  path = str(path)
  if runs.is_ensemble(path) or fileio.exists(os.path.join(path, runs.RUN_FILE)):
    return "run"
  if _saved_model(path):
    return "export"
  if _importer(path) is None:
    what = "no such directory" if not fileio.isdir(path) else "nothing recognised in it"
    raise InputError(f"{path}: {what}; expected one of: {'; '.join(KINDS)}")
  return "foreign"


def resolve(path, log):
  """(kind, where): ("run", a run directory or "a,b" runs), ("export", a SavedModel
  directory) or ("imported", a temporary run a foreign model was imported into, said
  through `log`; the caller loads it, then `remove_temporary`). InputError listing what
  is recognised."""
  path = str(path)
  found = kind(path)
  if found != "foreign":
    return found, path
  name, run_import, flag = _importer(path)
  output_dir = os.path.join(tempfile.mkdtemp(prefix="t2t_keras_import_"), "run")
  log(f"importing the {name} model in {path} into a temporary run ({output_dir}, removed "
      f"once loaded; `t2t-import {flag} --output_dir=DIR` keeps one)")
  try:
    run_import(path, output_dir, log=log)
  except BaseException:
    remove_temporary(output_dir)
    raise
  return "imported", output_dir


def remove_temporary(output_dir):
  """Removes an imported run's temporary directory (the run is in memory by then)."""
  shutil.rmtree(os.path.dirname(output_dir), ignore_errors=True)


def _saved_model(path):
  if not fileio.isdir(path):
    return False
  if fileio.exists(os.path.join(path, "saved_model.pb")):
    return True
  return any(name.isdigit() and fileio.exists(os.path.join(path, name, "saved_model.pb"))
             for name in (n.rstrip("/") for n in fileio.listdir(path)))


def _importer(path):
  """(what, import_run(path, output_dir, log=), the t2t-import flags) for a foreign
  model directory, or None."""
  if not os.path.isdir(path):
    return None
  has = lambda *names: any(glob.glob(os.path.join(path, n)) for n in names)  # noqa: E731
  if has("flags.txt") and has("model.ckpt-*", "checkpoint"):
    from t2t_keras.importing import t2t_checkpoint  # pylint: disable=import-outside-toplevel
    return ("tensor2tensor", t2t_checkpoint.import_run, f"--t2t_dir={path}")
  if has("decoder.yml", "*.npz"):
    from t2t_keras.importing import marian  # pylint: disable=import-outside-toplevel
    return ("Marian", marian.import_run, f"--from=marian --marian_dir={path}")
  if has("config.json"):
    from t2t_keras.importing import hf  # pylint: disable=import-outside-toplevel
    return ("Hugging Face", hf.import_run, f"--from=hf --hf_dir={path}")
  return None
