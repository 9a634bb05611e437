"""Training a stack with each residual add, its dropout and the LayerNorm after it fused.

A stack's sublayers s_1 .. s_n (`Sublayer`s: each layer's attention and FFN in the
paper's order, with their `Residual`s) compute, training,

    post-norm (the paper):  x = dropout(embedded);  for s: x = LayerNorm_s(x + dropout(s(x)))
    pre-norm:  x = dropout(embedded);  for s: x = x + dropout(s(LayerNorm_s(x)));
               out = LayerNorm_final(x)

which is what the layers' `call` computes. Here each residual add, the dropout before
it, the FFN's output bias and the LayerNorm after it (post-norm the residual's own,
pre-norm the next sublayer's input norm or the final one) are one XLA kernel each way
(`fused_residual.add_dropout_norm`): one pass over [rows, d] per residual instead of
four. Pre-norm, the embeddings' dropout is such an add onto a zero stream. The same
values as the layers' `call` (to float rounding) and the same dropout draws in the same
order.
"""

import collections

import tensorflow as tf

from t2t_keras.layers.fused_residual import add_dropout_norm

Sublayer = collections.namedtuple("Sublayer", ["residual", "fn", "bias"])
Sublayer.__doc__ = """One sublayer and its residual connection.

residual: its `Residual`; fn: h [batch, len, d_model] -> y [batch, len, d_model]
(the sublayer's output before its residual add); bias: None or [d_model], added to y
inside the fused kernel (the FFN's output bias).
"""


def encoder_sublayers(layer, attention_mask):
  """An `EncoderLayer`'s [self-attention, FFN] as `Sublayer`s (training)."""
  attend = lambda h: layer.self_attention(h, attention_mask=attention_mask, training=True)
  return [Sublayer(layer.self_attention_residual, attend, None), _ffn(layer)]


def decoder_sublayers(layer, memory, self_mask, memory_mask):
  """A `DecoderLayer`'s SUBLAYERS (self-attention, encoder-decoder attention, FFN) as
  `Sublayer`s (training, teacher forcing)."""
  fns = {"self_attention": lambda h: layer.self_attention(h, attention_mask=self_mask,
                                                          training=True),
         "encdec_attention": lambda h: layer.encdec_attention(
             h, memory, attention_mask=memory_mask, training=True)}
  return [_ffn(layer) if name == "ffn"
          else Sublayer(getattr(layer, f"{name}_residual"), fns[name], None)
          for name in layer.SUBLAYERS]


def _ffn(layer):
  """The FFN as a `Sublayer`: its output bias is added inside the fused kernel."""
  ffn = layer.ffn
  return Sublayer(layer.ffn_residual, lambda h: ffn.project(ffn.hidden(h, training=True)),
                  ffn.output_dense.bias)


def run_chained(embedded, dropout, sublayers, final_norm, stream_dtype):
  """The stack's training output [batch, len, d_model] in the stream's dtype.

  Args:
    embedded: [batch, len, d_model], the embeddings with positions.
    dropout: the `Dropout` layer on the embeddings.
    sublayers: the stack's `Sublayer`s in order (every layer's, flattened), all with
      post-norm or all with pre-norm `Residual`s.
    final_norm: the stack's final `LayerNorm` (pre-norm; unused post-norm).
    stream_dtype: the residual stream's dtype (float32 under mixed precision).
  """
  if sublayers[0].residual.norm_type == "post":
    x = tf.cast(dropout(embedded, training=True), stream_dtype)
    for s in sublayers:
      x = _add_and_norm(s.residual, x, s.fn(x), s.bias, s.residual.layer_norm,
                        keep_stream=False)
    return x
  norms = [s.residual.layer_norm for s in sublayers[1:]] + [final_norm]
  zeros = tf.zeros(tf.shape(embedded), stream_dtype)
  x, h = fused_add_norm(zeros, embedded, dropout, sublayers[0].residual.layer_norm)
  for s, next_norm in zip(sublayers, norms):
    x, h = _add_and_norm(s.residual, x, s.fn(h), s.bias, next_norm)
  return h


def _add_and_norm(residual, x, y, bias, norm, keep_stream=True):
  """(z, norm(z)) for z = x + dropout(y + bias), or norm(z) alone without keep_stream:
  fused where the LayerNorm allows."""
  if norm.fusable(x):
    return fused_add_norm(x, y, residual.dropout, norm, bias=bias, keep_stream=keep_stream)
  if bias is not None:
    y = y + tf.cast(bias, y.dtype)
  z = x + tf.cast(residual.dropout(y, training=True), x.dtype)
  return (z, norm(z)) if keep_stream else norm(z)


def fused_add_norm(x, y, dropout, norm, bias=None, keep_stream=True):
  """(x + dropout(y + bias), norm of that) as one kernel each way, or the norm alone
  without keep_stream (`fused_residual.add_dropout_norm`).

  x: the stream [batch, len, d]; y [batch, len, d]; dropout: a `Dropout`
  layer (its rate, and its next seed); norm: a `LayerNorm` over the last axis
  (built here if it is not yet); the normalized output in its compute dtype.
  """
  if not norm.built:
    norm.build(y.shape)
  seed = dropout.next_seed() if dropout.rate else None
  return add_dropout_norm(x, y, dropout.rate, seed, norm.gamma, norm.beta,
                          float(norm.epsilon), bias=bias, h_dtype=norm.compute_dtype,
                          keep_stream=keep_stream)
