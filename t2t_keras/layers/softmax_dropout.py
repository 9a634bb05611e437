"""Attention weights in training: scale, mask, softmax and dropout as one fused kernel each way."""

import tensorflow as tf

from t2t_keras.layers.dropout import _keep, _masked_scale, _threshold

_MASKED = -1e9  # the logit of a position the mask forbids


@tf.function(jit_compile=True, autograph=False)
def _forward(logits, mask, scale, seed, threshold, keep_scale):
  """(softmax weights float32, their dropped and rescaled copy in logits' dtype)."""
  z = tf.where(mask, tf.cast(logits, tf.float32) * scale, tf.constant(_MASKED, tf.float32))
  weights = tf.nn.softmax(z, axis=-1)
  keep = _keep(tf.reshape(tf.size(weights), [1]), seed, threshold)
  dropped = _masked_scale(weights, tf.reshape(keep, tf.shape(weights)), keep_scale)
  return weights, tf.cast(dropped, logits.dtype)


@tf.function(jit_compile=True, autograph=False)
def _backward(dy, dweights, weights, scale, seed, threshold, keep_scale):
  """d/dlogits from d/d(dropped weights) dy and d/dweights (a scalar 0 when the
  weights are not used); the keep mask is hashed again, not stored."""
  keep = tf.reshape(_keep(tf.reshape(tf.size(weights), [1]), seed, threshold),
                    tf.shape(weights))
  dw = _masked_scale(tf.cast(dy, tf.float32), keep, keep_scale) + dweights
  dz = weights * (dw - tf.reduce_sum(dw * weights, axis=-1, keepdims=True))
  return tf.cast(dz * scale, dy.dtype)


def softmax_dropout(logits, mask, scale, rate, seed):
  """softmax(where(mask, logits * scale, -1e9)) over the last axis, then dropout.

  Equal to the unfused ops with `dropout(weights, rate, seed)` (the same mask:
  both hash the flat index of [batch, heads, q_len, k_len]); forward and
  backward are one XLA kernel each, where TF ran a multiply, a select, a
  softmax, the dropout kernel and four or five ops for the softmax's gradient.
  Masked positions get weight 0 and gradient 0. Gradients flow through both
  results (the weights are returned for callers that report them).

  Args:
    logits: float [batch, heads, q_len, k_len], unscaled q k^T.
    mask: bool broadcastable to logits (True = attend), or None.
    scale: a Python float (1 / sqrt(d_k)).
    rate: drop probability in (0, 1), a Python float.
    seed: int64 [2], a stateless seed.
  Returns:
    (weights float32 [batch, heads, q_len, k_len] before dropout,
     the dropped weights in logits' dtype).
  """
  if mask is None:
    mask = tf.ones([1, 1, 1, 1], tf.bool)
  threshold, keep_scale = _threshold(rate), 1.0 / (1.0 - rate)

  @tf.custom_gradient
  def fn(logits):
    weights, dropped = _forward(logits, mask, scale, seed, threshold, keep_scale)

    def grad(dweights, dy):
      dweights = tf.zeros([], tf.float32) if dweights is None else dweights
      return _backward(dy, dweights, weights, scale, seed, threshold, keep_scale)

    return (weights, dropped), grad

  return fn(logits)
