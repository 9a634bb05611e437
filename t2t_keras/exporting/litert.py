"""Checkpoint -> LiteRT (TensorFlow Lite) model with the search inside (t2t-exporter --format=litert).

    path = convert_run("runs/tiny")                         # runs/tiny/litert/
    path = convert_run("runs/tiny", quantization="int8")    # runs/tiny/litert_int8/
    python t2t_keras/exporting/litert_translate.py runs/tiny/litert "one hundred"

The model directory:

    model.tflite        the encoder, the decoder and the run's search (beam or greedy, its
                        beam size, alpha and length limits, the problem's output constraint
                        where it has one) in one graph of LiteRT builtin ops only (no Flex or
                        custom op: `operators` lists them, and conversion fails otherwise)
    vocabulary.json     the model's (target side's) pieces in id order
    source_vocabulary.json  the source side's, where it has ids of its own (an OPUS-MT
                        import with separate vocabularies)
    sentencepiece.model the tokenizer (a Marian pair: source.spm and target.spm); none for
                        a vocabulary that is not sentencepiece (tensor2tensor's subwords:
                        t2t-decoder --engine=litert tokenizes for it)
    litert_info.json    EOS / PAD ids, the decoding, the input limit, the signatures, a
                        multilingual model's languages (tags or language tokens), versions,
                        fold_first_letter (litert_translate folds and restores the case)

Signatures (ids as the SavedModel's search sees them: each source's pieces, EOS, 0-padded):

    translate         ids int32 [batch, width] -> ids int32 [batch, beam, L] (best first,
                      0 after EOS), scores float32 [batch, beam] (log prob / t2t's length
                      penalty); L = width + extra_length, capped at max_decode_length and the
                      position table (greedy: beam 1)
    translate_prefix  ids, prefix int32 [batch, P] (0-padded) -> the same, each output
                      starting with its prefix: a language-token model's only (M2M-100, NLLB:
                      the target language's token is the forced first piece)

Precisions (`quantization`): float32 ("none"), float16 weights (computed in float32), and
dynamic-range int8 weights (`tf.lite.Optimize.DEFAULT`: int8 weights, activations
quantized on the fly for the matmuls).

The graph is the one the SavedModel's search runs (`decoding/search.py`), frozen first:
left to itself, LiteRT's converter kept variable reads inside the search's while loop
(READ_VARIABLE ops that fail at run time; docs/notebook.md), so the variables become
constants before conversion (`_frozen_saved_model`).
"""

import json
import os
import re
import shutil

import tensorflow as tf

from t2t_keras import __version__, runs
from t2t_keras.data import languages
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.errors import InputError
from t2t_keras.exporting import ct2_convert
# The files litert_translate.py (which stands alone) reads.
from t2t_keras.exporting.litert_translate import (INFO_FILE, MODEL_FILE, SOURCE_VOCABULARY_FILE,
                                                  VOCABULARY_FILE)
from t2t_keras.ids import EOS_ID, PAD_ID

QUANTIZATIONS = ("none", "float32", "float16", "int8")


class UnsupportedError(InputError):
  """The run cannot become a LiteRT model (the message says why)."""


def search_signatures(model, decoding, vocab, with_prefix=False):
  """{name: concrete function} of the LiteRT model's signatures (module docstring): the
  run's search (`DecodingSpec.searcher`: beam or greedy, the problem's output constraint
  where `decoding` has one) over source ids, and with `with_prefix` its variant with target
  prefixes forced."""
  outputs = lambda result: {"ids": tf.identity(result[0], name="ids"),  # noqa: E731
                            "scores": tf.identity(result[1], name="scores")}
  ids = tf.TensorSpec([None, None], tf.int32, name="ids")
  search = decoding.searcher(model, vocab)
  out = {"translate": tf.function(lambda ids: outputs(search(ids)), autograph=False,
                                  input_signature=[ids]).get_concrete_function()}
  if with_prefix:
    prefix = tf.TensorSpec([None, None], tf.int32, name="prefix")
    search = decoding.searcher(model, vocab, "prefix")
    out["translate_prefix"] = tf.function(
        lambda ids, prefix: outputs(search(ids, prefix)), autograph=False,
        input_signature=[ids, prefix]).get_concrete_function()
  return out


