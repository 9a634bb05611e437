"""The searches as strategy objects: beam search, greedy search for beam size 1, sampling
(sampling_method=random: beam_size independent samples per sentence), and lexically
constrained beam search; each owns its `SearchOptions`.

    strategy = search.from_settings(model, parse_decode_hparams("beam_size=4").search)
    ids, scores = strategy(inputs)   # int32 [batch, src_len] ->
    # ids int32 [batch, beam, max_len] (best first, 0 after EOS), scores float32 [batch, beam]
    ids, scores = strategy(inputs, prefix=prefix)       # outputs start with their prefixes

    ids, scores = search.search(model, inputs, SearchOptions(beam_size=4))  # one call

Beam size 1 runs greedy search, as t2t does, in beam search's output format and
scored as beam search scores (log prob / length penalty): the 2k-candidate
search with k = 1 would keep the better of the two best extensions when it ends
in EOS, which argmax decoding never picks. `decoding.translate` (files, text) and
`exporting.export` (the SavedModel) both build their search here (`from_settings`,
`constrained_from_settings`), as OpenNMT-tf's `DecodingStrategy.from_params` picks one.

Sampling runs greedy search's loop with `sampling.sampler` choosing each
token; with beam_size k it draws k samples of each sentence (the rows repeated,
each copy with its own noise), returned best score first, scored as greedy
outputs are (the model's log prob / length penalty, whatever the temperature).
"""

import tensorflow as tf

from t2t_keras.decoding import sampling as sampling_lib
from t2t_keras.decoding.beam_search import beam_search_with_steps
from t2t_keras.decoding.greedy import greedy_loop
from t2t_keras.decoding.search_common import (  # noqa: F401  (Sampling: search.Sampling)
    Sampling, SearchOptions, prepare)
from t2t_keras.ids import EOS_ID

class Strategy:
  """A search over `model` with `options`; `constraint` (optional) forbids tokens at each
  step (`decoding/output_constraint.py`). Called on int32 source ids [batch, src_len] (and
  optionally target prefixes [batch, P], 0-padded): (ids [batch, beam, max_len], scores
  [batch, beam]); `with_steps` also returns the decoder steps run."""

  def __init__(self, model, options, constraint=None):
    self.model = model
    self.options = options
    self.constraint = constraint

  def __call__(self, inputs, prefix=None):
    ids, scores, _ = self.with_steps(inputs, prefix)
    return ids, scores

  def with_steps(self, inputs, prefix=None):
    raise NotImplementedError


class BeamSearch(Strategy):
  """t2t's beam search (`beam_search.py`), options.beam_size >= 2."""

  def with_steps(self, inputs, prefix=None):
    return beam_search_with_steps(self.model, inputs, self.options, self.constraint, prefix)


class GreedySearch(Strategy):
  """Argmax decoding (`greedy.py`) in beam search's format: beam 1, scored log prob /
  length penalty."""

  def with_steps(self, inputs, prefix=None):
    o = self.options
    p = prepare(self.model, inputs, o.replace(beam_size=1), self.constraint, prefix)
    ids, log_probs, steps = greedy_loop(p, o.eos_id)
    lengths = output_lengths(ids, p.decode_lengths, o.eos_id)
    return ids[:, None], (log_probs / o.length_penalty(lengths))[:, None], steps


class SamplingSearch(Strategy):
  """options.beam_size samples per sentence (options.sampling), best score first."""

  def with_steps(self, inputs, prefix=None):
    o, num_samples = self.options, self.options.beam_size
    inputs = tf.convert_to_tensor(inputs, tf.int32)
    batch = tf.shape(inputs)[0]
    rows = tf.repeat(inputs, num_samples, axis=0)  # sentence-major: s0 s0 s1 s1 ...
    if prefix is not None:
      prefix = tf.repeat(tf.convert_to_tensor(prefix, tf.int32), num_samples, axis=0)
    p = prepare(self.model, rows, o.replace(beam_size=1), self.constraint, prefix)
    s = o.sampling
    pick = sampling_lib.sampler(s.temperature, s.top_k, s.top_p, s.seed, rows,
                                self.model.vocab_size, copies=num_samples)
    ids, log_probs, steps = greedy_loop(p, o.eos_id, pick=pick)
    scores = log_probs / o.length_penalty(output_lengths(ids, p.decode_lengths, o.eos_id))
    scores = tf.reshape(scores, [batch, num_samples])
    ids = tf.reshape(ids, [batch, num_samples, -1])
    order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
    return (tf.gather(ids, order, axis=1, batch_dims=1),
            tf.gather(scores, order, axis=1, batch_dims=1), steps)


class ConstrainedBeamSearch(Strategy):
  """Beam search whose outputs hold each sentence's phrases (`lexical.py`); called as
  (inputs [B, S], tokens [B, C, T], lengths [B, C], fail [B, C, T]) -> (ids [B, K, L],
  scores [B, K], met bool [B])."""

  def __call__(self, inputs, tokens, lengths, fail):  # pylint: disable=arguments-differ
    from t2t_keras.decoding import lexical  # pylint: disable=import-outside-toplevel
    return lexical.constrained_beam_search(self.model, inputs,
                                           lexical.Terms(tokens, lengths, fail),
                                           self.options)


def output_lengths(ids, max_lengths, eos_id=EOS_ID):
  """int32 [batch]: tokens up to and including the first EOS of ids [batch, max_len], or
  max_lengths [batch] (where the loop stopped a sentence) when it has none."""
  is_eos = tf.equal(ids, eos_id)
  return tf.where(tf.reduce_any(is_eos, 1),
                  tf.argmax(tf.cast(is_eos, tf.int32), 1, output_type=tf.int32) + 1,
                  max_lengths)


def strategy_for(model, options, constraint=None):
  """The `Strategy` `options` ask for: sampling, greedy (beam_size 1) or beam search."""
  if options.sampling is not None:
    return SamplingSearch(model, options, constraint)
  if options.beam_size > 1:
    return BeamSearch(model, options, constraint)
  return GreedySearch(model, options, constraint)


def from_settings(model, search_settings, constraint=None):
  """The `Strategy` a `DecodeSettings.search` asks for (beam_size, alpha, extra_length,
  max_decode_length, stop_early, sampling_*)."""
  return strategy_for(model, SearchOptions.from_settings(search_settings), constraint)


def constrained_from_settings(model, search_settings):
  """The `ConstrainedBeamSearch` of a `DecodeSettings.search`; InputError for sampling,
  which has no such search."""
  from t2t_keras.errors import InputError  # pylint: disable=import-outside-toplevel
  if search_settings.sampling_method != "argmax":
    raise InputError("terminology constraints run with beam search; sampling "
                     "(sampling_method=random) cannot take them")
  return ConstrainedBeamSearch(model, SearchOptions.from_settings(search_settings))


def search_with_steps(model, inputs, options=SearchOptions(), constraint=None, prefix=None):
  """(ids [batch, beam, max_len], scores [batch, beam], steps int32) of the search
  `options` ask for (`strategy_for`), for every beam size."""
  return strategy_for(model, options, constraint).with_steps(inputs, prefix)


def search(model, inputs, options=SearchOptions(), constraint=None, prefix=None):
  """(ids, scores) of `search_with_steps`."""
  return strategy_for(model, options, constraint)(inputs, prefix)
