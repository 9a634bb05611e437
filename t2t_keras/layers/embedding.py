"""The shared embedding / pre-softmax matrix and positional encodings (sections 3.4, 3.5)."""

import math

import keras
import numpy as np
import tensorflow as tf

# PAD's logit where it is outside the softmax: exp() of it is 0 in float32, and it stays
# finite (a masked row's log-softmax has no NaN).
NEG_LOGIT = -1e9

class SharedEmbedding(keras.layers.Layer):
  """One [vocab, d_model] matrix for source, target and the pre-softmax projection.

  `call(ids)` returns embeddings multiplied by sqrt(d_model) (section 3.4);
  `logits(x)` projects decoder outputs onto the same matrix. (A model imported
  from tensor2tensor with separate matrices has one of these per role.)

  Args:
    vocab_size: V, shared by source and target.
    hidden_size: d_model.
    zero_pad: id 0 (PAD, the decoder's start symbol) embeds as zeros, as
      tensor2tensor's symbol modality does (and as Marian's decoder starts from a
      zero vector); its row still gives PAD's logit.
    logit_bias: `logits` adds a learned bias [V] (Marian's decoder_ff_logit_out_b).
    mask_pad_logit: `logits` gives id 0 (PAD) NEG_LOGIT: PAD is outside the softmax
      (a vocabulary imported without a padding entry, as Marian's).

  Example:
    emb = SharedEmbedding(37000, 512)
    x = emb(ids)          # [batch, len] -> [batch, len, 512]
    logits = emb.logits(x)  # [batch, len, 512] -> [batch, len, 37000]
  """

  def __init__(self, vocab_size, hidden_size, zero_pad=False, logit_bias=False,
               mask_pad_logit=False, **kwargs):
    super().__init__(**kwargs)
    self.vocab_size = vocab_size
    self.hidden_size = hidden_size
    self.zero_pad = zero_pad
    self.logit_bias = logit_bias
    self.mask_pad_logit = mask_pad_logit

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="embeddings", shape=(self.vocab_size, self.hidden_size),
        initializer=keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5))
    if self.logit_bias:
      self.bias = self.add_weight(name="bias", shape=(self.vocab_size,), initializer="zeros")
    self.built = True

  def output_bias(self):
    """float32 [V] added to the logits (the learned bias, PAD's mask), or None."""
    if not self.built:
      self.build()
    bias = tf.cast(self.bias, tf.float32) if self.logit_bias else None
    if self.mask_pad_logit:
      mask = tf.one_hot(0, self.vocab_size, on_value=NEG_LOGIT, off_value=0.0)
      bias = mask if bias is None else bias + mask
    return bias

  def call(self, ids):
    table = tf.cast(self.embeddings, self.compute_dtype)
    x = tf.gather(table, ids) * math.sqrt(self.hidden_size)
    if self.zero_pad:
      x *= tf.expand_dims(tf.cast(tf.not_equal(ids, 0), x.dtype), -1)  # LiteRT: no [..., None]
    return x

  def logits(self, x):
    """[batch, len, d_model] -> float32 logits [batch, len, vocab]."""
    if not self.built:  # a separate pre-softmax matrix is never called as an embedding
      self.build()
    table = tf.cast(self.embeddings, x.dtype)
    # A 2-D matmul against the transposed table (forward and gradients are
    # plain matmuls); it measured level with the einsum it replaced.
    logits = tf.matmul(tf.reshape(x, [-1, self.hidden_size]), table, transpose_b=True)
    shape = tf.shape(x)
    logits = tf.cast(tf.reshape(logits, [shape[0], shape[1], self.vocab_size]), tf.float32)
    bias = self.output_bias()
    return logits if bias is None else logits + bias

  def get_config(self):
    config = super().get_config()
    config.update(vocab_size=self.vocab_size, hidden_size=self.hidden_size,
                  zero_pad=self.zero_pad, logit_bias=self.logit_bias,
                  mask_pad_logit=self.mask_pad_logit)
    return config


class TargetSpaceEmbedding(keras.layers.Layer):
  """tensor2tensor's target-space embedding: one learned row, chosen by the problem's
  target space id, added to every encoder input (before the positions).

  Args:
    num_spaces: rows of the table (t2t: 32).
    hidden_size: d_model.
    space_id: the row added (t2t's `problem.target_space_id`, e.g. 8 for German).

  Call: x [batch, len, d_model] -> x + table[space_id].
  """

  def __init__(self, num_spaces, hidden_size, space_id, **kwargs):
    super().__init__(**kwargs)
    if not 0 <= space_id < num_spaces:
      raise ValueError(f"target_space_id must be in [0, {num_spaces}), got {space_id}")
    self.num_spaces = num_spaces
    self.hidden_size = hidden_size
    self.space_id = space_id

  def build(self, input_shape=None):
    self.embeddings = self.add_weight(
        name="embeddings", shape=(self.num_spaces, self.hidden_size),
        initializer=keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5))
    self.built = True

  def call(self, x):
    return x + tf.cast(self.embeddings[self.space_id], x.dtype)

  def get_config(self):
    config = super().get_config()
    config.update(num_spaces=self.num_spaces, hidden_size=self.hidden_size,
                  space_id=self.space_id)
    return config


