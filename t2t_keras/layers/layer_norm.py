"""Layer normalization over the last axis, forward and backward each one XLA-fused kernel."""

import keras
import tensorflow as tf

from t2t_keras.layers.custom_gradient import custom_gradient


def _row_mean(x):
  """Mean over the last axis of float32 [rows, d] as a product with a column of
  1/d: [rows, 1]. XLA's CPU row reductions ran LayerNorm at about a quarter of
  memory speed; products are faster. Sums over rows (dgamma, dbeta) stay
  reductions: as products they were slower (figures: docs/notebook.md)."""
  return tf.matmul(x, tf.fill([x.shape[-1], 1], 1.0 / x.shape[-1]))


def normalize(x32, gamma, beta, epsilon):
  """(LayerNorm(x32) float32, rstd float32 [rows, 1]) for float32 x32 [rows, d]
  (the arithmetic of the forward kernels here and in `fused_residual`)."""
  centered = x32 - _row_mean(x32)
  rstd = tf.math.rsqrt(_row_mean(tf.square(centered)) + epsilon)
  return centered * rstd * tf.cast(gamma, tf.float32) + tf.cast(beta, tf.float32), rstd


def normalize_grad(dy32, x32, gamma, rstd):
  """(dx, dgamma, dbeta), float32, for the upstream dy32 and the input x32 [rows, d],
  recomputing the normalized x from x32 and the saved rstd."""
  xhat = (x32 - _row_mean(x32)) * rstd
  dxhat = dy32 * tf.cast(gamma, tf.float32)
  dx = rstd * (dxhat - _row_mean(dxhat) - xhat * _row_mean(dxhat * xhat))
  return dx, tf.reduce_sum(dy32 * xhat, axis=0), tf.reduce_sum(dy32, axis=0)


@tf.function(jit_compile=True, autograph=False)
def _forward(x, gamma, beta, epsilon):
  """(y in x's dtype, rstd float32 [rows, 1]) for x [rows, d]; statistics in float32."""
  y, rstd = normalize(tf.cast(x, tf.float32), gamma, beta, epsilon)
  return tf.cast(y, x.dtype), rstd


@tf.function(jit_compile=True, autograph=False)
def _backward(dy, x, gamma, rstd):
  """(dx in x's dtype, dgamma, dbeta in gamma's dtype) for dy, x [rows, d]."""
  dx, dgamma, dbeta = normalize_grad(tf.cast(dy, tf.float32), tf.cast(x, tf.float32),
                                     gamma, rstd)
  return tf.cast(dx, x.dtype), tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, gamma.dtype)


def layer_norm(x, gamma, beta, epsilon, differentiable=True):
  """(x - mean) / sqrt(var + epsilon) * gamma + beta over the last axis.

  Statistics and arithmetic in float32 whatever x's dtype; the result in x's.
  Keras' LayerNormalization runs about ten TF kernels forward and more backward,
  each a pass over x; here each direction is one XLA kernel (the backward
  recomputes the normalized x from x and the saved 1/std).

  Args:
    x: float [..., d].
    gamma, beta: [d].
    epsilon: a Python float.
    differentiable: through the custom gradient (the one-kernel backward); False: the
      forward kernel alone, the same values and no custom-gradient op in the graph.
  Returns:
    [..., d] in x's dtype.
  """

  @custom_gradient
  def fn(x, gamma, beta):
    y, rstd = _forward(x, gamma, beta, epsilon)

    def grad(dy):
      return _backward(dy, x, gamma, rstd)

    return y, grad

  # Tensors, not variables: the gradient is returned for them as for x. Rows
  # flattened: the kernels compile per row count, not per [batch, length].
  rows = tf.reshape(x, [-1, x.shape[-1]])
  gamma, beta = tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta)
  y = fn(rows, gamma, beta) if differentiable else _forward(rows, gamma, beta, epsilon)[0]
  return tf.reshape(y, tf.shape(x))


class LayerNorm(keras.layers.LayerNormalization):
  """keras.layers.LayerNormalization over the last axis through `layer_norm`.

  The same variables (gamma, beta), config and results (to float rounding);
  other axes, rms_scaling or no center/scale take Keras' own path.

  Call: [..., d] -> [..., d] in the compute dtype; `training` (gradients will be taken):
  through `layer_norm`'s custom gradient, else the forward kernel alone, the same values
  (a graph that is never differentiated, a search or an export, holds no custom-gradient
  op: a SavedModel would keep such ops without their gradients, and warn at load).
  """

  def fusable(self, inputs):
    """Whether `layer_norm` computes this layer for `inputs` (else Keras' own path)."""
    return (self.axis in (-1, [-1], [len(inputs.shape) - 1]) and not self.rms_scaling
            and self.center and self.scale)

  def call(self, inputs, training=False):
    if not self.fusable(inputs):
      return super().call(inputs)
    y = layer_norm(inputs, self.gamma, self.beta, float(self.epsilon), differentiable=training)
    return tf.cast(y, self.compute_dtype)
