"""Checkpoint averaging (section 6.1: "the last 5 checkpoints, written at 10-minute intervals").

    path = average_checkpoints(output_dir, num_last=5)      # output_dir/averaged/ckpt-<step>
    model, vocab, hparams, info, _ = runs.load(output_dir, checkpoint_path=path)

Works on the checkpoint files alone (no model is built): every float variable
of the `model` object is averaged over the chosen checkpoints; everything else
(optimizer slots, step, input iterator, RNG state, the object graph) is copied
from the newest one, so the result is a complete checkpoint that
`tf.train.Checkpoint(model=...)` restores like any other.
"""

import os

import time

import tensorflow as tf
from tensorflow.core.protobuf import trackable_object_graph_pb2

from t2t_keras.errors import InputError
from t2t_keras import fileio, runs

ROOT_CHILD = "model"  # the trainer's tf.train.Checkpoint(model=..., optimizer=..., ...)
AVERAGED_DIR = "averaged"


def checkpoint_paths(output_dir, log=None):
  """The CheckpointManager's kept, readable checkpoints in output_dir, oldest first.

  Truncated or missing ones are skipped (and logged with `log`).
  """
  paths = runs.checkpoint_prefixes(output_dir, log)
  if not paths:
    raise FileNotFoundError(f"no checkpoints found in {output_dir!r} (no 'checkpoint' "
                            "index and no ckpt-<step> files: is it a t2t-trainer output_dir?)")
  readable = runs.readable_checkpoints(paths, log)
  if not readable:
    raise InputError(f"no readable checkpoint in {output_dir!r}: "
                     f"{', '.join(os.path.basename(p) for p in paths)} are missing or truncated")
  return readable


def step_of(path):
  tail = os.path.basename(path).rsplit("-", 1)[-1]
  return int(tail) if tail.isdigit() else None


def object_checkpoint_keys(reader, child):
  """Checkpoint keys of every variable reachable from the root's `child` (e.g. "model").

  A variable is saved once, under the first path that reaches it (the model's
  weights often appear as `optimizer/_trainable_variables/<i>/...`), so keys are
  found by walking the saved object graph rather than by name prefix.
  """
  graph = trackable_object_graph_pb2.TrackableObjectGraph()
  graph.ParseFromString(reader.get_tensor("_CHECKPOINTABLE_OBJECT_GRAPH"))
  todo = [c.node_id for c in graph.nodes[0].children if c.local_name == child]
  if not todo:
    raise ValueError(f"checkpoint has no {child!r} object")
  seen, keys = set(todo), []
  while todo:
    node = graph.nodes[todo.pop()]
    keys.extend(a.checkpoint_key for a in node.attributes)
    for c in node.children:
      if c.node_id not in seen:
        seen.add(c.node_id)
        todo.append(c.node_id)
  return keys


def _read(prefix, names, dtypes):
  if not names:
    return []
  return tf.raw_ops.RestoreV2(prefix=prefix, tensor_names=names,
                              shape_and_slices=[""] * len(names), dtypes=dtypes)


def average_checkpoint_files(paths, output_prefix):
  """Averages the `model` object's float variables of `paths` into a new checkpoint at `output_prefix`.

  Non-model and non-float tensors come from the last path. Returns the
  number of averaged tensors. Raises ValueError if the checkpoints disagree on
  the model's variables or shapes.
  """
  if not paths:
    raise ValueError("no checkpoints to average")
  readers = [runs.checkpoint_reader(p) for p in paths]
  last = readers[-1]
  dtypes = last.get_variable_to_dtype_map()
  shapes = last.get_variable_to_shape_map()
  model_keys = sorted(k for k in object_checkpoint_keys(last, ROOT_CHILD)
                      if dtypes[k].is_floating)
  for path, reader in zip(paths, readers):
    other = reader.get_variable_to_shape_map()
    missing = [k for k in model_keys if k not in other or other[k] != shapes[k]]
    if missing:
      raise ValueError(f"{path} does not match {paths[-1]} at {missing[:3]}")

  names = sorted(dtypes)
  # RestoreV2 reads every dtype, the iterator's variant state included.
  tensors = _read(paths[-1], names, [dtypes[k] for k in names])
  averaged = set(model_keys)
  model_dtypes = [dtypes[k] for k in model_keys]
  totals = [tf.cast(t, tf.float64) for t in _read(paths[0], model_keys, model_dtypes)]
  for path in paths[1:]:
    totals = [a + tf.cast(t, tf.float64)
              for a, t in zip(totals, _read(path, model_keys, model_dtypes))]
  means = {k: tf.cast(t / len(paths), dtypes[k]) for k, t in zip(model_keys, totals)}
  tensors = [means[k] if k in averaged else t for k, t in zip(names, tensors)]
  tf.io.gfile.makedirs(os.path.dirname(output_prefix) or ".")
  # Written under a temporary prefix and renamed, data before index: an
  # interrupted run leaves no checkpoint that looks complete.
  tmp = output_prefix + "_incomplete"
  tf.raw_ops.SaveV2(prefix=tmp, tensor_names=names,
                    shape_and_slices=[""] * len(names), tensors=tensors)
  data = [f for f in tf.io.gfile.glob(tmp + ".data-*")]
  for f in data:
    tf.io.gfile.rename(f, output_prefix + f[len(tmp):], overwrite=True)
  tf.io.gfile.rename(tmp + ".index", output_prefix + ".index", overwrite=True)
  return len(model_keys)


