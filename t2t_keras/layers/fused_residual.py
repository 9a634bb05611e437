"""The residual add with its bias, dropout and the next LayerNorm: one XLA kernel each way.

    z = x + dropout(y + bias);  h = LayerNorm(z)     (`add_dropout_norm`)

Pre-norm, z is the residual stream and h the next sublayer's input (or the
stack's output); post-norm, h is the residual's output. Unfused, a pre-norm
residual ran a dropout kernel, TF's AddV2 (and a BiasAdd for the FFN's output
bias) and the next LayerNorm kernel forward, and backward the LayerNorm kernel,
TF's AddN of the stream's two gradients and the dropout kernel (and
BiasAddGrad): each a pass over [rows, d]. Here each direction is one pass.

Every call compiles the same two programs for a given row count (the bias
defaults to zeros; the embeddings' dropout before the first pre-norm layer is
an add onto a zero stream), so a new batch shape costs two compiles here where
dropout and LayerNorm had cost four. The dropout mask is the one
`dropout.dropout` draws for the same (shape, rate, seed) (`dropout.keep_mask`);
the backward hashes it again instead of storing it.
"""

import tensorflow as tf

from t2t_keras.layers.custom_gradient import custom_gradient
from t2t_keras.layers.dropout import drop_threshold, kept, masked_scale
from t2t_keras.layers.layer_norm import normalize, normalize_grad

_JIT = dict(jit_compile=True, autograph=False)


@tf.function(**_JIT)
def _forward(x, y, bias, seed, threshold, scale, gamma, beta, epsilon, h_dtype):
  """(z = x + dropout(y + bias) in x's dtype, LayerNorm(z) in h_dtype, rstd float32
  [rows, 1]) for x, y [rows, d]; statistics in float32, of z as stored."""
  y32 = tf.cast(y, tf.float32) + tf.cast(bias, tf.float32)
  if threshold is not None:
    y32 = masked_scale(y32, kept(tf.shape(y), seed, threshold), scale)
  z = tf.cast(tf.cast(x, tf.float32) + y32, x.dtype)
  h, rstd = normalize(tf.cast(z, tf.float32), gamma, beta, epsilon)
  return z, tf.cast(h, h_dtype), rstd


@tf.function(**_JIT)
def _backward(dz, dh, z, rstd, gamma, y_dtype, bias_dtype, seed, threshold, scale):
  """(dx in z's dtype, dy in y_dtype, dbias in bias_dtype, dgamma, dbeta in gamma's
  dtype) for dz (None: z itself was not used) and dh [rows, d]."""
  dx, dgamma, dbeta = normalize_grad(tf.cast(dh, tf.float32), tf.cast(z, tf.float32),
                                     gamma, rstd)
  if dz is not None:
    dx = dx + tf.cast(dz, tf.float32)
  dy = dx
  if threshold is not None:
    dy = masked_scale(dx, kept(tf.shape(dx), seed, threshold), scale)
  return (tf.cast(dx, z.dtype), tf.cast(dy, y_dtype),
          tf.cast(tf.reduce_sum(dy, axis=0), bias_dtype),
          tf.cast(dgamma, gamma.dtype), tf.cast(dbeta, gamma.dtype))


def add_dropout_norm(x, y, rate, seed, gamma, beta, epsilon, bias=None, h_dtype=None,
                     keep_stream=True):
  """(z, LayerNorm(z)) for z = x + dropout(y + bias, rate, seed): one kernel each way.

  LayerNorm(z) = (z - mean) / sqrt(var + epsilon) * gamma + beta over the last
  axis, statistics in float32, of z as stored in x's dtype.

  Args:
    x: float [..., d], the residual stream.
    y: float [..., d], the sublayer's output (any float dtype).
    rate: drop probability in [0, 1), a Python float (0: no dropout).
    seed: int64 [2], a stateless seed (unused when rate is 0).
    gamma, beta: [d], the LayerNorm's scale and offset.
    epsilon: a Python float.
    bias: optional [d], added to y before the dropout.
    h_dtype: the normalized output's dtype (default x's).
    keep_stream: return z too (pre-norm: the stream goes on); False returns
      LayerNorm(z) alone (post-norm), and z is kept only for the gradient.
  Returns:
    (z [..., d], LayerNorm(z) [..., d] in h_dtype), or the latter alone
    without keep_stream.
  """
  if rate:
    threshold, scale, seed = drop_threshold(rate), 1.0 / (1.0 - rate), tf.cast(seed, tf.int64)
  else:
    threshold, scale, seed = None, 1.0, tf.zeros([2], tf.int64)
  shape, d = tf.shape(y), y.shape[-1]
  y = tf.reshape(y, [-1, d])
  x = tf.reshape(x, [-1, d])
  bias = tf.zeros([d], tf.float32) if bias is None else tf.convert_to_tensor(bias)
  y_dtype, bias_dtype = y.dtype, bias.dtype
  h_dtype = tf.as_dtype(h_dtype or x.dtype)

  @custom_gradient
  def fn(x, y, bias, gamma, beta):
    z, h, rstd = _forward(x, y, bias, seed, threshold, scale, gamma, beta, epsilon, h_dtype)

    def grad(*upstream):
      dz, dh = upstream if keep_stream else (None, upstream[0])
      return _backward(dz, dh, z, rstd, gamma, y_dtype, bias_dtype, seed, threshold, scale)

    return ((z, h) if keep_stream else h), grad

  # Tensors, not variables: their gradients are returned as for x and y.
  out = fn(x, y, bias, tf.convert_to_tensor(gamma), tf.convert_to_tensor(beta))
  if not keep_stream:
    return tf.reshape(out, shape)
  return tf.reshape(out[0], shape), tf.reshape(out[1], shape)
