"""Prints parameter counts of base, big and every Table 3 row beside the paper's column.

    t2t-param-table [--vocab_size=37000]

Counts come from `analytic_param_count`, which tests pin to the built Keras
models' `count_params()` for every set listed here.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)
from absl import flags

from t2t_keras import registry
from t2t_keras.hparams.transformer import PAPER_PARAMS_MILLIONS, TABLE3
from t2t_keras.models.params import analytic_param_count

t2t_keras.bin.define_flag("integer", "vocab_size", 37000, "Shared source/target vocabulary size.")
NAME = "t2t-param-table"
FLAGS = flags.FLAGS


def param_table(vocab_size=37000):
  """Rows of (set name, changes from base, our count, paper count in millions or None)."""
  rows = []
  for name, paper in PAPER_PARAMS_MILLIONS.items():
    hp = registry.hparams(name)
    row = name[len("transformer_table3_"):] if name.startswith("transformer_table3_") else ""
    changes = ", ".join(f"{k}={v}" for k, v in TABLE3[row][0].items()) if row else ""
    rows.append((name, changes, analytic_param_count(hp, vocab_size), paper))
  return rows


def format_table(rows):
  lines = [f"{'hparams set':<24} {'ours (M)':>9} {'paper (M)':>9} {'diff':>6}  changes from base",
           "-" * 100]
  for name, changes, count, paper in rows:
    ours = count / 1e6
    paper_s = f"{paper:>9}" if paper else f"{'-':>9}"
    diff = f"{ours - paper:+6.1f}" if paper else f"{'':>6}"
    lines.append(f"{name:<24} {ours:>9.1f} {paper_s} {diff}  {changes}")
  return "\n".join(lines)


def main(argv):
  del argv
  print(format_table(param_table(FLAGS.vocab_size)))


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
