"""An OPUS-MT model in Hugging Face's layout (`Helsinki-NLP/opus-mt-*`) -> a t2t-keras run.

    import_run("opus-mt-en-de", "runs/opus-en-de")   # a directory as the hub serves it
    run = runs.load("runs/opus-en-de")    # decodes, fine-tunes, exports and serves as any run

Reads `config.json` (the architecture), the weights (`hf_files.read_weights`:
model.safetensors, float32 or float16, or tf_model.h5), `vocab.json` (and
`target_vocab.json`, separate vocabularies) and `source.spm` / `target.spm`; writes the
weights as a checkpoint and the vocabulary as the pair file of the Marian import
(`data/marian_vocab.py`: vocab.json's entries become its vocab.yml, target_vocab.json's
its target_vocab.yml, ids unchanged). A setting that does not map is refused in one line
naming its key and value.

The conventions, from transformers' `models/marian/modeling_marian.py` (MarianModel,
MarianSinusoidalPositionalEmbedding, MarianAttention, the encoder and decoder layers)
and `convert_marian_to_pytorch.py`, each in docs/migrating.md: post-norm only, LayerNorm
epsilon 1e-5 (`nn.LayerNorm`), embeddings times sqrt(d_model) (`scale_embedding`),
sinusoids recomputed in Hugging Face's layout (`pos=timing_hf`; a saved table is checked
against it), attention and FFN biases, swish or relu, the logits' `final_logits_bias`;
`<pad>` is the vocabulary's last entry (appended by the converter) with a zero embedding
row: the decoder's start symbol, never an output (`bad_words_ids`), so ours keeps it out
of the softmax. Separate vocabularies (`separate_vocabs` in tokenizer_config.json, from
`tied-embeddings-src: false` models; `tokenization_marian.py`, and
`add_special_tokens_to_vocab` in the converter): the encoder's table
(`model.encoder.embed_tokens.weight`) in vocab.json's ids, the decoder's
(`model.decoder.embed_tokens.weight`, tied to `lm_head` unless tie_word_embeddings is
false) and `final_logits_bias` in target_vocab.json's, each with `<pad>` appended, the
one `pad_token_id` of both (MarianModel.__init__ copies one table when
`share_encoder_decoder_embeddings` is false; the converter requires one size).
"""

import json
import os
import tempfile

import numpy as np
import tensorflow as tf
import yaml

from t2t_keras import fileio, runs
from t2t_keras.data import marian_vocab
from t2t_keras.errors import InputError
from t2t_keras.ids import PAD_ID
from t2t_keras.importing import hf_files, marian

VOCAB, TARGET_VOCAB = "vocab.json", "target_vocab.json"
SPMS = ("source.spm", "target.spm")
# config.json keys (some written by older transformers, BART's) whose value must be the
# first: Hugging Face's Marian computes nothing else. The second is the value an absent
# key has (MarianConfig's default; the BART-era keys are not MarianConfig's and change
# nothing there, so absent they are Marian's).
_FIXED = {"scale_embedding": (True, False), "normalize_before": (False, False),
          "add_final_layer_norm": (False, False), "normalize_embedding": (False, False),
          "static_position_embeddings": (True, True), "add_bias_logits": (False, False),
          "is_encoder_decoder": (True, True)}
# MarianConfig's default max_position_embeddings (configuration_marian.py).
_DEFAULT_POSITIONS = 1024
_ACTIVATIONS = {"swish": "swish", "silu": "swish", "relu": "relu"}
_SOURCE_TABLE, _TARGET_TABLE = ("model.encoder.embed_tokens.weight",
                                "model.decoder.embed_tokens.weight")
_SHARED = ("model.shared.weight", _SOURCE_TABLE, _TARGET_TABLE)
# Saved copies of what the import recomputes or ties (checked, then not assigned).
_POSITIONS = ("model.encoder.embed_positions.weight", "model.decoder.embed_positions.weight")


def _value(config, key, name="config.json"):
  if key not in config:
    raise InputError(f"{name}: no {key!r} (a Marian config.json has it)")
  return config[key]


