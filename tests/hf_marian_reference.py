"""Hugging Face's MarianMTModel in float64 NumPy, written from transformers' source
(`models/marian/modeling_marian.py`, 4.57) for the import tests. It shares no code with
t2t_keras, reads PyTorch's parameter names and works in vocab.json's ids (the
target side in target_vocab.json's, where the vocabularies are separate).

    sd = {name: float64 array}          # the state dict (tied copies may be absent)
    logits = teacher_forced_logits(sd, config, src_ids, tgt_ids)   # [T, V]
    out = greedy(sd, config, src_ids, max_new_tokens)               # ids, ending eos

What it follows, each from the class named:
  * MarianEncoder / MarianDecoder.forward: `embed_tokens(ids) * embed_scale`
    (sqrt(d_model) with scale_embedding), plus `embed_positions`; no LayerNorm on the
    embeddings and none after the last layer;
  * MarianSinusoidalPositionalEmbedding._init_weight: position_enc[p, j] =
    p / 10000^(2 (j // 2) / d); the first d/2 columns sin(position_enc[:, 0::2]), the
    rest cos(position_enc[:, 1::2]); positions from 0 (past_key_values_length) on both
    sides;
  * MarianAttention + eager_attention_forward: q, k, v = Linear (weight [out, in],
    bias), heads as contiguous blocks of head_dim, softmax(q k^T * head_dim^-0.5 +
    mask) v, then out_proj;
  * MarianEncoderLayer / MarianDecoderLayer: post-norm, h = LayerNorm(h + sublayer(h))
    for self-attention, (decoder) encoder attention, and fc2(act(fc1 h)); nn.LayerNorm
    with eps 1e-5 and the biased variance; act = ACT2FN[activation_function] (swish =
    nn.SiLU, x sigmoid(x); relu);
  * MarianModel.__init__: one table (model.shared) for both stacks, or, with
    share_encoder_decoder_embeddings false (separate vocabularies), the encoder's
    (encoder.embed_tokens) and the decoder's (decoder.embed_tokens), each in its own
    vocabulary's ids;
  * MarianMTModel.forward: lm_logits = lm_head(h) + final_logits_bias, lm_head tied to
    the decoder's table (`_tied_weights_keys`) unless tie_word_embeddings is false;
  * generation (generation_config.json): the decoder starts from
    decoder_start_token_id (<pad>), bad_words_ids bans <pad>, greedy stops at eos.
"""

import numpy as np

EPS = 1e-5


def sinusoids(n_pos, dim):
  position_enc = np.array([[pos / np.power(10000, 2 * (j // 2) / dim) for j in range(dim)]
                           for pos in range(n_pos)])
  out = np.empty((n_pos, dim))
  out[:, :dim // 2] = np.sin(position_enc[:, 0::2])
  out[:, dim // 2:] = np.cos(position_enc[:, 1::2])
  return out


def layer_norm(x, sd, name):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + EPS) * sd[f"{name}.weight"] + sd[f"{name}.bias"]


def linear(x, sd, name):
  return x @ sd[f"{name}.weight"].T + sd[f"{name}.bias"]


def attention(sd, name, hidden, memory, mask, heads):
  """hidden [T, d], memory [S, d], mask [T, S] of 0 / -inf-like -> [T, d]."""
  q, k, v = (linear(x, sd, f"{name}.{p}_proj") for x, p in
             ((hidden, "q"), (memory, "k"), (memory, "v")))
  head_dim = q.shape[1] // heads
  out = []
  for h in range(heads):
    cols = slice(h * head_dim, (h + 1) * head_dim)
    z = q[:, cols] @ k[:, cols].T * head_dim ** -0.5 + mask
    w = np.exp(z - z.max(-1, keepdims=True))
    out.append((w / w.sum(-1, keepdims=True)) @ v[:, cols])
  return linear(np.concatenate(out, axis=1), sd, f"{name}.out_proj")


def activation(h, name):
  return h / (1.0 + np.exp(-h)) if name in ("swish", "silu") else np.maximum(h, 0.0)


def _table(sd, side):
  """The `side` ("encoder" or "decoder") stack's embedding table."""
  for name in ("model.shared.weight", f"model.{side}.embed_tokens.weight"):
    if name in sd:
      return sd[name]
  raise KeyError(f"no {side} embedding table")


def _embed(sd, config, ids, side):
  d = config["d_model"]
  scale = np.sqrt(d) if config.get("scale_embedding") else 1.0
  return _table(sd, side)[ids] * scale + sinusoids(len(ids), d)


def _ffn(sd, config, prefix, h):
  out = linear(activation(linear(h, sd, f"{prefix}.fc1"), config["activation_function"]),
               sd, f"{prefix}.fc2")
  return layer_norm(h + out, sd, f"{prefix}.final_layer_norm")


def encode(sd, config, src):
  """src: ids ending in </s> -> memory [S, d]."""
  h, heads = _embed(sd, config, src, "encoder"), config["encoder_attention_heads"]
  none = np.zeros((len(src), len(src)))
  for i in range(config["encoder_layers"]):
    p = f"model.encoder.layers.{i}"
    h = layer_norm(h + attention(sd, f"{p}.self_attn", h, h, none, heads), sd,
                   f"{p}.self_attn_layer_norm")
    h = _ffn(sd, config, p, h)
  return h


def decoder_logits(sd, config, memory, decoder_ids):
  """decoder_ids: the decoder's inputs (decoder_start_token_id first) -> logits [T, V]."""
  h, heads = _embed(sd, config, decoder_ids, "decoder"), config["decoder_attention_heads"]
  t = len(decoder_ids)
  causal = np.where(np.tril(np.ones((t, t))) > 0, 0.0, np.finfo(np.float64).min)
  context = np.zeros((t, len(memory)))
  for i in range(config["decoder_layers"]):
    p = f"model.decoder.layers.{i}"
    h = layer_norm(h + attention(sd, f"{p}.self_attn", h, h, causal, heads), sd,
                   f"{p}.self_attn_layer_norm")
    h = layer_norm(h + attention(sd, f"{p}.encoder_attn", h, memory, context, heads), sd,
                   f"{p}.encoder_attn_layer_norm")
    h = _ffn(sd, config, p, h)
  output = (_table(sd, "decoder") if config.get("tie_word_embeddings", True)
            else sd["lm_head.weight"])
  return h @ output.T + sd["final_logits_bias"].reshape(-1)


def teacher_forced_logits(sd, config, src, tgt):
  """Logits [len(tgt), V] of each target id given those before it (shift_tokens_right)."""
  start = [config["decoder_start_token_id"]]
  return decoder_logits(sd, config, encode(sd, config, src), start + list(tgt[:-1]))


def greedy(sd, config, src, max_new_tokens):
  """generate(num_beams=1): argmax with <pad> banned, up to eos or max_new_tokens."""
  memory, out = encode(sd, config, src), []
  while len(out) < max_new_tokens:
    logits = decoder_logits(sd, config, memory, [config["decoder_start_token_id"]] + out)[-1]
    logits[config["pad_token_id"]] = -np.inf
    out.append(int(np.argmax(logits)))
    if out[-1] == config["eos_token_id"]:
      break
  return out
