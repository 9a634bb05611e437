"""t2t-sweep: train a list of hparams rows on one problem for one step budget each, then a table.

    t2t-sweep --problem=translate_ende_multi30k --data_dir=t2t_data/multi30k \\
        --raw_dir=../shared/data/multi30k --output_dir=t2t_train/table3 --train_steps=1200 \\
        --rows_file=recipes/table3_rows.txt          # or --row="SET [k=v,...] [seed=N]" ...

Rows run one after another; each gets OUTPUT_DIR/<row id>/ (a t2t-trainer
run directory), then its dev perplexity (per target subword) and dev BLEU
(beam 4, alpha 0.6, newest checkpoint, no averaging, as the paper's Table 3).
OUTPUT_DIR/results.csv, results.md (with the paper's figures, the base's seed
spread and which of the paper's findings reproduced) and results.png are
rewritten after every row. Re-running the same command skips finished rows and
resumes an interrupted one from its checkpoint; SIGTERM / Ctrl-C stop the
running row after it saves.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

_define = t2t_keras.bin.define_flag
_define("string", "problem", None, "The problem every row trains on (data generated).")
_define("string", "data_dir", None, "The problem's generated data (t2t-datagen).")
_define("string", "raw_dir", None, "Raw files of the problem, for raw dev references.")
_define("string", "output_dir", None, "One run directory per row, and the result tables.")
_define("integer", "train_steps", None, "Every row's step budget.", lower_bound=1)
_define("multi_string", "row", [], 'A row: "HPARAMS_SET [key=value,...] [seed=N]" (repeatable).')
_define("string", "rows_file", None, "Rows, one per line ('#' comments).")
_define("string", "hparams", "", "Overrides for every row (before the row's own).")
_define("string", "decode_hparams", "beam_size=4,alpha=0.6", "The dev BLEU's decoding.")
_define("multi_string", "trainer_flag", [], "A t2t-trainer flag for every row, e.g. --trainer_flag=--save_every=400 "
        "(repeatable; --model, --use_xla, --save_every, --save_every_minutes, --keep_checkpoints, "
        "--eval_every, --eval_steps, --eval_bleu_sentences, --log_every).")
NAME = "t2t-sweep"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  from t2t_keras.tuning import sweep  # pylint: disable=import-outside-toplevel
  for name in ("problem", "data_dir", "output_dir", "train_steps"):
    if getattr(FLAGS, name) is None:
      raise app.UsageError(f"--{name} is required")
  rows = [sweep.parse_row(spec) for spec in FLAGS.row]
  if FLAGS.rows_file:
    rows += sweep.read_rows_file(FLAGS.rows_file)
  sweep.run_sweep(rows, problem=FLAGS.problem, data_dir=FLAGS.data_dir,
                  output_dir=FLAGS.output_dir, train_steps=FLAGS.train_steps,
                  hparams=FLAGS.hparams, raw_dir=FLAGS.raw_dir,
                  decode_overrides=FLAGS.decode_hparams, trainer_flags=FLAGS.trainer_flag)
  print(f"table: {FLAGS.output_dir}/results.md")
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
