"""t2t-exporter: a run's checkpoint -> SavedModel translating raw strings.

    t2t-exporter --output_dir=runs/tiny                 # runs/tiny/export/<step>/
    t2t-exporter --output_dir=runs/base \\
        --checkpoint_path=runs/base/averaged/ckpt-100000 \\
        --decode_hparams="beam_size=4,alpha=0.6,extra_length=50"
    python t2t_keras/exporting/translate_saved_model.py runs/tiny/export "one hundred"

The export is a TF Serving versioned directory (export_dir/<checkpoint step>),
written to a temporary directory and renamed into place. Its signatures:
  serving_default  inputs string [batch] -> outputs string [batch], scores float32 [batch],
                   truncated bool [batch] (the input was longer than max_input_length)
  nbest            inputs string [batch] -> outputs [batch, beam], scores [batch, beam], truncated
  attention        inputs, outputs string [batch] -> source_pieces, target_pieces, weights
                   [batch, layers, T, S] (teacher-forced encoder-decoder attention)
  sample           inputs string [batch], seed int32 [] -> one sampled translation each
                   (the decode hparams' sampling_temp / _keep_top_k / _keep_top_p)
Several runs, --output_dir=runs/a,runs/b --export_dir=DIR, export one ensemble (the mean
of their probabilities at each step) with the same signatures.
Serve it over HTTP with t2t-serve --export_dir=OUTPUT_DIR (TF Serving's REST API).
Loading it needs tensorflow and tensorflow-text (import tensorflow_text first), not t2t_keras.

    t2t-exporter --output_dir=runs/tiny --format=ctranslate2 [--quantization=int8]
    python t2t_keras/exporting/ct2_translate.py runs/tiny/ctranslate2 < in.en > out.de

--format=ctranslate2 writes a CTranslate2 model directory instead (default
output_dir/ctranslate2, or ctranslate2_<quantization>): model.bin, the vocabulary,
the sentencepiece model, t2t_decoding.json and a README naming the decoding
(`exporting/ct2_convert.py`; needs pip install 't2t-keras[ctranslate2]').

    t2t-exporter --output_dir=runs/tiny --format=litert [--quantization=float16|int8]
    python t2t_keras/exporting/litert_translate.py runs/tiny/litert < in.en > out.de

--format=litert writes a LiteRT (TensorFlow Lite) model directory (default
output_dir/litert, or litert_<quantization>): model.tflite with the search inside
(the decode hparams' beam, alpha and limits), builtin ops only; the vocabulary, the
sentencepiece model(s) and litert_info.json (`exporting/litert.py`; its runtime:
pip install 't2t-keras[litert]').
t2t's --problem, --model, --hparams_set, --hparams and --data_dir are accepted
as t2t scripts pass them; each given one must agree with the run.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.bin import run_flags  # --output_dir --problem --model --hparams_set ...

NAME = "t2t-exporter"
FLAGS = flags.FLAGS


_define = t2t_keras.bin.define_flag
_define("string", "checkpoint_path", None,
        "A checkpoint prefix, e.g. an averaged one (default: output_dir's latest).")
_define("string", "export_dir", None,
        "Parent of the versioned exports (default output_dir/export); with "
        "--format=ctranslate2 or litert the model directory (default "
        "output_dir/ctranslate2[_QUANT] or output_dir/litert[_QUANT]).")
_define("string", "decode_hparams", "",
        'Decoding overrides baked into the export, e.g. "beam_size=4,alpha=0.6,extra_length=50".')
_define("integer", "max_input_length", None,
        "Inputs are truncated to this many subword ids, EOS included "
        "(default: the training hparams' max_length).")
_define("integer", "export_version", None,
        "Version directory number (default: the checkpoint's step, else the Unix time).")
_define("bool", "overwrite", False,
        "Replace an existing export_dir/<version> (a CTranslate2 directory with --format).")
_define("enum", "format", "savedmodel",
        "savedmodel (TF Serving's layout), ctranslate2 (a CTranslate2 model directory) or "
        "litert (a LiteRT model with the search inside).",
        enum_values=["savedmodel", "ctranslate2", "litert"])
_define("enum", "quantization", "none",
        "With --format=ctranslate2: CTranslate2's weight type (none keeps float32); with "
        "--format=litert: none, float16 or int8 (dynamic-range int8 weights).",
        enum_values=["none", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                     "int16", "float16", "bfloat16"])


def main(argv):
  del argv
  if not FLAGS.output_dir:
    raise app.UsageError("--output_dir is required")
  run_flags.import_usr_dir()
  run_flags.check(FLAGS.output_dir)
  from absl import logging  # pylint: disable=import-outside-toplevel
  logging.set_verbosity(logging.WARNING)  # SavedModel writing logs INFO lines per function
  if FLAGS.format in ("ctranslate2", "litert"):
    if FLAGS.export_version is not None:
      raise app.UsageError(f"--export_version is for SavedModels; a --format={FLAGS.format} "
                           "model is one directory (--export_dir)")
    from t2t_keras import runs  # pylint: disable=import-outside-toplevel
    if runs.is_ensemble(FLAGS.output_dir):
      raise app.UsageError(f"--format={FLAGS.format} converts one run; export an ensemble "
                           "as a SavedModel")
    if FLAGS.format == "litert":
      from t2t_keras.exporting import litert  # pylint: disable=import-outside-toplevel
      convert, target = litert.convert_run, "litert_dir"
    else:
      from t2t_keras.exporting import ct2_convert  # pylint: disable=import-outside-toplevel
      convert, target = ct2_convert.convert_run, "ct2_dir"
    print(convert(FLAGS.output_dir, checkpoint_path=FLAGS.checkpoint_path,
                  quantization=FLAGS.quantization, decode_hparams=FLAGS.decode_hparams,
                  max_input_length=FLAGS.max_input_length, overwrite=FLAGS.overwrite,
                  **{target: FLAGS.export_dir}))
    return
  if FLAGS.quantization != "none":
    raise app.UsageError("--quantization is for --format=ctranslate2 or litert")
  from t2t_keras.exporting import export  # pylint: disable=import-outside-toplevel
  path = export.export_model(FLAGS.output_dir, export_dir=FLAGS.export_dir,
                             checkpoint_path=FLAGS.checkpoint_path,
                             decode_hparams=FLAGS.decode_hparams,
                             max_input_length=FLAGS.max_input_length,
                             version=FLAGS.export_version, overwrite=FLAGS.overwrite)
  print(path)  # last line: the new version's directory (for scripts)


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
