"""Resuming from the newest readable checkpoint of a run."""

import re

import tensorflow as tf

from t2t_keras.errors import InputError
from t2t_keras import runs

# The checkpoint's record of which input pipeline wrote its iterator state
# (`t2t_keras.data.pipeline.VERSION`); checkpoints written before it was kept
# hold version 1's; runs reading through the tf.data service record NO_INPUT_POSITION.
PIPELINE_KEY = "input_pipeline"
NO_INPUT_POSITION = 0  # the version a run reading through the tf.data service records
_PIPELINE_TENSOR = PIPELINE_KEY + "/.ATTRIBUTES/VARIABLE_VALUE"


def input_pipeline_version(path):
  """The input pipeline version whose iterator a checkpoint holds (1 if unrecorded)."""
  reader = runs.checkpoint_reader(path)
  if not reader.has_tensor(_PIPELINE_TENSOR):
    return 1
  return int(reader.get_tensor(_PIPELINE_TENSOR))


def restore_newest_readable(checkpoint, manager, log):
  """Restores from the newest readable of `manager`'s checkpoints.

  A truncated newer one (killed mid-write, disk full) is skipped with a
  warning. `checkpoint` is a tf.train.Checkpoint, or a function of the path
  returning the one to restore into. Returns the path restored, or None when
  there is none yet. Raises InputError when checkpoints exist but none reads back.
  """
  path = runs.newest_readable(manager.checkpoints, log)
  if path is not None:
    target = checkpoint(path) if callable(checkpoint) else checkpoint
    try:
      target.restore(path).assert_existing_objects_matched()
    except tf.errors.NotFoundError as e:
      if "dataset iterator" not in str(e):
        raise
      raise InputError(
          f"{path} holds the input position of data files that are not where it read them "
          f"({_missing_file(str(e))}): resume from the directory the run was started in, "
          "with the same --data_dir (a relative one is read from there)") from None
  elif manager.checkpoints:
    raise InputError(f"no readable checkpoint in {manager.directory}: "
                     f"{', '.join(manager.checkpoints)} are all missing or truncated; "
                     "move them away to start afresh")
  return path


def _missing_file(message):
  """The data file a failed iterator restore names, from TensorFlow's message."""
  m = re.search(r"from checkpoint: (\S+?);", message)
  return m.group(1) if m else "a file of the run's data_dir"
