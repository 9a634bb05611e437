"""Exact match of a translate_ende_numbers run per range, on numbers outside its test split.

    python recipes/numbers_ranges.py t2t_train/numbers_tiny [--per_range 100] [--sample_seed 0]
        [--checkpoint_path t2t_train/numbers_tiny/ckpt-1500]

Draws `--per_range` numbers from each of 0-99, 100-9,999 and 10,000-99,999
(`numbers.independent_sample`: numbers >= 1,000 that are in no split's data;
numbers below 1,000 are all in train by design), translates their English
words with the run's newest (or the given) checkpoint (beam 4, alpha 0.6) and compares with
num2words' German. Prints one line per range and writes the misses to
<run>/ranges_misses.tsv.
"""

import argparse
import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from num2words import num2words  # noqa: E402

from t2t_keras.bin.decoder import load  # noqa: E402  (quiet TensorFlow start-up)
from t2t_keras.decoding import decoder  # noqa: E402
from t2t_keras.problems import numbers  # noqa: E402


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("run_dir")
  parser.add_argument("--per_range", type=int, default=100)
  parser.add_argument("--sample_seed", type=int, default=0)
  parser.add_argument("--checkpoint_path", help="default: the run's newest checkpoint")
  args = parser.parse_args()
  model, vocab, info = load(args.run_dir, args.checkpoint_path)
  if info["problem"] != "translate_ende_numbers":
    sys.exit(f"{args.run_dir} was trained on {info['problem']}, not translate_ende_numbers")
  sample = numbers.independent_sample(args.per_range, sample_seed=args.sample_seed)
  hp = decoder.decode_hparams("beam_size=4,alpha=0.6")
  misses, total_right, total = [], 0, 0
  print(f"{info['checkpoint_path']}: exact match per range "
        f"({args.per_range} numbers each, sample seed {args.sample_seed}, beam 4, alpha 0.6)")
  for name, nums in sample.items():
    sources = [num2words(n, lang="en") for n in nums]
    refs = [num2words(n, lang="de") for n in nums]
    hyps = decoder.decode_lines(model, vocab, sources, hp)
    right = sum(h.strip() == r for h, r in zip(hyps, refs))
    misses += [(name, n, s, r, h) for n, s, r, h in zip(nums, sources, refs, hyps)
               if h.strip() != r]
    total_right, total = total_right + right, total + len(nums)
    print(f"  {name:>14}: {100.0 * right / len(nums):5.1f}% ({right}/{len(nums)})")
  print(f"  {'all':>14}: {100.0 * total_right / total:5.1f}% ({total_right}/{total})")
  path = os.path.join(args.run_dir, "ranges_misses.tsv")
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.write("range\tnumber\tenglish\treference\ttranslation\n")
    f.writelines("\t".join(map(str, m)) + "\n" for m in misses)
  os.replace(path + ".tmp", path)
  print(f"  misses: {path}")


if __name__ == "__main__":
  main()
