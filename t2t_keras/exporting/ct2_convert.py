"""A run's checkpoint -> a CTranslate2 model directory (t2t-exporter --format=ctranslate2).

    path = convert_run("runs/tiny")                              # runs/tiny/ctranslate2
    path = convert_run("runs/base/selected", quantization="int8",
                       decode_hparams="beam_size=4,alpha=0.6")

    # anywhere with ctranslate2 and sentencepiece (no TensorFlow, no t2t_keras):
    python t2t_keras/exporting/ct2_translate.py runs/tiny/ctranslate2 < in.en > out.de

The output directory:

    model.bin, config.json          CTranslate2's TransformerSpec (its own format)
    shared_vocabulary.json          the vocabulary's pieces, id order (source = target);
                                    source_vocabulary.json and target_vocabulary.json
                                    where the sides have their own ids (an OPUS-MT
                                    import with separate vocabularies)
    sentencepiece.model             the run's sentencepiece model, to tokenize; for a
                                    Marian pair (an OPUS-MT import) source.spm and
                                    target.spm instead
    t2t_decoding.json               the decoding the run chose (beam, alpha, lengths);
                                    a language-token model's {code: token} too;
                                    fold_first_letter (ct2_translate folds and restores)
    README.md                       how to call it with the same settings

The mapping (every weight copied, none approximated): the source and target
embeddings (one matrix unless the run has Marian's separate source table, PAD's row
zeroed where the model zeroes it), scaled by sqrt(d_model); the pre-softmax matrix
(the target embedding's unless t2t's separate one) with the run's logit bias, if any,
and PAD's -1e9 where the model keeps PAD out of the softmax (`softmax_excludes_pad`:
exp(-1e9) is exactly 0 in float32, so the softmax is the model's); position tables
written out (the run's sinusoids in its layout, or the learned table), so
CTranslate2's own sinusoids (halves, positions from 1) are never used; attention with
the run's biases, if any, d_k = d_v per head as `head_dim`; a ReLU or swish FFN with
biases; post- or pre-norm with the run's epsilon; the decoder starts from piece 0 (PAD,
t2t's start symbol; a zero vector for Marian's imports, as Marian starts) and sources end
with EOS (`add_source_eos`). Otherwise the softmax is the model's own, PAD included: our
searches rule PAD out after the softmax, which no CTranslate2 option does (its
suppression renormalizes), so `ct2_translate` drops hypotheses holding PAD instead, and
every log probability stays the model's.

What CTranslate2 cannot express is refused with one line (`UnsupportedError`):
d_k != d_v, a model other than the Transformer, tensor2tensor's target-space
embedding, a vocabulary that is not sentencepiece (t2t's subwords).
"""

import json
import os
import shutil

import numpy as np

from t2t_keras import fileio, runs
from t2t_keras.data import languages, vocabulary
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID, PAD_ID, UNK_ID

QUANTIZATIONS = ("none", "float32", "int8", "int8_float32", "int8_float16", "int8_bfloat16",
                 "int16", "float16", "bfloat16")
DECODING_FILE = "t2t_decoding.json"
SPM_FILE = "sentencepiece.model"
SOURCE_SPM_FILE, TARGET_SPM_FILE = "source.spm", "target.spm"  # a Marian pair's


class UnsupportedError(InputError):
  """The run has a feature CTranslate2's TransformerSpec cannot express."""


def import_ctranslate2():
  """The ctranslate2 module, or InputError saying how to install it."""
  try:
    import ctranslate2  # pylint: disable=import-outside-toplevel
  except ImportError as e:
    raise InputError("CTranslate2 is not installed: pip install 't2t-keras[ctranslate2]' "
                     f"(or pip install ctranslate2) ({e})") from e
  return ctranslate2


