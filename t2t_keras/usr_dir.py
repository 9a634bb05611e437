"""User directories (t2t's --t2t_usr_dir): modules that register problems and hparams."""

import importlib
import os
import sys


def import_usr_dir(usr_dir):
  """Imports `usr_dir` as a package so its registrations run.

  The directory must be a Python package (hold an `__init__.py` that imports
  its modules) or hold plain modules, all of which are imported. Returns the
  imported module names. Works from notebooks as well as from flags.
  """
  if not usr_dir:
    return []
  path = os.path.abspath(os.path.expanduser(usr_dir.rstrip("/")))
  if not os.path.isdir(path):
    raise FileNotFoundError(f"t2t_usr_dir {usr_dir!r} is not a directory")
  parent, name = os.path.split(path)
  if os.path.exists(os.path.join(path, "__init__.py")):
    if parent not in sys.path:
      sys.path.insert(0, parent)
    importlib.import_module(name)
    return [name]
  if path not in sys.path:
    sys.path.insert(0, path)
  names = sorted(f[:-3] for f in os.listdir(path) if f.endswith(".py"))
  for n in names:
    importlib.import_module(n)
  return names
