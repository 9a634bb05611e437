"""The project's side of the peer's step scripts: one training step and beam search, at a size.

    .venv/bin/python benchmarks/step_bench.py [--size small|base|big|tiny] [--batch N]
        [--steps 15] [--decode_steps 5] [--data_dir DIR] [--json out.json]

The same shapes and the same schedule of measurements as the peer's script at that size
(../shared/bench/model_garden_peer.py at the small size, benchmarks/model_garden_sized.py
at the others), so the two can be run one after the other and their medians compared
(benchmarks/peer_compare.py does that, alternating them). The sizes (benchmarks/
bench_sizes.py): small = transformer_multi30k with every dropout 0.1 on Multi30k's 8k
vocabulary, [128, 32] batches; base / big = the paper's transformer_base / transformer_big
with a 37,000-entry vocabulary, [64, 64] batches; tiny = transformer_tiny, a check that
it runs.

  Model: the size's hparams set (shared embedding/softmax, no attention biases);
    label smoothing 0.1, Adam (0.9, 0.98, 1e-9) with the set's learning-rate schedule
    (the peer: a constant 1e-4; the same work per step).
  Training step: what users run. A `t2t_keras.training.trainer.Trainer` is built as
    `trainer.train` builds it (default strategy; XLA as the Trainer's default: off on CPU,
    on where TensorFlow sees a GPU, as the peer with JIT=1 there), and its iterator is
    replaced by one fixed batch {"inputs", "targets"} of int32 [batch, length] random ids
    in [2, vocab) (the peer's exact ids: numpy default_rng(0), sources drawn first), so
    there is no padding and every step has batch x length target tokens. At the small
    size the Trainer reads translate_ende_multi30k's data and vocabulary; at the others
    translate_ende_numbers' (generated here when absent, seconds), with the vocabulary's
    size reported to the Trainer as the size's (`SizedVocabulary`): the model's
    embedding and softmax have that many rows, and nothing else reads the vocabulary.
    Timed: `trainer.train_step()`, one update as `train()` calls it (forward, loss,
    backward, Adam apply, and the host round trip for the loss). Warm-up: one step
    (trace) timed apart, then 3 untimed steps; then STEPS / --steps (default 15) timed
    steps; reported: the median step time and tokens / median target tokens/s (src+tgt:
    twice that).
  Beam search: the trainer's model with the decoder's default settings,
    `parse_decode_hparams("max_decode_length=40").search`: beam 4, alpha 0.6, stop_early, XLA as
    its `jit` default (on) and `search_shards` default (2 concurrent half-batch
    searches on a CPU with 2+ cores), as `builder.compile_search` wraps it, in float32 whatever
    --hparams' precision (the trained weights copied into a float32 model, as t2t-decoder
    and the SavedModel restore a checkpoint: under XLA on CPU bf16 dots run no faster than
    float32 and the casts cost, so bf16 search was slower), except eos_id=-1: EOS is
    never chosen, so every hypothesis has exactly 40 tokens (checked on the output shape).
    Inputs: 32 sources of 30 ids (29 random ids in [3, vocab) + EOS=1), as
    benchmarks/decode_bench.py. First call (trace + XLA compile) timed apart, then
    DSTEPS / --decode_steps (default 5; 0 skips the search) timed calls (each until the
    ids are on the host); reported: the median seconds per batch and 32 / median
    sentences/s. (The small size's peer decodes 32 of its training sources, 32 random
    ids without EOS; model_garden_sized.py decodes these inputs. The peer's search can
    stop at EOS; it prints the mean decoded length.)

Also printed: the peak RSS of this process (getrusage ru_maxrss: model, optimizer, the
Trainer's tf.data input pipeline, which `train()` has too, and the decoder) and one line
`STEP_BENCH_RESULT {json}` with every figure. The data is generated into --data_dir when
absent (default: a directory under the system temp dir, never the repository; the small
size reads ../shared/data/multi30k); datagen is not timed, and when the data is already
there (benchmarks/peer_compare.py generates it in its own process first) it does not run
in this process at all, so it leaves no trace in the peak RSS.
"""

