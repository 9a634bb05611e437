"""Small random OPUS-MT models in Hugging Face's layout, for the import tests.

  model = write_hf_dir(directory, seed=1, weights="safetensors")

A directory holds what a `Helsinki-NLP/opus-mt-*` repository serves: config.json (with
the BART-era keys older conversions still carry), generation_config.json,
tokenizer_config.json, vocab.json (Marian's joint vocabulary with `<pad>` appended as its
last id, as `convert_marian_to_pytorch.py` does; two target-language labels, `>>fra<<`
and `>>deu<<`, among its pieces), source.spm / target.spm
(`marian_fixture`'s sentencepiece models) and the weights: model.safetensors (float32,
float16 as the hub's tc-big repositories, or bfloat16), or tf_model.h5 in the layout
transformers 4.57's `TFMarianMTModel.save_pretrained` writes (Keras 2 weights: a
`layer_names` attribute, groups `model` and `final_logits_bias`, each with its
`weight_names`; TF names, kernels [in, out]; the sinusoid tables saved).

The weights are random, scaled as `marian_fixture`'s (`sharpness` on the queries and
keys; </s>'s logit bias raised by `eos_bias`: at sharpness 3 the default 5, not
marian_fixture's 3, for some of 8 greedy outputs to end within 20 steps), under
PyTorch's names; `<pad>`'s embedding row and logit bias are 0.

`separate_vocabs=True` writes a model converted from a `tied-embeddings-src: false`
Marian model, as `convert_marian_to_pytorch.py` does: vocab.json from the source side's
pieces (and the labels), target_vocab.json from the target side's, both filled to one
size and each with `<pad>` appended (the same last id); tokenizer_config.json's
separate_vocabs true; config.json's share_encoder_decoder_embeddings false; the weights'
model.encoder.embed_tokens.weight and model.decoder.embed_tokens.weight (no
model.shared.weight, which MarianModel drops), lm_head tied to the decoder's.
"""

import json
import os

import h5py
import ml_dtypes
import numpy as np
from safetensors.numpy import save_file

import hf_marian_reference as reference
import marian_fixture

DIM, HEADS, FFN, DEPTH = 16, 2, 32, 2


def model_config(vocab, activation="swish", tie_word_embeddings=True, separate_vocabs=False):
  """config.json as the hub's OPUS-MT conversions write it, at the fixture's size."""
  pad = vocab["<pad>"]
  config = {
      "_name_or_path": "fixture/opus-mt-en-de", "activation_dropout": 0.0,
      "activation_function": activation, "add_bias_logits": False,
      "add_final_layer_norm": False, "architectures": ["MarianMTModel"],
      "attention_dropout": 0.0, "bad_words_ids": [[pad]], "bos_token_id": 0,
      "classif_dropout": 0.0, "classifier_dropout": 0.0, "d_model": DIM,
      "decoder_attention_heads": HEADS, "decoder_ffn_dim": FFN, "decoder_layerdrop": 0.0,
      "decoder_layers": DEPTH, "decoder_start_token_id": pad, "decoder_vocab_size": len(vocab),
      "dropout": 0.1, "encoder_attention_heads": HEADS, "encoder_ffn_dim": FFN,
      "encoder_layerdrop": 0.0, "encoder_layers": DEPTH, "eos_token_id": vocab["</s>"],
      "forced_eos_token_id": vocab["</s>"], "init_std": 0.02, "is_encoder_decoder": True,
      "max_length": 512, "max_position_embeddings": 512, "model_type": "marian",
      "normalize_before": False, "normalize_embedding": False, "num_beams": 4,
      "num_hidden_layers": DEPTH, "pad_token_id": pad, "scale_embedding": True,
      "share_encoder_decoder_embeddings": not separate_vocabs,
      "static_position_embeddings": True,
      "transformers_version": "4.57.1", "use_cache": True, "vocab_size": len(vocab),
  }
  if not tie_word_embeddings:
    config["tie_word_embeddings"] = False
  return config


