"""What both searches (beam_search.py, greedy.py) need around the model.

`SearchOptions` is what every search takes beside the model and its inputs.
`prepare` encodes a batch once and returns what a search loop runs on: a
next-token function over the model (cached: one decoder step with the k/v
cache; uncached: the whole decoder again, the reference), its state, each
sentence's maximum output length and the output buffer's length. Also: the
length penalty, a step's log probs, and writes into fixed-size buffers (static
shapes, so XLA compiles one program).
"""

import collections
import dataclasses
from typing import Optional

import tensorflow as tf

from t2t_keras.ids import EOS_ID, PAD_ID

NEG_INF = -1e7  # t2t's "infinity" for log probs: large but finite, so NEG_INF * 0 stays 0
# A beam slot that holds no hypothesis scores NEG_INF; a score below this is such a slot.
NO_HYPOTHESIS = NEG_INF / 10


Sampling = collections.namedtuple("Sampling", ["temperature", "top_k", "top_p", "seed"])
Sampling.__doc__ = """sampling_method=random's settings: temperature (0: argmax), top_k
(0: all tokens), top_p (1.0: off), seed."""


@dataclasses.dataclass(frozen=True)
class SearchOptions:
  """What a search takes beside the model and its inputs.

  beam_size: hypotheses kept per sentence (1: greedy search), or with `sampling` the
    samples drawn per sentence. alpha, length_penalty_kind: the length penalty
    (`length_penalty`; "gnmt" or "length").
  extra_length, max_decode_length: an output's most ids (`output_limit`; None: no cap).
  stop_early: t2t's early termination of beam search (off: run to the longest output).
  sampling: a `Sampling` (sampling_method=random), or None: argmax.
  eos_id: the end symbol (an id never emitted forces the longest outputs).
  cached: one decoder step per token with the k/v cache; False re-runs the whole
    decoder at every step (the reference), over the output so far only with
    `prefix_only` (dynamic shapes: not for XLA).
  `from_settings` makes them from a `DecodeSettings.search`; eos_id, cached and
  prefix_only are the tests' and benchmarks' knobs.
  """
  beam_size: int = 4
  alpha: float = 0.6
  length_penalty_kind: str = "gnmt"
  extra_length: int = 50
  max_decode_length: Optional[int] = None
  stop_early: bool = True
  sampling: Optional[Sampling] = None
  eos_id: int = EOS_ID
  cached: bool = True
  prefix_only: bool = False

  @classmethod
  def from_settings(cls, search_settings):
    """The options of a `DecodeSettings.search` (its sampling_* fields as a `Sampling`
    where sampling_method=random)."""
    s = search_settings
    sampling = None
    if s.sampling_method == "random":
      sampling = Sampling(float(s.sampling_temp), int(max(s.sampling_keep_top_k, 0)),
                          float(s.sampling_keep_top_p), int(s.sampling_seed))
    return cls(beam_size=s.beam_size, alpha=s.alpha,
               length_penalty_kind=s.length_penalty_kind, extra_length=s.extra_length,
               max_decode_length=s.max_decode_length or None, stop_early=s.stop_early,
               sampling=sampling)

  def replace(self, **changes):
    return dataclasses.replace(self, **changes)

  def length_penalty(self, length):
    """float32, length's shape: what a score of `length` ids (EOS included) divides its
    log prob by (`length_penalty` of these options' alpha and kind)."""
    return length_penalty(length, self.alpha, self.length_penalty_kind)


def length_penalty(length, alpha, kind="gnmt"):
  """The length penalty of outputs of `length` ids, EOS included, float32:
  kind "gnmt": ((5 + length) / 6) ** alpha (Wu et al., 2016; t2t's, the paper's);
  kind "length": length ** alpha (fairseq's `--lenpen`: its generator divides a finished
  hypothesis' score by (step + 1) ** lenpen, the ids EOS included; CTranslate2's
  `length_penalty`)."""
  length, alpha = tf.cast(length, tf.float32), tf.cast(alpha, tf.float32)
  if kind == "gnmt":
    return tf.pow((5.0 + length) / 6.0, alpha)
  if kind == "length":
    return tf.pow(length, alpha)
  raise ValueError(f"length_penalty_kind={kind!r}: one of gnmt, length")


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


