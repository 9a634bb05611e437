"""tf.data input pipeline: TFRecords -> length-bucketed (or packed) token-budget batches.

    train = InputSettings(shuffle=True, seed=1, repeat=True)
    ds = make_dataset(problem, data_dir, "train", hparams, train)
    # elements: {"inputs": int32 [B, S], "targets": int32 [B, T]}, pad id 0, EOS included

    ds = make_dataset(..., InputSettings(packed_length=256))  # or hparams.packed_length
    # elements: {"inputs", "targets", "inputs_segmentation", "targets_segmentation",
    #            "inputs_position", "targets_position"}: int32 [R, 256] each

    dist = strategy.distribute_datasets_from_function(
        lambda ctx: make_dataset(problem, data_dir, "train", hparams, train,
                                 input_context=ctx))

How batches are made:
  * serialized records are shuffled (buffer `shuffle_buffer`) and repeated as
    strings, then parsed, length-filtered and given their bucket key
    PARSE_CHUNK at a time (one parse per chunk costs less than half the CPU of
    parsing pair by pair; docs/notebook.md).
  * pairs with max(len(inputs), len(targets)) > hparams.max_length (subword ids,
    EOS included) are dropped; `count_long_pairs` reports how many.
  * each side's length is rounded up to a bucket boundary (`bucket_boundaries`:
    every integer up to 10, then geometric steps of ~10%); a batch holds pairs
    of one (input boundary, target boundary) cell, padded to exactly those
    lengths, so the model sees few distinct shapes and little padding.
  * sentences per batch = per-replica budget // max(input boundary, target
    boundary), so padded max(S, T) * B <= budget. `hparams.batch_size` is the
    GLOBAL token budget: with an input_context each replica gets
    batch_size // num_replicas_in_sync.
  * with several replicas per input pipeline, batches come in runs of
    `replicas per pipeline` with identical shapes, so every replica of a step
    gets the same shape: a repeated stream drops incomplete runs; one pass
    (evaluation) keeps every pair, padding a cell's last batches to full rows
    and completing the run with all-PAD batches, which count 0 tokens.
  * order is deterministic given `seed` (and `streams`).
  * `streams` > 1: that many such pipelines over shards of the files, run in
    parallel (bucketing and packing are serial within one), their batches taken
    in turn a run of `replicas per pipeline` at a time.

Packed batches (`packed_length` > 0, tensor2tensor's packed datasets; see
`t2t_keras.data.packing`): after the shuffle, repeat and max_length filter,
pairs are packed first-fit into rows of `packed_length` tokens per side and
R = max(1, per-replica budget // packed_length) rows make a batch, so every
batch has the one shape [R, packed_length] (a single pass keeps its last,
smaller batch; with several replicas per pipeline padded to R rows, as above). Pair k of a
row has segment id k on both sides; padding has segment 0. packed_length must
be >= the length limit (max_length, or the budget when max_length <= 0).
"""

import dataclasses
import json
from typing import Optional

import tensorflow as tf

from t2t_keras import fileio
from t2t_keras.data import service
from t2t_keras.data.packing import pack_dataset
from t2t_keras.data.vocabulary import PAD
from t2t_keras.errors import InputError

DEFAULT_SHUFFLE_BUFFER = 10000
PARSE_CHUNK = 256  # records parsed, filtered and keyed together
# Bumped whenever make_dataset's tf.data graph changes: a checkpointed iterator
# restores only into the graph that wrote it (the trainer records this in run.json).
VERSION = 2


def bucket_boundaries(max_length, step=1.1, exact_up_to=10):
  """Sorted bucket upper bounds ending at `max_length`.

  Every length up to `exact_up_to` is its own bucket; above it each bound
  grows by `step` (at least 1), so padding per side is under (step - 1).
  """
  if max_length < 1:
    raise ValueError(f"max_length must be >= 1, got {max_length}")
  bounds, b = [], 1
  while b < max_length:
    bounds.append(b)
    b = b + 1 if b < exact_up_to else max(b + 1, int(b * step + 0.999999))
  bounds.append(max_length)
  return bounds


def _length_limit(hparams, max_length, per_replica_budget):
  if max_length is None:
    max_length = hparams.max_length
  limit = per_replica_budget if not max_length or max_length <= 0 else max_length
  return min(limit, per_replica_budget)


