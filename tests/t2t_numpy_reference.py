"""tensor2tensor's `transformer` forward pass in float64 NumPy, from a t2t TF1 checkpoint's
variables: a reference written from tensor2tensor's own source (read at v1.4.2, Jan 2018,
and at v1.15.7), sharing no code with t2t_keras and importing neither it nor TensorFlow.

    space = target_space_id("translate_ende_wmt8k", "1.4")  # 8; 0 with "1.15"
    logits = forward_logits(variables, hparams, inputs, targets, space, "1.4")
    # variables: checkpoint name -> array (e.g. "transformer/body/encoder/layer_0/ffn/conv1/kernel");
    # hparams: the dict of the run's hparams.json; inputs end with EOS (1); logits [len(targets), vocab]

Translation (inputs -> targets), batch of 1, inference (every dropout is off: t2t_model.py
T2TModel.set_mode zeroes each hparam ending in "dropout" outside TRAIN, both versions).
`version` picks the t2t code: "1.4" (alias "2018-01": v1.4.2; diffs from v1.4.1 to v1.5.1
change none of these numbers) or "1.15" (v1.15.7). Where they differ is said at the place. Citations are
file (version) function. tests/t2t_conventions.md lists the facts.

Checked (throwaway script, not kept) against t2t's own graph code of both tags, run in
TF float32 with only tf.layers.dense shimmed, on the shared transformer_test_ckpt and on
random post-norm / "nn" / unshared / shared_embedding / odd-width variants: logits agree
to 2e-6.
"""

import math
import re

import numpy as np

EOS_ID = 1  # data_generators/text_encoder.py (both): RESERVED_TOKENS = [<pad>, <EOS>]
_VERSIONS = {"1.4": "1.4", "2018-01": "1.4", "1.15": "1.15"}
# t2t_model.py (both) estimator_spec_predict/infer + utils/decoding.py decode_hparams:
# decode length = input length + extra_length (50 at 1.4, 100 at 1.15).
EXTRA_LENGTH = {"1.4": 50, "1.15": 100}

# data_generators/problem.py (both) class SpaceID; identical at v1.4.2 and v1.15.7.
SPACE_ID = dict(GENERIC=0, IMAGE_LABEL=1, EN_CHR=2, EN_TOK=3, EN_BPE_TOK=4, FR_CHR=5,
                FR_TOK=6, DE_CHR=7, DE_TOK=8, DE_BPE_TOK=9, CS_TOK=21, CS_CHR=22)
# translate_{ende,enfr,encs}.py (v1.4.2): each Problem's target_space_id property.
_TARGET_SPACE_1_4 = {
    "translate_ende_wmt_bpe32k": "DE_BPE_TOK", "translate_ende_wmt8k": "DE_TOK",
    "translate_ende_wmt32k": "DE_TOK", "translate_ende_wmt32k_packed": "DE_TOK",
    "translate_ende_wmt_characters": "DE_CHR",
    "translate_enfr_wmt_small8k": "FR_TOK", "translate_enfr_wmt_small32k": "FR_TOK",
    "translate_enfr_wmt8k": "FR_TOK", "translate_enfr_wmt32k": "FR_TOK",
    "translate_enfr_wmt32k_packed": "FR_TOK", "translate_enfr_wmt_small_characters": "FR_CHR",
    "translate_enfr_wmt_characters": "FR_CHR",
    "translate_encs_wmt32k": "CS_TOK", "translate_encs_wmt_characters": "CS_CHR"}


def _version(version):
  if version not in _VERSIONS:
    raise ValueError("version must be one of %s, not %r" % (sorted(_VERSIONS), version))
  return _VERSIONS[version]