def random_layers(config, seed, sharpness=3):
  """(sd, normal, norm): sd {PyTorch name: float32 array} holding every encoder and decoder
  layer of BART's naming, which Marian and M2M-100 share (Linear weights [out, in],
  LayerNorms [d]; queries and keys scaled by `sharpness`); `normal(shape, std)` draws on
  from the same generator, `norm(name)` adds a LayerNorm."""
  rng = np.random.RandomState(seed)
  d, f = config["d_model"], config["encoder_ffn_dim"]
  normal = lambda shape, std: rng.normal(0.0, std, shape).astype(np.float32)  # noqa: E731
  sd = {}

  def norm(name):
    sd[f"{name}.weight"], sd[f"{name}.bias"] = 1.0 + normal(d, 0.1), normal(d, 0.1)

  def attention(name):
    for p, scale in (("q", sharpness), ("k", sharpness), ("v", 1), ("out", 3)):
      sd[f"{name}.{p}_proj.weight"] = normal((d, d), scale * d ** -0.5)
      sd[f"{name}.{p}_proj.bias"] = normal(d, 0.1)
    norm(f"{name}_layer_norm")

  def ffn(prefix):
    sd[f"{prefix}.fc1.weight"], sd[f"{prefix}.fc1.bias"] = normal((f, d), d ** -0.5), normal(f, 0.1)
    sd[f"{prefix}.fc2.weight"] = normal((d, f), 3 * f ** -0.5)
    sd[f"{prefix}.fc2.bias"] = normal(d, 0.1)
    norm(f"{prefix}.final_layer_norm")

  for i in range(config["encoder_layers"]):
    attention(f"model.encoder.layers.{i}.self_attn")
    ffn(f"model.encoder.layers.{i}")
  for i in range(config["decoder_layers"]):
    attention(f"model.decoder.layers.{i}.self_attn")
    attention(f"model.decoder.layers.{i}.encoder_attn")
    ffn(f"model.decoder.layers.{i}")
  return sd, normal, norm


def random_state_dict(config, seed, sharpness=3, eos_bias=5.0):
  """{PyTorch name: float32 array}: Linear weights [out, in], LayerNorms [d]."""
  sd, normal, _ = random_layers(config, seed, sharpness)
  d, v = config["d_model"], config["vocab_size"]
  pad, eos = config["pad_token_id"], config["eos_token_id"]
  tables = (["model.shared.weight"] if config["share_encoder_decoder_embeddings"] else
            ["model.encoder.embed_tokens.weight", "model.decoder.embed_tokens.weight"])
  for name in tables:
    sd[name] = normal((v, d), 0.5)
    sd[name][pad] = 0.0
  if not config.get("tie_word_embeddings", True):
    sd["lm_head.weight"] = normal((v, d), 0.5)
  bias = normal((1, v), 0.3)
  bias[0, eos] += eos_bias
  bias[0, pad] = 0.0
  sd["final_logits_bias"] = bias
  return sd


def tf_name(name):
  """PyTorch's name -> the TF name TFMarianMTModel saves it under, and whether the value
  is transposed ([in, out] kernels)."""
  if name == "final_logits_bias":
    return "final_logits_bias/final_logits_bias:0", False
  if name == "model.shared.weight":
    return "model/model.shared/model.shared/embeddings:0", False
  parts = name.split(".")  # model.encoder.layers.0.self_attn.q_proj.weight
  leaf = parts[-1]
  layer_norm = parts[-2].endswith("layer_norm")
  leaf = {("weight", True): "gamma", ("bias", True): "beta", ("weight", False): "kernel",
          ("bias", False): "bias"}[(leaf, layer_norm)]
  scope = "/".join([parts[1], ".".join(parts[2:4])] + parts[4:-1])
  return f"model/tf_marian_mt_model/model/{scope}/{leaf}:0", leaf == "kernel"


