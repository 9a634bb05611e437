"""Residual connection, dropout and layer normalization around a sublayer (section 5.4)."""

import keras

from t2t_keras.layers.dropout import Dropout


class Residual(keras.layers.Layer):
  """Wraps a sublayer: post-norm LayerNorm(x + Dropout(f(x))) (the paper) or
  pre-norm x + Dropout(f(LayerNorm(x))) (t2t's later default).

  Use in two halves so the sublayer can take and return extra state (a cache):

      h = res.sublayer_input(x)
      y = sublayer(h)
      x = res(x, y)

  Args:
    dropout: P_drop applied to the sublayer output before the residual add.
    norm_type: "post" or "pre".
    epsilon: LayerNorm epsilon.
  """

  def __init__(self, dropout=0.1, norm_type="post", epsilon=1e-6, **kwargs):
    super().__init__(**kwargs)
    if norm_type not in ("post", "pre"):
      raise ValueError(f"norm_type must be 'post' or 'pre', got {norm_type!r}")
    self.dropout_rate = dropout
    self.norm_type = norm_type
    self.epsilon = epsilon
    self.layer_norm = keras.layers.LayerNormalization(
        epsilon=epsilon, name="layer_norm", dtype=self.dtype_policy)
    self.dropout = Dropout(dropout, dtype=self.dtype_policy)

  def build(self, x_shape, sublayer_output_shape=None):
    self.layer_norm.build(x_shape)
    self.built = True

  def sublayer_input(self, x):
    """[batch, len, d] -> what the sublayer sees: LayerNorm(x) for pre-norm, else x."""
    return self.layer_norm(x) if self.norm_type == "pre" else x

  def call(self, x, sublayer_output, training=False):
    """Residual add of the sublayer output [batch, len, d] to x [batch, len, d]."""
    y = x + self.dropout(sublayer_output, training=training)
    return self.layer_norm(y) if self.norm_type == "post" else y

  def get_config(self):
    config = super().get_config()
    config.update(dropout=self.dropout_rate, norm_type=self.norm_type, epsilon=self.epsilon)
    return config
