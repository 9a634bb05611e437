"""Nucleus sampling on a trained run: the bisection (sampling.filter_top_p) against sorting
the whole vocabulary, beside greedy search and plain sampling, on real source lines.

    python benchmarks/nucleus_bench.py --run RUN_DIR --sources FILE [--lines 256]
        [--rounds 3] [--top_p 0.9] [--decode_hparams "batch_size=32"]

Each variant decodes the first `--lines` lines of FILE as t2t-decoder does
(translate.translate_ids: length-sorted batches, XLA, search shards), compiled first,
then timed in rounds that take the variants in turn; a variant's figure is the median
of its rounds. "top_p (sort)" is the same search traced with the earlier filter, which
sorted the whole vocabulary every step (`sorted_filter` below); the two filters' samples
are compared. A trained run: its outputs end at EOS where a random model's run to the
length limit.
"""

import argparse
import os
import statistics
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import tensorflow as tf  # noqa: E402

from t2t_keras import runs  # noqa: E402
from t2t_keras.decoding import translate, sampling  # noqa: E402
from t2t_keras.decoding.settings import parse_decode_hparams  # noqa: E402
from t2t_keras.decoding.spec import DecodingSpec  # noqa: E402
from t2t_keras.decoding.search_common import NEG_INF  # noqa: E402


def sorted_filter(log_probs, p):
  """The nucleus by a descending sort of the whole vocabulary (the earlier filter)."""
  sorted_lp = tf.sort(log_probs, axis=-1, direction="DESCENDING")
  before = tf.cumsum(tf.exp(sorted_lp), axis=-1, exclusive=True)
  kept = tf.where(before < p, sorted_lp, tf.constant(float("inf"), log_probs.dtype))
  threshold = tf.reduce_min(kept, axis=-1, keepdims=True)
  return tf.where(log_probs < threshold, tf.constant(NEG_INF, log_probs.dtype), log_probs)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--run", required=True)
  parser.add_argument("--sources", required=True)
  parser.add_argument("--lines", type=int, default=256)
  parser.add_argument("--rounds", type=int, default=3)
  parser.add_argument("--top_p", type=float, default=0.9)
  parser.add_argument("--decode_hparams", default="")
  args = parser.parse_args()
  run = runs.load(args.run)
  with open(args.sources, encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line, _ in zip(f, range(args.lines))]
  sources = translate.encode_sources(run.vocab, lines)
  extra = "," + args.decode_hparams if args.decode_hparams else ""
  sample = "sampling_method=random,beam_size=1"
  nucleus = f"{sample},sampling_keep_top_p={args.top_p}"
  variants = {"greedy": ("beam_size=1", None), "sample": (sample, None),
              "top_p": (nucleus, None), "top_p (sort)": (nucleus, sorted_filter)}
  print(f"{args.run}: {len(lines)} lines of {args.sources}, vocabulary "
        f"{run.vocab.vocab_size}, {os.cpu_count()} CPUs, TF {tf.__version__}")
  fns, outputs, bisection = {}, {}, sampling.filter_top_p
  for name, (text, nucleus_filter) in variants.items():
    settings = parse_decode_hparams(text + extra)
    fn = DecodingSpec(None, settings).search_fn(run.model, run.vocab)
    sampling.filter_top_p = nucleus_filter or bisection  # looked up when traced
    start = time.perf_counter()
    outputs[name] = translate.translate_ids(run.model, sources, settings, fn)
    sampling.filter_top_p = bisection
    print(f"{name:<14} first pass (trace + compiles) {time.perf_counter() - start:6.1f} s",
          flush=True)
    fns[name] = settings, fn
  times = {name: [] for name in fns}
  for _ in range(args.rounds):
    for name, (settings, fn) in fns.items():
      start = time.perf_counter()
      translate.translate_ids(run.model, sources, settings, fn)
      times[name].append(time.perf_counter() - start)
  rates = {name: len(lines) / statistics.median(t) for name, t in times.items()}
  for name, rate in rates.items():
    print(f"{name:<14} {rate:8.1f} sentences/s  (median of {args.rounds}; "
          f"{rate / rates['greedy']:.2f}x greedy)")
  print(f"RATIO top_p bisection / sort: {rates['top_p'] / rates['top_p (sort)']:.2f}x")
  same = sum(a == b for a, b in zip(outputs["top_p"], outputs["top_p (sort)"]))
  print(f"the same samples (ids and scores) from both filters: {same} of {len(lines)}")


if __name__ == "__main__":
  main()
