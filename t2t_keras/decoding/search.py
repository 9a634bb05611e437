"""The search decode settings ask for: beam search, greedy search for beam size 1,
or sampling (sampling_method=random: beam_size independent samples per sentence).

    search_fn = search.from_settings(model, parse_decode_hparams("beam_size=4").search)
    ids, scores = search_fn(inputs)   # int32 [batch, src_len] ->
    # ids int32 [batch, beam, max_len] (best first, 0 after EOS), scores float32 [batch, beam]

Beam size 1 runs greedy search, as t2t does, in beam search's output format and
scored as beam search scores (log prob / length penalty): the 2k-candidate
search with k = 1 would keep the better of the two best extensions when it ends
in EOS, which argmax decoding never picks. `decoding.translate` (files, text) and
`serving.export` (the SavedModel) both build their search here.

Sampling runs greedy search's loop with `sampling.sampler` choosing each
token; with beam_size k it draws k samples of each sentence (the rows repeated,
each copy with its own noise), returned best score first, scored as greedy
outputs are (the model's log prob / length penalty, whatever the temperature).
"""

import collections
import functools

import tensorflow as tf

from t2t_keras.decoding import sampling as sampling_lib
from t2t_keras.decoding.beam_search import beam_search_with_steps
from t2t_keras.decoding.greedy import greedy_loop
from t2t_keras.decoding.search_common import length_penalty, prepare
from t2t_keras.ids import EOS_ID

Sampling = collections.namedtuple("Sampling", ["temperature", "top_k", "top_p", "seed"])
Sampling.__doc__ = """sampling_method=random's settings: temperature (0: argmax), top_k
(0: all tokens), top_p (1.0: off), seed."""


def search_with_steps(model, inputs, beam_size=4, alpha=0.6, extra_length=50,
                      max_decode_length=None, eos_id=EOS_ID, stop_early=True, cached=True,
                      prefix_only=False, constraint=None, sampling=None, prefix=None):
  """(ids [batch, beam, max_len], scores [batch, beam], steps int32): `beam_search`'s
  arguments and outputs (a target `prefix` included), for every beam size; with
  `sampling` (a `Sampling`), beam_size samples per sentence."""
  if sampling is not None:
    return sample_with_steps(model, inputs, beam_size, alpha, extra_length, max_decode_length,
                             eos_id, cached, prefix_only, constraint, sampling, prefix)
  if beam_size > 1:
    return beam_search_with_steps(model, inputs, beam_size, alpha, extra_length,
                                  max_decode_length, eos_id, stop_early, cached,
                                  prefix_only=prefix_only, constraint=constraint,
                                  prefix=prefix)
  p = prepare(model, inputs, 1, extra_length, max_decode_length, cached,
              prefix_only=prefix_only, constraint=constraint, prefix=prefix)
  ids, log_probs, steps = greedy_loop(p.fn, p.state, p.batch_size, p.length, p.decode_lengths,
                                      eos_id, force=p.force)
  lengths = output_lengths(ids, p.decode_lengths, eos_id)
  return ids[:, None], (log_probs / length_penalty(lengths, alpha))[:, None], steps


def sample_with_steps(model, inputs, num_samples, alpha, extra_length, max_decode_length,
                      eos_id, cached, prefix_only, constraint, sampling, prefix=None):
  """`num_samples` sampled outputs per sentence: (ids [batch, num_samples, max_len],
  scores [batch, num_samples] best first, steps)."""
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  batch = tf.shape(inputs)[0]
  rows = tf.repeat(inputs, num_samples, axis=0)  # sentence-major: s0 s0 s1 s1 ...
  if prefix is not None:
    prefix = tf.repeat(tf.convert_to_tensor(prefix, tf.int32), num_samples, axis=0)
  p = prepare(model, rows, 1, extra_length, max_decode_length, cached,
              prefix_only=prefix_only, constraint=constraint, prefix=prefix)
  pick = sampling_lib.sampler(sampling.temperature, sampling.top_k, sampling.top_p,
                              sampling.seed, rows, model.vocab_size, copies=num_samples)
  ids, log_probs, steps = greedy_loop(p.fn, p.state, p.batch_size, p.length, p.decode_lengths,
                                      eos_id, pick=pick, force=p.force)
  scores = log_probs / length_penalty(output_lengths(ids, p.decode_lengths, eos_id), alpha)
  scores = tf.reshape(scores, [batch, num_samples])
  ids = tf.reshape(ids, [batch, num_samples, -1])
  order = tf.argsort(scores, axis=1, direction="DESCENDING", stable=True)
  return (tf.gather(ids, order, axis=1, batch_dims=1),
          tf.gather(scores, order, axis=1, batch_dims=1), steps)


def output_lengths(ids, max_lengths, eos_id=EOS_ID):
  """int32 [batch]: tokens up to and including the first EOS of ids [batch, max_len], or
  max_lengths [batch] (where the loop stopped a sentence) when it has none."""
  is_eos = tf.equal(ids, eos_id)
  return tf.where(tf.reduce_any(is_eos, 1),
                  tf.argmax(tf.cast(is_eos, tf.int32), 1, output_type=tf.int32) + 1,
                  max_lengths)


def search(model, inputs, **kwargs):
  """(ids, scores) of `search_with_steps`."""
  ids, scores, _ = search_with_steps(model, inputs, **kwargs)
  return ids, scores


def sampling_from_settings(search_settings):
  """A `Sampling` of a `DecodeSettings.search` with sampling_method=random, None for
  argmax (beam or greedy search)."""
  if search_settings.sampling_method != "random":
    return None
  return Sampling(float(search_settings.sampling_temp),
                  int(max(search_settings.sampling_keep_top_k, 0)),
                  float(search_settings.sampling_keep_top_p), int(search_settings.sampling_seed))


def constrained_from_settings(model, search_settings):
  """Lexically constrained beam search (`lexical.py`) with a `DecodeSettings.search`, as a
  function (inputs [B, S], tokens [B, C, T], lengths [B, C], fail [B, C, T]) -> (ids
  [B, K, L], scores [B, K], met bool [B]); InputError for sampling, which has no such
  search."""
  from t2t_keras.decoding import lexical  # pylint: disable=import-outside-toplevel
  from t2t_keras.errors import InputError  # pylint: disable=import-outside-toplevel
  s = search_settings
  if s.sampling_method != "argmax":
    raise InputError("terminology constraints run with beam search; sampling "
                     "(sampling_method=random) cannot take them")

  def fn(inputs, tokens, lengths, fail):
    return lexical.constrained_beam_search(
        model, inputs, lexical.Constraints(tokens, lengths, fail), beam_size=s.beam_size,
        alpha=s.alpha, extra_length=s.extra_length,
        max_decode_length=s.max_decode_length or None, stop_early=s.stop_early)

  return fn


def from_settings(model, search_settings, constraint=None):
  """The search a `DecodeSettings.search` asks for (beam_size, alpha, extra_length,
  max_decode_length, stop_early, sampling_*), as a function of int32 [batch, src_len] ids."""
  s = search_settings
  return functools.partial(search, model, beam_size=s.beam_size, alpha=s.alpha,
                           extra_length=s.extra_length,
                           max_decode_length=s.max_decode_length or None,
                           stop_early=s.stop_early, constraint=constraint,
                           sampling=sampling_from_settings(s))
