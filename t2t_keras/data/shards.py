"""A split's TFRecord shards: written by several processes, resumable shard by shard.

The split's raw pairs (the problem's samples, counted before empty pairs are skipped) are
cut into n contiguous ranges, one per shard: shard i holds raw pairs
[i * N // n, (i + 1) * N // n), N from `problem.count_raw_samples`. A pass over the samples
writes the shards in order, and each is finished as soon as its range is: written under a
`.incomplete` name, renamed when complete, with `<shard>.stats.json` beside it (its pairs,
skipped pairs by reason, and the histogram of pair lengths). A datagen killed mid-split
redoes only the unfinished shards (it still reads past the finished ones' samples). When
every shard is done, the split's stats file sums them and the per-shard files go.

    stats = shards.write_split(problem, tmp_dir, "train", paths, vocab, num_workers=4)

With num_workers > 1, worker processes (started with "spawn": the parent may hold
TensorFlow) each write a contiguous group of the unfinished shards, reading the samples
up to the end of their group: W workers read the data about (W + 1) / 2 times, cheap next
to encoding and serializing for text files.
"""

import collections
import concurrent.futures
import json
import math
import multiprocessing
import os
import pickle
import time

from t2t_keras import fileio
from t2t_keras.data import vocabulary as vocab_lib
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID
from t2t_keras.processes import stop_with_parent

TMP_SUFFIX = fileio.TMP_SUFFIX
ENCODE_CHUNK = 4096
LOG_EVERY_S = 30.0


def shard_stats_path(shard_path):
  return shard_path + ".stats.json"


def merge_stats(parts):
  """{"pairs", "skipped": {reason: n}, "lengths": {length: n}} summed over shard stats."""
  skipped, lengths = collections.Counter(), collections.Counter()
  for p in parts:
    skipped.update(p["skipped"])
    lengths.update({int(k): v for k, v in p.get("lengths", {}).items()})
  return {"pairs": sum(p["pairs"] for p in parts), "skipped": dict(skipped),
          "lengths": {str(k): lengths[k] for k in sorted(lengths)}}