def _parse_chunk(problem, records):
  """Serialized records [k] -> (pairs: ragged int32 [k, None] per side, input lengths
  int32 [k], target lengths int32 [k]): one parse for the chunk. The one definition of
  a pair's lengths for both the length filter and `count_long_pairs`."""
  ex = problem.parse_records(records)
  return (ex, tf.cast(ex["inputs"].row_lengths(), tf.int32),
          tf.cast(ex["targets"].row_lengths(), tf.int32))


def count_long_pairs(problem, data_dir, split, max_length):
  """Counts pairs of a split longer than `max_length` ids (either side, EOS included).

  Read from the histogram of pair lengths datagen keeps in the split's stats file, or,
  for data written before it kept one, by a pass over the split.
  Returns {"total": n, "dropped": d, "kept": n - d}.
  """
  stats_path = problem.stats_path(data_dir, split)
  stats = json.loads(fileio.read_text(stats_path)) if fileio.exists(stats_path) else {}
  if "lengths" in stats:
    lengths = {int(k): v for k, v in stats["lengths"].items()}
    total = sum(lengths.values())
    dropped = sum(v for k, v in lengths.items() if k > max_length)
    return {"total": total, "dropped": dropped, "kept": total - dropped}

  def pair_lengths(records):
    _, len_in, len_out = _parse_chunk(problem, records)
    return tf.maximum(len_in, len_out)

  lengths = (problem.records(data_dir, split).batch(PARSE_CHUNK)
             .map(pair_lengths, num_parallel_calls=tf.data.AUTOTUNE))
  total, dropped = lengths.reduce(
      (tf.constant(0, tf.int64), tf.constant(0, tf.int64)),
      lambda acc, n: (acc[0] + tf.size(n, out_type=tf.int64),
                      acc[1] + tf.reduce_sum(tf.cast(n > max_length, tf.int64))))
  total, dropped = int(total), int(dropped)
  return {"total": total, "dropped": dropped, "kept": total - dropped}


def check_shards(problem, data_dir, split):
  """InputError naming a shard of `split` that is missing or not the size t2t-datagen wrote
  (its stats file's "shard_bytes"; data without them is not checked). tf.data reads a shard
  cut short as a shorter one, without a word: this is where such a cut is found."""
  stats_path = problem.stats_path(data_dir, split)
  if not fileio.exists(stats_path):
    return
  written = fileio.read_json(stats_path).get("shard_bytes", {})
  for name, expected in sorted(written.items()):
    path = fileio.join(data_dir, name)
    found = fileio.size(path) if fileio.exists(path) else None
    if found != expected:
      state = "is missing" if found is None else f"holds {found:,} bytes"
      raise InputError(
          f"{path} {state}, where t2t-datagen wrote {expected:,} bytes: the shard is cut "
          f"short or changed. Remove it and {stats_path}, then run t2t-datagen again with "
          f"the same flags: it writes the {split} split again and keeps the vocabulary")


class ShardsWholeNow(InputError):
  """A read error (`damaged_shard_error`'s) whose split's shards all read to their end now."""


def damaged_shard_error(problem, data_dir, split, error):
  """An InputError for `error`, a tf.errors.DataLossError met reading `split` (TensorFlow's
  message names neither the file nor the record): the first shard of the split that cannot
  be read to its end, the record, and how to write it again; a ShardsWholeNow where every
  shard reads whole. One pass over the shards."""
  for path in sorted(fileio.glob(problem.filepattern(data_dir, split))):
    read = 0
    try:
      for _ in tf.data.TFRecordDataset(path):
        read += 1
    except tf.errors.DataLossError as e:
      stats = problem.stats_path(data_dir, split)
      also = f" and {stats}" if fileio.exists(stats) else ""
      return InputError(
          f"{path}: record {read + 1} cannot be read ({_first_line(e.message)}): the shard is "
          f"cut short or damaged. Remove it{also}, then run t2t-datagen again with the same "
          f"flags: it writes the {split} split again and keeps the vocabulary")
  return ShardsWholeNow(f"a {split} shard in {data_dir} could not be read "
                    f"({_first_line(error.message)}), though each reads to its end now: a "
                    "shard changed while it was read (another datagen writing it?)")


