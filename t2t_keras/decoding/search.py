"""The search a decoding hparams set asks for: beam search, or greedy search for beam size 1.

    search_fn = search.from_hparams(model, decoder.decode_hparams("beam_size=4"))
    ids, scores = search_fn(inputs)   # int32 [batch, src_len] ->
    # ids int32 [batch, beam, max_len] (best first, 0 after EOS), scores float32 [batch, beam]

Beam size 1 runs greedy search, as t2t does, in beam search's output format and
scored as beam search scores (log prob / length penalty): the 2k-candidate
search with k = 1 would keep the better of the two best extensions when it ends
in EOS, which argmax decoding never picks. `decoding.decoder` (files, text) and
`serving.export` (the SavedModel) both build their search here.
"""

import functools

import tensorflow as tf

from t2t_keras.decoding.beam_search import beam_search_with_steps
from t2t_keras.decoding.greedy import greedy_loop
from t2t_keras.decoding.search_common import length_penalty, prepare
from t2t_keras.ids import EOS_ID


def search_with_steps(model, inputs, beam_size=4, alpha=0.6, extra_length=50,
                      max_decode_length=None, eos_id=EOS_ID, stop_early=True, cached=True,
                      prefix_only=False, constraint=None):
  """(ids [batch, beam, max_len], scores [batch, beam], steps int32): `beam_search`'s
  arguments and outputs, for every beam size."""
  if beam_size > 1:
    return beam_search_with_steps(model, inputs, beam_size, alpha, extra_length,
                                  max_decode_length, eos_id, stop_early, cached,
                                  prefix_only=prefix_only, constraint=constraint)
  p = prepare(model, inputs, 1, extra_length, max_decode_length, cached,
              prefix_only=prefix_only, constraint=constraint)
  ids, log_probs, steps = greedy_loop(p.fn, p.state, p.batch_size, p.length, p.decode_lengths,
                                      eos_id)
  lengths = output_lengths(ids, p.decode_lengths, eos_id)
  return ids[:, None], (log_probs / length_penalty(lengths, alpha))[:, None], steps


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


def from_hparams(model, hparams, constraint=None):
  """The search decoding `hparams` ask for (beam_size, alpha, extra_length,
  max_decode_length, stop_early), as a function of int32 [batch, src_len] ids."""
  return functools.partial(search, model, beam_size=hparams.beam_size, alpha=hparams.alpha,
                           extra_length=hparams.extra_length,
                           max_decode_length=hparams.max_decode_length or None,
                           stop_early=hparams.stop_early, constraint=constraint)