def target_space_id(problem_name, version="1.15"):
  """The target_space_id t2t feeds the model for a WMT en-de/en-fr/en-cs problem.

  v1.4.2: translate_*.py give EN_* -> DE/FR/CS_* ids (DE_TOK = 8 for translate_ende_wmt8k).
  v1.15.7: these problems are text_problems.Text2TextProblem subclasses that set no space
  id (since v1.5.2, commit 765d33bb "Base classes for text problems"), so problem.py
  _default_hparams' SpaceID.GENERIC = 0 is fed. A model trained with 1.4 learnt row 8 (etc.)
  of target_space_embedding; run it with the 1.4 id.
  """
  v = _version(version)
  if problem_name not in _TARGET_SPACE_1_4:
    raise ValueError("unknown problem %r; known: %s" % (problem_name, sorted(_TARGET_SPACE_1_4)))
  return SPACE_ID[_TARGET_SPACE_1_4[problem_name]] if v == "1.4" else SPACE_ID["GENERIC"]


def _hp(hparams, key, default=KeyError):
  if key in hparams:
    return hparams[key]
  if default is KeyError:
    raise KeyError("hparams lacks %r" % key)
  return default  # a key only 1.15 has; its default leaves the 1.4 computation unchanged


def _check(hp):
  """Raise for settings whose computation this reference does not implement."""
  unsupported = [
      ("ffn_layer", ("dense_relu_dense", "conv_hidden_relu"), None),  # transformer_ffn_layer
      ("pos", ("timing",), None),
      ("self_attention_type", ("dot_product",), None),
      ("max_relative_position", (0,), 0),
      ("norm_type", ("layer", "none"), None),
      ("proximity_bias", (False, 0), False),
      ("prepend_mode", ("none",), "none"),
      ("symbol_modality_skip_top", (False, 0), False),
      ("causal_decoder_self_attention", (True, 1), True),  # 1.15 only
      ("unidirectional_encoder", (False, 0), False),  # 1.15 only
      ("attention_variables_3d", (False, 0, None), False),  # 1.15 only
      ("hard_attention_k", (0,), 0), ("num_area_layers", (0,), 0),  # 1.15 only
      ("activation_dtype", ("float32",), "float32"), ("weight_dtype", ("float32",), "float32"),
  ]
  for key, allowed, default in unsupported:
    value = _hp(hp, key, default) if default is not None else _hp(hp, key)
    if value not in allowed:
      raise NotImplementedError(
          "t2t reference: %s=%r is not implemented (only %s)" % (key, value, allowed))
  for key in ("layer_preprocess_sequence", "layer_postprocess_sequence"):
    seq = _hp(hp, key)
    if seq != "none" and set(seq) - set("and"):
      raise NotImplementedError("t2t reference: %s=%r (letters a, n, d only)" % (key, seq))
    if key == "layer_preprocess_sequence" and "a" in seq and seq != "none":
      raise ValueError("t2t layer_preprocess asserts no 'a' in the preprocess sequence")


