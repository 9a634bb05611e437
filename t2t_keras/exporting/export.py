"""Checkpoint -> SavedModel that translates raw strings (t2t-exporter).

    path = export_model("runs/tiny")                       # runs/tiny/export/<step>
    path = export_model("runs/base", checkpoint_path="runs/base/averaged/ckpt-100000",
                        decode_hparams="beam_size=4,alpha=0.6,extra_length=50")

    # anywhere with tensorflow and tensorflow-text (no t2t_keras):
    import tensorflow as tf, tensorflow_text  # tensorflow_text registers the tokenizer ops
    m = tf.saved_model.load(path)
    m.signatures["serving_default"](inputs=tf.constant(["one hundred"]))
    # -> {"outputs": string [batch], "scores": float32 [batch], "truncated": bool [batch]}
    m.signatures["nbest"](inputs=...)   # -> outputs string [batch, beam], scores [batch, beam],
                                        #    truncated [batch]
    m.signatures["attention"](inputs=..., outputs=...)  # the encoder-decoder attention of a
                                        # given translation (t2t-serve's web page draws it)
    m.signatures["sample"](inputs=..., seed=tf.constant(7))  # one sampled translation each
                                        # (sampling_temp / _keep_top_k / _keep_top_p of the
                                        # decode hparams), as serving_default's outputs
    m.signatures["prefix"](inputs=..., prefix=tf.constant(["Ein Mann", ""]))  # each output
                                        # starts with its target prefix ("": none), as
                                        # serving_default's outputs
    m.signatures["target_language"](inputs=..., target_language=tf.constant(["fr", "de"]))
                                        # a multilingual model's (its vocabulary has <2xx>
                                        # tags): each input in its row's language, as
                                        # serving_default's outputs

Everything happens in the graph: UTF-8 repair (invalid bytes become U+FFFD),
sentencepiece tokenization (tensorflow_text), truncation to the training
max_length (reported: `truncated` is true for such an input), EOS, length-sorted batches of at most `batch_size` padded to
`length_bucket` multiples (few XLA programs), beam search with the decode
hparams, detokenization, and the problem's post-processing where it has one
(parsing: well-formed trees over the input words, `exporting/tree_ops.py`). The
problem's `decode_defaults` (parsing: beam 21, alpha 0.3, input + 300) apply
before the given decode hparams. Empty inputs (no tokens) give "" with score 0.

Layout (TF Serving's versioned directories, written to a temporary directory
and renamed, so a server polling export_dir never sees a partial version):

    export_dir/<version>/saved_model.pb, variables/,
        assets/vocab.model         the run's vocabulary (sentencepiece, or tensor2tensor's
                                   subwords); the graph's tokenizer holds it too (an op
                                   attribute, or constants and a lookup table)
        assets/export_info.json    checkpoint, hparams and decode hparams used (and a
                                   multilingual model's target_languages; fold_first_letter:
                                   whether the graph folds sources and restores outputs)
"""


import json
import os
import re
import shutil
import time

import tensorflow as tf

from t2t_keras import __version__, fileio, runs
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.errors import InputError
from t2t_keras.exporting.serving_module import ServingModule


def checkpoint_step(path):
  """The step in a checkpoint prefix ".../ckpt-1234" (None when the name has none)."""
  match = re.search(r"-(\d+)$", os.path.basename(path or ""))
  return int(match.group(1)) if match else None


