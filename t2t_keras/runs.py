"""A run directory: what a training run leaves in output_dir, and the one way to load it.

    run = runs.load("t2t_train/numbers_tiny")   # newest readable checkpoint
    run = runs.load(run_dir, checkpoint_path=run_dir + "/averaged/ckpt-3000")
    run.model, run.vocab, run.hparams, run.info["problem"], run.checkpoint_path

The decoder, the exporter, selection, sweeps and recipes all load through `load`.
t2t-avg-all's output_dir is a run directory too (it copies hparams.json,
run.json and the vocabulary beside its averaged checkpoints).

output_dir/
  hparams.json     the training HParams (later steps reuse them)
  run.json         {"problem", "model", "hparams_set", "vocab_size", "vocab_file",
                    "t2t_keras_version" (of the program that last wrote it),
                    and where they apply "bucket_mode", "shuffle_buffer", "input_streams", "warm_start",
                    "best"}
  best/            the early-stopping best checkpoint, a run directory of its own
  vocab.model      a copy of the problem's sentencepiece model (self-contained runs)
  ckpt-<step>.*    tf.train checkpoints: model, optimizer, step, input iterator
  checkpoint       the CheckpointManager's index of kept checkpoints
"""

import json
import os
import re
import sys
from typing import NamedTuple

import tensorflow as tf

from t2t_keras import __version__, fileio, registry
from t2t_keras.errors import InputError
from t2t_keras.hparams_lib import HParams

HPARAMS_FILE = "hparams.json"
RUN_FILE = "run.json"
CHECKPOINT_INDEX = "checkpoint"  # tf.train.CheckpointManager's index of kept checkpoints
VOCAB_FILE = "vocab.model"


def save_run_info(output_dir, hparams, problem_name, vocab_size, vocab_path=None,
                  model_name="transformer", hparams_set=None, bucket_mode=None,
                  warm_start=None, best=None, shuffle_buffer=None, input_streams=None,
                  imported_from=None):
  """Writes hparams.json, a copy of the vocabulary and, last, run.json (each atomically):
  a directory with a run.json is a whole run (the importers write their checkpoints
  first, so a killed import leaves no run.json and can be run again).

  bucket_mode: the training stream's bucketing ("auto" resolved), kept so that
  a resumed run reads the same batches whatever its XLA or replica settings.
  warm_start: {"from": checkpoint, "optimizer": bool} when the run started from
  another run's weights (t2t-trainer --warm_start_from).
  best: the early-stopping best so far (`training/early_stopping.py`), kept on resume.
  shuffle_buffer: the training stream's shuffle buffer (records), kept on resume (the
  checkpointed iterator restores only into the same pipeline).
  input_streams: the training pipeline's parallel batching streams, kept on resume (so).
  """
  tf.io.gfile.makedirs(output_dir)
  hparams.save(os.path.join(output_dir, HPARAMS_FILE))
  info = {"problem": problem_name, "model": model_name, "hparams_set": hparams_set,
          "vocab_size": int(vocab_size), "vocab_file": VOCAB_FILE if vocab_path else None,
          "t2t_keras_version": __version__}
  if bucket_mode:
    info["bucket_mode"] = bucket_mode
  if shuffle_buffer:
    info["shuffle_buffer"] = int(shuffle_buffer)
  if input_streams:
    info["input_streams"] = int(input_streams)
  if warm_start:
    info["warm_start"] = dict(warm_start)
  if best:
    info["best"] = dict(best)
  if imported_from:
    info["imported_from"] = dict(imported_from)  # t2t-import: where the weights came from
  if vocab_path:
    fileio.copy_atomic(vocab_path, os.path.join(output_dir, VOCAB_FILE))
  fileio.write_atomic(os.path.join(output_dir, RUN_FILE), json.dumps(info, indent=2))


def copy_run_info(model_dir, output_dir):
  """hparams.json, run.json and the vocabulary copy of model_dir into output_dir (each
  written atomically): output_dir becomes a run directory of its own checkpoints
  (t2t-avg-all's output, the early-stopping best/)."""
  for name in (HPARAMS_FILE, RUN_FILE, VOCAB_FILE):
    src = os.path.join(model_dir, name)
    if fileio.exists(src):
      fileio.copy_atomic(src, os.path.join(output_dir, name))