import argparse
import itertools
import json
import os
import resource
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
DEFAULT_RAW = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
DEFAULT_DATA_ROOT = os.path.join(tempfile.gettempdir(), "t2t_bench")
RESULT_TAG = "STEP_BENCH_RESULT "
PROBLEM = "translate_ende_multi30k"  # the small size's (its real 8k vocabulary)
sys.path.insert(0, HERE)
import bench_sizes  # noqa: E402  (pure Python)
from bench_sizes import DECODE_BATCH, DECODE_SRC_LENGTH, DECODE_LENGTH  # noqa: E402


def data_ready(data_dir, problem=PROBLEM):
  """Whether data_dir holds the vocabulary and the finished train split (its stats file)."""
  return all(os.path.exists(os.path.join(data_dir, name)) for name in
             (f"vocab.{problem}.model", f"{problem}-train.stats.json"))


def prepare_data(data_dir, raw_dir, log=print, problem=PROBLEM):
  """Generates `problem` (translate_ende_multi30k from raw_dir, or translate_ende_numbers,
  which needs no files) into data_dir unless it is there already."""
  if data_ready(data_dir, problem):
    log(f"data: {problem} in {data_dir} (reused)")
    return
  from t2t_keras.data import datagen  # pylint: disable=import-outside-toplevel
  kwargs = {}
  if problem == PROBLEM:
    if not os.path.exists(os.path.join(raw_dir, "train.en.gz")):
      sys.exit(f"step_bench: Multi30k not found in {raw_dir} (train.en.gz ...); pass --raw_dir")
    kwargs["raw_dir"] = raw_dir
  start = time.time()
  datagen.generate(problem, data_dir, log=None, **kwargs)
  log(f"data: {problem} in {data_dir} ({time.time() - start:.1f} s datagen, not timed)")


def size_data_dir(size, data_dir=None, raw_dir=DEFAULT_RAW):
  """The data dir of the size's problem (`data_dir`, default one under the system temp
  dir), generated there first when absent."""
  data_dir = data_dir or os.path.join(DEFAULT_DATA_ROOT, size.problem)
  prepare_data(data_dir, raw_dir, problem=size.problem)
  return data_dir


def fixed_batch(size, batch=None, seed=0):
  """The peer's batch: default_rng(seed), sources then targets, ids in [2, vocab),
  [batch (default the size's), size.length] each."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  shape = (size.sentences(batch), size.length)
  src = rng.integers(2, size.vocab_size, shape).astype(np.int32)
  tgt = rng.integers(2, size.vocab_size, shape).astype(np.int32)
  return src, tgt


def decode_inputs(vocab_size, seed=0):
  """32 sources of 29 random ids in [3, vocab_size) + EOS (1), as benchmarks/decode_bench.py."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  ids = rng.integers(3, vocab_size, (DECODE_BATCH, DECODE_SRC_LENGTH - 1)).astype(np.int32)
  return np.concatenate([ids, np.ones([DECODE_BATCH, 1], np.int32)], axis=1)


class SizedVocabulary:
  """A problem's vocabulary reporting `vocab_size` rows: the model a size measures gets
  its embedding and softmax size; everything else is the wrapped vocabulary's."""

  def __init__(self, vocab, vocab_size):
    self._vocab, self.vocab_size = vocab, vocab_size

  def id_to_piece(self, i):
    """The wrapped vocabulary's piece, or "<extra N>" past its end."""
    return self._vocab.id_to_piece(i) if i < self._vocab.vocab_size else f"<extra {i}>"

  def __getattr__(self, name):
    return getattr(self._vocab, name)


class SizedProblem:
  """A problem whose vocabulary is a `SizedVocabulary` of `vocab_size`."""

  def __init__(self, problem, vocab_size):
    self._problem, self._vocab_size = problem, vocab_size

  def get_vocabulary(self, data_dir):
    return SizedVocabulary(self._problem.get_vocabulary(data_dir), self._vocab_size)

  def __getattr__(self, name):
    return getattr(self._problem, name)