def export_model(output_dir, export_dir=None, checkpoint_path=None, decode_hparams="",
                 max_input_length=None, version=None, overwrite=False, log=print):
  """Exports a training run's checkpoint as a versioned SavedModel.

  Load the run, resolve the decoding and the input limit, save the ServingModule
  to a temporary directory beside the target, then move it into place.

  Args:
    output_dir: the trainer's output_dir (hparams.json, run.json, vocab.model, ckpts);
      several, comma-separated, export one ensemble (`models/ensemble.py`; needs
      export_dir; the version defaults to the Unix time).
    export_dir: parent of the versioned directories (default output_dir/export).
    checkpoint_path: a checkpoint prefix (e.g. t2t-avg-all's), one per run for an
      ensemble (comma-separated); default the latest.
    decode_hparams: t2t's --decode_hparams overrides (string, `settings.parse_decode_hparams`)
      or a `DecodeSettings`: its search (beam_size, alpha, extra_length, max_decode_length,
      stop_early, jit, search_shards, sampling_*) and batching (batch_size: rows per beam
      search, length_bucket).
    max_input_length: inputs are truncated to this many ids, EOS included
      (default: the training hparams' max_length; longer pairs never trained).
    version: the version directory's number (default: the checkpoint's step,
      else the Unix time).
    overwrite: replace an existing export_dir/<version> (else FileExistsError).
    log: progress messages (None: silent).
  Returns:
    The path of the new export_dir/<version>.
  """
  log = log or (lambda *_: None)
  ensemble = runs.is_ensemble(output_dir)
  if ensemble and not export_dir:
    raise InputError(f"--output_dir={output_dir} names an ensemble: give --export_dir")
  model, vocab, hparams, info, ckpt = runs.load(output_dir, checkpoint_path)
  decoding = DecodingSpec.for_run(info.get("problem"), decode_hparams, hparams,
                                  max_input_length)
  export_dir = export_dir or os.path.join(output_dir, "export")
  version, final = _version_dir(export_dir, version, None if ensemble else ckpt, overwrite)
  # Saved beside the target where that is a local disk (then renamed into place at once),
  # else in a local temporary directory, then copied up.
  tmp = fileio.private_temporary_dir(None if fileio.is_remote(export_dir) else export_dir,
                                     f".tmp-{int(version)}-")
  try:
    translator = ServingModule(model, info["vocab_path"], decoding, decoding.limits(hparams))
    export_info = _export_info(translator, ckpt, version, info, decoding, hparams)
    _save(translator, export_info, tmp)
    _move_into_place(tmp, final, export_dir, version)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise
  log(f"exported {ckpt} to {final}")
  return final


SIGNATURES = {
    "serving_default": "inputs string [batch] -> outputs string [batch], "
                       "scores float32 [batch], truncated bool [batch]",
    "nbest": "inputs string [batch] -> outputs string [batch, beam], "
             "scores float32 [batch, beam], truncated bool [batch]",
    "attention": "inputs string [batch], outputs string [batch] -> "
                 "source_pieces string [batch, S], target_pieces string [batch, T], "
                 "weights float32 [batch, layers, T, S]",
    "sample": "inputs string [batch], seed int32 [] -> outputs string [batch], "
              "scores float32 [batch], truncated bool [batch]",
    "prefix": "inputs string [batch], prefix string [batch] -> outputs string [batch] "
              "(each starting with its prefix), scores float32 [batch], truncated bool [batch]",
    "constrained": "inputs string [batch], constraints string [batch, C] ('' pads) -> "
                   "outputs string [batch] (each holding its row's phrases), scores float32 "
                   "[batch], truncated bool [batch], met bool [batch]",
    "target_language": "inputs string [batch], target_language string [batch] -> outputs "
                       "string [batch] (each in its row's language), scores float32 [batch], "
                       "truncated bool [batch]"}


def _has_signature(translator, name):
  """Whether the translator's export has signature `name`: `constrained` where it takes
  constraints, `target_language` where its vocabulary has target-language tags."""
  if name == "constrained":
    return translator.takes_constraints
  if name == "target_language":
    return bool(translator.target_languages)
  return True