def check_supported(hparams, model_name="transformer"):
  """UnsupportedError (one line) for a run CTranslate2 cannot run exactly."""
  if model_name != "transformer":
    raise UnsupportedError(f"CTranslate2 export supports the 'transformer' model, not "
                           f"{model_name!r}")
  # pylint: disable-next=import-outside-toplevel
  from t2t_keras.models.transformer import convention, head_sizes
  if convention(hparams, "num_target_spaces"):
    raise UnsupportedError(
        "CTranslate2 export of tensor2tensor's target-space embedding (num_target_spaces="
        f"{convention(hparams, 'num_target_spaces')}) is not built: a converter would fold "
        "the row into the source embeddings, and ct2_translate.py would need t2t's subword "
        "tokenizer beside sentencepiece; decode, export a SavedModel or serve this run instead")
  d_k, d_v = head_sizes(hparams)
  if d_k != d_v:
    raise UnsupportedError(
        f"CTranslate2 cannot express d_k != d_v (attention_key_channels={d_k}, "
        f"attention_value_channels={d_v}): its attention has one head_dim for queries, "
        "keys and values")


def _np(variable):
  return np.asarray(variable.numpy(), dtype=np.float32)


def position_table(positions):
  """float32 [max_positions, d_model]: what a `PositionalEncoding` layer adds at each
  position from 0 (its learned table, or its kind of sinusoids)."""
  if positions.kind == "emb":
    return _np(positions.position_embeddings)
  zeros = np.zeros([1, positions.max_positions, positions.hidden_size], np.float32)
  return np.asarray(positions(zeros)[0], np.float32)


def _table(embedding):
  """A `SharedEmbedding`'s rows, PAD's zero where the layer zeroes it (`zero_pad`)."""
  table = _np(embedding.embeddings)
  if embedding.zero_pad:
    table[0] = 0.0
  return table


def _linear_t(kernel):
  """A Keras kernel [in, ...] -> CTranslate2's [out, in]."""
  k = _np(kernel)
  return np.ascontiguousarray(k.reshape(k.shape[0], -1).T)


def _output_t(kernel):
  """An attention output kernel [h, d_v, d_model] -> [d_model, h * d_v]."""
  k = _np(kernel)
  return np.ascontiguousarray(k.reshape(-1, k.shape[-1]).T)


def _norm(spec, layer_norm):
  spec.gamma = _np(layer_norm.gamma)
  spec.beta = _np(layer_norm.beta)


def _attention(spec, attention, residual, self_attention):
  """Our MultiHeadAttention and its Residual's LayerNorm -> a MultiHeadAttentionSpec.

  Self-attention: linear[0] = fused Q, K, V; linear[1] = output. Encoder-decoder:
  linear[0] = Q, linear[1] = fused K, V (over the encoder output); linear[2] = output.
  Biases (Marian's bq, bk, bv, bo: `attention_bias`) go beside their weights.
  """
  _norm(spec.layer_norm, residual.layer_norm)
  dense = (attention.query_dense, attention.key_dense, attention.value_dense)
  weights = [_linear_t(d.kernel) for d in dense]
  biases = [_np(d.bias).reshape(-1) for d in dense] if attention.use_bias else None
  fused = [(0, 1, 2)] if self_attention else [(0,), (1, 2)]
  for i, group in enumerate(fused):
    spec.linear[i].weight = np.concatenate([weights[j] for j in group], axis=0)
    if biases:
      spec.linear[i].bias = np.concatenate([biases[j] for j in group], axis=0)
  output = spec.linear[len(fused)]
  output.weight = _output_t(attention.output_dense.kernel)
  if attention.use_bias:
    output.bias = _np(attention.output_dense.bias)
  spec.queries_scale = np.float32(attention.key_size ** -0.5)


def _ffn(spec, ffn, residual):
  _norm(spec.layer_norm, residual.layer_norm)
  spec.linear_0.weight = _linear_t(ffn.filter_dense.kernel)
  spec.linear_0.bias = _np(ffn.filter_dense.bias)
  spec.linear_1.weight = _linear_t(ffn.output_dense.kernel)
  spec.linear_1.bias = _np(ffn.output_dense.bias)


