"""Beam-search decoding speed: sentences/s, cached vs uncached decoder, XLA on/off.

    python benchmarks/decode_bench.py [--batch 32 --beam 4 --length 40 --repeats 3]

A transformer_small-sized model (vocab 8000, 3+3 layers, d_model 256, 4 heads,
d_ff 1024) with random weights decodes a batch of random sources. EOS is
disabled (eos_id=-1) and the output length fixed (max_decode_length), so every
variant does the same number of steps:

  cached    encoder once, one decoder step per token with the k/v cache
  -sharded  the batch as `default_shards()` slices searched at once (2 on a
            2-core CPU: t2t-decoder's and the SavedModel's default;
            t2t_keras/decoding/sharding.py)
  uncached  re-runs the whole decoder every step: over the prefix (no XLA;
            dynamic shapes) or over the fixed-length buffer (XLA needs static
            shapes; about twice the prefix's work)

For a comparison with TF Model Garden and CTranslate2 on these shapes, measured
in one run on the same machine, see benchmarks/peer_compare.py.
"""

import argparse
import json
import os
import resource
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from t2t_keras import registry  # noqa: E402
from t2t_keras.decoding import search  # noqa: E402
from t2t_keras.decoding.sharding import default_shards, shard_search_fn  # noqa: E402
from t2t_keras.models.transformer import Transformer  # noqa: E402


def bench_model(vocab_size=8000):
  hp = registry.hparams("transformer_small").replace(
      num_encoder_layers=3, num_decoder_layers=3, hidden_size=256, filter_size=1024,
      num_heads=4, layer_prepostprocess_dropout=0.0)
  model = Transformer(vocab_size, hp)
  model.build_for_ids()
  return model


def make_fn(model, beam, length, cached, jit, shards=1):
  def decode(inputs):
    ids, scores, _ = search.search_with_steps(model, inputs, search.SearchOptions(
        beam_size=beam, alpha=0.6, extra_length=50, max_decode_length=length, eos_id=-1,
        stop_early=True, cached=cached, prefix_only=not cached and not jit))
    return ids, scores
  # As builder.compile_search with search_shards: slices of the batch searched at once.
  return shard_search_fn(tf.function(decode, jit_compile=jit), shards)


def time_variant(fn, inputs, repeats):
  start = time.perf_counter()
  ids, _ = fn(inputs)
  first = time.perf_counter() - start
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    ids, _ = fn(inputs)
    _ = ids.numpy()
    times.append(time.perf_counter() - start)
  return first, min(times), ids.shape


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--beam", type=int, default=4)
  parser.add_argument("--length", type=int, default=40, help="output length (forced)")
  parser.add_argument("--src_length", type=int, default=30)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--uncached_repeats", type=int, default=1)
  parser.add_argument("--variants",
                      default="cached-xla-sharded,cached-xla,cached,uncached-xla,uncached",
                      help="-sharded: the batch as default_shards() concurrent slices "
                           "(t2t-decoder's default on a CPU)")
  parser.add_argument("--json", help="Also write the figures to this JSON file.")
  args = parser.parse_args()

  tf.keras.utils.set_random_seed(0)
  model = bench_model()
  inputs = tf.random.uniform([args.batch, args.src_length], 3, 8000, tf.int32)
  inputs = tf.concat([inputs[:, :-1], tf.ones([args.batch, 1], tf.int32)], 1)  # EOS-terminated
  print(f"model: {model.count_params() / 1e6:.1f}M params; batch {args.batch}, beam "
        f"{args.beam}, source length {args.src_length}, output length {args.length}; "
        f"{os.cpu_count()} CPUs; TF {tf.__version__}")
  results, first_calls = {}, {}
  for variant in args.variants.split(","):
    base = variant.removesuffix("-sharded")
    cached = not base.startswith("uncached")
    jit = base.endswith("xla")
    shards = default_shards() if variant.endswith("-sharded") else 1
    repeats = args.repeats if cached else args.uncached_repeats
    first, best, shape = time_variant(
        make_fn(model, args.beam, args.length, cached, jit, shards), inputs, repeats)
    assert shape[-1] == args.length, shape
    results[variant] = args.batch / best
    first_calls[variant] = first
    print(f"{variant:<18} {results[variant]:8.1f} sentences/s  ({best:6.2f} s/batch; first "
          f"call incl. tracing/compile {first:6.1f} s)", flush=True)
  if "cached-xla" in results and "uncached-xla" in results:
    print(f"cached/uncached (XLA): {results['cached-xla'] / results['uncached-xla']:.1f}x")
  if "cached" in results and "uncached" in results:
    print(f"cached/uncached (no XLA): {results['cached'] / results['uncached']:.1f}x")
  best = max(results.values())
  print(f"best: {best:.1f} sentences/s")
  max_rss_mib = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  print(f"peak RSS {max_rss_mib:.0f} MiB")
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"config": vars(args), "params": model.count_params(),
                 "sentences_per_s": results, "first_call_s": first_calls,
                 "max_rss_mib": max_rss_mib}, f, indent=2)


if __name__ == "__main__":
  main()