def _export_info(translator, ckpt, version, info, decoding, hparams):
  """assets/export_info.json's content: checkpoint, version, problem, the limits
  (`DecodingSpec.limits`; max_input_length also at the top, as before), the decode
  hparams and hparams, whether the problem folds the first letter (the graph folds and
  restores: `data/casing.py`), the signatures this export has, a multilingual model's
  target languages, and the t2t-keras versions that exported it and that last wrote its
  run."""
  export_info = {
      "checkpoint_path": ",".join(fileio.abspath(c) for c in ckpt.split(",")),
      "version": int(version),
      "t2t_keras_version": __version__,
      "run_t2t_keras_version": info.get("t2t_keras_version"),
      "problem": info.get("problem"), "vocab_size": info.get("vocab_size"),
      "max_input_length": translator.max_input_length, "limits": dict(translator.limits),
      "decode_hparams": decoding.settings.values(), "hparams": hparams.values(),
      "fold_first_letter": decoding.fold_first_letter,
      "signatures": {k: v for k, v in SIGNATURES.items() if _has_signature(translator, k)},
      "constraint_limits": {"max_phrases": translator.max_phrases,
                            "max_phrase_pieces": translator.max_phrase_pieces}}
  if translator.target_languages:
    export_info["target_languages"] = list(translator.target_languages)
  if translator.language_tokens:
    export_info["language_tokens"] = dict(sorted(translator.language_tokens.items()))
  return export_info


def _version_dir(export_dir, version, checkpoint, overwrite):
  """(version, export_dir/<version>): the version given, else the checkpoint's step, else
  the Unix time; FileExistsError for an existing one without `overwrite`."""
  if version is None:
    version = checkpoint_step(checkpoint) if checkpoint else None
    if version is None:
      version = int(time.time())
  final = os.path.join(export_dir, str(int(version)))
  _remove_killed_exports(export_dir, version)
  if fileio.exists(final) and not overwrite:
    raise FileExistsError(f"{final} exists: pass overwrite=True (--overwrite) or another "
                          f"version (--export_version)")
  fileio.makedirs(export_dir)
  return version, final


def _remove_killed_exports(export_dir, version):
  """Removes the temporary directories of this version that a killed export left (its
  `.tmp-<version>-*` save, an overwrite's `.old-<version>-*`): the next run of the same
  command cleans up after it (`fileio.remove_dead_temporaries`)."""
  local = not fileio.is_remote(export_dir)
  fileio.remove_dead_temporaries(export_dir if local else None, f".tmp-{int(version)}-")
  if local:
    fileio.remove_dead_temporaries(export_dir, f".old-{int(version)}-")


def _save(translator, export_info, directory):
  """tf.saved_model.save of the translator's signatures, export_info.json in assets/."""
  info_path = os.path.join(directory, "export_info.json")  # saved into assets/, then removed
  with open(info_path, "w") as f:
    json.dump(export_info, f, indent=2, default=str)
  translator.info_asset = tf.saved_model.Asset(info_path)
  # The tf.functions themselves, not their concrete functions: save traces them in its
  # own context (a function traced outside it is traced again inside, twice the time).
  signatures = {"serving_default": translator.translate, "nbest": translator.nbest,
                "attention": translator.attention, "sample": translator.sample,
                "prefix": translator.prefix}
  for name in ("constrained", "target_language"):
    if _has_signature(translator, name):
      signatures[name] = getattr(translator, name)
  # Without gradient functions: a served model is never differentiated. The package's
  # layers put no custom-gradient op in these graphs (they take custom gradients only when
  # training; a test reads the SavedModel for one), so a load has none to warn about; a
  # user's layer that does is saved too, with a warning at load instead of a failed save.
  tf.saved_model.save(translator, directory, signatures=signatures,
                      options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))
  os.remove(info_path)
  os.chmod(directory, 0o755)  # mkdtemp makes it 0700


def _move_into_place(tmp, final, export_dir, version):
  """Renames the local directory tmp to final; an existing final is moved aside first,
  then removed. A remote final (an object store has no directory rename) is replaced by
  a copy of tmp, file by file."""
  if fileio.is_remote(final):
    fileio.rmtree(final)
    fileio.upload_tree(tmp, final)
    shutil.rmtree(tmp, ignore_errors=True)
  elif os.path.exists(final):
    old = fileio.private_temporary_dir(export_dir, f".old-{int(version)}-")
    os.rename(final, os.path.join(old, "v"))
    os.rename(tmp, final)
    shutil.rmtree(old, ignore_errors=True)
  else:
    os.rename(tmp, final)
