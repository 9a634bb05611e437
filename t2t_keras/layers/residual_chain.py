"""Training a pre-norm stack with each LayerNorm fused into the residual add before it.

A pre-norm stack computes, for its sublayers s_1 .. s_n (`Sublayer`s of its layers),

    x = dropout(embedded);  for s: x = x + dropout(s(LayerNorm_s(x)));  out = LayerNorm_final(x)

`run_sublayers` does it in that order. Here every LayerNorm runs inside the add that
produces its input: (x, h) = (x + dropout(y), LayerNorm_next(x + dropout(y))) is one
XLA kernel each way (`residual.fused_add_norm`), and the embeddings' dropout is such an
add onto a zero stream. Same values as `run_sublayers` and the same dropout draws in the
same order; one pass over [rows, d] per residual instead of four (`fused_residual.py`).
"""

import tensorflow as tf

from t2t_keras.layers.residual import fused_add_norm


def run_chained(embedded, dropout, sublayers, final_norm, stream_dtype):
  """The pre-norm stack's training output, LayerNorm_final(x) [batch, len, d_model].

  Args:
    embedded: [batch, len, d_model], the embeddings with positions.
    dropout: the `Dropout` layer on the embeddings.
    sublayers: the stack's `Sublayer`s in order (every layer's, flattened), each
      with a pre-norm `Residual`.
    final_norm: the stack's final `LayerNorm`.
    stream_dtype: the residual stream's dtype (float32 under mixed precision).
  """
  norms = [s.residual.layer_norm for s in sublayers[1:]] + [final_norm]
  zeros = tf.zeros(tf.shape(embedded), stream_dtype)
  x, h = fused_add_norm(zeros, embedded, dropout, sublayers[0].residual.layer_norm)
  for s, next_norm in zip(sublayers, norms):
    x, h = _add_and_norm(s.residual, x, s.fn(h), s.bias, next_norm)
  return h


def _add_and_norm(residual, x, y, bias, norm):
  """(z, norm(z)) for z = x + dropout(y + bias): fused where the LayerNorm allows."""
  if norm.fusable(x):
    return fused_add_norm(x, y, residual.dropout, norm, bias=bias)
  z = residual.add(x, y, training=True, bias=bias)
  return z, norm(z)