def average_checkpoints(output_dir, num_last=5, output_path=None, paths=None, max_step=None):
  """Averages the last `num_last` checkpoints of a training run.

  Args:
    output_dir: the trainer's output_dir.
    num_last: how many of the newest kept checkpoints to average (the paper: 5
      for base models, 20 for big ones); fewer if fewer are kept.
    output_path: checkpoint prefix to write; default
      output_dir/averaged/ckpt-<newest step>. Its directory gets a `checkpoint`
      index, so `tf.train.latest_checkpoint` finds it.
    paths: explicit checkpoints to average instead of the newest of output_dir.
    max_step: only checkpoints at or before this step count as "newest": the
      average as it would have been when training had reached max_step.
  Returns:
    (the written checkpoint prefix, the averaged checkpoint paths).
  """
  if not paths:
    paths = checkpoint_paths(output_dir)
    if max_step is not None:
      kept = paths
      paths = [p for p in kept if step_of(p) is not None and step_of(p) <= max_step]
      if not paths:
        raise ValueError(f"no checkpoint at or before step {max_step} in {output_dir!r}; "
                         f"kept: {', '.join(os.path.basename(p) for p in kept)}")
    paths = paths[-num_last:]
  paths = list(paths)
  if output_path is None:
    step = step_of(paths[-1])
    output_path = os.path.join(output_dir, AVERAGED_DIR,
                               f"ckpt-{step}" if step is not None else "ckpt")
  average_checkpoint_files(paths, output_path)
  runs.write_checkpoint_index(output_path)
  return output_path, paths


def average_all(model_dir, output_dir, n=8, min_steps=0, max_step=None, wait_minutes=0.0,
                log=print):
  """t2t-avg-all: a moving average over a run's checkpoints, written as a run directory.

  For every readable checkpoint of model_dir with min_steps <= step (<= max_step)
  that has n - 1 older ones, writes output_dir/ckpt-<its step>: the mean of
  those n checkpoints (t2t's windows). If fewer than n exist, one average of
  all of them is written, with a note. Averages already in output_dir are kept.
  output_dir also gets the run's hparams.json, run.json and vocabulary, so it
  is a run directory that t2t-decoder and t2t-exporter load like model_dir.
  With wait_minutes > 0, new checkpoints are awaited that long (t2t's
  --wait_minutes) and averaged as they come.

  Returns:
    the written (or already present) average prefixes, oldest first.
  Raises:
    InputError / FileNotFoundError naming the directory when there is nothing
    to average.
  """
  if fileio.abspath(model_dir).rstrip("/") == fileio.abspath(output_dir).rstrip("/"):
    raise InputError(f"--output_dir must differ from --model_dir ({model_dir}): the averages "
                     "would replace the run's own checkpoint index")
  runs.check_run_files(model_dir)  # the files copied beside the averages read back
  written, done, deadline = [], set(), time.time() + 60 * wait_minutes
  while True:
    paths = [p for p in checkpoint_paths(model_dir, log)
             if (step_of(p) or 0) >= min_steps and (max_step is None or (step_of(p) or 0) <= max_step)]
    if not paths:
      raise InputError(f"no checkpoint in {model_dir!r} between step {min_steps} and "
                       f"{max_step if max_step is not None else 'the end'}")
    if len(paths) < n:
      log(f"note: {len(paths)} checkpoints in {model_dir} (fewer than --n={n}); averaging all")
      windows = [paths]
    else:
      windows = [paths[i - n + 1:i + 1] for i in range(n - 1, len(paths))]
    new = [w for w in windows if w[-1] not in done]
    for window in new:
      prefix = os.path.join(output_dir, f"ckpt-{step_of(window[-1])}")
      if not runs.checkpoint_is_readable(prefix):
        average_checkpoint_files(window, prefix)
        log(f"wrote {prefix}: mean of {', '.join(os.path.basename(p) for p in window)}")
      written.append(prefix)
      done.add(window[-1])
    if new:
      runs.copy_run_info(model_dir, output_dir)
      runs.write_checkpoint_index(*written)
      deadline = time.time() + 60 * wait_minutes
    if time.time() >= deadline:
      return written
    time.sleep(min(10.0, max(0.0, deadline - time.time())))
