"""Translate with an exported model, using only TensorFlow and TensorFlow Text.

    python translate_saved_model.py EXPORT_DIR "a sentence" ["another" ...]
    echo "a sentence" | python translate_saved_model.py EXPORT_DIR
    python translate_saved_model.py --nbest EXPORT_DIR "a sentence"
    python translate_saved_model.py --target_language=fr EXPORT_DIR "a sentence"  # multilingual

EXPORT_DIR is a SavedModel written by t2t-exporter: a version directory
(export/1000) or its parent (export/: the highest version is used). Prints one
"score<TAB>translation" line per input (with --nbest, one per beam, inputs
separated by blank lines).

This file imports nothing from t2t_keras on purpose: it shows that an export
stands alone. `import tensorflow_text` is needed before loading, to register
the sentencepiece ops the graph uses.
"""

import os
import sys

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")


def _import_quietly():
  """tensorflow and tensorflow_text, their start-up lines (the CUDA probe, oneDNN's notice,
  written to file descriptor 2 before logging is set up) sent to /dev/null, as the
  t2t-keras binaries do (T2T_VERBOSE_TF=1 shows them)."""
  if os.environ.get("T2T_VERBOSE_TF"):
    import tensorflow  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    return tensorflow
  saved, devnull = os.dup(2), os.open(os.devnull, os.O_WRONLY)
  try:
    os.dup2(devnull, 2)
    import tensorflow  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import  (registers the SentencepieceOp kernels)
  finally:
    os.dup2(saved, 2)
    os.close(saved)
    os.close(devnull)
  return tensorflow


tf = _import_quietly()


def resolve(export_dir):
  """A SavedModel directory: export_dir itself, or its highest numbered version."""
  if tf.io.gfile.exists(os.path.join(export_dir, "saved_model.pb")):
    return export_dir
  versions = [n.rstrip("/") for n in tf.io.gfile.listdir(export_dir)]
  versions = sorted((int(n) for n in versions if n.isdigit()), reverse=True)
  for v in versions:
    path = os.path.join(export_dir, str(v))
    if tf.io.gfile.exists(os.path.join(path, "saved_model.pb")):
      return path
  raise FileNotFoundError(f"no SavedModel in {export_dir} or its numbered subdirectories")


def translate(export_dir, sentences, nbest=False, target_language=None):
  """[(translation(s), score(s))] of each sentence, from the export's signatures; a
  multilingual export's `target_language` signature where `target_language` is given."""
  if target_language and nbest:  # refused before the model loads
    raise SystemExit("--nbest and --target_language do not combine: tag the lines "
                     "(<2fr> ...) and use --nbest alone")
  model = tf.saved_model.load(resolve(export_dir))
  inputs = tf.constant(list(sentences), tf.string)
  if target_language:
    if "target_language" not in model.signatures:
      raise SystemExit("this export has one target language (no target_language signature)")
    out = model.signatures["target_language"](
        inputs=inputs, target_language=tf.fill(tf.shape(inputs), target_language))
  else:
    out = model.signatures["nbest" if nbest else "serving_default"](inputs=inputs)
  texts = [t.decode("utf-8") if isinstance(t, bytes) else [x.decode("utf-8") for x in t]
           for t in out["outputs"].numpy().tolist()]
  return list(zip(texts, out["scores"].numpy().tolist()))


def main(argv):
  args = argv[1:]
  nbest = "--nbest" in args
  language = [a.split("=", 1)[1] for a in args if a.startswith("--target_language=")]
  args = [a for a in args if a != "--nbest" and not a.startswith("--target_language=")]
  if not args or args[0] in ("-h", "--help"):
    print(__doc__.strip())
    return 0 if args else 2
  export_dir, sentences = args[0], args[1:]
  if not sentences:
    sentences = [line.rstrip("\n") for line in sys.stdin]
  for texts, scores in translate(export_dir, sentences, nbest, (language or [None])[-1]):
    if nbest:
      for text, score in zip(texts, scores):
        print(f"{score:.4f}\t{text}")
      print()
    else:
      print(f"{scores:.4f}\t{texts}")
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
