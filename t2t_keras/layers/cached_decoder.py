"""A decoder layer one step at a time over a cache: incremental decoding.

    cache = init_layer_cache(layer, memory, max_decode_length, beam_size=4)
    x, cache = decoder_layer_step(layer, x, cache, index, self_mask, memory_mask, beams=4)

The same sublayers, residuals and order as `DecoderLayer.call` (the paper's layer), for
one query step: the self-attention's keys and values of the steps so far are kept in
the cache and this step's are written at `index`; the encoder's keys and values are
computed once per source (`init_layer_cache`). Dropout is off (decoding).

A layer's cache is {"self": {"k", "v"}, "memory": {"k", "v"}} (heads before length:
attention reads it without transposes). Plain, its self-attention part is
[rows, h, length, d] and the memory's [rows, h, src_len, d], one row per decoder row.
Beam-folded (`beams`), it is [batch, h, beams, length, d], written where each beam slot
was and never reordered when beams swap histories (`beam_history_mask` lets each beam
attend to the slots its history was in), and the memory's keys and values are held once
per sentence, [batch, h, src_len, d]: a beam search copies no cache at all.
"""

import tensorflow as tf

from t2t_keras.layers.attention import scaled_dot_product_attention


def init_layer_cache(layer, memory, max_decode_length, beam_size=None):
  """A `DecoderLayer`'s zeroed self-attention cache of `max_decode_length` steps and
  the memory's keys and values.

  Without `beam_size`: memory [rows, src_len, d_model], the self-attention cache
  [rows, h, max_decode_length, d]. With `beam_size`: memory [batch, src_len, d_model],
  one row per sentence, and the self-attention cache [batch, h, beam_size,
  max_decode_length, d] (module docstring).
  """
  attention = layer.self_attention
  rows = tf.shape(memory)[0]
  beams = [beam_size] if beam_size else []
  zeros = lambda size: tf.zeros([rows, attention.num_heads] + beams + [max_decode_length, size],
                                layer.compute_dtype)
  k, v = layer.encdec_attention.project(
      memory, [layer.encdec_attention.key_dense, layer.encdec_attention.value_dense])
  return {"self": {"k": zeros(attention.key_size), "v": zeros(attention.value_size)},
          "memory": {"k": k, "v": v}}


def decoder_layer_step(layer, x, cache, index, self_mask, memory_mask, beams=None):
  """One decoding step of a `DecoderLayer`: (output [rows, 1, d_model], the cache with
  this step's keys and values written).

  Args:
    layer: the `DecoderLayer`.
    x: [rows, 1, d_model], this step's input (rows = batch * beams when beam-folded,
      each sentence's beams adjacent).
    cache: the layer's cache (`init_layer_cache`); index: int scalar, the step.
    self_mask: bool, [1, 1, 1, length] (`cache_step_mask`) or, beam-folded, [batch, 1,
      beams, beams * length] (`beam_history_mask`).
    memory_mask: bool [rows or batch, 1, 1, src_len].
    beams: None, or the beam size of a beam-folded cache.
  """
  written = {}

  def attend_self(h):
    y, written["self"] = self_attention_step(layer.self_attention, h, cache["self"], index,
                                             self_mask, beams)
    return y

  x = layer.apply_sublayers(x, {
      "self_attention": attend_self,
      "encdec_attention": lambda h: memory_attention_step(
          layer.encdec_attention, h, cache["memory"], memory_mask, beams),
      "ffn": layer.ffn})
  return x, {"self": written["self"], "memory": cache["memory"]}