def _first_line(message):
  return str(message).strip().splitlines()[0] if str(message).strip() else "no message"


@dataclasses.dataclass(frozen=True)
class InputSettings:
  """How `make_dataset` reads a split (the default: one pass in file order, as evaluation).

  Attributes:
    shuffle: shuffle files and records (buffer `shuffle_buffer`) with `seed` (bool).
    seed: int; same seed (and `streams`), same order.
    repeat: repeat forever (training) or one pass (evaluation) (bool).
    batch_size: overrides hparams.batch_size (global tokens), or None.
    max_length: overrides hparams.max_length (<= 0: no limit but the budget), or None.
    shuffle_buffer: records in the shuffle buffer (int >= 1).
    bucket_step: geometric step of bucket boundaries above length 10; None:
      hparams.bucket_step if present, else 1.1.
    bucket_mode: "pair" buckets on (input boundary, target boundary) cells: least
      padding, more distinct shapes. "max" buckets on the boundary of max(len inputs,
      len targets) and pads both sides to it: one shape per boundary (fewest XLA
      programs). "auto" is "max" here (the trainer resolves it for its training
      stream). None: hparams.bucket_mode if present, else "pair".
    packed_length: > 0 packs pairs into rows of this many tokens per side instead of
      bucketing (the module docstring); None: hparams.packed_length if present, else 0.
    streams: batching streams run in parallel, each over a shard of this pipeline's files
      (records when there are fewer files), taken in turn a run at a time: bucketing and
      packing, serial within one, use up to `streams` cores (int >= 1).
    data_service: a tf.data service dispatcher ("grpc://host:port") whose workers make the
      batches (`data/service.py`): repeated streams only, not deterministic, not
      checkpointable; None: this process.
  """

  shuffle: bool = False
  seed: int = 0
  repeat: bool = False
  batch_size: Optional[int] = None
  max_length: Optional[int] = None
  shuffle_buffer: int = DEFAULT_SHUFFLE_BUFFER
  bucket_step: Optional[float] = None
  bucket_mode: Optional[str] = None
  packed_length: Optional[int] = None
  streams: int = 1
  data_service: Optional[str] = None

  def __post_init__(self):
    if self.streams < 1:
      raise ValueError(f"streams must be >= 1, got {self.streams}")
    if self.shuffle_buffer < 1:
      raise ValueError(f"shuffle_buffer must be >= 1, got {self.shuffle_buffer}")
    if self.data_service and not self.repeat:
      raise ValueError("data_service serves repeated (training) streams only: each of its "
                       "workers reads the whole split, so one pass would repeat every pair")


def make_dataset(problem, data_dir, split, hparams, settings=None, *, input_context=None):
  """Batches of {"inputs": int32 [B, S], "targets": int32 [B, T]} for one replica.

  Args:
    problem: a Text2TextProblem (reversed problems swap the features).
    data_dir: where t2t-datagen wrote the problem's files.
    split: "train", "dev" or "test".
    hparams: uses `batch_size` (global token budget) and `max_length` (and
      `bucket_step`, `bucket_mode`, `packed_length` where `settings` leaves them None).
    settings: an `InputSettings` (default InputSettings(): one pass in file order).
      Packed batches have the `packing.FEATURES` keys, each int32 [R, packed_length].
    input_context: a tf.distribute.InputContext; shards the data by
      input_pipeline_id and divides the budget by num_replicas_in_sync.
  A shard cut short raises InputError here (`check_shards`); one whose records fail their
  checksums raises tf.errors.DataLossError when read (`damaged_shard_error` names it).
  """
  s = InputSettings() if settings is None else settings
  b = _batching(hparams, input_context, s)
  check_shards(problem, data_dir, split)

  def batches(seed):
    def stream(num, index):
      return _stream(problem, data_dir, split, b, s, seed=seed, num_streams=num,
                     stream_id=index)

    if s.streams == 1:
      return stream(b.num_pipelines, b.pipeline_id)
    return _in_turn([stream(b.num_pipelines * s.streams, b.pipeline_id * s.streams + i)
                     for i in range(s.streams)], b.group)

  if s.data_service:
    return service.distribute(batches, b.group, s.data_service)
  return batches(s.seed).prefetch(tf.data.AUTOTUNE)