def check_config(config):
  """InputError naming the first config.json key whose value does not map."""
  for key, (wanted, default) in _FIXED.items():
    value = config.get(key, default)
    if value != wanted:
      given = json_value(config[key]) if key in config else f"absent ({json_value(default)})"
      raise InputError(f"config.json: {key}: {given} is not supported (Hugging Face's "
                       f"Marian computes {key}={json_value(wanted)} only)")
  activation = config.get("activation_function", "gelu")
  if activation not in _ACTIVATIONS:
    raise InputError(f"config.json: activation_function: {activation!r} is not supported "
                     f"(supported: {', '.join(_ACTIVATIONS)})")
  for a, b in (("encoder_attention_heads", "decoder_attention_heads"),
               ("encoder_ffn_dim", "decoder_ffn_dim")):
    if _value(config, a) != _value(config, b):
      raise InputError(f"config.json: {a}: {config[a]} differs from {b}: {config[b]} "
                       "(one value for both stacks)")
  vocab_size = _value(config, "vocab_size")
  if config.get("decoder_vocab_size") not in (None, vocab_size):
    raise InputError(f"config.json: decoder_vocab_size: {config['decoder_vocab_size']} "
                     f"differs from vocab_size: {vocab_size} (the model has one size for "
                     "both sides, as every converted OPUS-MT model)")
  d, heads = _value(config, "d_model"), config["encoder_attention_heads"]
  if d % heads or d % 2:
    raise InputError(f"config.json: d_model: {d} is not an even multiple of "
                     f"encoder_attention_heads: {heads}")


def json_value(value):
  return json.dumps(value)


def to_hparams(config, overrides=None):
  """config.json -> our HParams (Marian's import of the same model, then Hugging Face's
  conventions and config.json's dropouts for fine-tuning); `overrides` ("a=1") last."""
  check_config(config)
  tied_output = config.get("tie_word_embeddings", True)
  shared = shares_embeddings(config)
  model_yml = {
      "dim-emb": config["d_model"], "transformer-heads": config["encoder_attention_heads"],
      "transformer-dim-ffn": config["encoder_ffn_dim"],
      "enc-depth": _value(config, "encoder_layers"),
      "dec-depth": _value(config, "decoder_layers"),
      "transformer-ffn-activation": _ACTIVATIONS[config.get("activation_function", "gelu")],
      "tied-embeddings-all": bool(shared and tied_output), "tied-embeddings-src": shared,
      "tied-embeddings": bool(tied_output),
  }
  hparams = marian.to_hparams(model_yml, pad_added=True).replace(
      pos="timing_hf", norm_epsilon=1e-5,
      layer_prepostprocess_dropout=float(config.get("dropout", 0.1)),
      attention_dropout=float(config.get("attention_dropout", 0.0)),
      relu_dropout=float(config.get("activation_dropout", 0.0)),
      max_length=int(config.get("max_position_embeddings", _DEFAULT_POSITIONS)))
  return hparams.override(overrides) if overrides else hparams


def shares_embeddings(config):
  """config.json's share_encoder_decoder_embeddings (MarianConfig's default: true)."""
  return bool(config.get("share_encoder_decoder_embeddings", True))


