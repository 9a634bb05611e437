"""The decoder's incremental-decoding cache: its layout and each step's self-attention mask.

    cache = init_cache(decoder_layers, memory, max_decode_length, beam_size=4)
    self_mask, new_cache, beams = step_mask(cache, index)

The cache is {"layer_i": {"self": {"k", "v"}, "memory": {"k", "v"}}} (`layers/cached_decoder.py`'s
`init_layer_cache`). Without a beam size there is one decoder row per memory row and step i
attends to cache positions 0..i. With a beam size the self-attention caches are
beam-folded ([batch, h, beams, length, d]) and never reordered by a beam search: the
cache's "ancestry" int32 [batch * beams, length] records which beam slot each beam's
history occupied at every step, and is the only part a beam search reorders.
"""

import tensorflow as tf

from t2t_keras.layers.cached_decoder import (beam_history_mask, cache_step_mask,
                                             init_layer_cache)


def init_cache(decoder_layers, memory, max_decode_length, beam_size=None):
  """The cache of `decoder_layers` for `max_decode_length` steps over `memory` [batch,
  src_len, d]; with `beam_size`, for batch * beam_size decoder rows (each sentence's beams
  adjacent) over the untiled memory, beam-folded, with the ancestry."""
  cache = {f"layer_{i}": init_layer_cache(layer, memory, max_decode_length, beam_size)
           for i, layer in enumerate(decoder_layers)}
  if beam_size:
    cache["ancestry"] = tf.zeros([tf.shape(memory)[0] * beam_size, max_decode_length],
                                 tf.int32)
  return cache


def beams(cache):
  """The beam size of a beam-folded cache (static int), else None."""
  return cache["layer_0"]["self"]["k"].shape[2] if "ancestry" in cache else None


def step_mask(cache, index, self_mask=None):
  """(the self-attention mask of step `index`, the new cache's non-layer entries (a dict:
  the ancestry with this step's slots, when beam-folded), the beam size or None).

  The mask is bool [batch, 1, beams, beams * length] when beam-folded
  (`beam_history_mask`), else `self_mask` or [1, 1, 1, length] (`cache_step_mask`).
  """
  folded = beams(cache)
  if not folded:
    length = tf.shape(cache["layer_0"]["self"]["k"])[2]
    return (cache_step_mask(length, index) if self_mask is None else self_mask), {}, None
  ancestry = cache["ancestry"]
  slot = tf.range(tf.shape(ancestry)[0]) % folded
  ancestry = tf.where(tf.equal(tf.range(tf.shape(ancestry)[1]), index)[None],
                      slot[:, None], ancestry)
  return beam_history_mask(ancestry, folded, index), {"ancestry": ancestry}, folded