def check_supported(run_dir, search_settings):
  """UnsupportedError where a LiteRT model cannot hold the decoding: an ensemble, sampling."""
  if runs.is_ensemble(run_dir):
    raise UnsupportedError("--format=litert converts one run; export an ensemble as a "
                           "SavedModel")
  if search_settings.sampling_method != "argmax":
    raise UnsupportedError("--format=litert holds beam and greedy search; sample with the "
                           "SavedModel's `sample` signature")


def _frozen_saved_model(signatures, directory):
  """Saves `signatures` ({name: concrete function}) with their variables made constants as
  a SavedModel in `directory` (what the converter reads)."""
  # pylint: disable-next=import-outside-toplevel
  from tensorflow.python.framework.convert_to_constants import convert_variables_to_constants_v2
  holder = tf.Module()
  functions = {}
  for name, function in signatures.items():
    frozen = convert_variables_to_constants_v2(function)
    call = (lambda frozen, outputs: lambda *args: tf.nest.pack_sequence_as(
        outputs, frozen(*args)))(frozen, function.structured_outputs)
    functions[name] = tf.function(call, autograph=False,
                                  input_signature=function.structured_input_signature[0])
    setattr(holder, name, functions[name])
  tf.saved_model.save(holder, directory, signatures=functions,
                      options=tf.saved_model.SaveOptions(experimental_custom_gradients=False))


def convert_saved_model(directory, signature_names, quantization="none"):
  """The LiteRT flatbuffer (bytes) of a frozen SavedModel's signatures, builtin ops only;
  UnsupportedError naming the op and where the model makes it when one cannot be lowered."""
  converter = tf.lite.TFLiteConverter.from_saved_model(directory,
                                                       signature_keys=list(signature_names))
  converter.target_spec.supported_ops = [tf.lite.OpsSet.TFLITE_BUILTINS]
  if quantization == "float16":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
    converter.target_spec.supported_types = [tf.float16]
  elif quantization == "int8":
    converter.optimizations = [tf.lite.Optimize.DEFAULT]
  try:
    flatbuffer = converter.convert()
  except Exception as e:  # pylint: disable=broad-except
    message = conversion_error(e)
    if message is None:
      raise
    raise UnsupportedError(message) from None
  found = [op for op in operators(flatbuffer) if not op[1]]
  if found:
    raise UnsupportedError(f"the LiteRT model holds non-builtin ops {sorted(set(found))}")
  return flatbuffer


def conversion_error(error):
  """One line from the converter's error: each op it cannot lower and where the model makes
  it (the innermost t2t_keras source line, else the graph node, whose name holds the
  layer's scope; an op made in several places: how many, and the first), or None for
  another error."""
  details = getattr(error, "errors", None) or []
  found = {}  # op -> [where]
  for detail in details:
    op = detail.operator.name if detail.HasField("operator") else ""
    if not op:
      continue
    where = ""
    for call in detail.location.call:
      source = call.source if call.HasField("source") else None
      if source is not None and source.filename and "t2t_keras" in source.filename:
        path = source.filename[source.filename.rfind("t2t_keras"):]
        where = f"{path}:{source.line}"
    if not where and detail.location.call:
      where = f"node {detail.location.call[0].name.split('@')[0]}"
    places = found.setdefault(op, [])
    if where and where not in places:
      places.append(where)
  if not found:
    ops = re.findall(r"'(tf\.\w+)' op is neither a custom op nor a flex op", str(error))
    found = {op: [] for op in sorted(set(ops))}
  if not found:
    return None
  named = [op if not places else f"{op} ({places[0]})" if len(places) == 1 else
           f"{op} ({len(places)} places, the first {places[0]})"
           for op, places in found.items()]
  return ("LiteRT's builtin ops cannot express " + "; ".join(named) +
          ": the model or the search uses an op LiteRT lacks")


