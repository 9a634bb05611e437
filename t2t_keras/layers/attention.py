"""Scaled dot-product and multi-head attention (section 3.2 of the paper).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1..head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Masks are boolean, True where attention is allowed, broadcastable to
[batch, heads, query_length, key_length]; masked logits are set to a large
negative value before the softmax.
"""

import keras
import tensorflow as tf

from t2t_keras.layers.dropout import Dropout


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, training=False):
  """softmax(q k^T / sqrt(d_k)) v.

  Args:
    q: [batch, heads, q_len, d_k].
    k: [batch, heads, k_len, d_k].
    v: [batch, heads, k_len, d_v].
    mask: bool, broadcastable to [batch, heads, q_len, k_len]; True = attend.
    dropout: optional layer applied to the attention weights.
  Returns:
    (output [batch, heads, q_len, d_v], weights float32 [batch, heads, q_len, k_len]).
  """
  depth = tf.cast(tf.shape(q)[-1], q.dtype)
  logits = tf.einsum("bhqd,bhkd->bhqk", q * tf.math.rsqrt(depth), k)
  logits = tf.cast(logits, tf.float32)  # softmax in float32, also under mixed precision
  if mask is not None:
    logits = tf.where(mask, logits, tf.constant(-1e9, tf.float32))
  weights = tf.nn.softmax(logits, axis=-1)
  attended = weights
  if dropout is not None:
    attended = dropout(attended, training=training)
  out = tf.einsum("bhqk,bhkd->bhqd", tf.cast(attended, v.dtype), v)
  return out, weights


class MultiHeadAttention(keras.layers.Layer):
  """Multi-head attention with h projections of d_k / d_v and the output projection W^O.

  Supports an incremental-decoding cache: self-attention keys/values of the
  steps decoded so far, and precomputed keys/values of the encoder output.

  Args:
    num_heads: h.
    key_size: d_k per head.
    value_size: d_v per head.
    output_size: d_model (width of W^O's output).
    dropout: dropout rate on the attention weights (0 in the paper).

  Call args:
    query: [batch, q_len, d_model].
    memory: [batch, k_len, d_model], or None for self-attention.
    attention_mask: bool, broadcastable to [batch, 1, q_len, k_len] (or
      [batch, q_len, k_len]).
    cache: optional dict {"k": [batch, h, L, d_k], "v": [batch, h, L, d_v]}
      (heads before length: attention reads it without transposes).
      For self-attention, this step's keys/values are written at `cache_index`
      (q_len must then be 1) and attention runs over the whole cache under
      `mask`. With `memory_kv=True`, the cache holds the encoder's keys/values
      and `memory` is not used.
  Returns:
    (output [batch, q_len, d_model], updated cache or None).

  Example:
    mha = MultiHeadAttention(8, 64, 64, 512)
    y, _ = mha(x, attention_mask=causal_mask(10))
  """

  def __init__(self, num_heads, key_size, value_size, output_size, dropout=0.0, **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.key_size = key_size
    self.value_size = value_size
    self.output_size = output_size
    self.dropout = dropout
    proj = lambda size, name: keras.layers.EinsumDense(
        "btd,dhk->bhtk", output_shape=(num_heads, None, size), name=name,
        dtype=self.dtype_policy)
    self.query_dense = proj(key_size, "query")
    self.key_dense = proj(key_size, "key")
    self.value_dense = proj(value_size, "value")
    self.output_dense = keras.layers.EinsumDense(
        "bhtk,hkd->btd", output_shape=(None, output_size), name="output",
        dtype=self.dtype_policy)
    self.attention_dropout = Dropout(dropout, dtype=self.dtype_policy)

  def build(self, query_shape, memory_shape=None):
    memory_shape = memory_shape or query_shape
    self.query_dense.build(query_shape)
    self.key_dense.build(memory_shape)
    self.value_dense.build(memory_shape)
    self.output_dense.build((None, self.num_heads, None, self.value_size))
    self.built = True

  def project_memory(self, memory):
    """Encoder-decoder keys and values, computed once per source: a cache dict."""
    return {"k": self.key_dense(memory), "v": self.value_dense(memory)}

  def call(self, query, memory=None, attention_mask=None, cache=None, cache_index=None,
           memory_kv=False, training=False, return_weights=False):
    q = self.query_dense(query)
    if memory_kv:
      k, v = cache["k"], cache["v"]
    else:
      source = query if memory is None else memory
      k, v = self.key_dense(source), self.value_dense(source)
      if cache is not None:
        # Write this step's key/value at cache_index; static shapes for XLA.
        length = tf.shape(cache["k"])[2]
        at = tf.equal(tf.range(length), cache_index)[None, None, :, None]
        k = tf.where(at, tf.cast(k, cache["k"].dtype), cache["k"])
        v = tf.where(at, tf.cast(v, cache["v"].dtype), cache["v"])
        cache = {"k": k, "v": v}
    if attention_mask is not None and attention_mask.shape.rank == 3:
      attention_mask = attention_mask[:, None]
    out, weights = scaled_dot_product_attention(
        q, k, v, attention_mask, self.attention_dropout, training)
    out = self.output_dense(out)
    if return_weights:
      return out, cache, weights
    return out, cache

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, key_size=self.key_size,
                  value_size=self.value_size, output_size=self.output_size,
                  dropout=self.dropout)
    return config


def padding_mask(ids):
  """[batch, len] ids -> bool [batch, 1, 1, len], True at non-pad (id != 0)."""
  return tf.not_equal(ids, 0)[:, None, None, :]


def causal_mask(length):
  """bool [1, 1, length, length], True where key position <= query position."""
  i = tf.range(length)
  return (i[None, :] <= i[:, None])[None, None]


def cache_step_mask(cache_length, index):
  """bool [1, 1, 1, cache_length], True at cache positions <= index (decoding step)."""
  return (tf.range(cache_length) <= index)[None, None, None, :]
