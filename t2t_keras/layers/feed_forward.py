"""Position-wise feed-forward network (section 3.3): FFN(x) = max(0, x W1 + b1) W2 + b2
(or swish(x W1 + b1) W2 + b2, Marian's default activation)."""

import keras
import tensorflow as tf

from t2t_keras.layers.dropout import Dropout, bias_relu_dropout
from t2t_keras.layers.matmul import matmul

# Our names -> Keras' (Marian's "swish" is Keras' "silu": x * sigmoid(x)).
ACTIVATIONS = {"relu": "relu", "swish": "silu"}


class FeedForward(keras.layers.Layer):
  """Two dense layers with a ReLU (or swish) between them, applied at every position.

  Args:
    hidden_size: d_model (input and output width).
    filter_size: d_ff.
    relu_dropout: dropout on the activation's output (0 in the paper).
    activation: "relu" (the paper's) or "swish" (x * sigmoid(x), Marian's
      `transformer-ffn-activation` default).

  Call: [batch, len, d_model] -> [batch, len, d_model].
  """

  def __init__(self, hidden_size, filter_size, relu_dropout=0.0, activation="relu", **kwargs):
    super().__init__(**kwargs)
    if activation not in ACTIVATIONS:
      raise ValueError(f"ffn_activation must be one of {', '.join(ACTIVATIONS)}, "
                       f"got {activation!r}")
    self.hidden_size = hidden_size
    self.filter_size = filter_size
    self.relu_dropout = relu_dropout
    self.activation = activation
    self.filter_dense = keras.layers.Dense(
        filter_size, activation=ACTIVATIONS[activation], name="filter",
        dtype=self.dtype_policy)
    self.output_dense = keras.layers.Dense(
        hidden_size, name="output", dtype=self.dtype_policy)
    self.dropout = Dropout(relu_dropout, dtype=self.dtype_policy)

  def build(self, input_shape):
    self.filter_dense.build(input_shape)
    self.output_dense.build(tuple(input_shape[:-1]) + (self.filter_size,))
    self.built = True

  def call(self, x, training=False, output_bias=True):
    """[batch, len, d_model] -> [batch, len, d_model]; without `output_bias` the
    second layer's bias (`output_dense.bias`) is left for the caller to add
    (`Residual` adds it inside its fused kernel)."""
    if training and self.relu_dropout > 0 and self.activation == "relu":
      # Bias, ReLU and dropout in one fused kernel (and one for their gradient).
      dense = self.filter_dense
      h = tf.matmul(tf.reshape(x, [-1, tf.shape(x)[-1]]), dense.kernel)
      h = bias_relu_dropout(h, dense.bias, self.relu_dropout, self.dropout.next_seed())
      h = tf.reshape(h, tf.concat([tf.shape(x)[:-1], [self.filter_size]], 0))
    else:
      h = self.dropout(self.filter_dense(x), training=training)
    if output_bias:
      return self.output_dense(h)
    kernel = tf.cast(self.output_dense.kernel, self.compute_dtype)
    y = matmul(tf.reshape(h, [-1, self.filter_size]), kernel)
    return tf.reshape(y, tf.concat([tf.shape(h)[:-1], [self.hidden_size]], 0))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, filter_size=self.filter_size,
                  relu_dropout=self.relu_dropout, activation=self.activation)
    return config
