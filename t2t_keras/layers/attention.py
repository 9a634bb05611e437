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


def scaled_dot_product_attention(q, k, v, mask=None, dropout=None, training=False,
                                 scale_query=True):
  """softmax(q k^T / sqrt(d_k)) v.

  Args:
    q: [batch, heads, q_len, d_k]; with `scale_query=False`, q / sqrt(d_k) already
      (`MultiHeadAttention` folds the scale into its query kernel).
    k: [batch, heads, k_len, d_k].
    v: [batch, heads, k_len, d_v].
    mask: bool, broadcastable to [batch, heads, q_len, k_len]; True = attend.
    dropout: optional layer applied to the attention weights.
  Returns:
    (output [batch, heads, q_len, d_v], weights float32 [batch, heads, q_len, k_len]).
  """
  if scale_query:
    q = q * tf.math.rsqrt(tf.cast(tf.shape(q)[-1], q.dtype))
  logits = tf.matmul(q, k, transpose_b=True)
  logits = tf.cast(logits, tf.float32)  # softmax in float32, also under mixed precision
  if mask is not None:
    logits = tf.where(mask, logits, tf.constant(-1e9, tf.float32))
  weights = tf.nn.softmax(logits, axis=-1)
  attended = weights
  if dropout is not None:
    attended = dropout(attended, training=training)
  out = tf.matmul(tf.cast(attended, v.dtype), v)
  return out, weights


class MultiHeadAttention(keras.layers.Layer):
  """Multi-head attention with h projections of d_k / d_v and the output projection W^O.

  Args:
    num_heads: h.
    key_size: d_k per head.
    value_size: d_v per head.
    output_size: d_model (width of W^O's output).
    dropout: dropout rate on the attention weights (0 in the paper).
    use_bias: biases on the four projections (Marian's bq, bk, bv, bo; the paper's
      and t2t's projections have none).

  Call args:
    query: [batch, q_len, d_model].
    memory: [batch, k_len, d_model], or None for self-attention.
    attention_mask: bool, broadcastable to [batch, 1, q_len, k_len] (or
      [batch, q_len, k_len]).
  Returns:
    output [batch, q_len, d_model]; `attend` also returns the weights.

  Incremental decoding (one query step over cached keys and values, plain or
  beam-folded) is `layers/cached_decoder.py`'s, over `project` and `merge_heads`.

  Example:
    mha = MultiHeadAttention(8, 64, 64, 512)
    y = mha(x, attention_mask=causal_mask(10))
  """

  def __init__(self, num_heads, key_size, value_size, output_size, dropout=0.0,
               use_bias=False, **kwargs):
    super().__init__(**kwargs)
    self.num_heads = num_heads
    self.key_size = key_size
    self.value_size = value_size
    self.output_size = output_size
    self.dropout = dropout
    self.use_bias = use_bias
    # Each projection's bias (with use_bias) has its kernel's output axes: [h, size]
    # for the queries, keys and values, [d_model] for W^O.
    proj = lambda size, name: keras.layers.EinsumDense(
        "btd,dhk->bhtk", output_shape=(num_heads, None, size), name=name,
        bias_axes="hk" if use_bias else None, dtype=self.dtype_policy)
    self.query_dense = proj(key_size, "query")
    self.key_dense = proj(key_size, "key")
    self.value_dense = proj(value_size, "value")
    self.output_dense = keras.layers.EinsumDense(
        "bhtk,hkd->btd", output_shape=(None, output_size), name="output",
        bias_axes="d" if use_bias else None, dtype=self.dtype_policy)
    self.attention_dropout = Dropout(dropout, dtype=self.dtype_policy)

  def build(self, query_shape, memory_shape=None):
    memory_shape = memory_shape or query_shape
    self.query_dense.build(query_shape)
    self.key_dense.build(memory_shape)
    self.value_dense.build(memory_shape)
    self.output_dense.build((None, self.num_heads, None, self.value_size))
    self.built = True

  def call(self, query, memory=None, attention_mask=None, training=False):
    return self.attend(query, memory, attention_mask, training)[0]

  def attend(self, query, memory=None, attention_mask=None, training=False):
    """`call`'s output [batch, q_len, d_model] and the attention weights float32
    [batch, h, q_len, k_len]."""
    if memory is None:  # self-attention: Q, K and V in one matmul
      q, k, v = self.project(query, [self.query_dense, self.key_dense, self.value_dense])
    else:
      (q,) = self.project(query, [self.query_dense])
      k, v = self.project(memory, [self.key_dense, self.value_dense])
    if attention_mask is not None and attention_mask.shape.rank == 3:
      attention_mask = attention_mask[:, None]
    heads, weights = scaled_dot_product_attention(
        q, k, v, attention_mask, self.attention_dropout, training, scale_query=False)
    return self.merge_heads(heads), weights

  def project(self, x, layers):
    """x [batch, len, d_model] -> one [batch, h, len, size] per projection layer.

    The layers' kernels ([d_model, h, size] each) are concatenated into one
    [d_model, sum of h * size] matrix: one matmul instead of one per
    projection, and one transpose to heads-first when the sizes agree. The
    query kernel comes scaled by 1 / sqrt(d_k), so the queries are q / sqrt(d_k)
    (scaling the [d_model, h * d_k] kernel, not the [batch, h, len, d_k] queries,
    forward and backward; with biases, the query's bias too).
    """
    x = tf.cast(x, self.compute_dtype)  # as Keras' autocast (the cached path calls this)
    shape = tf.shape(x)
    width = x.shape[-1]
    kernels = [tf.reshape(tf.cast(l.kernel, self.compute_dtype), [width, -1]) for l in layers]
    biases = [tf.reshape(tf.cast(l.bias, self.compute_dtype), [-1])
              for l in layers] if self.use_bias else []
    if layers[0] is self.query_dense:
      scale = tf.cast(self.key_size ** -0.5, self.compute_dtype)
      kernels[0] = kernels[0] * scale
      biases[:1] = [b * scale for b in biases[:1]]
    kernel = kernels[0] if len(kernels) == 1 else tf.concat(kernels, axis=1)
    y = tf.matmul(tf.reshape(x, [-1, width]), kernel)
    if biases:
      y += biases[0] if len(biases) == 1 else tf.concat(biases, axis=0)
    sizes = [int(l.kernel.shape[-1]) for l in layers]
    if len(set(sizes)) == 1:
      y = tf.reshape(y, [shape[0], shape[1], len(layers), self.num_heads, sizes[0]])
      return tf.unstack(tf.transpose(y, [2, 0, 3, 1, 4]), axis=0)
    parts = tf.split(y, [self.num_heads * size for size in sizes], axis=1)
    return [tf.transpose(tf.reshape(part, [shape[0], shape[1], self.num_heads, size]),
                         [0, 2, 1, 3]) for part, size in zip(parts, sizes)]

  def merge_heads(self, attended):
    """[batch, h, len, d_v] -> Concat(head_1..head_h) W^O -> [batch, len, d_model]."""
    shape = tf.shape(attended)
    merged = tf.reshape(tf.transpose(attended, [0, 2, 1, 3]),
                        [-1, self.num_heads * self.value_size])
    kernel = tf.reshape(tf.cast(self.output_dense.kernel, self.compute_dtype),
                        [self.num_heads * self.value_size, self.output_size])
    y = tf.matmul(merged, kernel)
    if self.use_bias:
      y += tf.cast(self.output_dense.bias, self.compute_dtype)
    return tf.reshape(y, [shape[0], shape[2], self.output_size])

  def get_config(self):
    config = super().get_config()
    config.update(num_heads=self.num_heads, key_size=self.key_size,
                  value_size=self.value_size, output_size=self.output_size,
                  dropout=self.dropout, use_bias=self.use_bias)
    return config