def bench_trainer(data_dir, output_dir, overrides="", size=bench_sizes.SIZES["small"],
                  batch=None, strategy=None):
  """The benchmark's Trainer (the size's configuration plus `overrides`), fed the fixed batch.

  Returns (trainer, hparams); `trainer.train_step()` then runs one update on the
  [batch, size.length] batch of `fixed_batch()`, no padding. `strategy`: the Trainer's
  (default: as `train()` picks it); with several replicas each gets an equal slice.
  """
  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  from t2t_keras import registry
  from t2t_keras.training.config import TrainerConfig
  from t2t_keras.training.trainer import Trainer

  hp = bench_sizes.hparams(size, overrides)
  config = TrainerConfig(eval_every=0, save_every=10 ** 9, save_every_minutes=1e9)
  problem = registry.problem(size.problem)
  if size.problem != PROBLEM:
    problem = SizedProblem(problem, size.vocab_size)
  trainer = Trainer(problem, hp, data_dir, output_dir, config, strategy=strategy,
                    log=lambda *a, **k: None)
  assert trainer.vocab.vocab_size == size.vocab_size, trainer.vocab.vocab_size
  src, tgt = fixed_batch(size, batch)
  n = trainer.local_replicas  # the Trainer takes one batch a replica from its iterator
  trainer.iterator = itertools.cycle([
      {"inputs": tf.constant(s), "targets": tf.constant(t)}
      for s, t in zip(np.split(src, n), np.split(tgt, n))])
  return trainer, hp


def time_training(trainer, tokens, steps, warmup):
  """One traced step timed apart, `warmup` untimed, then `steps` timed `train_step()`s.

  Returns (first step seconds, step times, the last loss); asserts every step counts
  `tokens` target tokens.
  """
  start = time.perf_counter()
  loss, counted = trainer.train_step()
  first = time.perf_counter() - start
  assert counted == tokens, (counted, tokens)
  for _ in range(warmup):
    trainer.train_step()
  times = []
  for _ in range(steps):
    start = time.perf_counter()
    loss, counted = trainer.train_step()
    times.append(time.perf_counter() - start)
  return first, times, loss


