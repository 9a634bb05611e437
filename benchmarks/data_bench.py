"""Data benchmark: datagen pairs/s, pipeline tokens/s, CPU per batch and padding fraction.

  .venv/bin/python benchmarks/data_bench.py [--multi30k_dir=../shared/data/multi30k]
      [--batches=300] [--hparams=transformer_small]

Generates Multi30k (and the numbers problem) into a fresh temporary data_dir,
then reads train batches through `make_dataset` in both bucket modes.
"""

import argparse
import os
import shutil
import statistics
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from t2t_keras import registry  # noqa: E402
from t2t_keras.data import datagen, pipeline  # noqa: E402

HERE = os.path.dirname(os.path.abspath(__file__))


def bench_datagen(name, data_dir, **kwargs):
  start = time.time()
  summary = datagen.generate(name, data_dir, log=None, **kwargs)
  seconds = time.time() - start
  pairs = sum(s["pairs"] for s in summary["splits"].values())
  print(f"datagen {name}: {pairs} pairs in {seconds:.1f} s = {pairs / seconds:,.0f} pairs/s "
        f"(vocabulary {summary['vocab_size']} pieces, trained inside that time)")
  return summary


def bench_pipeline(name, data_dir, hparams_name, batches, mode):
  problem = registry.problem(name)
  hp = registry.hparams(hparams_name)
  ds = pipeline.make_dataset(problem, data_dir, "train", hp,
                             pipeline.InputSettings(shuffle=True, seed=1, repeat=True,
                                                    bucket_mode=mode))
  it = iter(ds)
  next(it)  # start-up (graph building, first shuffle fill) not timed
  fractions, shapes = [], set()
  real = padded = budget_tokens = 0
  start = time.time()
  for _ in range(batches):
    b = next(it)
    n_in, n_tg = int(tf.size(b["inputs"])), int(tf.size(b["targets"]))
    frac = pipeline.padding_fraction(b)
    fractions.append(frac)
    padded += n_in + n_tg
    real += round((1 - frac) * (n_in + n_tg))
    budget_tokens += pipeline.batch_tokens(b)
    shapes.add((b["inputs"].shape[1], b["targets"].shape[1]))
  seconds = time.time() - start
  fr = sorted(fractions)
  print(f"pipeline {name} {hparams_name} (batch_size {hp.batch_size}, max_length "
        f"{hp.max_length}) mode={mode}: {batches} batches, "
        f"{real / seconds:,.0f} real tokens/s ({padded / seconds:,.0f} padded ids/s); "
        f"padding fraction per batch mean {statistics.mean(fr):.3f} "
        f"median {fr[len(fr) // 2]:.3f} p90 {fr[int(len(fr) * 0.9)]:.3f} max {fr[-1]:.3f}; "
        f"overall {1 - real / padded:.3f}; budget use {budget_tokens / batches / hp.batch_size:.2f}; "
        f"{len(shapes)} distinct shapes")
  print(f"  CPU per batch (the pipeline alone, in TF's runtime): "
        f"{cpu_per_batch(ds, min(batches, 100)):.1f} ms of CPU time")


def cpu_per_batch(ds, batches, rounds=3):
  """Median over `rounds` of the process CPU time (ms) per batch of `batches` batches
  drained by Dataset.reduce: what the pipeline takes from the training step's cores."""
  ds = ds.take(batches)
  drain = lambda: ds.reduce(tf.constant(0, tf.int64), lambda n, b: n + 1)  # noqa: E731
  drain()
  times = []
  for _ in range(rounds):
    t0 = os.times()
    drain()
    t1 = os.times()
    times.append((t1.user - t0.user + t1.system - t0.system) / batches * 1e3)
  return statistics.median(times)


def main():
  ap = argparse.ArgumentParser()
  ap.add_argument("--multi30k_dir", default=os.path.join(HERE, "..", "..", "shared", "data",
                                                         "multi30k"))
  ap.add_argument("--batches", type=int, default=300)
  ap.add_argument("--hparams", default="transformer_small")
  args = ap.parse_args()
  print(f"TensorFlow {tf.__version__}, {os.cpu_count()} CPU cores")
  root = tempfile.mkdtemp(prefix="t2t_data_bench_")
  try:
    runs = []
    if os.path.exists(os.path.join(args.multi30k_dir, "train.en.gz")):
      d = os.path.join(root, "multi30k")
      bench_datagen("translate_ende_multi30k", d, raw_dir=args.multi30k_dir)
      runs.append(("translate_ende_multi30k", d, args.hparams))
    else:
      print(f"Multi30k not found at {args.multi30k_dir}; skipping it")
    d = os.path.join(root, "numbers")
    bench_datagen("translate_ende_numbers", d)
    runs.append(("translate_ende_numbers", d, "transformer_tiny"))
    for name, d, hp in runs:
      for mode in ("pair", "max"):
        bench_pipeline(name, d, hp, args.batches, mode)
  finally:
    shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
  main()