def operators(flatbuffer):
  """[(name, builtin)] of every operator code a LiteRT flatbuffer lists: builtin False for a
  custom op (Flex ops are custom ops named Flex...)."""
  from tensorflow.lite.python import schema_py_generated as schema  # pylint: disable=import-outside-toplevel
  model = schema.Model.GetRootAsModel(flatbuffer, 0)
  names = {v: k for k, v in vars(schema.BuiltinOperator).items() if not k.startswith("_")}
  out = []
  for i in range(model.OperatorCodesLength()):
    code = model.OperatorCodes(i)
    builtin = max(code.BuiltinCode(), code.DeprecatedBuiltinCode())
    if builtin == schema.BuiltinOperator.CUSTOM:
      out.append(((code.CustomCode() or b"?").decode(), False))
    else:
      out.append((names.get(builtin, str(builtin)), True))
  return out


def litert_info(settings, decoding, hparams, info, ckpt, quantization, signatures, vocab,
                constrained):
  """litert_info.json's content (module docstring)."""
  s = settings.search
  out = {"format": "litert", "quantization": quantization,
         "checkpoint_path": os.path.basename(ckpt), "problem": info.get("problem"),
         "t2t_keras_version": __version__, "eos_id": EOS_ID, "pad_id": PAD_ID,
         "vocab_size": vocab.vocab_size, "beam_size": int(s.beam_size),
         "alpha": float(s.alpha), "length_penalty_kind": s.length_penalty_kind,
         **decoding.limits(hparams), "fold_first_letter": decoding.fold_first_letter,
         "constrained": constrained, "signatures": sorted(signatures)}
  tokens = languages.language_tokens(vocab)
  if tokens:
    out["language_tokens"] = dict(sorted(tokens.items()))
  elif languages.languages_of(vocab):
    out["target_languages"] = list(languages.languages_of(vocab))
  return out


def convert_run(output_dir, litert_dir=None, checkpoint_path=None, quantization="none",
                decode_hparams="", max_input_length=None, overwrite=False, log=print):
  """Converts a run's checkpoint into a LiteRT model directory (module docstring).

  Args:
    output_dir: a run directory (the trainer's, t2t-avg-all's, or an import's).
    litert_dir: where to write (default output_dir/litert, "_<quantization>" appended for
      float16 and int8).
    checkpoint_path: a checkpoint prefix (default the run's newest readable).
    quantization: one of QUANTIZATIONS.
    decode_hparams: decoding overrides (string) built into the search.
    max_input_length: the input limit in pieces, EOS included (default the training
      max_length, as the SavedModel's); litert_translate.py cuts longer inputs and says so.
    overwrite: replace an existing litert_dir (else FileExistsError).
  Returns:
    litert_dir.
  """
  log = log or (lambda *_: None)
  if quantization not in QUANTIZATIONS:
    raise InputError(f"--quantization={quantization!r}: --format=litert takes one of "
                     f"{', '.join(QUANTIZATIONS)}")
  quantization = "float32" if quantization == "none" else quantization
  hparams, info = runs.load_run_info(output_dir)
  decoding = DecodingSpec.for_run(info.get("problem"), decode_hparams, hparams,
                                  max_input_length)
  check_supported(output_dir, decoding.settings.search)
  litert_dir = ct2_convert.model_dir(output_dir, litert_dir, "litert", quantization, overwrite)
  model, vocab, hparams, info, ckpt = runs.load(output_dir, checkpoint_path)
  tokenizers = _tokenizers(vocab, log)
  constraint = decoding.constraint(vocab)
  signatures = search_signatures(model, decoding, vocab,
                                 with_prefix=bool(languages.language_tokens(vocab)))
  info = litert_info(decoding.settings, decoding, hparams, info, ckpt, quantization,
                     signatures, vocab, constraint is not None)

  def write(tmp):
    _frozen_saved_model(signatures, os.path.join(tmp, "frozen"))
    flatbuffer = convert_saved_model(os.path.join(tmp, "frozen"), signatures, quantization)
    shutil.rmtree(os.path.join(tmp, "frozen"))
    _write(tmp, flatbuffer, tokenizers, vocab, info)

  ct2_convert.write_model_dir(litert_dir, write)
  log(f"converted {ckpt} to {litert_dir} (LiteRT, {quantization}, "
      f"{os.path.getsize(os.path.join(litert_dir, MODEL_FILE)) / 2**20:.1f} MiB)")
  return litert_dir