def time_search(trainer, hp, vocab_size, calls):
  """Beam search as the decoder runs it (see the module docstring), `calls` timed calls
  after the first. Returns (first call seconds, call times, output length, settings, shards,
  dtype)."""
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from t2t_keras import runs
  from t2t_keras.decoding import search
  from t2t_keras.decoding.settings import parse_decode_hparams
  from t2t_keras.decoding.sharding import default_shards, shard_search_fn

  dh = parse_decode_hparams(f"max_decode_length={DECODE_LENGTH}").search
  model = trainer.model
  if hp.precision != "float32":
    # t2t-decoder and the SavedModel restore a checkpoint into a float32 model
    # (runs.load_model), whatever the training precision: search as they do.
    model = runs.build_model(hp, vocab_size)
    model.set_weights(trainer.model.get_weights())

  def run_search(inputs):
    return search.search(model, inputs, search.SearchOptions(
        beam_size=dh.beam_size, alpha=dh.alpha, extra_length=dh.extra_length,
        max_decode_length=dh.max_decode_length, eos_id=-1, stop_early=dh.stop_early))

  # As builder.compile_search, with eos_id=-1 (forced length): jit-compiled, and
  # the batch searched as `search_shards` concurrent slices (2 on a 2-core CPU).
  signature = [tf.TensorSpec([None, None], tf.int32)]
  shards = dh.search_shards or default_shards()
  search_fn = shard_search_fn(
      tf.function(run_search, jit_compile=dh.jit, input_signature=signature), shards, signature)
  inputs = tf.constant(decode_inputs(vocab_size))
  start = time.perf_counter()
  ids = search_fn(inputs)[0].numpy()
  first = time.perf_counter() - start
  assert ids.shape == (DECODE_BATCH, dh.beam_size, DECODE_LENGTH), ids.shape
  times = []
  for _ in range(calls):
    start = time.perf_counter()
    ids = search_fn(inputs)[0].numpy()
    times.append(time.perf_counter() - start)
  return first, times, int(ids.shape[-1]), dh, shards, model.compute_dtype


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="small", choices=list(bench_sizes.SIZES),
                      help="the model and batch (benchmarks/bench_sizes.py; default small)")
  parser.add_argument("--batch", type=int, default=None,
                      help="sentences a step (default: the size's); the peer must get the same")
  parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "15")),
                      help="timed training steps (default: $STEPS or 15, as the peer)")
  parser.add_argument("--warmup", type=int, default=3,
                      help="untimed steps after the first (default 3, as the peer)")
  parser.add_argument("--decode_steps", type=int, default=int(os.environ.get("DSTEPS", "5")),
                      help="timed beam-search calls (default: $DSTEPS or 5, as the peer; 0: "
                           "no search)")
  parser.add_argument("--data_dir", default=None,
                      help="the size's problem's data (generated here when absent; default "
                           "a folder under the system temp dir)")
  parser.add_argument("--raw_dir", default=DEFAULT_RAW, help="raw Multi30k (train.en.gz ...)")
  parser.add_argument("--json", help="also write the figures to this file")
  parser.add_argument("--hparams", default="",
                      help='extra overrides of ours, e.g. "precision=mixed_bfloat16" '
                           "(the default measures the peer's configuration exactly)")
  args = parser.parse_args()
  size = bench_sizes.get(args.size)
  data_dir = size_data_dir(size, args.data_dir, args.raw_dir)
  tokens = size.tokens(args.batch)

  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  import keras

  load_before = os.getloadavg()
  print(f"tf {tf.__version__} keras {keras.__version__}; {os.cpu_count()} CPUs; load average "
        f"{' '.join(f'{x:.2f}' for x in load_before)}; size {size.name}", flush=True)
  with tempfile.TemporaryDirectory(prefix="step_bench_") as output_dir:
    trainer, hp = bench_trainer(data_dir, output_dir, args.hparams, size, args.batch)
    first, times, loss = time_training(trainer, tokens, args.steps, args.warmup)
    params = int(sum(np.prod(v.shape) for v in trainer.model.trainable_variables))
    print(f"first step (trace) {first:.1f}s; params: {params}", flush=True)
    med = statistics.median(times)
    tok_s = tokens / med
    flops = bench_sizes.step_flops(hp, size, args.batch)
    print(f"TRAIN xla={trainer.use_xla}: median step {med * 1000:.1f} ms (min "
          f"{min(times) * 1000:.1f}, max {max(times) * 1000:.1f}) over {len(times)} steps; "
          f"{tok_s:.0f} target tok/s ({2 * tok_s:.0f} src+tgt tok/s); loss {loss:.3f}; "
          f"{flops / 1e12:.3f} model TFLOP/step, {flops / med / 1e12:.2f} TFLOP/s",
          flush=True)
    result = {
        "size": size.name, "batch": size.sentences(args.batch), "length": size.length,
        "vocab_size": size.vocab_size, "tokens_per_step": tokens,
        "precision": hp.precision, "params": params, "xla_train": trainer.use_xla,
        "train_first_step_s": first, "train_step_times_s": times, "train_median_step_s": med,
        "train_target_tok_s": tok_s, "train_loss": loss, "flops_per_step": flops,
        "model_tflops_s": flops / med / 1e12, "steps": args.steps, "warmup": args.warmup,
        "decode_steps": args.decode_steps}
    if args.decode_steps > 0:
      dfirst, dtimes, length, dh, shards, dtype = time_search(
          trainer, hp, size.vocab_size, args.decode_steps)
      dmed = statistics.median(dtimes)
      print(f"decode first call (trace + compile, jit={dh.jit}, {shards} shard(s), {dtype}) "
            f"{dfirst:.1f}s", flush=True)
      print(f"BEAM beam={dh.beam_size} batch={DECODE_BATCH} max_len={DECODE_LENGTH}: median "
            f"{dmed:.2f}s/batch -> {DECODE_BATCH / dmed:.1f} sent/s; output length "
            f"{length} (forced: eos_id=-1)", flush=True)
      result.update({"jit_decode": dh.jit, "decode_shards": shards, "decode_dtype": dtype,
                     "decode_first_call_s": dfirst, "decode_times_s": dtimes,
                     "decode_median_s": dmed, "decode_sent_s": DECODE_BATCH / dmed,
                     "decode_output_length": length})

  max_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(f"peak RSS {max_rss_mib:.0f} MiB", flush=True)
  result.update({"tf": tf.__version__, "keras": keras.__version__, "cpus": os.cpu_count(),
                 "gpus": [d.name for d in tf.config.list_logical_devices("GPU")],
                 "load_before": load_before, "load_after": os.getloadavg(),
                 "max_rss_mib": max_rss_mib})
  print(RESULT_TAG + json.dumps(result), flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=2)


if __name__ == "__main__":
  main()
