"""Residual connection, dropout and layer normalization around a sublayer (section 5.4)."""

import keras
import tensorflow as tf

from t2t_keras.layers.dropout import Dropout
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

  def call(self, x, sublayer_output, training=False):
    """x [batch, len, d] plus the dropped-out sublayer output [batch, len, d], in x's
    dtype; post-norm, then the LayerNorm. (Training, the model's stacks run the same
    through the fused kernels of `residual_chain.py`.)"""
    z = x + tf.cast(self.dropout(sublayer_output, training=training), x.dtype)
    return self.layer_norm(z, training=training) if self.norm_type == "post" else z

  def get_config(self):
    config = super().get_config()
    config.update(dropout=self.dropout_rate, norm_type=self.norm_type, epsilon=self.epsilon)
    return config

