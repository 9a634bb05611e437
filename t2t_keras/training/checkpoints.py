"""Resuming from the newest readable checkpoint of a run."""

from t2t_keras.errors import InputError
from t2t_keras.training import model_io


def restore_newest_readable(checkpoint, manager, log):
  """Restores `checkpoint` from the newest readable of `manager`'s checkpoints.

  A truncated newer one (killed mid-write, disk full) is skipped with a
  warning. Returns the path restored, or None when there is none yet. Raises
  InputError when checkpoints exist but none reads back.
  """
  path = model_io.newest_readable(manager.checkpoints, log)
  if path is not None:
    checkpoint.restore(path).assert_existing_objects_matched()
  elif manager.checkpoints:
    raise InputError(f"no readable checkpoint in {manager.directory}: "
                     f"{', '.join(manager.checkpoints)} are all missing or truncated; "
                     "move them away to start afresh")
  return path