def self_attention_step(attention, query, cache, index, mask, beams=None):
  """One step of a `MultiHeadAttention`'s self-attention: (output [rows, 1, d_model],
  the cache {"k", "v"} with this step's keys and values written at `index`).

  Plain: query [rows, 1, d_model], cache [rows, h, length, d]. Beam-folded: query
  [batch * beams, 1, d_model], projected as [batch, beams, d_model] (which gives the
  heads-first [batch, h, beams, d] with no transposes), cache [batch, h, beams,
  length, d].
  """
  layers = [attention.query_dense, attention.key_dense, attention.value_dense]
  if not beams:
    q, k, v = attention.project(query, layers)
    k, v = write_step(cache["k"], k, index), write_step(cache["v"], v, index)
    out, _ = scaled_dot_product_attention(q, k, v, mask, scale_query=False)
    return attention.merge_heads(out), {"k": k, "v": v}
  rows, width = tf.shape(query)[0], query.shape[-1]
  batch = tf.shape(cache["k"])[0]
  q, k, v = attention.project(tf.reshape(query, [-1, beams, width]), layers)
  k = write_step(cache["k"], k[:, :, :, None], index)  # [batch, h, beams, 1, d]
  v = write_step(cache["v"], v[:, :, :, None], index)
  flat = lambda x, d: tf.reshape(x, [batch, attention.num_heads, -1, d])
  out, _ = scaled_dot_product_attention(q, flat(k, attention.key_size),
                                        flat(v, attention.value_size), mask,
                                        scale_query=False)  # [batch, h, beams, d_v]
  out = tf.reshape(attention.merge_heads(out), [rows, 1, attention.output_size])
  return out, {"k": k, "v": v}


def memory_attention_step(attention, query, cache, mask, beams=None):
  """One step of a `MultiHeadAttention`'s encoder-decoder attention over the cached
  keys and values of the memory: output [rows, 1, d_model].

  Beam-folded, the keys and values are held once per sentence, [batch, h, src_len, d],
  and the beams' queries are folded into the query axis: each (sentence, head) is one
  [beams, d_k] x [d_k, src_len] product, the keys and values read once per step instead
  of once per beam. mask: bool [batch, 1, 1, src_len].
  """
  rows, width = tf.shape(query)[0], query.shape[-1]
  if beams:
    query = tf.reshape(query, [-1, beams, width])  # [batch, beams, d_model]
  (q,) = attention.project(query, [attention.query_dense])
  out, _ = scaled_dot_product_attention(q, cache["k"], cache["v"], mask, scale_query=False)
  out = attention.merge_heads(out)
  return tf.reshape(out, [rows, 1, attention.output_size]) if beams else out


def write_step(cache, update, index):
  """cache [..., length, d] with update [..., 1, d] written at position `index`.

  A scatter of one d-vector per leading index: XLA updates the loop's buffer
  in place, where a select over the whole cache (tf.where) copied all of it at
  every decoding step (a quarter of beam search's time at length 40).
  """
  shape = tf.shape(cache)
  rows = tf.reduce_prod(shape[:-2])
  flat = tf.reshape(cache, [rows, shape[-2], shape[-1]])
  at = tf.stack([tf.range(rows), tf.fill([rows], tf.cast(index, tf.int32))], axis=1)
  updates = tf.reshape(tf.cast(update, cache.dtype), [rows, shape[-1]])
  return tf.reshape(tf.tensor_scatter_nd_update(flat, at, updates), shape)


def beam_history_mask(ancestry, beam_size, index):
  """Self-attention mask over a beam-folded cache [batch, h, beams, length, d].

  Args:
    ancestry: int [batch * beams, length]: for each beam, the slot (0..beams-1)
      its history occupied at every step so far.
    beam_size: beams (static).
    index: the decoding step; later positions are masked.
  Returns:
    bool [batch, 1, beams, beams * length]: beam i may attend slot j at step t
    iff ancestry[i, t] == j and t <= index.
  """
  length = tf.shape(ancestry)[1]
  history = tf.reshape(ancestry, [-1, beam_size, 1, length])
  allowed = tf.logical_and(tf.equal(history, tf.range(beam_size)[:, None]),
                           tf.range(length) <= index)  # [batch, beams, beams, length]
  return tf.reshape(allowed, [-1, 1, beam_size, beam_size * length])


def cache_step_mask(cache_length, index):
  """bool [1, 1, 1, cache_length], True at cache positions <= index (decoding step)."""
  return (tf.range(cache_length) <= index)[None, None, None, :]