def build_spec(model, pieces, source_pieces=None):
  """A ctranslate2 TransformerSpec holding `model`'s weights (a built Transformer),
  `pieces` (the target vocabulary's pieces in id order) as target vocabulary and
  `source_pieces` (default `pieces`: one vocabulary) as source vocabulary."""
  import_ctranslate2()
  from ctranslate2.specs import common_spec, transformer_spec  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from t2t_keras.models.transformer import convention, head_sizes
  hp = model.hparams
  check_supported(hp)
  pre_norm = hp.norm_type == "pre"
  d_k, _ = head_sizes(hp)
  head_dim = None if d_k * hp.num_heads == hp.hidden_size else d_k
  activation = {"relu": common_spec.Activation.RELU, "swish": common_spec.Activation.SWISH}[
      convention(hp, "ffn_activation")]
  common = dict(pre_norm=pre_norm, activation=activation, head_dim=head_dim)
  spec = transformer_spec.TransformerSpec(
      transformer_spec.TransformerEncoderSpec(hp.num_encoder_layers, hp.num_heads, **common),
      transformer_spec.TransformerDecoderSpec(hp.num_decoder_layers, hp.num_heads, **common))
  source, target = _table(model.source_embedding), _table(model.target_embedding)
  if model.source_embedding is model.target_embedding:
    target = source  # one array: CTranslate2 stores it once
  spec.encoder.embeddings[0].weight = source
  spec.decoder.embeddings.weight = target
  softmax = model.softmax_embedding
  spec.decoder.projection.weight = (
      target if softmax is model.target_embedding and not softmax.zero_pad
      else _np(softmax.embeddings))
  bias = model.softmax_bias()  # Marian's logit bias and PAD's -1e9 (softmax_excludes_pad)
  if bias is not None:
    spec.decoder.projection.bias = _np(bias)
  spec.encoder.position_encodings.encodings = position_table(model.encoder_positions)
  spec.decoder.position_encodings.encodings = position_table(model.decoder_positions)
  for ours, theirs in zip(model.encoder_layers, spec.encoder.layer):
    _attention(theirs.self_attention, ours.self_attention, ours.self_attention_residual, True)
    _ffn(theirs.ffn, ours.ffn, ours.ffn_residual)
  for ours, theirs in zip(model.decoder_layers, spec.decoder.layer):
    _attention(theirs.self_attention, ours.self_attention, ours.self_attention_residual, True)
    _attention(theirs.attention, ours.encdec_attention, ours.encdec_attention_residual, False)
    _ffn(theirs.ffn, ours.ffn, ours.ffn_residual)
  if pre_norm:
    _norm(spec.encoder.layer_norm, model.encoder_norm)
    _norm(spec.decoder.layer_norm, model.decoder_norm)
  spec.config.layer_norm_epsilon = float(hp.norm_epsilon)
  spec.config.decoder_start_token = pieces[model.decoder_start_id]  # PAD's unless fairseq's
  spec.config.bos_token = pieces[PAD_ID]
  spec.config.eos_token = pieces[EOS_ID]
  spec.config.unk_token = pieces[UNK_ID]
  spec.config.add_source_eos = True
  spec.register_source_vocabulary(pieces if source_pieces is None else source_pieces)
  spec.register_target_vocabulary(pieces)
  return spec


def decoding_settings(decoding, hparams, problem):
  """The t2t_decoding.json dict: what ct2_translate needs to decode as the run does
  (decoding: the run's `DecodingSpec`; hparams: the run's): the search's beam and length
  penalty (alpha, length_penalty_kind),
  and the spec's limits, whose max_positions is the converted position table's length
  here whatever the run's positions (CTranslate2 reads sinusoids from a table too), and
  whether ct2_translate folds each source's first letter and restores it on outputs
  (`data/casing.py`)."""
  s = decoding.settings.search
  return {"problem": problem, "beam_size": int(s.beam_size), "alpha": float(s.alpha),
          "length_penalty_kind": s.length_penalty_kind, **decoding.limits(hparams),
          "max_positions": int(hparams.max_positions),
          "fold_first_letter": decoding.fold_first_letter}


