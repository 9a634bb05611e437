"""Greedy decoding over the cached decoder, in static shapes (XLA-compilable).

    ids, scores = greedy_decode(model, inputs, SearchOptions(beam_size=1, extra_length=50))
    # ids int32 [batch, max_len] (0 after EOS); scores float32 [batch] = sum of log probs

The encoder runs once; each step feeds the last token through the decoder with
the model's k/v cache. A sentence stops at EOS or at its maximum length
(non-pad input length + extra_length); the loop ends when every sentence has.
"""

import tensorflow as tf

from t2t_keras.decoding.search_common import SearchOptions, prepare, step_log_probs, write_at
from t2t_keras.ids import EOS_ID


def greedy_loop(p, eos_id=EOS_ID, pick=None):
  """Argmax decoding over any next-token function: `p` a `search_common.Prepared` of
  one row per output (see `beam_search_loop`).

  `pick(log_probs [batch, vocab], step) -> int32 [batch]` chooses each token
  instead of argmax (`sampling.sampler`); scores stay the model's own log probs.
  p.force, `(log_probs, step) -> log_probs`, runs first (`search_common.prefix_forcing`).

  Returns (ids int32 [batch, max_length], scores float32 [batch] (sum of the
  chosen tokens' log probs, EOS included), steps int32).
  """
  symbols_to_logits_fn, batch_size, max_length, force = p.fn, p.batch_size, p.length, p.force
  decode_lengths = tf.cast(p.decode_lengths, tf.int32)
  ids = tf.zeros([batch_size, max_length + 1], tf.int32)
  scores = tf.zeros([batch_size], tf.float32)
  done = tf.zeros([batch_size], tf.bool)

  def cond(i, ids, scores, done, state):
    del ids, scores, state
    return tf.logical_and(i < max_length, tf.logical_not(tf.reduce_all(done)))

  def body(i, ids, scores, done, state):
    logits, state = symbols_to_logits_fn(ids, i, state)
    log_probs = step_log_probs(logits)
    if force is not None:
      log_probs = force(log_probs, i)
    token = (pick(log_probs, i) if pick is not None
             else tf.argmax(log_probs, axis=-1, output_type=tf.int32))
    token_log_prob = tf.gather(log_probs, token, axis=1, batch_dims=1)
    token = tf.where(done, 0, token)
    scores += tf.where(done, 0.0, token_log_prob)
    ids = write_at(ids, i + 1, token)
    done = tf.logical_or(done, tf.logical_or(tf.equal(token, eos_id), i + 1 >= decode_lengths))
    return i + 1, ids, scores, done, state

  steps, ids, scores, _, _ = tf.while_loop(
      cond, body, (tf.constant(0), ids, scores, done, p.state))
  return ids[:, 1:], scores, steps


def greedy_decode(model, inputs, options=SearchOptions(beam_size=1)):
  """Greedy translation of a batch of source ids.

  Args:
    model: a Transformer (encode / init_cache / decode).
    inputs: int32 [batch, src_len] (EOS-terminated, 0-padded).
    options: `SearchOptions` of beam_size 1: extra_length and max_decode_length
      (maximum output length = non-pad input length + extra_length, capped), eos_id,
      cached (False re-runs the full decoder at every step: the reference).
  Returns:
    (ids int32 [batch, max_len], 0 after EOS; scores float32 [batch], sum of log probs).
  """
  ids, scores, _ = greedy_with_steps(model, inputs, options)
  return ids, scores


def greedy_with_steps(model, inputs, options):
  """`greedy_loop` over the model: (ids [batch, max_len], scores [batch], steps)."""
  if options.beam_size != 1:
    raise ValueError(f"greedy search keeps one hypothesis, got beam_size {options.beam_size}")
  return greedy_loop(prepare(model, inputs, options), options.eos_id)