def padding_mask(ids):
  """[batch, len] ids -> bool [batch, 1, 1, len], True at non-pad (id != 0)."""
  # expand_dims, not [:, None, None, :]: LiteRT has no strided slice that adds axes.
  return tf.expand_dims(tf.expand_dims(tf.not_equal(ids, 0), 1), 1)


def causal_mask(length):
  """bool [1, 1, length, length], True where key position <= query position."""
  i = tf.range(length)
  return (i[None, :] <= i[:, None])[None, None]


def packed_masks(inputs_segmentation, targets_segmentation):
  """Attention masks of packed rows: attend only within one segment id (0 = padding).

  Args:
    inputs_segmentation: int [batch, src_len]; pair k of a row has id k, padding 0.
    targets_segmentation: int [batch, tgt_len], the same ids on the target side.
  Returns:
    (encoder self-attention bool [batch, 1, src_len, src_len],
     decoder self-attention bool [batch, 1, tgt_len, tgt_len] (causal too),
     encoder-decoder bool [batch, 1, tgt_len, src_len]).
  """
  src_real = tf.not_equal(inputs_segmentation, 0)[:, None, None, :]
  same = lambda q, k: tf.equal(q[:, None, :, None], k[:, None, None, :])
  encoder = tf.logical_and(same(inputs_segmentation, inputs_segmentation), src_real)
  decoder = tf.logical_and(same(targets_segmentation, targets_segmentation),
                           causal_mask(tf.shape(targets_segmentation)[1]))
  memory = tf.logical_and(same(targets_segmentation, inputs_segmentation), src_real)
  return encoder, decoder, memory