def _in_turn(streams, group):
  """Batches of `streams` taken in turn, `group` (a run of one shape) at a time; each
  stream batches in its own prefetch thread, and an exhausted one is skipped (one pass
  keeps every pair)."""
  parts = [s.prefetch(tf.data.AUTOTUNE) for s in streams]
  turns = tf.data.Dataset.range(len(parts)).repeat().flat_map(
      lambda i: tf.data.Dataset.from_tensors(i).repeat(group))
  return tf.data.Dataset.choose_from_datasets(parts, turns, stop_on_empty_dataset=False)


def _stream(problem, data_dir, split, b, settings, *, seed, num_streams, stream_id):
  """One stream of batches (`make_dataset`'s) over shard `stream_id` of `num_streams`
  (`seed`: settings.seed, or the tf.data service's per-worker seed)."""
  shuffle, repeat = settings.shuffle, settings.repeat
  # Shuffled and repeated as serialized strings; parsed PARSE_CHUNK at a time
  # (benchmarks/data_bench.py prints the CPU a batch costs).
  ds = problem.records(data_dir, split, shuffle_files=shuffle, seed=seed,
                       num_input_pipelines=num_streams, input_pipeline_id=stream_id)
  if shuffle:
    ds = ds.shuffle(settings.shuffle_buffer, seed=seed, reshuffle_each_iteration=True)
  if repeat:
    ds = ds.repeat()
  ds = (ds.batch(PARSE_CHUNK)
        .map(_parse_fn(problem, b), num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
        .unbatch())
  if b.packed_length > 0:
    ds = pack_dataset(ds, b.packed_length)
    rows = max(1, b.budget // b.packed_length)
    if b.group > 1 and not repeat:
      ds = _full_groups(ds.batch(rows).map(lambda x: _pad_rows(x, rows)), b.group)
    else:
      ds = ds.batch(rows, drop_remainder=repeat)
  else:
    ds = _bucketed(ds, b, repeat)
  return ds


def _pad_rows(batch, rows):
  """{k: [n, L]} -> {k: [rows, L]}, padded with all-PAD rows (0 tokens, segment 0)."""
  return {k: tf.pad(v, [[0, rows - tf.shape(v)[0]], [0, 0]], constant_values=PAD)
          for k, v in batch.items()}


def _full_groups(batches, group):
  """Batches (all of one shape within each run of `group`) -> the same, the last run
  completed with all-PAD batches, so every replica of every step gets a batch of the
  step's shape. Only for one pass (evaluation) with several replicas per pipeline: a
  repeated stream drops incomplete runs instead."""
  def complete(x):
    return {k: tf.pad(v, [[0, group - tf.shape(v)[0]], [0, 0], [0, 0]],
                      constant_values=PAD) for k, v in x.items()}
  return batches.batch(group).map(complete).unbatch()


@dataclasses.dataclass(frozen=True)
class _Batching:
  """How one pipeline batches: tokens per replica batch, replicas it feeds, the length
  limit, bucket boundaries and each (input, target) bucket cell's batch size."""
  budget: int
  group: int
  limit: int
  bounds: tuple
  sizes: tuple  # [len(bounds) ** 2], row-major over (input bucket, target bucket)
  bucket_mode: str
  packed_length: int
  num_pipelines: int
  pipeline_id: int


def _batching(hparams, input_context, settings):
  """`make_dataset`'s settings, defaulted from hparams and checked, as a `_Batching`."""
  global_budget = int(settings.batch_size or hparams.batch_size)
  bucket_step = settings.bucket_step or hparams.get("bucket_step", 1.1)
  bucket_mode = settings.bucket_mode or hparams.get("bucket_mode", "pair")
  packed_length = settings.packed_length
  if packed_length is None:
    packed_length = hparams.get("packed_length", 0) or 0
  packed_length = int(packed_length)
  num_replicas, num_pipelines, pipeline_id = 1, 1, 0
  if input_context is not None:
    num_replicas = input_context.num_replicas_in_sync
    num_pipelines = input_context.num_input_pipelines
    pipeline_id = input_context.input_pipeline_id
  budget = global_budget // num_replicas
  limit = _length_limit(hparams, settings.max_length, budget)
  if limit < 1:
    raise ValueError(f"token budget per replica is {budget}: batch_size {global_budget} "
                     f"is too small for {num_replicas} replicas")
  if 0 < packed_length < limit:
    raise ValueError(
        f"packed_length {packed_length} is shorter than the length limit {limit} "
        f"(max_length, capped by the per-replica budget {budget}): a pair may not fit "
        f"in a row; use packed_length >= {limit} or max_length <= {packed_length}")
  if bucket_mode == "auto":
    bucket_mode = "max"
  if bucket_mode not in ("pair", "max"):
    raise ValueError(f"bucket_mode must be 'pair', 'max' or 'auto', got {bucket_mode!r}")
  bounds = tuple(bucket_boundaries(limit, step=bucket_step))
  sizes = tuple(max(1, budget // max(bi, bt)) for bi in bounds for bt in bounds)
  return _Batching(budget, max(1, num_replicas // num_pipelines), limit, bounds, sizes,
                   bucket_mode, packed_length, num_pipelines, pipeline_id)


def _parse_fn(problem, b):
  """PARSE_CHUNK serialized records -> the kept pairs (ragged [k, None]) and, unless
  packing, their bucket keys int64 [k]: one parse and one length filter per chunk."""
  bounds_t, nb = tf.constant(b.bounds, tf.int32), len(b.bounds)

  def parse(records):
    ex, len_in, len_out = _parse_chunk(problem, records)
    keep = tf.maximum(len_in, len_out) <= b.limit
    kept = tf.where(keep)[:, 0]
    ex = {k: tf.gather(v, kept) for k, v in ex.items()}
    len_in, len_out = tf.gather(len_in, kept), tf.gather(len_out, kept)
    if b.packed_length <= 0:
      if b.bucket_mode == "max":
        len_in = len_out = tf.maximum(len_in, len_out)
      ex["bucket"] = tf.cast(tf.searchsorted(bounds_t, len_in, side="left") * nb
                             + tf.searchsorted(bounds_t, len_out, side="left"), tf.int64)
    return ex

  return parse


def _bucketed(ds, b, repeat):
  """Pairs -> dense batches of one bucket cell each ({"inputs" [n, S], "targets" [n, T]},
  padded to the cell's boundaries); with several replicas per pipeline, `group`
  consecutive batches of one cell, one per replica. There a repeated stream drops a
  cell's incomplete runs; one pass keeps every pair, its last batches padded to full
  rows and completed with all-PAD batches (`_full_groups`)."""
  bounds_t, nb = tf.constant(b.bounds, tf.int32), len(b.bounds)
  sizes_t = tf.constant(b.sizes, tf.int64)
  keep_all = b.group > 1 and not repeat

  def reduce(key, window):
    rows = tf.cast(sizes_t[key], tf.int32) if keep_all else -1
    shapes = {"inputs": [rows, tf.gather(bounds_t, key // nb)],
              "targets": [rows, tf.gather(bounds_t, key % nb)]}

    def dense(batch):
      return {k: batch[k].to_tensor(PAD, shape=tf.cast(tf.stack(shape), tf.int64))
              for k, shape in shapes.items()}

    batches = (window.ragged_batch(sizes_t[key], drop_remainder=b.group > 1 and repeat)
               .map(dense))
    if keep_all:
      return _full_groups(batches, b.group)
    if b.group > 1:
      batches = batches.batch(b.group, drop_remainder=True).unbatch()
    return batches

  return ds.group_by_window(lambda ex: ex["bucket"], reduce,
                            window_size_func=lambda key: sizes_t[key] * b.group)


def padding_fraction(batch):
  """Fraction of padding among all positions of a batch (both features).

  Padding is id PAD, or segment 0 in a packed batch (one with
  "inputs_segmentation" / "targets_segmentation").
  """
  total = pads = 0
  for key in ("inputs", "targets"):
    seg = batch.get(key + "_segmentation")
    pad = tf.equal(batch[key], PAD) if seg is None else tf.equal(seg, 0)
    total += int(tf.size(pad))
    pads += int(tf.reduce_sum(tf.cast(pad, tf.int32)))
  return pads / max(1, total)


def batch_tokens(batch):
  """Padded tokens of a batch as the budget counts them: B * max(S, T).

  For a packed batch that is rows * packed_length (the budget counts rows).
  """
  b, s = batch["inputs"].shape[0], batch["inputs"].shape[1]
  return b * max(s, batch["targets"].shape[1])