def _modality_weights(V, hp):
  """Symbol-modality matrices [vocab, hidden] for input embedding, target embedding, softmax.

  modalities.py SymbolModality._get_weights (1.4) / get_weights (1.15): shard i of
  symbol_modality_num_shards has vocab//n + (1 if i < vocab % n else 0) rows, variable
  "weights_%d" % i; the shards are concatenated along rows in index order (0, 1, ..., 10,
  11, not name order). Scope transformer/symbol_modality_{vocab}_{hidden}/ then
  "shared" (all three if shared_embedding_and_softmax_weights; 1.15 also "shared" for both
  embeddings if shared_embedding), else "input_emb", "target_emb", "softmax". T2TModel
  __init__ (both) unsets the sharing when input and target vocab sizes differ.
  """
  pat = re.compile(r"^(transformer/symbol_modality_\d+_\d+)/"
                   r"(shared|input_emb|target_emb|softmax)/weights_0$")
  found = {}  # kind -> [scope]
  for name in V:
    m = pat.match(name)
    if m:
      found.setdefault(m.group(2), []).append(m.group(1))

  def weights(scope, kind):
    vocab, n = int(scope.rsplit("_", 2)[1]), int(_hp(hp, "symbol_modality_num_shards"))
    shards = []
    for i in range(n):
      w = np.asarray(V["%s/%s/weights_%d" % (scope, kind, i)], np.float64)
      if w.shape != (vocab // n + (1 if i < vocab % n else 0), hp["hidden_size"]):
        raise ValueError("%s/%s/weights_%d has shape %s" % (scope, kind, i, w.shape))
      shards.append(w)
    if "%s/%s/weights_%d" % (scope, kind, n) in V:
      raise ValueError("more than symbol_modality_num_shards=%d shards in %s/%s" % (n, scope, kind))
    return np.concatenate(shards, 0)

  if "softmax" not in found:
    if not _hp(hp, "shared_embedding_and_softmax_weights") or len(found.get("shared", [])) != 1:
      raise ValueError("expected one .../shared/ modality scope, found %s" % found)
    w = weights(found["shared"][0], "shared")
    return w, w, w
  if len(found["softmax"]) != 1:
    raise ValueError("expected one .../softmax/ scope, found %s" % found)
  tgt_scope = found["softmax"][0]
  in_scope = found.get("input_emb", [None])[0]
  in_w = weights(in_scope, "input_emb") if in_scope else None
  if in_w is None:  # 1.15 shared_embedding: "shared" in the inputs' scope (may equal targets')
    others = [s for s in found.get("shared", []) if s != tgt_scope]
    in_w = weights(others[0] if others else tgt_scope, "shared")
  tgt_w = weights(tgt_scope, "target_emb" if "target_emb" in found else "shared")
  if _hp(hp, "shared_embedding_and_softmax_weights") and in_w.shape == tgt_w.shape:
    raise ValueError("hparams share embeddings and softmax, the checkpoint has a softmax scope")
  return in_w, tgt_w, weights(tgt_scope, "softmax")


def _embed(table, ids, hp):
  """modalities.py SymbolModality.bottom_simple (1.4) / _symbol_bottom_simple (1.15): gather,
  times hidden_size**0.5 if multiply_embedding_mode == "sqrt_depth", id 0 -> zero vector."""
  x = table[np.asarray(ids, np.int64)]
  if _hp(hp, "multiply_embedding_mode") == "sqrt_depth":
    x = x * hp["hidden_size"] ** 0.5
  return x * (np.asarray(ids) != 0)[:, None]


def _timing_signal(length, channels, v, min_timescale=1.0, max_timescale=1.0e4):
  """common_attention.py get_timing_signal_1d: sin half then cos half, zero column if odd.
  log increment denominator: num_timescales - 1 (1.4), max(num_timescales - 1, 1) (1.15)."""
  num_timescales = channels // 2
  if v == "1.4" and num_timescales < 2:
    raise ValueError("t2t 1.4 divides by num_timescales - 1 = 0 (NaN signal) for hidden_size < 4")
  increment = math.log(max_timescale / min_timescale) / max(num_timescales - 1, 1)
  inv_timescales = min_timescale * np.exp(np.arange(num_timescales) * -increment)
  scaled = np.arange(length, dtype=np.float64)[:, None] * inv_timescales[None, :]
  signal = np.concatenate([np.sin(scaled), np.cos(scaled)], 1)
  return np.pad(signal, [[0, 0], [0, channels % 2]])


def _prepostprocess(V, scope, previous, x, sequence, hp):
  """common_layers.py layer_prepostprocess (both): a = add previous, n = layer norm,
  d = dropout (identity at inference). The k-th 'n' of one call reads layer_norm (k = 0),
  layer_norm_1, ... (TF default-name uniquing); layer_norm_compute: (x - mean) *
  rsqrt(var + norm_epsilon) * scale + bias over the last axis."""
  if sequence == "none":
    return x
  norms = 0
  for c in sequence:
    if c == "a":
      x = x + previous
    elif c == "n" and _hp(hp, "norm_type") == "layer":
      ln = scope + "/layer_norm" + ("_%d" % norms if norms else "")
      norms += 1
      mean = x.mean(-1, keepdims=True)
      var = ((x - mean) ** 2).mean(-1, keepdims=True)
      x = (x - mean) / np.sqrt(var + _hp(hp, "norm_epsilon"))
      x = x * _w(V, ln + "/layer_norm_scale") + _w(V, ln + "/layer_norm_bias")
  return x


def _pre(V, scope, x, hp):  # layer_preprocess: default_name "layer_prepostprocess"
  sequence = hp["layer_preprocess_sequence"]
  return _prepostprocess(V, scope + "/layer_prepostprocess", None, x, sequence, hp)


def _post(V, scope, x, y, hp):  # layer_postprocess: default_name "layer_postprocess"
  return _prepostprocess(V, scope + "/layer_postprocess", x, y, hp["layer_postprocess_sequence"], hp)


def _w(V, name):
  if name not in V:
    raise KeyError("checkpoint lacks variable %r" % name)
  return np.asarray(V[name], np.float64)


def _attention(V, scope, query_in, memory_in, bias, hp):
  """common_attention.py multihead_attention + compute_qkv + dot_product_attention (both):
  q, k, v dense without bias; split heads (channel c -> head c // depth); q *= depth_k**-0.5;
  softmax(q k^T + bias) v; combine heads; output_transform dense without bias."""
  s = scope + "/multihead_attention/"
  heads = hp["num_heads"]
  key_depth = hp["attention_key_channels"] or hp["hidden_size"]
  value_depth = hp["attention_value_channels"] or hp["hidden_size"]
  if key_depth % heads or value_depth % heads:
    raise ValueError("key/value depth %d/%d not divisible by num_heads %d"
                     % (key_depth, value_depth, heads))
  q = query_in @ _w(V, s + "q/kernel")
  k, v = memory_in @ _w(V, s + "k/kernel"), memory_in @ _w(V, s + "v/kernel")
  split = lambda t: t.reshape(t.shape[0], heads, -1).transpose(1, 0, 2)  # [heads, len, depth]
  q, k, v = split(q) * (key_depth // heads) ** -0.5, split(k), split(v)
  logits = q @ k.transpose(0, 2, 1) + bias
  weights = np.exp(logits - logits.max(-1, keepdims=True))
  weights /= weights.sum(-1, keepdims=True)
  out = (weights @ v).transpose(1, 0, 2).reshape(query_in.shape[0], value_depth)
  return out @ _w(V, s + "output_transform/kernel")


def _ffn(V, scope, x, hp, nonpadding=None):
  """common_layers.py dense_relu_dense (both): relu(x W1 + b1) W2 + b2, scopes ffn/conv1, conv2.
  transformer_ffn_layer's PadRemover (encoder only; use_pad_remover, and at 1.15 not under
  XLA) drops padded positions and scatters zeros back: the ffn output is 0 at encoder
  padding. Padded encoder positions are masked out of every attention, so logits do not
  depend on it."""
  s = scope + "/ffn/"
  h = np.maximum(x @ _w(V, s + "conv1/kernel") + _w(V, s + "conv1/bias"), 0.0)
  y = h @ _w(V, s + "conv2/kernel") + _w(V, s + "conv2/bias")
  return y if nonpadding is None else y * nonpadding[:, None]


def _encode(V, hp, emb, space_id, v):
  """transformer.py (1.4) / layers/transformer_layers.py (1.15) transformer_prepare_encoder
  then transformer_encoder: padding from all-zero embeddings (embedding_to_padding), bias
  padding * -1e9 on keys; + target_space_embedding row (kernel [32, hidden]); + timing."""
  padding = (np.abs(emb).sum(-1) == 0.0).astype(np.float64)
  bias = (padding * -1e9)[None, None, :]
  x = emb
  if _hp(hp, "use_target_space_embedding", True):  # 1.15 hparam; 1.4 always adds it
    x = x + _w(V, "transformer/body/target_space_embedding/kernel")[space_id]
  x = x + _timing_signal(len(x), hp["hidden_size"], v)
  nonpadding = 1.0 - padding if _hp(hp, "use_pad_remover") else None
  for i in range(hp["num_encoder_layers"] or hp["num_hidden_layers"]):
    layer = "transformer/body/encoder/layer_%d" % i
    y = _pre(V, layer + "/self_attention", x, hp)
    y = _attention(V, layer + "/self_attention", y, y, bias, hp)
    x = _post(V, layer + "/self_attention", x, y, hp)
    x = _post(V, layer + "/ffn", x, _ffn(V, layer, _pre(V, layer + "/ffn", x, hp), hp, nonpadding), hp)
  return _pre(V, "transformer/body/encoder", x, hp), bias


def _decode(V, hp, emb, encoder_out, encdec_bias, v):
  """transformer.py transformer_prepare_decoder (both): shift_right_3d (zero vector first),
  lower-triangle bias -1e9 (attention_bias_lower_triangle), + timing; transformer_decoder:
  self_attention, encdec_attention, ffn per layer, then layer_preprocess under decoder/."""
  x = np.concatenate([np.zeros_like(emb[:1]), emb[:-1]], 0)
  x = x + _timing_signal(len(x), hp["hidden_size"], v)
  length = len(x)
  causal = (-1e9 * (1.0 - np.tril(np.ones((length, length)))))[None]
  for i in range(hp["num_decoder_layers"] or hp["num_hidden_layers"]):
    layer = "transformer/body/decoder/layer_%d" % i
    y = _pre(V, layer + "/self_attention", x, hp)
    y = _attention(V, layer + "/self_attention", y, y, causal, hp)
    x = _post(V, layer + "/self_attention", x, y, hp)
    y = _pre(V, layer + "/encdec_attention", x, hp)
    x = _post(V, layer + "/encdec_attention", x,
              _attention(V, layer + "/encdec_attention", y, encoder_out, encdec_bias, hp), hp)
    x = _post(V, layer + "/ffn", x, _ffn(V, layer, _pre(V, layer + "/ffn", x, hp), hp), hp)
  return _pre(V, "transformer/body/decoder", x, hp)


def forward_logits(variables, hparams, inputs, targets, target_space_id, version="1.15"):
  """Logits [len(targets), vocab], float64: row t scores targets[t] given targets[:t] and
  inputs (source ids including t2t's trailing EOS 1). Top: modalities.py symbol top,
  body_output @ W^T, no bias."""
  v = _version(version)
  _check(hparams)
  if not 0 <= target_space_id < 32:
    raise ValueError("target_space_id must index the 32 target_space_embedding rows")
  if not len(inputs) or not len(targets):
    raise ValueError("inputs and targets must be non-empty")
  in_w, tgt_w, softmax_w = _modality_weights(variables, hparams)
  encoder_out, bias = _encode(variables, hparams, _embed(in_w, inputs, hparams), target_space_id, v)
  decoder_out = _decode(variables, hparams, _embed(tgt_w, targets, hparams), encoder_out, bias, v)
  return decoder_out @ softmax_w.T


def greedy(variables, hparams, inputs, target_space_id, max_length=None, version="1.15"):
  """t2t argmax decoding (transformer.py fast_decode, sampling_method "argmax": first
  maximal id): ids up to and including the first EOS, at most max_length ids (t2t's is
  len(inputs) + extra_length: 50 at 1.4, 100 at 1.15; None means that). 1.4 decodes all
  steps, 1.15 stops once EOS is hit: same ids up to EOS (decoding.py _save_until_eos then
  drops EOS and what follows before detokenizing; here EOS is kept)."""
  if max_length is None:
    max_length = len(inputs) + EXTRA_LENGTH[_version(version)]
  out = []
  while len(out) < max_length:
    # The last row never sees its own (placeholder) target: shift right + causal mask.
    logits = forward_logits(variables, hparams, inputs, out + [0], target_space_id, version)
    out.append(int(np.argmax(logits[-1])))
    if out[-1] == EOS_ID:
      break
  return out
