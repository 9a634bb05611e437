"""t2t-import: a tensor2tensor `transformer` checkpoint, a Marian (OPUS-MT) transformer, or
an OPUS-MT model in Hugging Face's layout, as a t2t-keras run.

    t2t-import --t2t_dir=t2t_train/ende --vocab=t2t_data/vocab.translate_ende_wmt8k.8192.subwords \
        --output_dir=runs/ende
    t2t-import --from=marian --marian_dir=opus-mt-en-de --output_dir=runs/opus-en-de
    t2t-import --from=hf --hf_dir=opus-mt-en-de --output_dir=runs/opus-en-de
    t2t-decoder --output_dir=runs/ende --decode_from_file=newstest2014.en

From tensor2tensor: reads --t2t_dir's hparams.json and flags.txt (problem, model) and
its newest checkpoint (or --checkpoint_path, or every one listed with
--all_checkpoints, for t2t-avg-all). From Marian: an unpacked OPUS-MT release (its
decoder.yml names the .npz and vocab.yml; source.spm and target.spm beside them), or
each file by flag. From Hugging Face: an OPUS-MT directory as the hub serves it
(config.json, model.safetensors or tf_model.h5, vocab.json, source.spm, target.spm), or
an M2M-100 one (config.json, model.safetensors, vocab.json, sentencepiece.bpe.model).
Each way --output_dir becomes a run that t2t-decoder, t2t-exporter, t2t-avg-all,
t2t-serve and t2t-trainer --warm_start_from take. What is mapped and what is refused:
docs/migrating.md.
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
_define("enum", "from", "t2t", "What to import: a tensor2tensor checkpoint, a Marian "
        "(OPUS-MT) model, or a Hugging Face model directory.",
        enum_values=["t2t", "marian", "hf"])
_define("string", "hf_dir", None, "--from=hf: a model directory as the Hugging Face hub "
        "serves it (config.json, model.safetensors or tf_model.h5, vocab.json, *.spm).")
_define("string", "marian_dir", None, "--from=marian: an unpacked OPUS-MT release (*.npz, "
        "*vocab.yml, source.spm, target.spm, decoder.yml).")
_define("string", "marian_npz", None, "--from=marian: the model's .npz (default: "
        "decoder.yml's, else the one *.npz in --marian_dir).")
_define("string", "marian_vocab", None, "--from=marian: the joint vocab.yml, or the source "
        "side's (default: decoder.yml's first, else the one *vocab.yml or *.src.vocab.yml "
        "in --marian_dir).")
_define("string", "marian_target_vocab", None, "--from=marian: the target side's vocab.yml "
        "of separate vocabularies (default: decoder.yml's second where it differs from the "
        "first, else the one *.trg.vocab.yml beside a *.src.vocab.yml).")
_define("string", "source_spm", None, "--from=marian: the source SentencePiece model "
        "(default: --marian_dir/source.spm).")
_define("string", "target_spm", None, "--from=marian: the target SentencePiece model "
        "(default: --marian_dir/target.spm).")
_define("string", "hparams", "", "--from=marian or hf: overrides of the imported hparams, "
        "e.g. CTranslate2's conventions: pos=timing_hf,norm_epsilon=1e-5 "
        "(docs/migrating.md).")
_define("string", "output_dir", None, "The t2t-keras run directory to write (new).")
NAME = "t2t-import"
FLAGS = flags.FLAGS


def import_marian():
  """--from=marian."""
  if not FLAGS.output_dir or not (FLAGS.marian_dir or FLAGS.marian_npz):
    raise app.UsageError("--from=marian needs --output_dir and --marian_dir (or "
                         "--marian_npz, --marian_vocab, --source_spm, --target_spm)")
  from t2t_keras.importing import marian  # pylint: disable=import-outside-toplevel
  files = marian.find_files(FLAGS.marian_dir, FLAGS.marian_npz, FLAGS.marian_vocab,
                            FLAGS.source_spm, FLAGS.target_spm, FLAGS.marian_target_vocab)
  marian.import_run(FLAGS.marian_dir, FLAGS.output_dir, files=files,
                    problem=FLAGS.problem or "translate_parallel_text",
                    overrides=FLAGS.hparams)
  print(f"1 checkpoint in {FLAGS.output_dir}; decode with: "
        f"t2t-decoder --output_dir={FLAGS.output_dir} ...")
  return 0


def import_hf():
  """--from=hf."""
  if not FLAGS.output_dir or not FLAGS.hf_dir:
    raise app.UsageError("--from=hf needs --hf_dir and --output_dir")
  from t2t_keras.importing import hf  # pylint: disable=import-outside-toplevel
  hf.import_run(FLAGS.hf_dir, FLAGS.output_dir, problem=FLAGS.problem or
                "translate_parallel_text", overrides=FLAGS.hparams)
  print(f"1 checkpoint in {FLAGS.output_dir}; decode with: "
        f"t2t-decoder --output_dir={FLAGS.output_dir} ...")
  return 0


def main(argv):
  del argv
  if FLAGS["from"].value == "marian":
    return import_marian()
  if FLAGS["from"].value == "hf":
    return import_hf()
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