def record(output_dir, **entries):
  """Adds `entries` to output_dir's run.json (rewritten atomically)."""
  path = os.path.join(output_dir, RUN_FILE)
  info = fileio.read_json(path)
  info.update(entries)
  fileio.write_atomic(path, json.dumps(info, indent=2))


def load_run_info(output_dir):
  """(HParams, run-info dict) saved by a training run; FileNotFoundError names the path,
  InputError a damaged file."""
  paths = [os.path.join(output_dir, n) for n in (HPARAMS_FILE, RUN_FILE)]
  for path in paths:
    if not fileio.exists(path):
      raise FileNotFoundError(f"{path} not found: is {output_dir!r} a t2t-trainer output_dir?")
  info = fileio.read_json(paths[1])
  if info.get("vocab_file"):
    info["vocab_path"] = os.path.join(output_dir, info["vocab_file"])
  return HParams.load(paths[0]), info


def check_run_files(output_dir):
  """hparams.json, run.json and the vocabulary copy of output_dir read back (what a tool
  that copies them checks first); FileNotFoundError / InputError naming the file."""
  from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
  _, info = load_run_info(output_dir)
  if info.get("vocab_path") and fileio.exists(info["vocab_path"]):
    vocabulary.load(info["vocab_path"])


# Hparams that only training reads: t2t's scripts pass the training's --hparams to the
# decoder and the exporter too, and a value of these that differs changes nothing there.
TRAINING_ONLY_HPARAMS = frozenset((
    "attention_dropout", "batch_size", "bucket_mode", "bucket_step", "clip_grad_norm",
    "gradient_accumulation_steps", "label_smoothing", "layer_prepostprocess_dropout",
    "learning_rate_constant", "learning_rate_warmup_steps", "optimizer_adam_beta1",
    "optimizer_adam_beta2", "optimizer_adam_epsilon", "packed_length", "rdrop_alpha",
    "relu_dropout", "train_steps"))


def check_run_matches(output_dir, *, problem=None, model=None, hparams_set=None,
                      hparams=None, compare_values=True):
  """Refuses flags that contradict what the run in output_dir recorded.

  t2t's decoder and exporter take --problem, --model, --hparams_set and
  --hparams; here the run directory already records them, so a given value
  must agree. None means "not given".

  Args:
    output_dir: a trainer output_dir (hparams.json, run.json).
    problem, model, hparams_set: names given on the command line, or None.
    hparams: an overrides string given on the command line, or None; applied
      to `hparams_set` if given, else to the run's hparams, and the result
      compared with the run's hparams (also when `hparams_set` is given and
      the run did not record its set's name).
    compare_values: False checks the names only (the trainer compares the
      values itself, overrides included).
  Raises:
    InputError naming the flag, the given value and the recorded one; a value of
    TRAINING_ONLY_HPARAMS may differ.
  """
  saved, info = load_run_info(output_dir)
  for key, value in (("problem", problem), ("model", model), ("hparams_set", hparams_set)):
    recorded = info.get(key)
    if value is not None and recorded is not None and value != recorded:
      raise InputError(f"--{key}={value} does not match the run in {output_dir}, "
                       f"trained with --{key}={recorded} ({RUN_FILE})")
  if not compare_values or not hparams and (hparams_set is None
                                             or hparams_set == info.get("hparams_set")):
    return  # names agree; the run's own overrides are in hparams.json
  wanted = (registry.hparams(hparams_set) if hparams_set else saved).override(hparams or "")
  diff = [k for k in saved.diff(wanted) if k not in TRAINING_ONLY_HPARAMS]
  if diff:
    given = "--hparams_set/--hparams" if hparams_set and hparams else (
        "--hparams" if hparams else "--hparams_set")
    details = ", ".join(f"{k}={wanted.get(k)!r} (run: {saved.get(k)!r})" for k in diff[:4])
    raise InputError(f"{given} give {details}, which does not match the run in "
                     f"{output_dir} ({HPARAMS_FILE})")


