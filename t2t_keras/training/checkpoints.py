"""A run's checkpoints: what they hold, where they go, resuming from the newest readable one
(or a warm start), the best one (output_dir/best/) and how to go on after a non-finite loss.

    ckpts = RunCheckpoints(model, optimizer, step, iterator, output_dir, None, config, log)
    ckpts.restore(warm_start)          # the path resumed from, or None (warm start, if any)
    ckpts.save()                       # output_dir/ckpt-<step>
    ckpts.save_best(step, tracker)     # output_dir/best/ckpt-<step>, with early stopping
"""

import os
import re

import tensorflow as tf

from t2t_keras.errors import InputError
from t2t_keras import runs
from t2t_keras.data import pipeline
from t2t_keras.training import early_stopping, warm_start

# The checkpoint's record of which input pipeline wrote its iterator state
# (`t2t_keras.data.pipeline.VERSION`); checkpoints written before it was kept
# hold version 1's; runs reading through the tf.data service record NO_INPUT_POSITION.
PIPELINE_KEY = "input_pipeline"
NO_INPUT_POSITION = 0  # the version a run reading through the tf.data service records
_PIPELINE_TENSOR = PIPELINE_KEY + "/.ATTRIBUTES/VARIABLE_VALUE"


class RunCheckpoints:
  """The checkpoints one worker of a run writes, and what it restores from them.

  A checkpoint holds the model, optimizer, step, dropout RNG states and this worker's
  tf.data iterator: a resumed run continues the exact batch sequence (tf.distribute's own
  iterators cannot be checkpointed in this TF version). The chief writes
  output_dir/ckpt-<step>, another worker output_dir/worker_tmp_<task id>/ckpt-<step>; with
  early stopping (config.early_stopping_steps), best/ beside them keeps the best one.

  Args:
    model, optimizer, step: the run's Keras model, its optimizer (built) and the int64
      step variable.
    iterator: this worker's training iterator (its position is saved; not with the tf.data
      service, whose stream has none).
    output_dir: the run directory.
    worker: None on the chief, else this worker's task id.
    config: the run's `TrainerConfig` (keep_checkpoints, data_service_address,
      reset_input_position, seed, early_stopping_steps).
    log: a print-like function.
  """

  def __init__(self, model, optimizer, step, iterator, output_dir, worker, config, log):
    self.model, self.optimizer, self.step = model, optimizer, step
    self.output_dir, self.chief, self.config, self.log = output_dir, worker is None, config, log
    rng_states = [v for v in model.variables if "seed_generator_state" in v.path]
    state = dict(model=model, optimizer=optimizer, step=step, rng_states=rng_states)
    # Without the iterator: for checkpoints whose iterator another pipeline wrote.
    self.without_data = tf.train.Checkpoint(**state)
    if config.data_service_address:  # the service's stream has no position to save
      self.checkpoint = tf.train.Checkpoint(**state, **{PIPELINE_KEY: tf.Variable(
          NO_INPUT_POSITION, trainable=False)})
    else:
      self.checkpoint = tf.train.Checkpoint(
          iterator=iterator, **state,
          **{PIPELINE_KEY: tf.Variable(pipeline.VERSION, trainable=False)})
    self.directory = output_dir if worker is None else os.path.join(
        output_dir, f"worker_tmp_{worker}")
    runs.repair_checkpoint_index(self.directory, log)  # else a damaged index starts over
    self.manager = tf.train.CheckpointManager(
        self.checkpoint, self.directory, max_to_keep=config.keep_checkpoints,
        checkpoint_name="ckpt")
    self.best = self._best_manager() if config.early_stopping_steps else None

  def _best_manager(self):
    """best/'s manager: one checkpoint, without the input position."""
    directory = os.path.join(self.directory, early_stopping.BEST_DIR)
    runs.repair_checkpoint_index(directory, self.log)
    return tf.train.CheckpointManager(self.without_data, directory, max_to_keep=1,
                                      checkpoint_name="ckpt")

  def restore(self, warm_start_source=None):
    """Restores the newest readable checkpoint; without one, the weights of
    `warm_start_source` ({"from": checkpoint, "optimizer": bool}, or None). Returns the path
    resumed from, or None."""
    path = restore_newest_readable(self._restore_target, self.manager, self.log)
    if path:
      self.log(f"resumed from {path} at step {int(self.step.numpy())}")
    elif warm_start_source:
      source, with_optimizer = warm_start_source["from"], warm_start_source["optimizer"]
      count = warm_start.load(source, self.model, self.optimizer if with_optimizer else None)
      state = "with its optimizer state" if with_optimizer else "fresh optimizer and schedule"
      self.log(f"warm start: {count} variables from {source} ({state})")
    return path

  def _restore_target(self, path):
    """The checkpoint object to restore `path` into: all of it, or all but the
    input position when an earlier input pipeline wrote it (a tf.data iterator
    restores only into the graph that saved it)."""
    seed = self.config.seed
    if self.config.data_service_address:
      self.log("the tf.data service's training stream starts afresh at the resumed step "
               "(its position cannot be checkpointed)")
      return self.without_data
    if self.config.reset_input_position:
      self.log(f"warning: --reset_input_position: the model, optimizer and step resume from "
               f"{path}; the data order starts afresh from --seed={seed}")
      return self.without_data
    written = input_pipeline_version(path)
    if written == pipeline.VERSION:
      return self.checkpoint
    if written == NO_INPUT_POSITION:
      self.log(f"warning: {path} was written reading through the tf.data service, which "
               f"keeps no input position: the data order starts afresh from --seed={seed}")
      return self.without_data
    self.log(f"warning: {path} holds its place in the training data for input pipeline "
             f"version {written}, and this t2t-keras reads with version {pipeline.VERSION}: "
             f"the model, optimizer and step resume; the data order starts afresh from "
             f"--seed={seed}")
    return self.without_data

  def save(self):
    """Saves this step's checkpoint (ckpt-<step>); returns its path."""
    return self.manager.save(checkpoint_number=int(self.step.numpy()))

  def save_best(self, step, tracker):
    """Saves this step as the best (output_dir/best/ckpt-<step>); the chief records
    `tracker`'s best (an `early_stopping.EarlyStopping`) in run.json and makes best/ a run
    directory. Returns the path."""
    path = self.best.save(checkpoint_number=step)
    if self.chief:
      runs.record(self.output_dir, best=tracker.record(path))
      runs.copy_run_info(self.output_dir, os.path.dirname(path))
      self.log(f"best dev {tracker.metric} so far ({tracker.value:.4g}): saved {path}")
    return path

  def recovery(self, learning_rate_constant):
    """How to go on after a non-finite loss: the same command meets it again (the run is
    deterministic) and the run's hparams are fixed, so a new run starts from the kept
    checkpoint, Adam's state and step included, at a lower learning rate."""
    latest = self.manager.latest_checkpoint
    if latest is None:
      return "Start again with a lower learning_rate_constant, or norm_type=pre."
    return (f"To go on at a lower learning rate, start a run in a new --output_dir with "
            f"--warm_start_from={latest} --warm_start_optimizer (the weights, Adam's moments "
            f"and the step come too) and --hparams=learning_rate_constant=<lower than "
            f"{learning_rate_constant:g}>")


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
