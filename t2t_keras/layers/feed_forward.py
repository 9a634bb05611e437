"""Position-wise feed-forward network (section 3.3): FFN(x) = max(0, x W1 + b1) W2 + b2."""

import keras

from t2t_keras.layers.dropout import Dropout


class FeedForward(keras.layers.Layer):
  """Two dense layers with a ReLU between them, applied at every position.

  Args:
    hidden_size: d_model (input and output width).
    filter_size: d_ff.
    relu_dropout: dropout on the ReLU output (0 in the paper).

  Call: [batch, len, d_model] -> [batch, len, d_model].
  """

  def __init__(self, hidden_size, filter_size, relu_dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.hidden_size = hidden_size
    self.filter_size = filter_size
    self.relu_dropout = relu_dropout
    self.filter_dense = keras.layers.Dense(
        filter_size, activation="relu", name="filter", dtype=self.dtype_policy)
    self.output_dense = keras.layers.Dense(
        hidden_size, name="output", dtype=self.dtype_policy)
    self.dropout = Dropout(relu_dropout, dtype=self.dtype_policy)

  def build(self, input_shape):
    self.filter_dense.build(input_shape)
    self.output_dense.build(tuple(input_shape[:-1]) + (self.filter_size,))
    self.built = True

  def call(self, x, training=False):
    return self.output_dense(self.dropout(self.filter_dense(x), training=training))

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, filter_size=self.filter_size,
                  relu_dropout=self.relu_dropout)
    return config
