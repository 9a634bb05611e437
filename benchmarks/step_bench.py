"""The project's side of ../shared/bench/model_garden_peer.py: one training step and beam search.

    .venv/bin/python benchmarks/step_bench.py [--steps 15] [--decode_steps 5] [--data_dir DIR]
        [--json out.json]

The same shapes and the same schedule of measurements as the peer's script, so the two
can be run one after the other and their medians compared (benchmarks/peer_compare.py
does that, alternating them):

  Model: transformer_multi30k (vocab 8000 from the translate_ende_multi30k data, 3+3
    layers, d_model 256, 4 heads, d_ff 1024, pre-norm, no biases in attention, shared
    embedding/softmax), with layer_prepostprocess_dropout=0.1, attention_dropout=0.1 and
    relu_dropout=0.1 (the peer: dropout_rate, attention_dropout_rate and
    intermediate_dropout 0.1). Label smoothing 0.1, Adam (0.9, 0.98, 1e-9) with the set's
    learning-rate schedule (the peer: a constant 1e-4; the same work per step).
  Training step: what users run. A `t2t_keras.training.trainer.Trainer` is built as
    `trainer.train` builds it (default strategy; XLA as the Trainer's default: off on CPU,
    like the peer without JIT=1), and its iterator is replaced by one fixed batch
    {"inputs", "targets"} of int32 [128, 32] random ids in [2, 8000) (the peer's exact
    ids: numpy default_rng(0), sources drawn first), so there is no padding and every step
    has 4096 target tokens. Timed: `trainer.train_step()`, one update as `train()` calls
    it (forward, loss, backward, Adam apply, and the host round trip for the loss).
    Warm-up: one step (trace) timed apart, then 3 untimed steps; then STEPS / --steps
    (default 15) timed steps; reported: the median step time and 4096 / median target
    tokens/s (src+tgt: twice that).
  Beam search: the trainer's model with the decoder's default settings,
    `parse_decode_hparams("max_decode_length=40").search`: beam 4, alpha 0.6, stop_early, XLA as
    its `jit` default (on) and `search_shards` default (2 concurrent half-batch
    searches on a CPU with 2+ cores), as `translate.make_search_fn` wraps it, in float32 whatever
    --hparams' precision (the trained weights copied into a float32 model, as t2t-decoder
    and the SavedModel restore a checkpoint: under XLA on CPU bf16 dots run no faster than
    float32 and the casts cost, so bf16 search was slower), except eos_id=-1: EOS is
    never chosen, so every hypothesis has exactly 40 tokens (checked on the output shape).
    Inputs: 32 sources of 30 ids (29 random ids in [3, 8000) + EOS=1), as
    benchmarks/decode_bench.py. First call (trace + XLA compile) timed apart, then
    DSTEPS / --decode_steps (default 5) timed calls (each until the ids are on the host);
    reported: the median seconds per batch and 32 / median sentences/s. (The peer decodes
    32 of its training sources, 32 random ids without EOS, with a plain tf.function and
    max length 40, but it can stop at EOS; it prints the mean decoded length.)

Also printed: the peak RSS of this process (getrusage ru_maxrss: model, optimizer, the
Trainer's tf.data input pipeline, which `train()` has too, and the decoder) and one line
`STEP_BENCH_RESULT {json}` with every figure. The data (vocabulary and TFRecords of
translate_ende_multi30k, from ../shared/data/multi30k) is generated into --data_dir when
absent (default: a directory under the system temp dir, never the repository); datagen
is not timed, and when the data is already there (benchmarks/peer_compare.py generates it
in its own process first) it does not run in this process at all, so it leaves no trace
in the peak RSS.
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
DEFAULT_DATA = os.path.join(tempfile.gettempdir(), "t2t_bench", "translate_ende_multi30k")
RESULT_TAG = "STEP_BENCH_RESULT "
PROBLEM = "translate_ende_multi30k"
VOCAB, BATCH, LENGTH = 8000, 128, 32
DECODE_BATCH, DECODE_SRC_LENGTH, DECODE_LENGTH = 32, 30, 40


def data_ready(data_dir):
  """Whether data_dir holds the vocabulary and the finished train split (its stats file)."""
  return all(os.path.exists(os.path.join(data_dir, name)) for name in
             (f"vocab.{PROBLEM}.model", f"{PROBLEM}-train.stats.json"))


def prepare_data(data_dir, raw_dir, log=print):
  """Generates translate_ende_multi30k into data_dir unless it is there already."""
  if data_ready(data_dir):
    log(f"data: {PROBLEM} in {data_dir} (reused)")
    return
  from t2t_keras.data import datagen  # pylint: disable=import-outside-toplevel
  if not os.path.exists(os.path.join(raw_dir, "train.en.gz")):
    sys.exit(f"step_bench: Multi30k not found in {raw_dir} (train.en.gz ...); pass --raw_dir")
  start = time.time()
  datagen.generate(PROBLEM, data_dir, log=None, raw_dir=raw_dir)
  log(f"data: {PROBLEM} in {data_dir} ({time.time() - start:.1f} s datagen, not timed)")


def fixed_batch(seed=0):
  """The peer's batch: default_rng(seed), sources then targets, ids in [2, VOCAB)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  src = rng.integers(2, VOCAB, (BATCH, LENGTH)).astype(np.int32)
  tgt = rng.integers(2, VOCAB, (BATCH, LENGTH)).astype(np.int32)
  return src, tgt