def build_model(hparams, vocab_size, model_name="transformer"):
  """A built (variables created) registered model."""
  model = registry.model(model_name)(vocab_size, hparams)
  model.build_for_ids()
  return model


def checkpoint_reader(prefix):
  """A CheckpointReader of the checkpoint prefix (DIR/ckpt-N) on any filesystem.

  tf.train.load_checkpoint would first ask whether the prefix is a directory, which
  ram:// answers yes for any prefix of a file name.
  """
  return tf.compat.v1.train.NewCheckpointReader(prefix)


def checkpoint_is_readable(path):
  """True if the checkpoint prefix `path` exists and every tensor in it reads back.

  A run killed while writing, a full disk or a copy cut short leave a
  truncated index or data file; this reads all of it (a few hundred MB at most).
  """
  try:
    reader = checkpoint_reader(path)
    dtypes = reader.get_variable_to_dtype_map()
    names = sorted(dtypes)
    tf.raw_ops.RestoreV2(prefix=path, tensor_names=names, shape_and_slices=[""] * len(names),
                         dtypes=[dtypes[n] for n in names])
    return True
  except Exception:  # pylint: disable=broad-except  (any failure means "not readable")
    return False


def readable_checkpoints(paths, log=None):
  """The readable ones of `paths` (any order kept); each skipped one is logged."""
  kept = []
  for path in paths:
    if checkpoint_is_readable(path):
      kept.append(path)
    elif log:
      log(f"warning: skipping {path}: missing or truncated checkpoint files")
  return kept


def newest_readable(paths, log=None):
  """The newest (last) readable checkpoint of `paths`, oldest first; None if none reads back.

  Each unreadable newer one is skipped and logged with `log`.
  """
  for path in reversed(list(paths)):
    if checkpoint_is_readable(path):
      return path
    if log:
      log(f"warning: skipping {path}: missing or truncated checkpoint files")
  return None


def latest_checkpoint(output_dir, log=None):
  """The newest readable checkpoint of output_dir (unreadable newer ones are skipped and logged)."""
  paths = checkpoint_prefixes(output_dir, log)
  if not paths:
    raise FileNotFoundError(f"no checkpoint found in {output_dir!r}")
  path = newest_readable(paths, log)
  if path is None:
    raise InputError(f"no readable checkpoint in {output_dir!r}: "
                     f"{', '.join(os.path.basename(p) for p in paths)} are missing or truncated")
  return path


def checkpoint_prefixes(directory, log=None):
  """The checkpoints of `directory`, oldest first, as its index (the `checkpoint` file)
  lists them; where the index is missing or damaged but ckpt-<step> files are there,
  those, with a warning through `log` (default: stderr)."""
  state = _index_state(directory)
  paths = list(state.all_model_checkpoint_paths) if state else []
  if state and state.model_checkpoint_path and state.model_checkpoint_path not in paths:
    paths.append(state.model_checkpoint_path)
  if paths:
    return paths
  found = checkpoint_files(directory)
  names = ", ".join(os.path.basename(p) for p in found)
  if found and (directory, names) not in _WARNED:  # once: t2t-avg-all --wait_minutes polls
    _WARNED.add((directory, names))
    (log or _warn)(f"warning: {os.path.join(directory, CHECKPOINT_INDEX)} is missing or "
                   f"damaged; using the checkpoint files beside it: {names}")
  return found


_WARNED = set()  # (directory, checkpoint names) that checkpoint_prefixes warned about


def checkpoint_files(directory):
  """The ckpt-<step> prefixes whose .index file is in `directory`, by step."""
  steps = []
  for name in fileio.glob(os.path.join(directory, "ckpt-*.index")):
    match = re.fullmatch(r"ckpt-(\d+)\.index", os.path.basename(name))
    if match:
      steps.append(int(match.group(1)))
  return [os.path.join(directory, f"ckpt-{step}") for step in sorted(steps)]


