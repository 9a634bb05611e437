"""Hugging Face's M2M100ForConditionalGeneration (M2M-100, NLLB-200 dense) in float64 NumPy,
written from transformers' source (`models/m2m_100/modeling_m2m_100.py`, 4.57) for the
import tests. It shares no code with t2t_keras, reads PyTorch's parameter names and works in
the model's own ids (fairseq's: <s> 0, <pad> 1, </s> 2, <unk> 3, ...).

    logits = teacher_forced_logits(sd, config, src_ids, tgt_ids)   # [T, V]
    out = greedy(sd, config, src_ids, forced_bos, max_new_tokens)

What it follows, each from the function or class named:
  * M2M100ScaledWordEmbedding: embed_tokens(ids) * sqrt(d_model) (scale_embedding);
  * M2M100SinusoidalPositionalEmbedding.get_embedding: half = d // 2, f_k =
    exp(-k log(10000) / (half - 1)), [sin(p f_k) | cos(p f_k)], row padding_idx zeroed;
    create_position_ids_from_input_ids: the k-th non-pad token (k from 1) at position
    padding_idx + k (2, 3, ...), pads at padding_idx; the decoder's positions the same,
    counting the cached steps;
  * M2M100EncoderLayer / M2M100DecoderLayer: pre-norm, h + sublayer(LayerNorm(h)) for
    self-attention, (decoder) encoder attention, fc2(act(fc1 .)); each stack ends with its
    `layer_norm`; nn.LayerNorm eps 1e-5; act = ACT2FN[activation_function] (relu);
  * M2M100Attention: q, k, v, out projections with biases, heads as contiguous blocks,
    softmax(q k^T * head_dim^-0.5 + mask) v;
  * M2M100ForConditionalGeneration.forward: lm_logits = lm_head(h), no bias; lm_head tied
    to model.shared; shift_tokens_right: decoder_start_token_id (</s>) then the labels;
  * generation: the decoder starts from decoder_start_token_id, forced_bos_token_id (the
    target language) is forced at step 1 (ForcedBOSTokenLogitsProcessor), greedy until eos.
"""

import numpy as np

# nn.LayerNorm (eps 1e-5), nn.Linear and the attention are BART's in both families
# ("Copied from transformers.models.bart" in both files): the Marian reference's.
from hf_marian_reference import attention, layer_norm, linear  # noqa: F401


def sinusoids(n_pos, dim, padding_idx):
  half = dim // 2
  freq = np.exp(np.arange(half) * -(np.log(10000.0) / (half - 1)))
  angles = np.arange(n_pos)[:, None] * freq[None]
  table = np.concatenate([np.sin(angles), np.cos(angles)], axis=1)
  if dim % 2:
    table = np.concatenate([table, np.zeros((n_pos, 1))], axis=1)
  table[padding_idx] = 0.0
  return table


def positions(ids, padding_idx, past=0):
  mask = (np.asarray(ids) != padding_idx).astype(np.int64)
  return (np.cumsum(mask) + past) * mask + padding_idx


def _embed(sd, config, ids):
  d, pad = config["d_model"], config["pad_token_id"]
  scale = np.sqrt(d) if config.get("scale_embedding", True) else 1.0
  pos = positions(ids, pad)
  table = sinusoids(int(pos.max()) + 1, d, pad)
  return sd["model.shared.weight"][ids] * scale + table[pos]


def _ffn(sd, prefix, h):
  x = layer_norm(h, sd, f"{prefix}.final_layer_norm")
  return h + linear(np.maximum(linear(x, sd, f"{prefix}.fc1"), 0.0), sd, f"{prefix}.fc2")


def encode(sd, config, src):
  h, heads = _embed(sd, config, src), config["encoder_attention_heads"]
  none = np.zeros((len(src), len(src)))
  for i in range(config["encoder_layers"]):
    p = f"model.encoder.layers.{i}"
    x = layer_norm(h, sd, f"{p}.self_attn_layer_norm")
    h = h + attention(sd, f"{p}.self_attn", x, x, none, heads)
    h = _ffn(sd, p, h)
  return layer_norm(h, sd, "model.encoder.layer_norm")


def decoder_logits(sd, config, memory, decoder_ids):
  h, heads = _embed(sd, config, decoder_ids), config["decoder_attention_heads"]
  t = len(decoder_ids)
  causal = np.where(np.tril(np.ones((t, t))) > 0, 0.0, np.finfo(np.float64).min)
  context = np.zeros((t, len(memory)))
  for i in range(config["decoder_layers"]):
    p = f"model.decoder.layers.{i}"
    x = layer_norm(h, sd, f"{p}.self_attn_layer_norm")
    h = h + attention(sd, f"{p}.self_attn", x, x, causal, heads)
    x = layer_norm(h, sd, f"{p}.encoder_attn_layer_norm")
    h = h + attention(sd, f"{p}.encoder_attn", x, memory, context, heads)
    h = _ffn(sd, p, h)
  h = layer_norm(h, sd, "model.decoder.layer_norm")
  output = sd.get("lm_head.weight", sd["model.shared.weight"])
  return h @ output.T


def teacher_forced_logits(sd, config, src, tgt):
  """tgt: labels ([tgt_lang] words </s>) -> logits [len(tgt), V]."""
  start = [config["decoder_start_token_id"]]
  return decoder_logits(sd, config, encode(sd, config, src), start + list(tgt[:-1]))


def greedy(sd, config, src, forced_bos, max_new_tokens):
  memory, out = encode(sd, config, src), [forced_bos]
  while len(out) < max_new_tokens:
    logits = decoder_logits(sd, config, memory, [config["decoder_start_token_id"]] + out)[-1]
    out.append(int(np.argmax(logits)))
    if out[-1] == config["eos_token_id"]:
      break
  return out
