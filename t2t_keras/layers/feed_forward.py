"""Position-wise feed-forward network (section 3.3): FFN(x) = max(0, x W1 + b1) W2 + b2
(or swish(x W1 + b1) W2 + b2, Marian's default activation)."""

import keras
import tensorflow as tf

from t2t_keras.layers.dropout import Dropout, bias_relu_dropout
from t2t_keras.layers.matmul import matmul

# The activations (Marian's "swish" is x * sigmoid(x), TensorFlow's and Keras' "silu").
ACTIVATIONS = ("relu", "swish")


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
    self.filter_dense = keras.layers.Dense(filter_size, name="filter", dtype=self.dtype_policy)
    self.output_dense = keras.layers.Dense(
        hidden_size, name="output", dtype=self.dtype_policy)
    self.dropout = Dropout(relu_dropout, dtype=self.dtype_policy)

  def build(self, input_shape):
    self.filter_dense.build(input_shape)
    self.output_dense.build(tuple(input_shape[:-1]) + (self.filter_size,))
    self.built = True

  def call(self, x, training=False):
    h = self.hidden(x, training=training)
    y = self.project(h, differentiable=training)
    return y + tf.cast(self.output_dense.bias, y.dtype)

  def hidden(self, x, training=False):
    """activation(x W1 + b1), dropped out: [batch, len, d_model] -> [batch, len, d_ff]."""
    x = tf.cast(x, self.compute_dtype)  # as Keras' autocast (the fused path calls this)
    if training and self.relu_dropout > 0 and self.activation == "relu":
      # Bias, ReLU and dropout in one fused kernel (and one for their gradient).
      dense = self.filter_dense
      kernel, bias = (tf.cast(v, self.compute_dtype) for v in (dense.kernel, dense.bias))
      h = tf.matmul(tf.reshape(x, [-1, tf.shape(x)[-1]]), kernel)
      h = bias_relu_dropout(h, bias, self.relu_dropout, self.dropout.next_seed())
      return tf.reshape(h, tf.concat([tf.shape(x)[:-1], [self.filter_size]], 0))
    return self.dropout(self.activate(self.filter_dense(x), training), training=training)

  def activate(self, h, training=False):
    """The activation on x W1 + b1: ReLU, or swish as `tf.nn.silu` when training (its custom
    gradient keeps no intermediate) and as h * sigmoid(h) otherwise: the same values, and no
    custom-gradient op in a graph that is never differentiated (see `project`)."""
    if self.activation == "relu":
      return tf.nn.relu(h)
    return tf.nn.silu(h) if training else h * tf.sigmoid(h)

  def project(self, h, differentiable=True):
    """h W2 without its bias b2 (`output_dense.bias`: training adds it inside the fused
    residual kernel, `residual_chain.py`): [batch, len, d_ff] -> [batch, len, d_model].

    `differentiable`: through `matmul`, whose custom gradient takes W2's gradient in the
    faster layout; False (evaluation, search, exports) is the same product as a plain
    tf.matmul, so a graph that is never differentiated holds no custom-gradient op (a
    SavedModel would keep them as ops whose gradients were not saved, and warn at load)."""
    kernel = tf.cast(self.output_dense.kernel, self.compute_dtype)
    rows = tf.reshape(h, [-1, self.filter_size])
    y = matmul(rows, kernel) if differentiable else tf.matmul(rows, kernel)
    return tf.reshape(y, tf.concat([tf.shape(h)[:-1], [self.hidden_size]], 0))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, filter_size=self.filter_size,
                  relu_dropout=self.relu_dropout, activation=self.activation)
    return config
