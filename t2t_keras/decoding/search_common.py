"""What both searches (beam_search.py, greedy.py) need around the model.

`prepare` encodes a batch once and returns what a search loop runs on: a
next-token function over the model (cached: one decoder step with the k/v
cache; uncached: the whole decoder again, the reference), its state, each
sentence's maximum output length and the output buffer's length. Also: the
length penalty, a step's log probs, and writes into fixed-size buffers (static
shapes, so XLA compiles one program).
"""

import collections

import tensorflow as tf

from t2t_keras.ids import PAD_ID

NEG_INF = -1e7  # t2t's "infinity" for log probs: large but finite, so NEG_INF * 0 stays 0


def length_penalty(length, alpha):
  """GNMT's ((5 + length) / 6) ** alpha, float32 (Wu et al., 2016)."""
  return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def step_log_probs(logits):
  """A step's next-token log probs, float32 [n, vocab], with PAD ruled out (NEG_INF).

  PAD (id 0) is padding, never an output token: a search that picked it wrote
  ids that detokenize to nothing and that `scoring` (which masks PAD) scores
  differently. Masked after the softmax, as fairseq's generator does, so every
  other token keeps the model's own log p(token | prefix).
  """
  log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
  is_pad = tf.equal(tf.range(tf.shape(log_probs)[-1]), PAD_ID)
  return tf.where(is_pad, tf.constant(NEG_INF, tf.float32), log_probs)


def write_at(seq, position, values):
  """seq [..., length] with `values` [...] written at `position` (static shapes)."""
  at = tf.equal(tf.range(tf.shape(seq)[-1]), position)
  return tf.where(at, values[..., None], seq)


def decode_lengths_for(inputs, extra_length, max_length):
  """Each sentence's maximum output length: non-pad input length + extra_length, capped."""
  lengths = tf.reduce_sum(tf.cast(tf.not_equal(inputs, 0), tf.int32), axis=1)
  return tf.minimum(lengths + extra_length, max_length)


def buffer_length(model, inputs, extra_length, max_decode_length=None):
  """Static-when-possible output buffer length: padded input length + extra, or the cap."""
  if max_decode_length:
    length = max_decode_length
  else:
    width = inputs.shape[1]
    length = (width if width is not None else tf.shape(inputs)[1]) + extra_length
  hp = getattr(model, "hparams", None)
  if hp is not None and hp.get("pos") == "emb":  # learned positions end at max_positions
    length = tf.minimum(length, hp.max_positions) if tf.is_tensor(length) else min(
        length, hp.max_positions)
  return length


def prefix_forcing(prefix, copies):
  """`force(log_probs, i)` for a search whose rows each start with their target prefix.

  prefix: int32 [batch, P], each sentence's prefix ids, 0-padded (no EOS); copies: rows
  per sentence in the search (beam_size, or samples). At step i, a row whose prefix is
  longer than i keeps only its prefix's token i, with the model's own log prob (so a
  hypothesis's score is the model's log prob of the whole output, prefix included); every
  other row, and every row past its prefix, is left as it is.
  """
  prefix = tf.repeat(tf.convert_to_tensor(prefix, tf.int32), copies, axis=0)  # [n, P]
  width = tf.shape(prefix)[1]

  def force(log_probs, i):
    at = tf.gather(prefix, tf.reshape(tf.minimum(i, tf.maximum(width - 1, 0)), [1]), axis=1)
    forced = tf.logical_and(i < width, tf.not_equal(at, PAD_ID))               # [n, 1]
    keep = tf.equal(tf.range(tf.shape(log_probs)[-1])[None, :], at)            # [n, V]
    return tf.where(tf.logical_and(forced, tf.logical_not(keep)),
                    tf.constant(NEG_INF, log_probs.dtype), log_probs)

  return force


def prefix_lengths(prefix):
  """int32 [batch]: each prefix's length (its non-pad ids)."""
  return tf.reduce_sum(tf.cast(tf.not_equal(prefix, PAD_ID), tf.int32), axis=1)


def cached_logits_fn(model, memory_mask):
  """symbols_to_logits_fn of one cached decoder step (state = the model's cache)."""

  def fn(ids, i, cache):
    prev = tf.gather(ids, tf.reshape(i, [1]), axis=1)  # [n, 1], static shape
    logits, cache = model.decode(prev, None, memory_mask, cache=cache, cache_index=i)
    return logits[:, -1], cache

  return fn


