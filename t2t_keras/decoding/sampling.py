"""Sampling a next token (t2t's sampling_method=random), reproducibly, inside the search loop.

    pick = sampler(temperature=0.8, top_k=0, top_p=0.9, seed=7, inputs=source_ids,
                   vocab_size=8000)
    token = pick(log_probs, i)      # log_probs float32 [n, vocab], step i -> int32 [n]

The draw is the Gumbel-max trick: argmax(log p / temperature + g) with g standard
Gumbel noise is a sample of softmax(log p / temperature). The noise is a hash of
(seed, the sentence's source ids, step, token): no random-number state in the
loop (one XLA program, any number of calls), and a sentence's sample depends on
the seed and the sentence alone, not on its batch, its row, the padding or the
search shards. So a file decodes to the same samples with any batch size, and
identical source lines get identical samples (change the seed for another draw).

Before the draw, top_k keeps the k most probable tokens, top_p (nucleus
sampling, Holtzman et al., 2020) the fewest whose probabilities (after the
temperature) sum to at least p; temperature 0 is argmax.
"""

import tensorflow as tf

from t2t_keras.decoding.beam_search import top_k as exact_top_k
from t2t_keras.decoding.search_common import NEG_INF

_MULT_A, _MULT_B = 0x7feb352d, 0x846ca68b  # "lowbias32" (C. Wellons' integer hash prospector)


def mix32(x):
  """A 32-bit integer hash (lowbias32) of uint32 x, elementwise."""
  def xorshift(x, n):
    return tf.bitwise.bitwise_xor(x, tf.bitwise.right_shift(x, tf.constant(n, tf.uint32)))
  x = xorshift(x, 16) * tf.constant(_MULT_A, tf.uint32)
  x = xorshift(x, 15) * tf.constant(_MULT_B, tf.uint32)
  return xorshift(x, 16)


def sentence_keys(inputs, seed):
  """uint32 [batch]: a hash of the seed and each row's non-pad source ids (order-aware)."""
  ids = tf.cast(inputs, tf.uint32)
  positions = tf.cast(tf.range(tf.shape(inputs)[1]), tf.uint32)[None]
  per_token = mix32(ids + mix32(positions + tf.constant(0x9e3779b9, tf.uint32)))
  per_token = tf.where(tf.equal(inputs, 0), tf.zeros_like(per_token), per_token)
  return mix32(tf.reduce_sum(per_token, axis=1) + mix32(tf.cast(seed, tf.uint32)
                                                        + tf.constant(1, tf.uint32)))


def token_hashes(vocab_size):
  """uint32 [1, vocab]: each token id's hash (the same at every step: computed once)."""
  return mix32(tf.cast(tf.range(vocab_size), tf.uint32))[None]


def uniform_noise(keys, step, vocab_size, tokens=None):
  """float32 [n, vocab] in (0, 1): a function of (keys [n], step, token id); `tokens`:
  `token_hashes(vocab_size)`, when the caller has it."""
  step_key = mix32(keys + mix32(tf.cast(step, tf.uint32) + tf.constant(0x85ebca6b, tf.uint32)))
  tokens = token_hashes(vocab_size) if tokens is None else tokens
  bits = mix32(tf.bitwise.bitwise_xor(step_key[:, None], tokens))
  top24 = tf.cast(tf.bitwise.right_shift(bits, tf.constant(8, tf.uint32)), tf.float32)
  return (top24 + 0.5) / float(1 << 24)


def filter_top_k(log_probs, k):
  """log_probs with all but the k largest of each row set to NEG_INF (ties at the k-th kept)."""
  kth = exact_top_k(log_probs, k)[0][:, -1:]  # beam search's two-stage top_k
  return tf.where(log_probs < kth, tf.constant(NEG_INF, log_probs.dtype), log_probs)


def filter_top_p(log_probs, p):
  """log_probs (normalized) keeping each row's nucleus: the most probable tokens whose
  probabilities sum to at least p (a token is kept when the mass before it is < p).

  With ties that is: a token of probability q is kept when the mass of the tokens more
  probable than q is below p. That mass only falls as q grows, so the least kept q is
  found by bisection over float32 bit patterns (ordered as the non-negative floats
  they encode): 31 masked sums over the vocabulary instead of sorting it, which XLA does
  slowly on a CPU. No sort, no data-dependent shape.
  """
  probs = tf.exp(log_probs)
  bits = tf.bitcast(probs, tf.int32)                                    # [n, vocab], >= 0

  def mass_above(b):  # [n, 1] -> [n, 1]: the probability of the tokens with bits > b
    return tf.reduce_sum(tf.where(bits > b, probs, 0.0), axis=-1, keepdims=True)

  # Invariant: mass_above(lo) >= p > mass_above(hi); then hi is the least kept pattern.
  lo = tf.fill(tf.shape(bits[:, :1]), tf.constant(-1, tf.int32))
  hi = tf.reduce_max(bits, axis=-1, keepdims=True)
  for _ in range(31):  # the range halves each time: 2 ** 31 patterns at most
    mid = lo + (hi - lo) // 2
    below = mass_above(mid) < p
    lo, hi = tf.where(below, lo, mid), tf.where(below, mid, hi)
  return tf.where(bits < hi, tf.constant(NEG_INF, log_probs.dtype), log_probs)


def sampler(temperature, top_k, top_p, seed, inputs, vocab_size, copies=1):
  """pick(log_probs [n, vocab], step) -> int32 [n]: one sampled token per row.

  `inputs` int32 [n, src_len] are the rows' source ids (for their keys); n rows
  of log probs [n, vocab_size] follow them one to one. With `copies` c, each sentence fills c
  consecutive rows, and copy j of it draws its own sample (its key mixed with j).
  """
  copy = tf.math.floormod(tf.range(tf.shape(inputs)[0]), copies)
  keys = mix32(sentence_keys(inputs, seed) + mix32(tf.cast(copy, tf.uint32)))
  tokens = token_hashes(vocab_size)  # outside the search loop: the same at every step

  def pick(log_probs, step):
    if temperature == 0:
      return tf.argmax(log_probs, axis=-1, output_type=tf.int32)
    scaled = tf.nn.log_softmax(log_probs / temperature)
    if top_k > 0:
      scaled = filter_top_k(scaled, top_k)
    if top_p < 1.0:
      scaled = filter_top_p(scaled, top_p)
    gumbel = -tf.math.log(-tf.math.log(uniform_noise(keys, step, vocab_size, tokens)))
    return tf.argmax(scaled + gumbel, axis=-1, output_type=tf.int32)

  return pick