def _tokenizers(vocab, log):
  """{file name: sentencepiece model bytes} for litert_translate.py, or {} (said in `log`)
  for a vocabulary that is not sentencepiece (tensor2tensor's subwords: ids only)."""
  try:
    return ct2_convert.tokenizer_files(vocab, "litert_translate.py",
                                       "it tokenizes with sentencepiece")
  except ct2_convert.UnsupportedError as e:
    log(f"note: {e}; the model is written without a tokenizer: decode it with "
        f"t2t-decoder --engine=litert (which tokenizes), or call its signature on ids")
    return {}


def _write(directory, flatbuffer, tokenizers, vocab, info):
  """The model directory's files (module docstring) into `directory`."""
  with open(os.path.join(directory, MODEL_FILE), "wb") as f:
    f.write(flatbuffer)
  for name, data in tokenizers.items():
    with open(os.path.join(directory, name), "wb") as f:
      f.write(data)
  sides = {VOCABULARY_FILE: vocab}
  if getattr(vocab, "separate", False):
    sides[SOURCE_VOCABULARY_FILE] = vocab.source
  for name, side in sides.items():
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      json.dump([side.id_to_piece(i) for i in range(vocab.vocab_size)], f, ensure_ascii=False)
  with open(os.path.join(directory, INFO_FILE), "w") as f:
    json.dump(info, f, indent=2)


def load_translator(run_dir, search_settings, constraint, model_dir=None, prefixes=False):
  """t2t-decoder --engine=litert: the `LiteRTTranslator` of model_dir (default
  run_dir/litert), after checking that the search built into it is the one asked for
  (beam, length penalty, length limits, the problem's output constraint) and, with `prefixes`
  (--decode_prefix_file), that it takes target prefixes; InputError otherwise."""
  model_dir = model_dir or os.path.join(run_dir, "litert")
  if not os.path.isfile(os.path.join(model_dir, MODEL_FILE)):
    raise InputError(f"no LiteRT model in {model_dir}: convert the run first "
                     f"(t2t-exporter --output_dir={run_dir} --format=litert)")
  try:
    import ai_edge_litert  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  except ImportError:
    raise InputError("--engine=litert needs LiteRT's runtime: pip install "
                     "'t2t-keras[litert]' (ai-edge-litert)") from None
  from t2t_keras.exporting.litert_translate import LiteRTTranslator  # pylint: disable=import-outside-toplevel
  translator = LiteRTTranslator(model_dir)
  s, info = search_settings, translator.info
  if prefixes and "translate_prefix" not in info["signatures"]:
    raise InputError(f"the LiteRT model in {model_dir} takes no target prefixes (only a "
                     "language-token model's has the translate_prefix signature); decode "
                     "--decode_prefix_file with --engine=tensorflow")
  if s.sampling_method != "argmax":
    raise InputError("--engine=litert runs the beam or greedy search built into the model; "
                     "sample with --engine=tensorflow")
  asked = {"beam_size": int(s.beam_size), "alpha": float(s.alpha),
           "length_penalty_kind": s.length_penalty_kind,
           "extra_length": int(s.extra_length),
           "max_decode_length": int(s.max_decode_length or 0),
           "constrained": constraint is not None}
  info = {"length_penalty_kind": "gnmt", **info}  # models converted before the option
  differ = {k: v for k, v in asked.items() if info.get(k) != v}
  if differ:
    built = ", ".join(f"{k}={info.get(k)}" for k in differ)
    wanted = ", ".join(f"{k}={v}" for k, v in differ.items())
    raise InputError(f"the LiteRT model in {model_dir} holds its search: it was converted "
                     f"with {built}, and the decoding asks for {wanted}; convert again with "
                     "t2t-exporter --format=litert --decode_hparams=..., or decode with "
                     "the model's settings")
  return translator
