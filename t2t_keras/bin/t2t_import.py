"""t2t-import: a tensor2tensor `transformer` checkpoint as a t2t-keras run.

    t2t-import --t2t_dir=t2t_train/ende --vocab=t2t_data/vocab.translate_ende_wmt8k.8192.subwords \
        --output_dir=runs/ende
    t2t-decoder --output_dir=runs/ende --decode_from_file=newstest2014.en

Reads --t2t_dir's hparams.json and flags.txt (problem, model) and its newest
checkpoint (or --checkpoint_path, or every one listed with --all_checkpoints, for
t2t-avg-all), and writes --output_dir as a run that t2t-decoder, t2t-exporter,
t2t-avg-all, t2t-serve and t2t-trainer --warm_start_from take. What is mapped and
what is refused: docs/migrating.md.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

_define = t2t_keras.bin.define_flag
_define("string", "t2t_dir", None, "tensor2tensor's output_dir: hparams.json, flags.txt, "
        "checkpoint, model.ckpt-*.")
_define("string", "checkpoint_path", None, "One t2t checkpoint prefix (default: the newest "
        "in --t2t_dir).")
_define("boolean", "all_checkpoints", False, "Import every checkpoint --t2t_dir's "
        "checkpoint file lists (for t2t-avg-all).")
_define("string", "vocab", None, "The problem's .subwords vocabulary (default: the one "
        "vocab.* file in --t2t_dir).")
_define("string", "problem", None, "The t2t problem (default: flags.txt's; if both are "
        "given they must agree).")
_define("integer", "target_space_id", None, "The target space id the model was trained "
        "with (default: read from the checkpoint's optimizer state).")
_define("string", "output_dir", None, "The t2t-keras run directory to write (new).")
NAME = "t2t-import"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.t2t_dir or not FLAGS.output_dir:
    raise app.UsageError("--t2t_dir and --output_dir are required")
  from t2t_keras.importing import t2t_checkpoint  # pylint: disable=import-outside-toplevel
  written = t2t_checkpoint.import_run(
      FLAGS.t2t_dir, FLAGS.output_dir, checkpoint_path=FLAGS.checkpoint_path,
      all_checkpoints=FLAGS.all_checkpoints, vocab_path=FLAGS.vocab, problem=FLAGS.problem,
      target_space_id=FLAGS.target_space_id)
  print(f"{len(written)} checkpoint(s) in {FLAGS.output_dir}; decode with: "
        f"t2t-decoder --output_dir={FLAGS.output_dir} ...")
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
