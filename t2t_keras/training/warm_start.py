"""Warm start: a new run begins from another run's weights (t2t's --warm_start_from).

    source = warm_start.resolve("t2t_train/base")      # a run dir, an averaged run dir
    warm_start.check_vocabulary(source, "t2t_data/vocab.translate_ende_multi30k.model")
    warm_start.load(source.checkpoint, model)           # or (model, optimizer) with its state

Only trainable weights are copied by default: the new run keeps its own dropout
RNG states (from its --seed), its own step counter, and a fresh optimizer, so
the learning-rate schedule warms up again. With `optimizer=...`, Adam's moments
and iteration count come too (the schedule continues where the source stopped).

Variables are matched as TensorFlow's checkpoint restore matches them: by the
names on the path from the checkpoint's root (model/encoder_layer_0/...), read
from the checkpoint's object graph. Before anything is assigned every variable
is checked: one missing from the checkpoint, one of another shape, or a model
weight in the checkpoint the new model has no place for, stops with one line
naming the first such variable.
"""

import collections
import os

import tensorflow as tf

from t2t_keras import fileio, runs
from t2t_keras.checkpoint_graph import (OBJECT_GRAPH as _OBJECT_GRAPH, matched_variables,
                                        model_keys, object_graph)
from t2t_keras.errors import InputError

Source = collections.namedtuple("Source", ["checkpoint", "run_dir"])
Source.__doc__ = """What --warm_start_from named: a checkpoint prefix, and the run directory
holding it (its hparams.json, run.json and vocabulary), or None for a bare checkpoint."""


def resolve(path):
  """A `Source` for a run directory (its newest readable checkpoint), a directory of
  checkpoints, or a checkpoint prefix; InputError when it is none of them."""
  flag = f"--warm_start_from={path}"
  if fileio.isdir(path):
    if fileio.exists(os.path.join(path, runs.RUN_FILE)):
      try:
        return Source(runs.latest_checkpoint(path), path)
      except FileNotFoundError as e:
        raise InputError(f"{flag}: {e}") from None
    prefix = tf.train.latest_checkpoint(path)
    if prefix and runs.checkpoint_is_readable(prefix):
      return Source(prefix, None)
    raise InputError(f"{flag}: the directory holds no run ({runs.RUN_FILE}) and no "
                     "readable checkpoint")
  if runs.checkpoint_is_readable(path):
    run_dir = os.path.dirname(path)
    return Source(path, run_dir if fileio.exists(os.path.join(run_dir, runs.RUN_FILE))
                  else None)
  raise InputError(f"{flag}: not a run directory, a checkpoint directory or a readable "
                   "checkpoint prefix (give DIR or DIR/ckpt-1000, not a file)")


def check_vocabulary(source, vocab_path):
  """InputError unless the source run's vocabulary copy has `vocab_path`'s exact content.

  Returns False (nothing to compare) for a bare checkpoint outside a run directory.
  """
  if source.run_dir is None:
    return False
  _, info = runs.load_run_info(source.run_dir)
  theirs = info.get("vocab_path")
  if not theirs or not fileio.exists(theirs):
    raise InputError(f"--warm_start_from={source.run_dir}: the run has no vocabulary copy "
                     f"({runs.VOCAB_FILE}) to compare with {vocab_path}")
  if not fileio.same_content(theirs, vocab_path):
    raise InputError(f"--warm_start_from={source.run_dir}: its vocabulary ({theirs}) differs "
                     f"from this problem's ({vocab_path}); a warm start needs the same "
                     "vocabulary file")
  return True


def plan(checkpoint, model, optimizer=None):
  """[(variable, checkpoint key)] to assign; InputError naming the first mismatch.

  Model: its trainable variables, each present with its shape, and no model
  weight of the checkpoint left without a place (the RNG states, non-trainable,
  are neither copied nor required). Optimizer (when given): its own variables
  (moments, iterations), not the model's it also tracks.
  """
  reader = runs.checkpoint_reader(checkpoint)
  shapes = reader.get_variable_to_shape_map()
  if _OBJECT_GRAPH not in shapes:
    raise InputError(f"--warm_start_from: {checkpoint} is not an object-based (TF2) checkpoint")
  graph = object_graph(reader)
  trainable = {id(v) for v in model.trainable_variables}
  everything = matched_variables(graph, "model", model, model.variables)
  pairs = [p for p in everything if id(p[1]) in trainable]
  if optimizer is not None:
    model_ids = {id(v) for v in model.variables}
    pairs += matched_variables(graph, "optimizer", optimizer,
                               [v for v in optimizer.variables if id(v) not in model_ids])
  for path, variable, key in pairs:
    if key is None or key not in shapes:
      raise InputError(f"--warm_start_from: {checkpoint} has no {path} "
                       f"(shape {list(variable.shape)}): the model differs from the source run's")
    if list(shapes[key]) != list(variable.shape):
      raise InputError(f"--warm_start_from: {path} has shape {list(shapes[key])} in "
                       f"{checkpoint} and {list(variable.shape)} in this model")
  # A model weight of the checkpoint that nothing here matched (a layer this model lacks).
  in_checkpoint = model_keys(graph)
  matched = {key for _, _, key in everything}
  unused = sorted((path, key) for key, path in in_checkpoint.items() if key not in matched)
  if unused:
    path, key = min(unused, key=lambda u: ("seed_generator" in u[0], u))
    raise InputError(f"--warm_start_from: {checkpoint} holds {path} (shape "
                     f"{list(shapes[key])}), which this model has no place for: the "
                     "model differs from the source run's")
  return [(variable, key) for _, variable, key in pairs]


def load(checkpoint, model, optimizer=None):
  """Assigns the checkpoint's values to `model`'s trainable variables (and `optimizer`'s
  own, when given), after `plan`'s checks; returns how many variables were assigned."""
  pairs = plan(checkpoint, model, optimizer)
  reader = runs.checkpoint_reader(checkpoint)
  for variable, key in pairs:
    variable.assign(reader.get_tensor(key))
  return len(pairs)
