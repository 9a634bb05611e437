"""Splits Multi30k's pairs by a pattern on the English side: an in-domain slice and the rest.

    python recipes/slice_pairs.py --raw_dir ../shared/data/multi30k --pattern '\\bdogs?\\b' \\
        --out_dir t2t_train/multi30k_dogs/slice

Writes <split>.in.en / .in.de (the pairs whose English matches, case-insensitive) and
<split>.out.en / .out.de (the others) for train, val and test_2016_flickr, and prints
the counts. recipes/multi30k_finetune.sh fine-tunes on train.in and reports both halves.
"""

import argparse
import gzip
import os
import re

SPLITS = ("train", "val", "test_2016_flickr")


def read(path):
  with gzip.open(path, "rt", encoding="utf-8") as f:
    return f.read().splitlines()


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--raw_dir", required=True)
  parser.add_argument("--pattern", required=True, help="a Python regex, case-insensitive")
  parser.add_argument("--out_dir", required=True)
  args = parser.parse_args()
  pattern = re.compile(args.pattern, re.IGNORECASE)
  os.makedirs(args.out_dir, exist_ok=True)
  for split in SPLITS:
    en = read(os.path.join(args.raw_dir, f"{split}.en.gz"))
    de = read(os.path.join(args.raw_dir, f"{split}.de.gz"))
    if len(en) != len(de):
      raise SystemExit(f"{split}: {len(en)} English and {len(de)} German lines")
    inside = [bool(pattern.search(line)) for line in en]
    for part, keep in (("in", True), ("out", False)):
      for lang, lines in (("en", en), ("de", de)):
        with open(os.path.join(args.out_dir, f"{split}.{part}.{lang}"), "w",
                  encoding="utf-8") as f:
          f.writelines(line + "\n" for line, i in zip(lines, inside) if i == keep)
    print(f"{split}: {sum(inside)} of {len(en)} pairs match {args.pattern!r}")


if __name__ == "__main__":
  main()
