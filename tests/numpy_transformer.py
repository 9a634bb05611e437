"""The Transformer's forward pass in float64 NumPy, from a Keras model's variables: a
reference written from the paper's formulas, sharing no code with t2t_keras.

    logits, attention = forward(model, source_ids, target_ids)
    # logits float64 [tgt_len, vocab]; attention float64 [layers, heads, tgt_len, src_len]
    # (each decoder layer's encoder-decoder attention weights)

One sentence pair, no padding, no dropout; teacher forcing (the decoder reads 0, or the
hparams' decoder_start_id, then the targets shifted right). Post- or pre-norm, sinusoidal
or learned positions (from 0, or the hparams' position_offset), any d_k = d_v per head,
as the model's hparams say.
"""

import numpy as np


def _w(variable):
  return np.asarray(variable.numpy(), np.float64)


def _layer_norm(x, norm, epsilon):
  mean = x.mean(-1, keepdims=True)
  var = ((x - mean) ** 2).mean(-1, keepdims=True)
  return (x - mean) / np.sqrt(var + epsilon) * _w(norm.gamma) + _w(norm.beta)


def _softmax(z):
  z = z - z.max(-1, keepdims=True)
  e = np.exp(z)
  return e / e.sum(-1, keepdims=True)


def _positions(length, hidden_size, table=None, offset=0):
  """PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(...) (section 3.5), or rows
  of a learned table; positions from `offset` (fairseq's models count from 2)."""
  if table is not None:
    return _w(table)[offset:offset + length]
  pos = np.arange(offset, offset + length, dtype=np.float64)[:, None]
  angles = pos / np.power(10000.0, np.arange(0, hidden_size, 2) / hidden_size)[None]
  pe = np.zeros([length, hidden_size])
  pe[:, 0::2], pe[:, 1::2] = np.sin(angles), np.cos(angles)
  return pe


def _attention(layer, queries, keys_values, causal):
  """MultiHead(Q, K, V) (section 3.2.2) of [q_len, d] over [k_len, d]: (output, weights
  [heads, q_len, k_len])."""
  q = np.einsum("td,dhk->htk", queries, _w(layer.query_dense.kernel))
  k = np.einsum("td,dhk->htk", keys_values, _w(layer.key_dense.kernel))
  v = np.einsum("td,dhk->htk", keys_values, _w(layer.value_dense.kernel))
  logits = q @ k.transpose(0, 2, 1) / np.sqrt(q.shape[-1])
  if causal:
    logits = np.where(np.tril(np.ones(logits.shape[1:], bool))[None], logits, -np.inf)
  weights = _softmax(logits)
  heads = weights @ v                                            # [h, q_len, d_v]
  return np.einsum("htk,hkd->td", heads, _w(layer.output_dense.kernel)), weights


def _ffn(ffn, x):
  """max(0, x W1 + b1) W2 + b2 (section 3.3)."""
  h = np.maximum(0.0, x @ _w(ffn.filter_dense.kernel) + _w(ffn.filter_dense.bias))
  return h @ _w(ffn.output_dense.kernel) + _w(ffn.output_dense.bias)


def _sublayer(residual, x, fn, pre, epsilon):
  """Post-norm LayerNorm(x + f(x)) or pre-norm x + f(LayerNorm(x)); returns (x, f's extra)."""
  if pre:
    y, extra = fn(_layer_norm(x, residual.layer_norm, epsilon))
    return x + y, extra
  y, extra = fn(x)
  return _layer_norm(x + y, residual.layer_norm, epsilon), extra


def forward(model, source_ids, target_ids):
  """(logits float64 [len(target_ids), vocab], encoder-decoder attention [layers, heads,
  len(target_ids), len(source_ids)]) of one pair, teacher-forced."""
  hp = model.hparams
  d, eps, pre = hp.hidden_size, hp.norm_epsilon, hp.norm_type == "pre"
  emb = _w(model.embedding.embeddings)
  learned = hp.pos == "emb"
  tables = ((model.encoder_positions.position_embeddings,
             model.decoder_positions.position_embeddings) if learned else (None, None))
  offset = hp.get("position_offset", 0)
  x = emb[list(source_ids)] * np.sqrt(d) + _positions(len(source_ids), d, tables[0], offset)
  for layer in model.encoder_layers:
    x, _ = _sublayer(layer.self_attention_residual, x,
                     lambda h, l=layer: _attention(l.self_attention, h, h, False), pre, eps)
    x, _ = _sublayer(layer.ffn_residual, x, lambda h, l=layer: (_ffn(l.ffn, h), None), pre, eps)
  memory = _layer_norm(x, model.encoder_norm, eps) if pre else x
  decoder_input = [hp.get("decoder_start_id", 0)] + list(target_ids)[:-1]
  y = emb[decoder_input] * np.sqrt(d) + _positions(len(decoder_input), d, tables[1], offset)
  attention = []
  for layer in model.decoder_layers:
    y, _ = _sublayer(layer.self_attention_residual, y,
                     lambda h, l=layer: _attention(l.self_attention, h, h, True), pre, eps)
    y, weights = _sublayer(layer.encdec_attention_residual, y,
                           lambda h, l=layer: _attention(l.encdec_attention, h, memory, False),
                           pre, eps)
    attention.append(weights)
    y, _ = _sublayer(layer.ffn_residual, y, lambda h, l=layer: (_ffn(l.ffn, h), None), pre, eps)
  if pre:
    y = _layer_norm(y, model.decoder_norm, eps)
  return y @ emb.T, np.stack(attention)