README = """# {problem}: a CTranslate2 model converted by t2t-exporter

Checkpoint: `{checkpoint}`; quantization: {quantization}.
Decoding chosen for this run: beam {beam_size}, alpha {alpha}, length_penalty_kind
{length_penalty_kind} (the length penalty: "gnmt" is t2t's ((5 + length) / 6) ** alpha,
"length" is length ** alpha), at most input length + {extra_length} output pieces{cap},
inputs truncated to {max_input_length} pieces (EOS included).

Translate with the same settings (ctranslate2 and sentencepiece only):

    python ct2_translate.py THIS_DIR < input.txt > output.txt   # t2t_keras/exporting/ct2_translate.py

or from Python:

    import ctranslate2, sentencepiece as spm
    source = spm.SentencePieceProcessor(model_file="THIS_DIR/{source_spm}")
    target = spm.SentencePieceProcessor(model_file="THIS_DIR/{target_spm}")
    translator = ctranslate2.Translator("THIS_DIR", device="cpu")
    pieces = source.encode(["A sentence."], out_type=str)  # EOS is added by the model
    best = translator.translate_batch(pieces, beam_size={beam_size}, length_penalty={alpha})
    target.decode(best[0].hypotheses[0])

CTranslate2's own length penalty is length ** alpha (length_penalty_kind "length", not
t2t's "gnmt"), and its beam search stops differently: `ct2_translate.py` asks for an
n-best list without a penalty and ranks it with the run's penalty, which reproduces
t2t-decoder's outputs (docs/ctranslate2.md). Where t2t_decoding.json says
fold_first_letter, ct2_translate.py also lowercases each source's first letter and restores
the capital on the output; the snippet above does neither.
"""


def convert_run(output_dir, ct2_dir=None, checkpoint_path=None, quantization="none",
                decode_hparams="", max_input_length=None, overwrite=False, log=print):
  """Converts a run's checkpoint into a CTranslate2 model directory.

  Args:
    output_dir: a run directory (the trainer's, or t2t-avg-all's output).
    ct2_dir: where to write (default output_dir/ctranslate2, with a "_<quantization>"
      suffix when quantized).
    checkpoint_path: a checkpoint prefix (default the run's newest readable).
    quantization: one of QUANTIZATIONS ("none" keeps float32 weights).
    decode_hparams: overrides (string) recorded in t2t_decoding.json and README.md.
    max_input_length: the input limit in pieces, EOS included (default: the
      SavedModel export's, the training max_length).
    overwrite: replace an existing ct2_dir (else FileExistsError).
  Returns:
    ct2_dir.
  """
  log = log or (lambda *_: None)
  if quantization not in QUANTIZATIONS:
    raise InputError(f"--quantization={quantization!r}: expected one of "
                     f"{', '.join(QUANTIZATIONS)}")
  import_ctranslate2()
  hparams, info = runs.load_run_info(output_dir)
  check_supported(hparams, info.get("model", "transformer"))
  ct2_dir = model_dir(output_dir, ct2_dir, "ctranslate2", quantization, overwrite)
  decoding = DecodingSpec.for_run(info.get("problem"), decode_hparams, hparams,
                                  max_input_length)
  model, vocab, hparams, info, ckpt = runs.load(output_dir, checkpoint_path)
  tokenizers = tokenizer_files(vocab)
  pieces = [vocab.id_to_piece(i) for i in range(vocab.vocab_size)]  # the target side's
  source = vocabulary.source_side(vocab)
  spec = build_spec(model, pieces, [source.id_to_piece(i) for i in range(vocab.vocab_size)])
  settings = decoding_settings(decoding, hparams,
                               info.get("problem"))
  tokens = languages.language_tokens(vocab)
  if tokens:  # M2M-100, NLLB: ct2_translate frames inputs and forces the target's
    settings["language_tokens"] = dict(sorted(tokens.items()))
  write_model_dir(ct2_dir, lambda tmp: _write(
      tmp, spec, quantization, tokenizers,
      dict(settings, checkpoint_path=os.path.basename(ckpt), quantization=quantization)))
  log(f"converted {ckpt} to {ct2_dir} (CTranslate2, quantization {quantization})")
  return ct2_dir


