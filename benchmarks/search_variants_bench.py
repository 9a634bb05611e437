"""Greedy search, sampling (plain, top-k, nucleus), beam search and a 2-model ensemble:
sentences/s of each, measured in one process on the same inputs, passes taken in turn.

    python benchmarks/search_variants_bench.py [--batch 32 --length 40 --rounds 5]

decode_bench.py's model (vocab 8000, 3+3 layers, d_model 256, 4 heads, d_ff 1024;
random weights; a second one from another seed for the ensemble), EOS disabled and the
output length fixed, so every variant runs the same number of steps; each variant is
compiled with XLA and searched as `--shards` slices at once (t2t-decoder's defaults).
A round times one call of every variant in turn; a variant's figure is the median of
its rounds. Ratios are against greedy search (and the ensemble against beam search of
one model) from the same rounds.
"""

import argparse
import os
import statistics
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))

import tensorflow as tf  # noqa: E402

from decode_bench import bench_model  # noqa: E402
from t2t_keras.decoding import search  # noqa: E402
from t2t_keras.decoding.sharding import default_shards, shard_search_fn  # noqa: E402
from t2t_keras.models.ensemble import Ensemble  # noqa: E402

VARIANTS = {  # name -> (beam_size, Sampling or None, ensemble?)
    "greedy": (1, None, False),
    "sample": (1, search.Sampling(1.0, 0, 1.0, 1), False),
    "sample-top_k=10": (1, search.Sampling(1.0, 10, 1.0, 1), False),
    "sample-top_p=0.9": (1, search.Sampling(1.0, 0, 0.9, 1), False),
    "beam4": (4, None, False),
    "beam4-ensemble2": (4, None, True),
}


def make_fn(model, beam, sampling, length, shards):
  def decode(inputs):
    return search.search(model, inputs, search.SearchOptions(
        beam_size=beam, alpha=0.6, extra_length=50, max_decode_length=length, eos_id=-1,
        sampling=sampling))
  return shard_search_fn(tf.function(decode, jit_compile=True), shards)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--length", type=int, default=40, help="output length (forced)")
  parser.add_argument("--src_length", type=int, default=30)
  parser.add_argument("--rounds", type=int, default=5)
  parser.add_argument("--shards", type=int, default=0, help="0: default_shards()")
  parser.add_argument("--variants", default=",".join(VARIANTS))
  args = parser.parse_args()
  shards = args.shards or default_shards()

  tf.keras.utils.set_random_seed(0)
  model = bench_model()
  tf.keras.utils.set_random_seed(1)
  pair = Ensemble([model, bench_model()])
  inputs = tf.random.uniform([args.batch, args.src_length], 3, 8000, tf.int32, seed=2)
  inputs = tf.concat([inputs[:, :-1], tf.ones([args.batch, 1], tf.int32)], 1)
  gpus = [d.name for d in tf.config.list_logical_devices("GPU")]
  print(f"batch {args.batch}, source length {args.src_length}, output length {args.length}, "
        f"{shards} shard(s), XLA; {os.cpu_count()} CPUs; GPUs: {gpus or 'none'}; "
        f"TF {tf.__version__}")
  fns = {}
  for name in args.variants.split(","):
    beam, sampling, ensemble = VARIANTS[name]
    fns[name] = make_fn(pair if ensemble else model, beam, sampling, args.length, shards)
    start = time.perf_counter()
    ids, _ = fns[name](inputs)
    assert ids.shape[-1] == args.length, ids.shape
    print(f"{name:<18} first call (trace + compile) {time.perf_counter() - start:6.1f} s",
          flush=True)
  times = {name: [] for name in fns}
  for _ in range(args.rounds):
    for name, fn in fns.items():
      start = time.perf_counter()
      ids, _ = fn(inputs)
      _ = ids.numpy()
      times[name].append(time.perf_counter() - start)
  rates = {name: args.batch / statistics.median(t) for name, t in times.items()}
  for name, rate in rates.items():
    vs = f"  {rate / rates['greedy']:.2f}x greedy" if "greedy" in rates else ""
    print(f"{name:<18} {rate:8.1f} sentences/s  (median of {args.rounds}; "
          f"min {args.batch / max(times[name]):.1f}, max {args.batch / min(times[name]):.1f}){vs}")
  if "beam4" in rates and "beam4-ensemble2" in rates:
    print(f"ensemble of 2 / one model, beam 4: {rates['beam4-ensemble2'] / rates['beam4']:.2f}x")


if __name__ == "__main__":
  main()
