"""Residual connection, dropout and layer normalization around a sublayer (section 5.4)."""

import keras
import tensorflow as tf

from t2t_keras.layers.dropout import Dropout
from t2t_keras.layers.fused_residual import add_dropout_norm
from t2t_keras.layers.layer_norm import LayerNorm


class Residual(keras.layers.Layer):
  """Wraps a sublayer: post-norm LayerNorm(x + Dropout(f(x))) (the paper) or
  pre-norm x + Dropout(f(LayerNorm(x))) (t2t's later default).

  Use in two halves so the sublayer can take and return extra state (a cache):

      h = res.sublayer_input(x)
      y = sublayer(h)
      x = res(x, y)

  Under a mixed-precision policy the residual stream stays in the variable dtype
  (float32): x is not cast on the way in, the sublayer's output (compute dtype,
  e.g. bfloat16) is added to it in float32 and the LayerNorm returns float32, so
  the small updates each sublayer adds are not rounded away by bfloat16's 8-bit
  significand (Megatron-LM's fp32 residual connection). The sublayers still
  cast their input to the compute dtype for their matmuls.

  Args:
    dropout: P_drop applied to the sublayer output before the residual add.
    norm_type: "post" or "pre".
    epsilon: LayerNorm epsilon.
  """

  def __init__(self, dropout=0.1, norm_type="post", epsilon=1e-6, **kwargs):
    super().__init__(**kwargs)
    self.autocast = False  # x keeps the stream's dtype (above)
    if norm_type not in ("post", "pre"):
      raise ValueError(f"norm_type must be 'post' or 'pre', got {norm_type!r}")
    self.dropout_rate = dropout
    self.norm_type = norm_type
    self.epsilon = epsilon
    self.layer_norm = LayerNorm(
        epsilon=epsilon, name="layer_norm", dtype=self.dtype_policy.variable_dtype)
    self.dropout = Dropout(dropout, dtype=self.dtype_policy)

  def build(self, x_shape, sublayer_output_shape=None):
    if not self.layer_norm.built:  # the layer before may have built it (next_norm)
      self.layer_norm.build(x_shape)
    self.built = True

  def sublayer_input(self, x):
    """[batch, len, d] -> what the sublayer sees: LayerNorm(x) for pre-norm, else x
    (in the stream's dtype; the sublayer casts it to its compute dtype)."""
    return self.layer_norm(x) if self.norm_type == "pre" else x

  def call(self, x, sublayer_output, training=False, bias=None):
    """Residual add of the sublayer output [batch, len, d] to x [batch, len, d], in x's dtype.

    bias: optional [d], added to the sublayer output before the dropout (the
      FFN's output bias: the fused kernel adds it, no pass of its own).
    Training post-norm, the add, bias, dropout and the LayerNorm run as one XLA
    kernel each way (`fused_add_norm`); a pre-norm stack fuses its LayerNorms the
    same way in `residual_chain.py`.
    """
    if training and self.norm_type == "post" and self.layer_norm.fusable(x):
      return fused_add_norm(x, sublayer_output, self.dropout, self.layer_norm, bias=bias,
                            keep_stream=False)
    z = self.add(x, sublayer_output, training=training, bias=bias)
    return self.layer_norm(z) if self.norm_type == "post" else z

  def add(self, x, sublayer_output, training=False, bias=None):
    """x + dropout(sublayer_output + bias), in x's dtype: the add without a LayerNorm."""
    y = sublayer_output if bias is None else sublayer_output + tf.cast(
        bias, sublayer_output.dtype)
    return x + tf.cast(self.dropout(y, training=training), x.dtype)

  def get_config(self):
    config = super().get_config()
    config.update(dropout=self.dropout_rate, norm_type=self.norm_type, epsilon=self.epsilon)
    return config


def fused_add_norm(x, y, dropout, norm, bias=None, keep_stream=True):
  """Training: (x + dropout(y + bias), norm of that) as one kernel each way, or the
  norm alone without keep_stream (`fused_residual.add_dropout_norm`).

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
