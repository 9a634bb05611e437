"""The main job's check: exact match on the test split and per range, and a verdict.

    python recipes/numbers_ranges.py t2t_train/numbers_tiny \\
        [--test_translations t2t_train/numbers_tiny/decode_test.de] [--min_exact_match 90] \\
        [--per_range 100] [--sample_seed 0] [--checkpoint_path t2t_train/numbers_tiny/ckpt-1500]

Draws `--per_range` numbers from each of 0-99, 100-9,999 and 10,000-99,999
(`numbers.independent_sample`: numbers >= 1,000 that are in no split's data;
numbers below 1,000 are all in train by design), translates their English
words with the run's newest (or the given) checkpoint (beam 4, alpha 0.6) and compares with
num2words' German. With `--test_translations` (t2t-decoder's `--decode_to_file` of
the test split) it also scores those lines against the test split's references.
Prints one line per figure, then one `RESULT name value` line each (what
`recipes/seeds.py` collects), and writes the misses to <run>/ranges_misses.tsv.

Exits 1 with one line naming the figures below `--min_exact_match` (percent):
a model that did not learn must not pass as a result.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from num2words import num2words  # noqa: E402

from t2t_keras import tf_startup  # noqa: E402

tf_startup.import_tensorflow_quietly()

from t2t_keras import runs  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.decoding import translate, files  # noqa: E402
from t2t_keras.decoding.settings import parse_decode_hparams  # noqa: E402
from t2t_keras.problems import numbers  # noqa: E402

PROBLEM = "translate_ende_numbers"


def score_test_split(path):
  """(percent, right, total) of the lines of `path` against the test split's references."""
  hyps = files.read_lines(path)
  _, refs = files.split_pairs(PROBLEM, split="test")
  if len(hyps) != len(refs):
    raise SystemExit(f"{path}: {len(hyps)} lines, but the test split of {PROBLEM} has "
                     f"{len(refs)} pairs; decode it with t2t-decoder --decode_split=test "
                     f"--decode_to_file={path}")
  right = sum(h.strip() == r.strip() for h, r in zip(hyps, refs))
  return 100.0 * right / len(refs), right, len(refs)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("run_dir")
  parser.add_argument("--test_translations", help="the test split's translations, one a line")
  parser.add_argument("--min_exact_match", type=float, default=90.0,
                      help="fail (exit 1) when the test split or any range is below this percent")
  parser.add_argument("--per_range", type=int, default=100)
  parser.add_argument("--sample_seed", type=int, default=0)
  parser.add_argument("--checkpoint_path", help="default: the run's newest checkpoint")
  args = parser.parse_args()
  results = {}
  if args.test_translations:
    pct, right, total = score_test_split(args.test_translations)
    print(f"{args.test_translations}: test split exact match {pct:.1f}% ({right}/{total})")
    results["test_exact_match"] = pct
  model, vocab, _, info, checkpoint_path = runs.load(args.run_dir, args.checkpoint_path)
  if info["problem"] != PROBLEM:
    sys.exit(f"{args.run_dir} was trained on {info['problem']}, not {PROBLEM}")
  sample = numbers.independent_sample(args.per_range, sample_seed=args.sample_seed)
  settings = parse_decode_hparams("beam_size=4,alpha=0.6")
  misses, total_right, total = [], 0, 0
  print(f"{checkpoint_path}: exact match per range "
        f"({args.per_range} numbers each, sample seed {args.sample_seed}, beam 4, alpha 0.6)")
  for name, nums in sample.items():
    sources = [num2words(n, lang="en") for n in nums]
    refs = [num2words(n, lang="de") for n in nums]
    hyps = translate.decode_lines(model, vocab, sources, settings)
    right = sum(h.strip() == r for h, r in zip(hyps, refs))
    misses += [(name, n, s, r, h) for n, s, r, h in zip(nums, sources, refs, hyps)
               if h.strip() != r]
    total_right, total = total_right + right, total + len(nums)
    results[f"range_{name}"] = 100.0 * right / len(nums)
    print(f"  {name:>14}: {100.0 * right / len(nums):5.1f}% ({right}/{len(nums)})")
  results["ranges_all"] = 100.0 * total_right / total
  print(f"  {'all':>14}: {100.0 * total_right / total:5.1f}% ({total_right}/{total})")
  path = os.path.join(args.run_dir, "ranges_misses.tsv")
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.write("range\tnumber\tenglish\treference\ttranslation\n")
    f.writelines("\t".join(map(str, m)) + "\n" for m in misses)
  os.replace(path + ".tmp", path)
  print(f"  misses: {path}")
  for name, value in results.items():
    print(f"RESULT {name} {value:.1f}")
  below = [f"{name} {value:.1f}%" for name, value in results.items()
           if name != "ranges_all" and value < args.min_exact_match]
  if below:
    sys.exit(f"FAILED: the model did not learn {PROBLEM}: {', '.join(below)} < "
             f"{args.min_exact_match:g}% exact match ({args.run_dir})")
  print(f"PASSED: every figure >= {args.min_exact_match:g}% exact match")


if __name__ == "__main__":
  main()
