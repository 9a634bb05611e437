"""Label-smoothed cross-entropy over non-pad target tokens (section 5.4)."""

import tensorflow as tf


def smoothed_cross_entropy(logits, targets, smoothing):
  """Sum of label-smoothed cross-entropy over non-pad tokens, and their count.

  The smoothed target puts 1 - smoothing on the true token and
  smoothing / (V - 1) on each other token; the loss is -sum_v q_v log p_v.
  Summing (not averaging) lets the trainer divide by the token count summed
  over all replicas.

  Args:
    logits: float [batch, len, V].
    targets: int [batch, len]; 0 is padding.
    smoothing: epsilon_ls.
  Returns:
    (loss_sum float32 scalar, num_tokens float32 scalar).
  """
  logits = tf.cast(logits, tf.float32)
  vocab = tf.shape(logits)[-1]
  log_probs = tf.nn.log_softmax(logits)
  on = 1.0 - smoothing
  off = smoothing / tf.cast(vocab - 1, tf.float32)
  true_lp = tf.gather(log_probs, targets, batch_dims=2)
  # -[(on - off) log p_true + off * sum_v log p_v]
  xent = -((on - off) * true_lp + off * tf.reduce_sum(log_probs, -1))
  weights = tf.cast(tf.not_equal(targets, 0), tf.float32)
  return tf.reduce_sum(xent * weights), tf.reduce_sum(weights)


def token_metrics(logits, targets):
  """Sums for dev metrics: (plain cross-entropy sum, correct-token count, token count)."""
  logits = tf.cast(logits, tf.float32)
  weights = tf.cast(tf.not_equal(targets, 0), tf.float32)
  xent = tf.nn.sparse_softmax_cross_entropy_with_logits(labels=targets, logits=logits)
  correct = tf.cast(tf.equal(tf.argmax(logits, -1, output_type=targets.dtype), targets),
                    tf.float32)
  return (tf.reduce_sum(xent * weights), tf.reduce_sum(correct * weights),
          tf.reduce_sum(weights))