def repair_checkpoint_index(directory, log=None):
  """Where `directory`'s index (the `checkpoint` file) is missing or damaged while
  ckpt-<step> files are there, writes it back listing them (a warning through `log`), so a
  resumed run continues from the newest instead of starting over beside them; a damaged
  index with no checkpoint files is removed. Returns whether it changed anything."""
  index = os.path.join(directory, CHECKPOINT_INDEX)
  if _index_state(directory) is not None:
    return False
  found = checkpoint_files(directory)
  if found:
    # With each file's time: a CheckpointManager keeps (and lists) only checkpoints whose
    # recorded time is after last_preserved_timestamp.
    stamps = [tf.io.gfile.stat(p + ".index").mtime_nsec / 1e9 for p in found]
    tf.compat.v1.train.update_checkpoint_state(
        directory, os.path.basename(found[-1]), [os.path.basename(p) for p in found],
        all_model_checkpoint_timestamps=stamps, last_preserved_timestamp=min(stamps) - 1)
    (log or _warn)(f"warning: {index} was missing or damaged; written again from the "
                   f"checkpoint files: {', '.join(os.path.basename(p) for p in found)}")
    return True
  if fileio.exists(index):
    fileio.remove(index)
    (log or _warn)(f"warning: {index} was damaged and no checkpoint files are beside it; "
                   "removed")
    return True
  return False


def write_checkpoint_index(*prefixes):
  """The `checkpoint` file listing `prefixes` (oldest first; they share a directory), so that
  tf.train.latest_checkpoint(dir) finds the last."""
  names = [os.path.basename(p) for p in prefixes]
  path = os.path.join(os.path.dirname(prefixes[-1]), CHECKPOINT_INDEX)
  fileio.write_atomic(path, f'model_checkpoint_path: "{names[-1]}"\n'
                      + "".join(f'all_model_checkpoint_paths: "{n}"\n' for n in names))


def _index_state(directory):
  """tf.train.get_checkpoint_state, None also for an empty index (where it raises)."""
  try:
    return tf.train.get_checkpoint_state(directory)
  except ValueError:  # "Invalid checkpoint state loaded from ...": no model_checkpoint_path
    return None


class Run(NamedTuple):
  """A loaded run: its model (restored), vocabulary, training hparams, run.json and checkpoint."""
  model: object
  vocab: object
  hparams: HParams
  info: dict
  checkpoint_path: str


def load(output_dir, checkpoint_path=None):
  """The run in output_dir, restored from `checkpoint_path` (default: its newest readable).

  Several runs, comma-separated ("runs/a,runs/b"), load as one ensemble
  (`load_ensemble`). Raises FileNotFoundError naming what is missing
  (hparams.json, run.json, a checkpoint, the vocabulary copy) and InputError for
  an unreadable checkpoint.
  """
  from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
  if is_ensemble(output_dir):
    return load_ensemble(split_runs(output_dir), checkpoint_path)
  model, hparams, info, path = load_model(output_dir, checkpoint_path)
  vocab_path = info.get("vocab_path")
  if not vocab_path or not fileio.exists(vocab_path):
    raise FileNotFoundError(f"{output_dir} has no vocabulary copy ({VOCAB_FILE}, "
                            f"named by {RUN_FILE}'s vocab_file)")
  return Run(model, vocabulary.load(vocab_path), hparams, info, path)


def split_runs(output_dir):
  """"runs/a,runs/b" -> ["runs/a", "runs/b"] (one run: a list of one)."""
  return [d.strip() for d in str(output_dir).split(",") if d.strip()]


def is_ensemble(output_dir):
  return len(split_runs(output_dir)) > 1