def shard_bounds(total, n):
  """[b_0, ..., b_n]: shard i holds raw pairs [b_i, b_i+1). total None (one shard, not
  counted): [0, inf]."""
  if total is None:
    return [0, math.inf]
  return [i * total // n for i in range(n + 1)]


def example(inputs, targets):
  """A serialized tf.train.Example of two id lists (the datagen record format)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  feature = {
      "inputs": tf.train.Feature(int64_list=tf.train.Int64List(value=inputs)),
      "targets": tf.train.Feature(int64_list=tf.train.Int64List(value=targets)),
  }
  return tf.train.Example(features=tf.train.Features(feature=feature)).SerializeToString(
      deterministic=True)  # map keys sorted: the same bytes in every process


class _Shard:
  """One shard being written: a TFRecordWriter under the temporary name, and its counts."""

  def __init__(self, path, vocab, encode_threads):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    self.path, self.vocab, self.encode_threads = path, vocab, encode_threads
    self.writer = tf.io.TFRecordWriter(path + TMP_SUFFIX)
    self.pairs, self.skipped, self.lengths = 0, collections.Counter(), collections.Counter()
    self.chunk = []

  def add(self, pair):
    """pair: (inputs, targets), or the reason it is skipped. Returns the pairs written."""
    if isinstance(pair, str):
      self.skipped[pair] += 1
      return 0
    self.chunk.append(pair)
    return self.flush() if len(self.chunk) >= ENCODE_CHUNK else 0

  def flush(self):
    eos = EOS_ID
    ids_in = self.vocab.encode_batch([c[0] for c in self.chunk], num_threads=self.encode_threads)
    ids_tg = vocab_lib.target_side(self.vocab).encode_batch(
        [c[1] for c in self.chunk], num_threads=self.encode_threads)
    for a, b in zip(ids_in, ids_tg):
      self.writer.write(example(a + [eos], b + [eos]))
      self.lengths[max(len(a), len(b)) + 1] += 1
    self.pairs += len(self.chunk)
    self.chunk.clear()
    return len(ids_in)

  def finish(self):
    """Writes the rest, the stats file, then renames the shard into place; its stats."""
    self.flush()
    self.writer.close()
    stats = {"pairs": self.pairs, "skipped": dict(self.skipped),
             "lengths": {str(k): v for k, v in sorted(self.lengths.items())}}
    fileio.write_atomic(shard_stats_path(self.path), json.dumps(stats, sort_keys=True))
    fileio.replace(self.path + TMP_SUFFIX, self.path)
    return stats

  def abort(self):
    try:
      self.writer.close()
    except Exception:  # pylint: disable=broad-except
      pass
    fileio.remove(self.path + TMP_SUFFIX)


class _Progress:
  """A log line every LOG_EVERY_S seconds: pairs written, pairs/s, and where the number of
  raw pairs to go is known, the share done and an ETA."""

  def __init__(self, split, goal, log):
    self.split, self.goal, self.log = split, goal, log
    self.written, self.start, self.last = 0, time.time(), time.time()

  def add(self, n):
    self.written += n
    if not self.log or not n or time.time() - self.last < LOG_EVERY_S:
      return
    self.last = time.time()
    rate = self.written / (self.last - self.start)
    line = f"{self.split}: {self.written:,} pairs, {rate:,.0f} pairs/s"
    if self.goal != math.inf:
      line += (f", {self.written / max(self.goal, 1):.0%} of the raw pairs, "
               f"ETA {max(0, self.goal - self.written) / max(rate, 1e-9):.0f} s")
    self.log(line)


def write_shards(problem, tmp_dir, split, paths, indices, bounds, vocab, *,
                 encode_threads=-1, log=None):
  """Writes the shards `indices` of `paths` (the split's n shards; shard i holds raw pairs
  [bounds[i], bounds[i + 1])) in one pass over the samples, finishing each (renamed into
  place, with its stats file) as soon as its range is written.

  Returns {index: stats}. On any failure the unfinished shard's temporary file is removed
  (finished ones stay). ValueError when the samples outnumber bounds[-1] (a wrong count
  would otherwise drop pairs) or run out before a shard's range is full.
  """
  todo, out, shard = sorted(indices), {}, None
  progress = _Progress(split, sum(bounds[i + 1] - bounds[i] for i in todo), log)

  def finish_first():
    nonlocal shard
    i = todo.pop(0)
    out[i] = (shard or _Shard(paths[i], vocab, encode_threads)).finish()
    shard = None

  try:
    k = -1
    for k, sample in enumerate(problem.raw_samples(split, tmp_dir)):
      while todo and bounds[todo[0] + 1] <= k:
        finish_first()
      if not todo:
        if k >= bounds[-1]:
          raise InputError(f"{problem.data_name} {split}: more than the {bounds[-1]} samples "
                           "counted (count_raw_samples); no pair may be dropped")
        break  # the rest belongs to other workers' shards
      if k < bounds[todo[0]]:
        continue  # a sample of a finished shard, or of another worker's
      shard = shard or _Shard(paths[todo[0]], vocab, encode_threads)
      progress.add(shard.add(problem.clean_pair(sample)))
    else:  # the samples ran out
      if todo and bounds[-1] != math.inf and k + 1 < bounds[todo[-1] + 1]:
        raise InputError(f"{problem.data_name} {split}: {k + 1} samples, but "
                         f"{bounds[-1]} were counted (count_raw_samples)")
      while todo:
        finish_first()
    return out
  except BaseException:
    if shard is not None:
      shard.abort()
    raise


def finished(paths):
  """Indices of the shards already written (the shard and its stats file both exist)."""
  return [i for i, p in enumerate(paths)
          if fileio.exists(p) and fileio.exists(shard_stats_path(p))]


def write_split(problem, tmp_dir, split, paths, vocab, *, num_workers=1, usr_dir=None,
                log=None):
  """Writes the split's unfinished shards (in `num_workers` processes where there are
  that many unfinished shards) and returns the merged stats of all of them."""
  log = log or (lambda msg: None)
  done = set(finished(paths))
  todo = [i for i in range(len(paths)) if i not in done]
  if done and todo:
    log(f"{split}: {len(done)} of {len(paths)} shards finished earlier; writing the other "
        f"{len(todo)}")
  workers = min(max(1, num_workers), len(todo))
  if workers > 1 and _in_process_only(paths[0], problem):
    log(f"{split}: writing in this process ({paths[0]} is on ram:// or the problem cannot "
        "be sent to another process)")
    workers = 1
  start = time.time()
  if todo:
    # One shard needs no count; several need the split's size (a pass for most problems).
    bounds = shard_bounds(problem.count_raw_samples(split, tmp_dir) if len(paths) > 1
                          else None, len(paths))
  if workers == 1 and todo:
    write_shards(problem, tmp_dir, split, paths, todo, bounds, vocab, log=log)
  elif todo:
    _write_in_processes(problem, tmp_dir, split, paths, todo, bounds, vocab, workers,
                        usr_dir, log, start)
  parts = [json.loads(fileio.read_text(shard_stats_path(p))) for p in paths]
  stats = merge_stats(parts)
  if todo:
    seconds = time.time() - start
    log(f"{split}: wrote {len(todo)} shard(s) in {seconds:.1f} s "
        f"({sum(parts[i]['pairs'] for i in todo) / max(seconds, 1e-9):,.0f} pairs/s)")
  return stats


def _in_process_only(path, problem):
  if str(path).startswith("ram://"):
    return True
  try:
    pickle.dumps(problem)
    return False
  except Exception:  # pylint: disable=broad-except
    return True


def _write_in_processes(problem, tmp_dir, split, paths, todo, bounds, vocab, workers,
                        usr_dir, log, start):
  groups = [todo[w * len(todo) // workers:(w + 1) * len(todo) // workers]
            for w in range(workers)]
  context = multiprocessing.get_context("spawn")
  with concurrent.futures.ProcessPoolExecutor(workers, mp_context=context,
                                              initializer=_init_worker,
                                              initargs=(usr_dir, os.getpid())) as pool:
    futures = [pool.submit(_worker, problem, tmp_dir, split, paths, group, bounds,
                           vocab.model_path) for group in groups]
    shards_done = 0
    for future in concurrent.futures.as_completed(futures):
      shards_done += len(future.result())
      elapsed = time.time() - start
      eta = elapsed / shards_done * (len(todo) - shards_done)
      log(f"{split}: {shards_done}/{len(todo)} shards written by {workers} processes, "
          f"{elapsed:.0f} s, ETA {eta:.0f} s")


def _init_worker(usr_dir, parent_pid):
  """A shard writer's start: it ends with the datagen that started it (killed, that one
  leaves no worker writing beside its rerun or waiting for work forever)."""
  stop_with_parent(parent_pid)
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  if usr_dir:
    from t2t_keras.usr_dir import import_usr_dir  # pylint: disable=import-outside-toplevel
    import_usr_dir(usr_dir)


def _worker(problem, tmp_dir, split, paths, indices, bounds, vocab_path):
  return write_shards(problem, tmp_dir, split, paths, indices, bounds,
                      vocab_lib.load(vocab_path), encode_threads=1)