def uncached_logits_fn(model, memory, memory_mask, prefix_only=False):
  """symbols_to_logits_fn that re-runs the whole decoder each step (no cache).

  `prefix_only` decodes ids[:, :i + 1] (dynamic shapes: not for XLA); otherwise
  the full fixed-length buffer (the causal mask makes the later positions
  irrelevant to step i).
  """

  def fn(ids, i, state):
    decoder_input = ids[:, :i + 1] if prefix_only else ids[:, :-1]
    logits, _ = model.decode(decoder_input, memory, memory_mask)
    return tf.gather(logits, i, axis=1), state

  return fn


Prepared = collections.namedtuple(
    "Prepared", ["fn", "state", "batch_size", "length", "decode_lengths", "reordered_keys",
                 "force"])
Prepared.__doc__ = """What a search loop runs on (`prepare`'s result).

  fn: symbols_to_logits_fn, (ids int32 [batch * beam, length + 1], i, state) ->
    (logits [batch * beam, vocab], state).
  state: its initial state (the model's cache, or {} uncached).
  batch_size: int32 scalar; length: the output buffer's length (int or scalar);
  decode_lengths: int32 [batch], each sentence's maximum output length.
  reordered_keys: the state keys that follow the beams when they swap histories
    (None: every leaf the function changes).
  force: None, or (log_probs [batch * beam, vocab], i) -> log_probs, applied by the loop
    after each step's softmax (`prefix_forcing`).
"""


def prepare(model, inputs, beam_size, extra_length, max_decode_length=None, cached=True,
            prefix_only=False, constraint=None, prefix=None):
  """Encodes `inputs` once and builds the next-token function of a search over it.

  Args:
    model: a Transformer (encode / init_cache / decode).
    inputs: int32 [batch, src_len] source ids (EOS-terminated, 0-padded).
    beam_size: hypotheses per sentence (1: greedy).
    extra_length, max_decode_length: maximum output length = non-pad input
      length + extra_length, capped at max_decode_length (also the buffer length).
    cached: one decoder step per token with the k/v cache; False re-runs the
      whole decoder at every step (`prefix_only`: over the prefix only, dynamic shapes).
    constraint: optional; its `wrap(fn, inputs)` forbids tokens at each step.
    prefix: optional int32 [batch, P], each output's first tokens (0-padded; a row of
      zeros: no prefix). A sentence's maximum output length grows to its prefix's
      length + 1 where that is longer, up to the buffer's length.
  Returns:
    a `Prepared`.
  """
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  length = buffer_length(model, inputs, extra_length, max_decode_length)
  decode_lengths = decode_lengths_for(inputs, extra_length, length)
  force = None
  prefix = None if prefix is None else tf.convert_to_tensor(prefix, tf.int32)
  if prefix is not None and prefix.shape[1] != 0:  # [batch, 0]: no prefixes
    width = prefix.shape[1]
    if isinstance(width, int) and isinstance(length, int) and width > length:
      raise ValueError(f"a target prefix of {width} ids (padded) is longer than the output "
                       f"buffer of {length} ids (raise max_decode_length)")
    decode_lengths = tf.minimum(tf.maximum(decode_lengths, prefix_lengths(prefix) + 1), length)
    force = prefix_forcing(prefix, beam_size)
  memory, mask = model.encode(inputs)  # [batch, src_len, d], [batch, 1, 1, src_len]
  reordered_keys = None
  if cached and beam_size > 1:
    # Beam-folded cache over the untiled memory: the encoder's keys/values once
    # per sentence, and beams swapping histories reorder the ancestry only.
    state = model.init_cache(memory, length, beam_size=beam_size)
    reordered_keys = ("ancestry",)
    fn = cached_logits_fn(model, mask)
  else:
    memory = tf.nest.map_structure(lambda m: tf.repeat(m, beam_size, axis=0), memory)
    mask = tf.repeat(mask, beam_size, axis=0)  # memory: a tensor, or an ensemble's tuple
    if cached:
      state = model.init_cache(memory, length)
      fn = cached_logits_fn(model, mask)
    else:
      state = {}
      fn = uncached_logits_fn(model, memory, mask, prefix_only=prefix_only)
  if constraint is not None:
    fn = constraint.wrap(fn, tf.repeat(inputs, beam_size, axis=0))
  return Prepared(fn, state, tf.shape(inputs)[0], length, decode_lengths, reordered_keys,
                  force)