def load_ensemble(output_dirs, checkpoint_paths=None):
  """The runs in output_dirs as one `models.ensemble.Ensemble` (mean probabilities).

  checkpoint_paths: None (each run's newest readable) or one prefix per run,
  comma-separated. The runs must share the vocabulary (the same file content);
  the first run gives the hparams and run.json (its problem's post-processing
  and decode defaults apply), with info["ensemble"] listing every member.
  Returns a `Run` whose checkpoint_path joins the members' with commas.
  """
  from t2t_keras.models.ensemble import Ensemble  # pylint: disable=import-outside-toplevel
  paths = split_runs(checkpoint_paths) if checkpoint_paths else [None] * len(output_dirs)
  if len(paths) != len(output_dirs):
    raise InputError(f"--checkpoint_path gives {len(paths)} checkpoints for "
                     f"{len(output_dirs)} runs in --output_dir: give one per run, in order")
  members = [load(d, p) for d, p in zip(output_dirs, paths)]
  first = members[0]
  for directory, run in zip(output_dirs[1:], members[1:]):
    if not fileio.same_content(first.info["vocab_path"], run.info["vocab_path"]):
      raise InputError(f"{directory}'s vocabulary ({run.info['vocab_path']}) differs from "
                       f"{output_dirs[0]}'s ({first.info['vocab_path']}): the runs of an "
                       "ensemble must share one vocabulary")
  info = dict(first.info, ensemble=[{"output_dir": d, "checkpoint_path": r.checkpoint_path}
                                    for d, r in zip(output_dirs, members)])
  return Run(Ensemble([r.model for r in members]), first.vocab, first.hparams, info,
             ",".join(r.checkpoint_path for r in members))


def _warn(message):
  print(message, file=sys.stderr)


def load_model(output_dir, checkpoint_path=None):
  """Restores the model of a training run for decoding or export.

  Args:
    output_dir: the trainer's output_dir (hparams.json, run.json, checkpoints).
    checkpoint_path: a specific checkpoint prefix (e.g. an averaged one);
      default: the latest in output_dir.
  Returns:
    (model, hparams, run-info dict with "vocab_path", checkpoint path used).
  """
  hparams, info = load_run_info(output_dir)
  if checkpoint_path and not checkpoint_is_readable(checkpoint_path):
    raise InputError(f"--checkpoint_path={checkpoint_path}: no readable checkpoint there "
                     "(give a prefix such as DIR/ckpt-1000, not a file)")
  path = checkpoint_path or latest_checkpoint(output_dir, log=_warn)
  model = build_model(hparams, info["vocab_size"], info.get("model", "transformer"))
  restore_model(model, path, f"{output_dir}'s {HPARAMS_FILE}")
  return model, hparams, info, path


def restore_model(model, path, built_from="the run's hparams"):
  """Restores a built `model` from checkpoint `path`. InputError first where the checkpoint
  holds another layout (variables missing, extra or of another shape: a checkpoint of
  another version, or hparams changed since), listing what differs (`layout_differences`);
  TensorFlow's restore alone fills a smaller model from a larger checkpoint silently."""
  differences = layout_differences(model, path)
  if differences:
    raise InputError(f"{path} holds another model than {built_from} builds: "
                     f"{differences}; decode it with the hparams it was trained with")
  tf.train.Checkpoint(model=model).restore(path).expect_partial(
  ).assert_existing_objects_matched()


def layout_differences(model, path, most=3):
  """What differs between the model's variables and those of checkpoint `path`, matched
  through its object graph as a restore matches them (`checkpoint_graph`), in one line:
  variables the checkpoint lacks, model variables only in the checkpoint, shapes that
  differ (the first `most` of each); "" where nothing does."""
  from t2t_keras import checkpoint_graph  # pylint: disable=import-outside-toplevel
  reader = checkpoint_reader(path)
  shapes = reader.get_variable_to_shape_map()
  if checkpoint_graph.OBJECT_GRAPH not in shapes:
    return ""  # not an object-based checkpoint: the restore says what it says
  graph = checkpoint_graph.object_graph(reader)
  found = checkpoint_graph.matched_variables(graph, "model", model, model.variables)
  matched = {key for _, _, key in found}
  lists = (("not in the checkpoint", [p for p, _, key in found if key not in shapes]),
           ("only in the checkpoint", sorted(p for key, p in
                                              checkpoint_graph.model_keys(graph).items()
                                              if key not in matched)),
           ("of another shape", [f"{p} {list(shapes[key])} in the checkpoint, "
                                 f"{list(v.shape)} in the model" for p, v, key in found
                                 if key in shapes and list(shapes[key]) != list(v.shape)]))
  parts = []
  for what, names in lists:
    if names:
      more = ", ..." if len(names) > most else ""
      parts.append(f"{len(names)} variable(s) {what} ({', '.join(names[:most])}{more})")
  return "; ".join(parts)