def sinusoid_encoding(positions, hidden_size):
  """Section 3.5: PE(pos, 2i) = sin(pos / 10000^(2i/d)), PE(pos, 2i+1) = cos(pos / 10000^(2i/d)).

  Args:
    positions: int [len] (or any int tensor).
    hidden_size: d_model (even).
  Returns:
    float32 [..., d_model], sin and cos interleaved as in the paper.
  """
  positions = tf.cast(positions, tf.float32)[..., None]
  two_i = np.arange(0, hidden_size, 2, dtype=np.float32)
  angles = positions / tf.constant(np.power(10000.0, two_i / hidden_size), tf.float32)
  stacked = tf.stack([tf.sin(angles), tf.cos(angles)], axis=-1)  # [..., d/2, 2]
  return tf.reshape(stacked, tf.concat([tf.shape(angles)[:-1], [hidden_size]], 0))


def t2t_timing_signal(positions, hidden_size):
  """tensor2tensor's sinusoids (`common_attention.get_timing_signal_1d`): d/2
  timescales from 1 to 10^4, geometric with ratio 10^(-4 / (d/2 - 1)); the sines of
  all timescales, then their cosines (a zero column after them when d is odd).

  Args:
    positions: int [len] (or any int tensor).
    hidden_size: d_model.
  Returns:
    float32 [..., d_model].
  """
  half = hidden_size // 2
  increment = math.log(1.0e4) / max(half - 1, 1)
  inv_timescales = np.exp(np.arange(half, dtype=np.float64) * -increment).astype(np.float32)
  angles = tf.cast(positions, tf.float32)[..., None] * inv_timescales
  signal = tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)
  if hidden_size % 2:
    signal = tf.pad(signal, [[0, 0]] * (signal.shape.rank - 1) + [[0, 1]])
  return signal


def hf_timing_signal(positions, hidden_size):
  """The sinusoids of Hugging Face's Marian port and CTranslate2's Marian converter
  (`MarianSinusoidalPositionalEmbedding`, `_make_sinusoidal_position_encodings`): the
  layout of `t2t_timing_signal` (all sines, then all cosines) but timescales
  10000^(k / (d/2)), k = 0 .. d/2 - 1, where Marian itself (and t2t) use 10000^(k / (d/2 - 1)).

  Args:
    positions: int [len] (or any int tensor).
    hidden_size: d_model (even).
  Returns:
    float32 [..., d_model].
  """
  half = hidden_size // 2
  inv_timescales = np.power(10000.0, -np.arange(half, dtype=np.float64) / half)
  angles = tf.cast(positions, tf.float32)[..., None] * inv_timescales.astype(np.float32)
  return tf.concat([tf.sin(angles), tf.cos(angles)], axis=-1)


_SINUSOIDS = {"timing": sinusoid_encoding, "timing_t2t": t2t_timing_signal,
              "timing_hf": hf_timing_signal}


class PositionalEncoding(keras.layers.Layer):
  """Adds position information to embeddings: sinusoids, or a learned table (row E).

  Args:
    hidden_size: d_model.
    kind: "timing" (the paper's sinusoids, any length), "timing_t2t"
      (tensor2tensor's and Marian's layout of them, `t2t_timing_signal`), "timing_hf"
      (Hugging Face's and CTranslate2's for Marian models, `hf_timing_signal`) or "emb"
      (learned, up to max_positions).
    max_positions: size of the learned table.
    offset: the position of the first token (0; fairseq's M2M-100 and NLLB count from
      padding_idx + 1 = 2).

  Call args:
    x: [batch, len, d_model].
    start_index: position of x[:, 0] (the decoding step when decoding with a cache).
    positions: optional int [batch, len], each token's own position (packed
      rows, where positions restart at every segment); overrides start_index.
  Returns:
    [batch, len, d_model].
  """

  def __init__(self, hidden_size, kind="timing", max_positions=1024, offset=0, **kwargs):
    super().__init__(**kwargs)
    if kind not in (*_SINUSOIDS, "emb"):
      raise ValueError(f"pos must be one of {', '.join(map(repr, [*_SINUSOIDS, 'emb']))}, "
                       f"got {kind!r}")
    self.hidden_size = hidden_size
    self.kind = kind
    self.max_positions = max_positions
    self.offset = offset

  def build(self, input_shape=None):
    if self.kind == "emb":
      self.position_embeddings = self.add_weight(
          name="position_embeddings", shape=(self.max_positions, self.hidden_size),
          initializer=keras.initializers.RandomNormal(stddev=self.hidden_size ** -0.5))
    self.built = True

  def call(self, x, start_index=0, positions=None):
    per_row = positions is not None
    if not per_row:
      positions = start_index + tf.range(tf.shape(x)[1])
    if self.offset:
      positions = positions + self.offset
    if self.kind in _SINUSOIDS:
      table = _SINUSOIDS[self.kind](positions, self.hidden_size)
    else:
      table = tf.gather(self.position_embeddings, positions)
    table = tf.cast(table, x.dtype)
    return x + (table if per_row else table[None])

  def get_config(self):
    config = super().get_config()
    config.update(hidden_size=self.hidden_size, kind=self.kind,
                  max_positions=self.max_positions, offset=self.offset)
    return config