def decode_inputs(seed=0):
  """32 sources of 29 random ids in [3, VOCAB) + EOS (1), as benchmarks/decode_bench.py."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.default_rng(seed)
  ids = rng.integers(3, VOCAB, (DECODE_BATCH, DECODE_SRC_LENGTH - 1)).astype(np.int32)
  return np.concatenate([ids, np.ones([DECODE_BATCH, 1], np.int32)], axis=1)


def bench_trainer(data_dir, output_dir, overrides=""):
  """The benchmark's Trainer (the peer's configuration plus `overrides`), fed the fixed batch.

  Returns (trainer, hparams); `trainer.train_step()` then runs one update on the [128, 32]
  batch of `fixed_batch()`, 4096 target tokens, no padding.
  """
  # pylint: disable=import-outside-toplevel
  import tensorflow as tf
  from t2t_keras import registry
  from t2t_keras.training.config import TrainerConfig
  from t2t_keras.training.trainer import Trainer

  hp = registry.hparams("transformer_multi30k").replace(
      layer_prepostprocess_dropout=0.1, attention_dropout=0.1,
      relu_dropout=0.1).override(overrides)
  config = TrainerConfig(eval_every=0, save_every=10 ** 9, save_every_minutes=1e9)
  trainer = Trainer(registry.problem(PROBLEM), hp, data_dir, output_dir, config,
                    log=lambda *a, **k: None)
  assert trainer.vocab.vocab_size == VOCAB, trainer.vocab.vocab_size
  src, tgt = fixed_batch()
  batch = {"inputs": tf.constant(src), "targets": tf.constant(tgt)}
  trainer.iterator = itertools.repeat(batch)
  return trainer, hp


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=int(os.environ.get("STEPS", "15")),
                      help="timed training steps (default: $STEPS or 15, as the peer)")
  parser.add_argument("--warmup", type=int, default=3,
                      help="untimed steps after the first (default 3, as the peer)")
  parser.add_argument("--decode_steps", type=int, default=int(os.environ.get("DSTEPS", "5")),
                      help="timed beam-search calls (default: $DSTEPS or 5, as the peer)")
  parser.add_argument("--data_dir", default=DEFAULT_DATA,
                      help="translate_ende_multi30k data (generated here when absent)")
  parser.add_argument("--raw_dir", default=DEFAULT_RAW, help="raw Multi30k (train.en.gz ...)")
  parser.add_argument("--json", help="also write the figures to this file")
  parser.add_argument("--hparams", default="",
                      help='extra overrides of ours, e.g. "precision=mixed_bfloat16" '
                           "(the default measures the peer's configuration exactly)")
  args = parser.parse_args()

  prepare_data(args.data_dir, args.raw_dir)

  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  import keras
  from t2t_keras.decoding import search
  from t2t_keras.decoding.settings import parse_decode_hparams
  from t2t_keras.decoding.sharding import default_shards, shard_search_fn
  from t2t_keras import runs

  load_before = os.getloadavg()
  print(f"tf {tf.__version__} keras {keras.__version__}; {os.cpu_count()} CPUs; load average "
        f"{' '.join(f'{x:.2f}' for x in load_before)}", flush=True)
  with tempfile.TemporaryDirectory(prefix="step_bench_") as output_dir:
    trainer, hp = bench_trainer(args.data_dir, output_dir, args.hparams)

    start = time.perf_counter()
    loss, tokens = trainer.train_step()
    first = time.perf_counter() - start
    assert tokens == BATCH * LENGTH, tokens
    params = int(sum(np.prod(v.shape) for v in trainer.model.trainable_variables))
    print(f"first step (trace) {first:.1f}s loss {loss:.3f}; params: {params}", flush=True)
    for _ in range(args.warmup):
      trainer.train_step()
    times = []
    for _ in range(args.steps):
      start = time.perf_counter()
      loss, tokens = trainer.train_step()
      times.append(time.perf_counter() - start)
    med = statistics.median(times)
    tok_s = BATCH * LENGTH / med
    print(f"TRAIN xla={trainer.use_xla}: median step {med * 1000:.1f} ms (min "
          f"{min(times) * 1000:.1f}, max {max(times) * 1000:.1f}) over {len(times)} steps; "
          f"{tok_s:.0f} target tok/s ({2 * tok_s:.0f} src+tgt tok/s); loss {loss:.3f}",
          flush=True)

    dh = parse_decode_hparams(f"max_decode_length={DECODE_LENGTH}").search
    model = trainer.model
    if hp.precision != "float32":
      # t2t-decoder and the SavedModel restore a checkpoint into a float32 model
      # (runs.load_model), whatever the training precision: search as they do.
      model = runs.build_model(hp, trainer.vocab.vocab_size)
      model.set_weights(trainer.model.get_weights())
    decode_dtype = model.compute_dtype

    def run_search(inputs):
      return search.search(
          model, inputs, beam_size=dh.beam_size, alpha=dh.alpha, extra_length=dh.extra_length,
          max_decode_length=dh.max_decode_length, eos_id=-1, stop_early=dh.stop_early)

    # As translate.make_search_fn, with eos_id=-1 (forced length): jit-compiled, and
    # the batch searched as `search_shards` concurrent slices (2 on a 2-core CPU).
    signature = [tf.TensorSpec([None, None], tf.int32)]
    shards = dh.search_shards or default_shards()
    search_fn = shard_search_fn(
        tf.function(run_search, jit_compile=dh.jit, input_signature=signature), shards, signature)
    inputs = tf.constant(decode_inputs())
    start = time.perf_counter()
    ids, _ = search_fn(inputs)
    ids = ids.numpy()
    decode_first = time.perf_counter() - start
    assert ids.shape == (DECODE_BATCH, dh.beam_size, DECODE_LENGTH), ids.shape
    print(f"decode first call (trace + compile, jit={dh.jit}, {shards} shard(s), "
          f"{decode_dtype}) "
          f"{decode_first:.1f}s, outputs shape {ids.shape}", flush=True)
    dtimes = []
    for _ in range(args.decode_steps):
      start = time.perf_counter()
      ids, _ = search_fn(inputs)
      ids = ids.numpy()
      dtimes.append(time.perf_counter() - start)
    dmed = statistics.median(dtimes)
    print(f"BEAM beam={dh.beam_size} batch={DECODE_BATCH} max_len={DECODE_LENGTH}: median "
          f"{dmed:.2f}s/batch -> {DECODE_BATCH / dmed:.1f} sent/s; output length "
          f"{ids.shape[-1]} (forced: eos_id=-1)", flush=True)

  max_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(f"peak RSS {max_rss_mib:.0f} MiB", flush=True)
  result = {
      "tf": tf.__version__, "keras": keras.__version__, "cpus": os.cpu_count(),
      "load_before": load_before, "load_after": os.getloadavg(), "params": params,
      "xla_train": trainer.use_xla, "jit_decode": dh.jit, "decode_shards": shards,
      "decode_dtype": decode_dtype,
      "train_first_step_s": first, "train_step_times_s": times, "train_median_step_s": med,
      "train_target_tok_s": tok_s, "train_loss": loss,
      "decode_first_call_s": decode_first, "decode_times_s": dtimes,
      "decode_median_s": dmed, "decode_sent_s": DECODE_BATCH / dmed,
      "decode_output_length": int(ids.shape[-1]), "max_rss_mib": max_rss_mib,
      "steps": args.steps, "warmup": args.warmup, "decode_steps": args.decode_steps,
  }
  print(RESULT_TAG + json.dumps(result), flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=2)


if __name__ == "__main__":
  main()