def position_cap(hparams):
  """The most target positions a model of `hparams` embeds: max_positions with learned
  positions (pos=emb), else None (sinusoidal positions have no end)."""
  if hparams is None or hparams.get("pos") != "emb":
    return None
  return hparams.max_positions


def output_limit(width, extra_length, max_decode_length=None, max_positions=None):
  """The most output ids, EOS included, for sources `width` ids wide (int, or int32 scalar
  tensor): width + extra_length, or max_decode_length where given, capped at
  max_positions (`position_cap`). The searches' buffer, the decoder's and the
  SavedModel's checks of prefixes and phrases all take it from here."""
  length = max_decode_length or width + extra_length
  if max_positions:
    length = (tf.minimum(length, max_positions) if tf.is_tensor(length)
              else min(length, max_positions))
  return length


def prefix_width(width, longest_prefix, extra_length, max_decode_length=None):
  """The width to pad sources `width` ids wide to (ints, or int32 scalar tensors) so that
  their output buffer holds a target prefix of `longest_prefix` ids and EOS: `width`
  where max_decode_length fixes the buffer, else at least longest_prefix + 1 -
  extra_length. The decoder's batches and the SavedModel's `prefix` both use it."""
  if max_decode_length:
    return width
  need = longest_prefix + 1 - extra_length
  if tf.is_tensor(width) or tf.is_tensor(need):
    return tf.maximum(width, need)
  return max(width, need)


def buffer_length(model, inputs, extra_length, max_decode_length=None):
  """Static-when-possible output buffer length (`output_limit` of the padded inputs)."""
  width = inputs.shape[1]
  width = width if width is not None else tf.shape(inputs)[1]
  return output_limit(width, extra_length, max_decode_length,
                      position_cap(getattr(model, "hparams", None)))


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
                 "force"], defaults=(None, None))
Prepared.__doc__ = """What a search loop runs on (`prepare`'s result).

  fn: symbols_to_logits_fn, (ids int32 [batch * beam, length + 1], i, state) ->
    (logits [batch * beam, vocab], state).
  state: its initial state (the model's cache, or {} uncached).
  batch_size: int32 scalar; length: the output buffer's length (int or scalar);
  decode_lengths: int32 [batch], each sentence's maximum output length.
  reordered_keys: the state keys that follow the beams when they swap histories
    (None, the default: every leaf the function changes).
  force: None (the default), or (log_probs [batch * beam, vocab], i) -> log_probs,
    applied by the loop after each step's softmax (`prefix_forcing`).
"""


def prepare(model, inputs, options, constraint=None, prefix=None):
  """Encodes `inputs` once and builds the next-token function of a search over it.

  Args:
    model: a Transformer (encode / init_cache / decode).
    inputs: int32 [batch, src_len] source ids (EOS-terminated, 0-padded).
    options: `SearchOptions`: beam_size hypotheses per sentence (1: greedy); maximum
      output length = non-pad input length + extra_length, capped at max_decode_length
      (also the buffer length); cached and prefix_only.
    constraint: optional; its `wrap(fn, inputs)` forbids tokens at each step.
    prefix: optional int32 [batch, P], each output's first tokens (0-padded; a row of
      zeros: no prefix). A sentence's maximum output length grows to its prefix's
      length + 1 where that is longer, up to the buffer's length.
  Returns:
    a `Prepared`.
  """
  beam_size, cached = options.beam_size, options.cached
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  length = buffer_length(model, inputs, options.extra_length, options.max_decode_length)
  decode_lengths = decode_lengths_for(inputs, options.extra_length, length)
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
      fn = uncached_logits_fn(model, memory, mask, prefix_only=options.prefix_only)
  if constraint is not None:
    fn = constraint.wrap(fn, tf.repeat(inputs, beam_size, axis=0))
  return Prepared(fn, state, tf.shape(inputs)[0], length, decode_lengths, reordered_keys,
                  force)
