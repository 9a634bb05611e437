"""Writes tensor2tensor training directories with random weights, for the import tests.

Variable names and shapes are tensor2tensor's, written here from its conventions
(tests/t2t_conventions.md, read from t2t's source), not from the package's importer:
a checkpoint t2t-trainer would have written for these hparams, with Adam moments
for the target-space row that training fed, `global_step`, hparams.json, flags.txt,
the `checkpoint` index and a SubwordTextEncoder vocabulary.
"""

import json
import os

import numpy as np
import tensorflow as tf

# A SubwordTextEncoder vocabulary: <pad> 0, <EOS> 1, then subtokens (the alphabet's
# characters included, as t2t's builder always adds them).
VOCAB = ["<pad>", "<EOS>", "the_", "a_", "b_", "_", ", _", ". _", "in", "ing_", "s_"] + \
    list("abcdefghijklmnopqrstuvwxyzABCEOS<> .,!?-'\\;0123456789")

# tensor2tensor 1.4 transformer_base's settings that the model reads (hparams.json keys).
BASE = dict(
    hidden_size=512, filter_size=2048, num_heads=8, num_hidden_layers=6, num_encoder_layers=0,
    num_decoder_layers=0, attention_key_channels=0, attention_value_channels=0,
    layer_preprocess_sequence="none", layer_postprocess_sequence="dan", norm_type="layer",
    norm_epsilon=1e-6, shared_embedding_and_softmax_weights=True, symbol_modality_num_shards=16,
    pos="timing", ffn_layer="dense_relu_dense", self_attention_type="dot_product",
    max_relative_position=0, multiply_embedding_mode="sqrt_depth", proximity_bias=False,
    prepend_mode="none", symbol_modality_skip_top=False, factored_logits=False,
    layer_prepostprocess_dropout=0.1, attention_dropout=0.0, relu_dropout=0.0,
    label_smoothing=0.1, max_length=256, learning_rate=0.1, use_pad_remover=True)


def shard_rows(vocab_size, shards):
  """Rows of each weights_<i> (t2t's SymbolModality: the first vocab % shards get one more)."""
  return [vocab_size // shards + (1 if i < vocab_size % shards else 0) for i in range(shards)]


def _scopes(hp):
  if hp["shared_embedding_and_softmax_weights"]:
    return ["shared"]
  if hp.get("shared_embedding"):
    return ["shared", "softmax"]
  return ["input_emb", "target_emb", "softmax"]


def random_variables(hp, vocab_size, rng):
  """{t2t name: float32 array} of a transformer with hparams `hp` (t2t's dict)."""
  d, f = hp["hidden_size"], hp["filter_size"]
  key, value = hp["attention_key_channels"] or d, hp["attention_value_channels"] or d
  pre = hp["layer_preprocess_sequence"] == "n"
  out = {}

  def dense(name, fan_in, fan_out, bias=False):
    out[f"{name}/kernel"] = rng.normal(0, fan_in ** -0.5, (fan_in, fan_out))
    if bias:
      out[f"{name}/bias"] = 0.1 * rng.normal(size=fan_out)

  def norm(prefix, scope):
    out[f"{prefix}/{scope}/layer_norm/layer_norm_scale"] = 1 + 0.1 * rng.normal(size=d)
    out[f"{prefix}/{scope}/layer_norm/layer_norm_bias"] = 0.1 * rng.normal(size=d)

  def sublayer(prefix, attention):
    if attention:
      for name, size in (("q", key), ("k", key), ("v", value)):
        dense(f"{prefix}/multihead_attention/{name}", d, size)
      dense(f"{prefix}/multihead_attention/output_transform", value, d)
    else:
      dense(f"{prefix}/conv1", d, f, bias=True)
      dense(f"{prefix}/conv2", f, d, bias=True)
    norm(prefix, "layer_prepostprocess" if pre else "layer_postprocess")

  body = "transformer/body"
  for i in range(hp["num_encoder_layers"] or hp["num_hidden_layers"]):
    sublayer(f"{body}/encoder/layer_{i}/self_attention", True)
    sublayer(f"{body}/encoder/layer_{i}/ffn", False)
  for i in range(hp["num_decoder_layers"] or hp["num_hidden_layers"]):
    sublayer(f"{body}/decoder/layer_{i}/self_attention", True)
    sublayer(f"{body}/decoder/layer_{i}/encdec_attention", True)
    sublayer(f"{body}/decoder/layer_{i}/ffn", False)
  if pre:
    norm(f"{body}/encoder", "layer_prepostprocess")
    norm(f"{body}/decoder", "layer_prepostprocess")
  out[f"{body}/target_space_embedding/kernel"] = rng.normal(0, 1, (32, d))
  modality = f"transformer/symbol_modality_{vocab_size}_{d}"
  for scope in _scopes(hp):
    for i, rows in enumerate(shard_rows(vocab_size, hp["symbol_modality_num_shards"])):
      out[f"{modality}/{scope}/weights_{i}"] = rng.normal(0, d ** -0.5, (rows, d))
  return {k: v.astype(np.float32) for k, v in out.items()}


def save_checkpoint(prefix, tensors):
  """A TF1 name-based checkpoint (index + data) of {name: array} at `prefix`."""
  names = sorted(tensors)
  tf.raw_ops.SaveV2(prefix=prefix, tensor_names=names, shape_and_slices=[""] * len(names),
                    tensors=[tf.constant(tensors[n]) for n in names])


def write_t2t_dir(path, hp, rng, steps=(1000,), problem="translate_ende_wmt8k",
                  target_space=8, extra=None, drop=(), vocab=True):
  """t2t-trainer's output_dir for `hp` at `steps`: {step: the model variables written}.

  target_space: the row of target_space_embedding given Adam moments (None: no
  optimizer state at all); extra: more {name: array} in every checkpoint; drop:
  model variable names left out; vocab: also write vocab.<problem>.8192.subwords.
  """
  os.makedirs(path, exist_ok=True)
  with open(os.path.join(path, "hparams.json"), "w") as f:
    json.dump(hp, f)
  with open(os.path.join(path, "flags.txt"), "w") as f:
    f.write(f"--problem={problem}\n--model=transformer\n--hparams_set=transformer_base\n"
            f"--output_dir=/somewhere/else/{problem}\n")
  if vocab:
    with open(os.path.join(path, f"vocab.{problem}.8192.subwords"), "w", encoding="utf-8") as f:
      f.write("".join(f"'{s}'\n" for s in VOCAB))
  written = {}
  for step in steps:
    model = random_variables(hp, len(VOCAB), rng)
    tensors = {k: v for k, v in model.items() if k not in drop}
    tensors["global_step"] = np.int64(step)
    if target_space is not None:
      moments = np.zeros((32, hp["hidden_size"]), np.float32)
      moments[target_space] = rng.random(hp["hidden_size"]) + 0.01
      for slot in ("Adam", "Adam_1"):
        tensors[f"training/transformer/body/target_space_embedding/kernel/{slot}"] = moments
      tensors["training/beta1_power"] = np.float32(0.9 ** step)
    tensors.update(extra or {})
    save_checkpoint(os.path.join(path, f"model.ckpt-{step}"), tensors)
    written[step] = model
  names = [f"model.ckpt-{s}" for s in steps]
  with open(os.path.join(path, "checkpoint"), "w") as f:
    f.write(f'model_checkpoint_path: "{names[-1]}"\n')
    f.write("".join(f'all_model_checkpoint_paths: "{n}"\n' for n in names))
  return written