def vocab_ymls(hf_dir, config):
  """(vocab.json's text as Marian's vocab.yml, target_vocab.json's or None): the same
  pieces and ids. The target's where tokenizer_config.json says separate_vocabs or the
  file is there. InputError where a file's size is not config.json's, its special ids
  are not config.json's, or separate vocabularies meet shared embeddings."""
  tokenizer = hf_files.read_json(hf_dir, "tokenizer_config.json", required=False) or {}
  separate = bool(tokenizer.get("separate_vocabs")) or fileio.exists(
      os.path.join(hf_dir, TARGET_VOCAB))
  if separate and shares_embeddings(config):
    raise InputError(f"{hf_dir}: separate vocabularies ({TARGET_VOCAB}) with config.json's "
                     "share_encoder_decoder_embeddings: true: one embedding table cannot "
                     "hold two id spaces")
  # The source's <pad> is the encoder table's zero row; the target's also starts the
  # decoder, and the target's </s> ends it.
  names = [(VOCAB, ("pad_token_id",) if separate else
            ("pad_token_id", "decoder_start_token_id", "eos_token_id"))]
  if separate:
    names.append((TARGET_VOCAB, ("pad_token_id", "decoder_start_token_id", "eos_token_id")))
  out = []
  for name, keys in names:
    entries = hf_files.read_json(hf_dir, name)
    path = os.path.join(hf_dir, name)
    if len(entries) != config["vocab_size"]:
      raise InputError(f"{path} has {len(entries)} entries; config.json's vocab_size is "
                       f"{config['vocab_size']}")
    for key in keys:
      piece = marian_vocab.EOS_PIECE if key == "eos_token_id" else marian_vocab.PAD_PIECE
      if entries.get(piece) != _value(config, key):
        raise InputError(f"config.json: {key}: {config[key]} is not {name}'s {piece!r} "
                         f"({entries.get(piece)}); Hugging Face's Marian starts the "
                         "decoder from <pad> and ends at </s>")
    out.append(yaml.safe_dump(entries, allow_unicode=True, sort_keys=False).encode("utf-8"))
  return out[0], (out[1] if separate else None)


_PROJECTIONS = (("q_proj", "query"), ("k_proj", "key"), ("v_proj", "value"),
                ("out_proj", "output"))


def variable_map(model):
  """[(PyTorch name, our variable, transposed)] of every variable but the embeddings
  and the logit bias (PyTorch's Linear weights are [out, in], Keras' kernels [in, out])."""

  def attention(prefix, layer, residual):
    pairs = []
    for theirs, ours in _PROJECTIONS:
      dense = getattr(layer, f"{ours}_dense")
      pairs += [(f"{prefix}.{theirs}.weight", dense.kernel, True),
                (f"{prefix}.{theirs}.bias", dense.bias, False)]
    return pairs + _norm(f"{prefix}_layer_norm", residual)

  def ffn(prefix, layer):
    return ([(f"{prefix}.fc1.weight", layer.ffn.filter_dense.kernel, True),
             (f"{prefix}.fc1.bias", layer.ffn.filter_dense.bias, False),
             (f"{prefix}.fc2.weight", layer.ffn.output_dense.kernel, True),
             (f"{prefix}.fc2.bias", layer.ffn.output_dense.bias, False)] +
            _norm(f"{prefix}.final_layer_norm", layer.ffn_residual))

  pairs = []
  for i, layer in enumerate(model.encoder_layers):
    prefix = f"model.encoder.layers.{i}"
    pairs += attention(f"{prefix}.self_attn", layer.self_attention,
                       layer.self_attention_residual)
    pairs += ffn(prefix, layer)
  for i, layer in enumerate(model.decoder_layers):
    prefix = f"model.decoder.layers.{i}"
    pairs += attention(f"{prefix}.self_attn", layer.self_attention,
                       layer.self_attention_residual)
    pairs += attention(f"{prefix}.encoder_attn", layer.encdec_attention,
                       layer.encdec_attention_residual)
    pairs += ffn(prefix, layer)
  return pairs


def _norm(name, residual):
  return [(f"{name}.weight", residual.layer_norm.gamma, False),
          (f"{name}.bias", residual.layer_norm.beta, False)]


def fits(given, shape):
  """Whether a tensor of shape `given` is a variable of `shape` with some axes joined:
  a [1, n] bias is [n], and our attention's kernels split an axis into heads ([d, d] is
  [d, heads, d / heads] or [heads, d / heads, d])."""
  joins = {(int(np.prod(shape)),)} | {(int(np.prod(shape[:i])), int(np.prod(shape[i:])))
                                       for i in range(1, len(shape))}
  return tuple(given) == tuple(shape) or tuple(given) in joins or (
      len(shape) == 1 and tuple(given) == (1, shape[0]))


def assign(variable, value, name):
  """variable <- value, whose shape must be the variable's (`fits`)."""
  shape = tuple(variable.shape)
  if not fits(value.shape, shape):
    raise InputError(f"the weights' {name} has shape {list(value.shape)}; config.json asks "
                     f"for {list(shape)}")
  variable.assign(value.reshape(shape))