def write_h5(path, sd, config):
  """tf_model.h5 as Keras 2's save_weights writes it for TFMarianMTModel."""
  tensors = dict(sd)
  positions = reference.sinusoids(config["max_position_embeddings"], config["d_model"])
  for side in ("encoder", "decoder"):
    tensors[f"model.{side}.embed_positions.weight"] = positions.astype(np.float32)
  with h5py.File(path, "w") as f:
    f.attrs["backend"], f.attrs["keras_version"] = "tensorflow", "2.21.0"
    f.attrs["layer_names"] = np.array([b"model", b"final_logits_bias"], dtype=object)
    names = {"model": [], "final_logits_bias": []}
    for name, value in tensors.items():
      if name.endswith("embed_positions.weight"):
        side = name.split(".")[1]
        key = f"model/tf_marian_mt_model/model/{side}/embed_positions/embeddings:0"
        transpose = False
      else:
        key, transpose = tf_name(name)
      f.create_dataset(key, data=value.T if transpose else value)
      group, weight_name = key.split("/", 1)
      names[group].append(weight_name.encode())
    for group, weight_names in names.items():
      f[group].attrs["weight_names"] = np.array(weight_names, dtype=object)


def separate_pieces(source, target, labels, sorted_layout):
  """(vocab.json's pieces, target_vocab.json's) of separate vocabularies: each side's own
  (the labels on the source side), filled to one size with pieces no text gives."""
  sides = [marian_fixture.vocab_pieces(source, source, sorted_layout) + labels,
           marian_fixture.vocab_pieces(target, target, sorted_layout)]
  size = max(map(len, sides))
  return [side + [f"<filler{i}>" for i in range(size - len(side))] + ["<pad>"]
          for side in sides]


def write_hf_dir(directory, seed=1, weights="safetensors", activation="swish", sharpness=3,
                 tie_word_embeddings=True, eos_bias=5.0, sorted_layout=False,
                 separate_vocabs=False):
  """Writes an OPUS-MT repository of a random model; returns {"config", "sd" (float64,
  the values as stored), "vocab" (piece -> id; the source side's), "target_vocab" (the
  target side's: "vocab" unless separate), "dir"}. `sorted_layout`: the vocabularies
  sorted, as newer (tc-big) OPUS-MT models have them (</s> and <unk> not 0 and 1)."""
  os.makedirs(directory, exist_ok=True)
  english, german = marian_fixture.corpus()
  source = marian_fixture.train_spm(english, 60)
  target = marian_fixture.train_spm(german, 80)
  labels = [">>fra<<", ">>deu<<"]  # multilingual OPUS-MT's target-language labels
  if separate_vocabs:
    pieces, target_pieces = separate_pieces(source, target, labels, sorted_layout)
  else:
    pieces = marian_fixture.vocab_pieces(source, target, sorted_layout) + labels + ["<pad>"]
    target_pieces = pieces
  vocab = {p: i for i, p in enumerate(pieces)}
  target_vocab = {p: i for i, p in enumerate(target_pieces)}
  config = model_config(target_vocab, activation, tie_word_embeddings, separate_vocabs)
  sd = random_state_dict(config, seed, sharpness, eos_bias)
  if weights in ("fp16", "bf16"):
    sd = {k: v.astype(np.float16 if weights == "fp16" else ml_dtypes.bfloat16)
          for k, v in sd.items()}
  if weights == "h5":
    write_h5(os.path.join(directory, "tf_model.h5"), sd, config)
  else:
    save_file(sd, os.path.join(directory, "model.safetensors"), metadata={"format": "pt"})
  files = {"config.json": config, "vocab.json": vocab,
           "generation_config.json": {"bad_words_ids": [[target_vocab["<pad>"]]],
                                      "decoder_start_token_id": target_vocab["<pad>"],
                                      "eos_token_id": target_vocab["</s>"], "max_length": 512,
                                      "num_beams": 4, "pad_token_id": target_vocab["<pad>"]},
           "tokenizer_config.json": {"source_lang": "en", "target_lang": "de",
                                     "separate_vocabs": separate_vocabs,
                                     "model_max_length": 512,
                                     "tokenizer_class": "MarianTokenizer"}}
  if separate_vocabs:
    files["target_vocab.json"] = target_vocab
  for name, value in files.items():
    with open(os.path.join(directory, name), "w", encoding="utf-8") as f:
      json.dump(value, f, ensure_ascii=False, indent=2)
  for name, proto in (("source.spm", source), ("target.spm", target)):
    with open(os.path.join(directory, name), "wb") as f:
      f.write(proto)
  return {"config": config, "vocab": vocab, "target_vocab": target_vocab, "dir": directory,
          "sd": {k: v.astype(np.float64) for k, v in sd.items()}}
