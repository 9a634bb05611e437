"""Target prefixes on Multi30k: the first k reference words forced, what follows measured.

    python recipes/multi30k_prefixes.py t2t_train/multi30k/selected [--ks 1,2,4] \\
        [--splits val,test_2016_flickr] [--latency_sentences 100]

For each sentence of a split, its reference's first k words (split on whitespace) are
the target prefix (`translate_lines(prefixes=...)`), with the run's selected decoding
(<run>/../selected/selection.json where the recipe wrote one, else beam 4, alpha 0.6).
A sentence whose reference has k words or fewer has no word to predict after a k-word
prefix and is counted apart. Per k, on the sentences with more than k reference words:

- sacreBLEU of the whole outputs (the k given words included) and of the continuations
  only (each output less its first k words against the reference less its first k);
- next word: the share of outputs whose word k + 1 is the reference's word k + 1 (what an
  autocompletion shows first); k = 0 is the unprefixed output's first word;
- exact: the share of outputs equal to their reference.

Then the latency of one sentence at a time (batch 1, the selected beam): the median and
90th percentile over `--latency_sentences` val sentences, unprefixed and with k = 2, each
after one warm-up pass over the same sentences (XLA compiles per length bucket).
Prints a markdown table and `RESULT` lines; choices are made on val, test2016 only reported.
"""

import argparse
import json
import os
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from t2t_keras import tf_startup  # noqa: E402

tf_startup.import_tensorflow_quietly()

import numpy as np  # noqa: E402  pylint: disable=wrong-import-position

from t2t_keras import runs  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.decoding import translate  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.decoding.spec import DecodingSpec  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.metrics import bleu  # noqa: E402  pylint: disable=wrong-import-position


def decode_hparams(run_dir, given):
  """The decode hparams: given, else the recipe's selection (selection.json), else beam 4."""
  if given:
    return given
  path = os.path.join(run_dir, "selection.json")
  if os.path.exists(path):
    with open(path) as f:
      return json.load(f)["decode_hparams"]
  return "beam_size=4,alpha=0.6"


def words_after(text, k):
  return " ".join(text.split()[k:])


def figures(outputs, refs, k):
  """{bleu, continuation_bleu, next_word, exact} (percent) of outputs against refs."""
  nxt = [o.split()[k:k + 1] == r.split()[k:k + 1] for o, r in zip(outputs, refs)]
  return {"bleu": bleu.sacrebleu_scores(outputs, refs)["bleu"],
          "continuation_bleu": bleu.sacrebleu_scores(
              [words_after(o, k) for o in outputs], [words_after(r, k) for r in refs])["bleu"],
          "next_word": 100.0 * np.mean(nxt),
          "exact": 100.0 * np.mean([o == r for o, r in zip(outputs, refs)])}


def evaluate_split(model, vocab, settings, sources, refs, ks):
  """[(k, sentences, figures)] for k = 0 and each k in ks (each on the sentences whose
  reference has more than k words; k = 0 on the same sentences as the largest k too)."""
  rows = []
  free = [h[0].text for h in translate.translate_lines(model, vocab, sources, settings)]
  rows.append((0, len(sources), figures(free, refs, 0)))
  for k in ks:
    kept = [i for i, r in enumerate(refs) if len(r.split()) > k]
    prefixes = [" ".join(refs[i].split()[:k]) for i in kept]
    outputs = [h[0].text for h in translate.translate_lines(
        model, vocab, [sources[i] for i in kept], settings, prefixes=prefixes)]
    starts = sum(o.startswith(p) for o, p in zip(outputs, prefixes))
    if starts != len(kept):
      raise SystemExit(f"k={k}: only {starts} of {len(kept)} outputs start with their prefix")
    rows.append((k, len(kept), figures(outputs, [refs[i] for i in kept], k)))
    rows.append((f"0 on k={k}'s", len(kept), figures([free[i] for i in kept],
                                                      [refs[i] for i in kept], k)))
  return rows


def latency(model, vocab, settings, sources, prefixes):
  """(median, p90) milliseconds of translating each sentence alone, after a warm-up."""
  one = settings.replace(batch_size=1)
  search_fn = DecodingSpec(None, one).search_fn(model, vocab,
                                                "ids" if prefixes is None else "prefix")
  times = []
  for warm in (True, False):
    for i, line in enumerate(sources):
      start = time.perf_counter()
      translate.translate_lines(model, vocab, [line], one, search_fn=search_fn,
                                prefixes=None if prefixes is None else [prefixes[i]])
      if not warm:
        times.append(1000.0 * (time.perf_counter() - start))
  return float(np.median(times)), float(np.percentile(times, 90))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("run_dir", help="a run, e.g. t2t_train/multi30k/selected")
  parser.add_argument("--raw_dir", default="../shared/data/multi30k")
  parser.add_argument("--splits", default="val,test_2016_flickr")
  parser.add_argument("--ks", default="1,2,4")
  parser.add_argument("--decode_hparams", default="")
  parser.add_argument("--latency_sentences", type=int, default=100)
  args = parser.parse_args()
  model, vocab, _, info, ckpt = runs.load(args.run_dir)
  hparams = decode_hparams(args.run_dir, args.decode_hparams)
  settings = DecodingSpec.for_run(info["problem"], hparams).settings
  ks = [int(k) for k in args.ks.split(",")]
  print(f"{ckpt}, decode hparams {hparams!r}")
  print("| split | k | sentences | sacreBLEU | continuation BLEU | next word % | exact % |")
  print("| --- | --- | --- | --- | --- | --- | --- |")
  for split in args.splits.split(","):
    sources = bleu.read_lines(os.path.join(args.raw_dir, f"{split}.en.gz"))
    refs = bleu.read_lines(os.path.join(args.raw_dir, f"{split}.de.gz"))
    for k, n, f in evaluate_split(model, vocab, settings, sources, refs, ks):
      print(f"| {split} | {k} | {n} | {f['bleu']:.2f} | {f['continuation_bleu']:.2f} | "
            f"{f['next_word']:.1f} | {f['exact']:.1f} |", flush=True)
      if isinstance(k, int):
        for name, value in f.items():
          print(f"RESULT {split}_k{k}_{name} {value:.2f}")
  if args.latency_sentences:
    sources = bleu.read_lines(os.path.join(args.raw_dir, "val.en.gz"))
    refs = bleu.read_lines(os.path.join(args.raw_dir, "val.de.gz"))
    chosen = [i for i, r in enumerate(refs) if len(r.split()) > 2][:args.latency_sentences]
    lines = [sources[i] for i in chosen]
    for name, prefixes in (("free", None), ("k2", [" ".join(refs[i].split()[:2])
                                                   for i in chosen])):
      median, p90 = latency(model, vocab, settings, lines, prefixes)
      print(f"latency {name}, batch 1, {len(lines)} val sentences: median {median:.1f} ms, "
            f"p90 {p90:.1f} ms")
      print(f"RESULT latency_{name}_median_ms {median:.1f}")


if __name__ == "__main__":
  main()