def taker(tensors, used):
  """`take(name)`: tensors[name], its name added to `used` (the leftover check of
  `assign_all`); InputError where the weights lack it."""
  def take(name):
    if name not in tensors:
      raise InputError(f"the weights have no {name}, which config.json needs")
    used.add(name)
    return tensors[name]
  return take


def check_tied_head(tensors, table, take):
  """InputError where the weights hold an lm_head.weight other than the tied `table`."""
  if "lm_head.weight" in tensors and not np.array_equal(take("lm_head.weight"), table):
    raise InputError("the weights' lm_head.weight differs from the embedding table; "
                     "config.json ties them (tie_word_embeddings)")


def checked_rows(tensors, name, count, take):
  """tensors[name] (`take`n) with `count` rows (a [1, V] bias: V values), else InputError."""
  value = take(name)
  rows = value.shape[-1] if name == "final_logits_bias" else value.shape[0]
  if rows != count:
    raise InputError(f"the weights' {name} has {rows} rows; {VOCAB} has {count} entries")
  return value.reshape(-1) if name == "final_logits_bias" else value


def shared_table(tensors, vocab_size, used):
  """The one embedding table (model.shared, or a tied copy under another name): every
  copy present must equal it, its <pad> row is 0 (the decoder's start)."""
  present = [n for n in _SHARED if n in tensors]
  if not present:
    raise InputError(f"the weights have no embedding table ({', '.join(_SHARED)} looked "
                     "for)")
  table = tensors[present[0]]
  for name in present[1:]:
    if tensors[name].shape != table.shape or not np.array_equal(tensors[name], table):
      raise InputError(f"the weights' {name} differs from {present[0]}; config.json ties "
                       "them (share_encoder_decoder_embeddings)")
  used.update(present)
  if table.shape[0] != vocab_size:
    raise InputError(f"the weights' {present[0]} has {table.shape[0]} rows; {VOCAB} has "
                     f"{vocab_size} entries")
  return table