def model_dir(output_dir, given, name, quantization, overwrite):
  """Where a converted model goes: `given`, else output_dir/name with "_<quantization>"
  unless it keeps float32 weights; FileExistsError where it exists and not `overwrite`
  (the CTranslate2 and LiteRT conversions)."""
  if given is None:
    suffix = "" if quantization in ("none", "float32") else f"_{quantization}"
    given = os.path.join(output_dir, name + suffix)
  if os.path.exists(given) and not overwrite:
    raise FileExistsError(f"{given} exists: pass --overwrite or another --export_dir")
  return given


def write_model_dir(directory, write):
  """write(tmp) into a new directory beside `directory`, then that directory put in its
  place (an existing one removed): a reader never sees a half-written model. 0755, as a
  SavedModel's (mkdtemp makes 0700). The temporary directories a killed conversion of
  `directory` left are removed first."""
  parent = os.path.dirname(os.path.abspath(directory))
  os.makedirs(parent, exist_ok=True)
  prefix = f".{os.path.basename(os.path.abspath(directory))}-"
  fileio.remove_dead_temporaries(parent, prefix)  # what a killed conversion left
  tmp = fileio.private_temporary_dir(parent, prefix)
  try:
    write(tmp)
    os.chmod(tmp, 0o755)
    if os.path.exists(directory):
      shutil.rmtree(directory)
    os.replace(tmp, directory)
  except BaseException:
    shutil.rmtree(tmp, ignore_errors=True)
    raise


def tokenizer_files(vocab, what="CTranslate2 export",
                    why="ct2_translate.py tokenizes with sentencepiece"):
  """{file name: sentencepiece model bytes} for ct2_translate (and litert_translate): SPM_FILE,
  or a Marian pair's SOURCE_SPM_FILE and TARGET_SPM_FILE; UnsupportedError for another
  vocabulary (`what` needs one, `why`)."""
  # pylint: disable-next=import-outside-toplevel
  from t2t_keras.data.marian_vocab import MarianVocabulary
  from t2t_keras.data.vocabulary import SubwordVocabulary  # pylint: disable=import-outside-toplevel
  if isinstance(vocab, MarianVocabulary):
    return {SOURCE_SPM_FILE: vocab.source.model_proto, TARGET_SPM_FILE: vocab.target.model_proto}
  if isinstance(vocab, SubwordVocabulary):
    return {SPM_FILE: fileio.read_bytes(vocab.model_path)}
  raise UnsupportedError(f"{what} needs a sentencepiece vocabulary; {vocab!r} is not one "
                         f"({why})")


def _write(directory, spec, quantization, tokenizers, settings):
  """The model directory's files (module docstring) into an empty `directory`."""
  spec.validate()
  spec.optimize(quantization=None if quantization == "none" else quantization)
  spec.save(directory)
  for name, data in tokenizers.items():
    with open(os.path.join(directory, name), "wb") as f:
      f.write(data)
  with open(os.path.join(directory, DECODING_FILE), "w") as f:
    json.dump(settings, f, indent=2)
  cap = (f" (never more than {settings['max_decode_length']})"
         if settings["max_decode_length"] else "")
  with open(os.path.join(directory, "README.md"), "w") as f:
    source_spm, target_spm = (SPM_FILE, SPM_FILE) if SPM_FILE in tokenizers else (
        SOURCE_SPM_FILE, TARGET_SPM_FILE)
    f.write(README.format(checkpoint=settings["checkpoint_path"], cap=cap,
                          source_spm=source_spm, target_spm=target_spm,
                          **{k: v for k, v in settings.items() if k != "checkpoint_path"}))