def check_positions(tensors, d_model, used):
  """A saved sinusoid table (tf_model.h5 and older files keep one) must be the one the
  import recomputes: Hugging Face's layout, 10000^(-2k/d) (`pos=timing_hf`)."""
  for name in _POSITIONS:
    if name in tensors:
      table = tensors[name]
      positions = np.arange(table.shape[0], dtype=np.float64)[:, None]
      angles = positions * np.power(10000.0, -np.arange(d_model // 2) * 2.0 / d_model)
      expected = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
      if table.shape != expected.shape or np.abs(table - expected).max() > 1e-3:
        raise InputError(f"the weights' {name} are not Hugging Face's Marian sinusoids "
                         "(MarianSinusoidalPositionalEmbedding), which the import recomputes")
      used.add(name)


def load_weights(model, tensors, vocab, weights=""):
  """Assigns every tensor to `model` (built from `to_hparams`), embedding rows and the
  logit bias in our id order (`vocab`: the run's `MarianVocabulary`, whose sides'
  `marian_ids` give each of our ids' Hugging Face id). InputError naming a missing
  tensor, one of another shape, or those left over (`weights`: the file they came
  from, for the messages)."""
  used = set()
  take = taker(tensors, used)
  source_ids, marian_ids = vocab.source.marian_ids, vocab.target.marian_ids
  count = len(marian_ids)
  if model.source_embedding is model.target_embedding:
    table = shared_table(tensors, count, used)
    name = "model.shared.weight"
    assign(model.embedding.embeddings, marian.reorder_rows(table, marian_ids), name)
  else:  # the encoder's table in the source's ids, the decoder's in the target's
    assign(model.source_embedding.embeddings, marian.reorder_rows(
        checked_rows(tensors, _SOURCE_TABLE, count, take), source_ids), _SOURCE_TABLE)
    table, name = checked_rows(tensors, _TARGET_TABLE, count, take), _TARGET_TABLE
    assign(model.target_embedding.embeddings, marian.reorder_rows(table, marian_ids), name)
  if np.any(table[marian_ids[PAD_ID]]):
    raise InputError(f"the weights' <pad> row of {name} is not zero (Hugging Face's Marian "
                     "starts the decoder from it; its converter writes zeros)")
  if not model.hparams.shared_embedding_and_softmax_weights:
    assign(model.softmax_table.embeddings, marian.reorder_rows(
        checked_rows(tensors, "lm_head.weight", count, take), marian_ids), "lm_head.weight")
  else:
    check_tied_head(tensors, table, take)
  if "final_logits_bias" not in tensors and weights.endswith(hf_files.H5):
    raise InputError(f"{weights} has no final_logits_bias: transformers' TF weights saved "
                     "before September 2022 lost it (transformers PR 18833) and translate "
                     f"wrongly; import the repository's {hf_files.SAFETENSORS} instead")
  assign(model.softmax_embedding.bias, marian.reorder_rows(
      checked_rows(tensors, "final_logits_bias", count, take), marian_ids), "final_logits_bias")
  check_positions(tensors, model.hparams.hidden_size, used)
  assign_all(variable_map(model), tensors, take, used)


def assign_all(pairs, tensors, take, used):
  """Assigns each (PyTorch name, variable, transposed) of `pairs` its tensor (`take`n);
  then InputError naming the tensors left over (not in `used`)."""
  for name, variable, transposed in pairs:
    value = take(name)
    assign(variable, value.T if transposed else value, name)
  left = hf_files.numbered(set(tensors) - used)
  if left:
    raise InputError(f"{len(left)} tensor(s) the model has no place for: "
                     f"{', '.join(left[:5])}{' ...' if len(left) > 5 else ''}")


def write_run(output_dir, hparams, pair_files, fill, *, imported_from, vocab_name,
              target_vocab_name=None, problem="translate_parallel_text", log=print):
  """Builds the model of `hparams` over the vocabulary pair of `pair_files` (source.spm,
  target.spm, vocab.yml, labels, target_vocab.yml: `marian_vocab.write_archive`'s), lets
  `fill(model, vocab)` assign its weights (its InputErrors come before anything is
  written), then writes output_dir: the checkpoint, then run.json. Returns the
  checkpoint prefix."""
  with tempfile.TemporaryDirectory() as tmp:
    pair = os.path.join(tmp, runs.VOCAB_FILE)
    marian_vocab.write_archive(pair, *pair_files)
    vocab = marian_vocab.MarianVocabulary(pair, vocab_name=vocab_name,
                                          target_vocab_name=target_vocab_name)
    model = runs.build_model(hparams, vocab.vocab_size)
    fill(model, vocab)
    manager = tf.train.CheckpointManager(tf.train.Checkpoint(model=model), output_dir,
                                         max_to_keep=None)
    written = manager.save(checkpoint_number=0)  # the checkpoint first, run.json last
    runs.save_run_info(output_dir, hparams, problem, vocab.vocab_size, pair,
                       imported_from={"hf": imported_from})
  log(f"imported {imported_from['weights']} -> {written}")
  return written


def import_run(hf_dir, output_dir, config, *, problem="translate_parallel_text",
               overrides=None, log=print):
  """Writes output_dir as a t2t-keras run of the OPUS-MT model in hf_dir (`config`: its
  config.json). Returns the checkpoint prefix. Nothing is written before every check has
  passed."""
  hparams = to_hparams(config, overrides)
  vocab_data, target_vocab_data = vocab_ymls(hf_dir, config)
  spms = []
  for name in SPMS:
    path = os.path.join(hf_dir, name)
    if not fileio.exists(path):
      raise InputError(f"{path}: no such file (OPUS-MT's tokenizer: source.spm, target.spm)")
    spms.append(fileio.read_bytes(path))
  tensors, weights = hf_files.read_weights(hf_dir)
  return write_run(
      output_dir, hparams, (*spms, vocab_data, (), target_vocab_data),
      lambda model, vocab: load_weights(model, tensors, vocab, weights),
      imported_from={"dir": hf_dir, "weights": weights, "model_type": "marian"},
      vocab_name=os.path.join(hf_dir, VOCAB), target_vocab_name=os.path.join(hf_dir, TARGET_VOCAB),
      problem=problem, log=log)
