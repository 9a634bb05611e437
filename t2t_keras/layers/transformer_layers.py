"""One encoder layer and one decoder layer of the Transformer (section 3.1)."""

import keras
import tensorflow as tf

from t2t_keras.layers.attention import MultiHeadAttention
from t2t_keras.layers.feed_forward import FeedForward
from t2t_keras.layers.residual import Residual


class _Layer(keras.layers.Layer):
  """Shared constructor arguments of encoder and decoder layers.

  Args:
    hidden_size: d_model.
    filter_size: d_ff.
    num_heads: h.
    key_size, value_size: d_k, d_v per head.
    dropout: P_drop on every sublayer output.
    attention_dropout: dropout on attention weights.
    relu_dropout: dropout inside the FFN.
    norm_type: "post" (paper) or "pre".
    norm_epsilon: LayerNorm epsilon.

  The input x is not cast to the compute dtype: under a mixed-precision policy the
  residual stream stays float32 (see `Residual`).

  Pre-norm layers chain their LayerNorms into the residual adds before them
  (`Residual`'s `next_norm`): a layer can take its first sublayer's input `h`
  (its first LayerNorm of x) from the layer before, and with `next_norm` (the
  next layer's first LayerNorm, or the stack's final one) returns
  (x, next_norm(x)) instead of x.
  """

  def __init__(self, hidden_size, filter_size, num_heads, key_size, value_size,
               dropout=0.1, attention_dropout=0.0, relu_dropout=0.0,
               norm_type="post", norm_epsilon=1e-6, **kwargs):
    super().__init__(**kwargs)
    self.autocast = False
    self._args = dict(hidden_size=hidden_size, filter_size=filter_size,
                      num_heads=num_heads, key_size=key_size, value_size=value_size,
                      dropout=dropout, attention_dropout=attention_dropout,
                      relu_dropout=relu_dropout, norm_type=norm_type,
                      norm_epsilon=norm_epsilon)

  def _attention(self, name):
    a = self._args
    return MultiHeadAttention(a["num_heads"], a["key_size"], a["value_size"],
                              a["hidden_size"], a["attention_dropout"], name=name,
                              dtype=self.dtype_policy)

  def _residual(self, name):
    a = self._args
    return Residual(a["dropout"], a["norm_type"], a["norm_epsilon"], name=name,
                    dtype=self.dtype_policy)

  def _ffn(self):
    a = self._args
    return FeedForward(a["hidden_size"], a["filter_size"], a["relu_dropout"],
                       name="ffn", dtype=self.dtype_policy)

  @property
  def first_norm(self):
    """The LayerNorm of this layer's first sublayer input (pre-norm)."""
    return self.self_attention_residual.layer_norm

  def _then(self, residual):
    """`next_norm` for the residual before `residual`: its LayerNorm when pre-norm."""
    return residual.layer_norm if residual.norm_type == "pre" else None

  def _add(self, residual, x, y, training, next_norm=None):
    """(x after `residual`, the next sublayer's input)."""
    out = residual(x, y, training=training, next_norm=next_norm)
    return out if next_norm is not None else (out, out)

  def get_config(self):
    config = super().get_config()
    config.update(self._args)
    return config


class EncoderLayer(_Layer):
  """Self-attention then FFN, each wrapped in residual + dropout + LayerNorm.

  Call: x [batch, src_len, d_model], attention_mask bool [batch, 1, 1, src_len]
  -> [batch, src_len, d_model]; with `next_norm` (pre-norm), (that, next_norm of it).
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.self_attention = self._attention("self_attention")
    self.self_attention_residual = self._residual("self_attention_residual")
    self.ffn = self._ffn()
    self.ffn_residual = self._residual("ffn_residual")

  def build(self, input_shape):
    for layer in (self.self_attention, self.self_attention_residual, self.ffn,
                  self.ffn_residual):
      layer.build(input_shape)
    self.built = True

  def call(self, x, attention_mask=None, training=False, h=None, next_norm=None):
    if h is None:
      h = self.self_attention_residual.sublayer_input(x)
    y, _ = self.self_attention(h, attention_mask=attention_mask, training=training)
    x, h = self._add(self.self_attention_residual, x, y, training,
                     next_norm=self._then(self.ffn_residual))
    y = self.ffn(h, training=training, output_bias=False)
    return self.ffn_residual(x, y, training=training, bias=self.ffn.output_dense.bias,
                             next_norm=next_norm)


class DecoderLayer(_Layer):
  """Masked self-attention, encoder-decoder attention, FFN; each with residual + LayerNorm.

  One code path for training (no cache, causal mask over the whole target) and
  incremental decoding (a cache and the step index, one token per call).

  Call args:
    x: [batch, tgt_len, d_model] (tgt_len 1 when decoding with a cache).
    memory: encoder output [batch, src_len, d_model] (unused when the cache
      holds its keys/values).
    self_mask: bool, broadcastable to [batch, 1, tgt_len, keys].
    memory_mask: bool [batch, 1, 1, src_len] (one row per sentence with a
      beam-folded cache).
    cache: None, or {"self": {"k", "v"}, "memory": {"k", "v"}} (see
      `init_cache`); cache_index: the decoding step.
    h, next_norm: as for `EncoderLayer` (pre-norm); with next_norm the output
      is (x, next_norm(x)).
  Returns:
    (output [batch, tgt_len, d_model], updated cache or None).
  """

  def __init__(self, *args, **kwargs):
    super().__init__(*args, **kwargs)
    self.self_attention = self._attention("self_attention")
    self.self_attention_residual = self._residual("self_attention_residual")
    self.encdec_attention = self._attention("encdec_attention")
    self.encdec_attention_residual = self._residual("encdec_attention_residual")
    self.ffn = self._ffn()
    self.ffn_residual = self._residual("ffn_residual")

  def build(self, input_shape):
    for layer in (self.self_attention, self.self_attention_residual,
                  self.encdec_attention, self.encdec_attention_residual,
                  self.ffn, self.ffn_residual):
      layer.build(input_shape)
    self.built = True

  def init_cache(self, memory, max_decode_length, beam_size=None):
    """Zeroed self-attention cache of max_decode_length steps and the memory's keys/values.

    Without `beam_size`: memory [rows, src_len, d_model], the self-attention
    cache [rows, h, max_decode_length, d]. With `beam_size`: memory [batch,
    src_len, d_model], one row per sentence; the self-attention cache is the
    beam-folded [batch, h, beam_size, max_decode_length, d], which a beam
    search never reorders, and the memory's keys/values [batch, h, src_len, d]
    serve all of a sentence's beams (see MultiHeadAttention).
    """
    a = self._args
    rows = tf.shape(memory)[0]
    if beam_size:
      zeros = lambda size: tf.zeros(
          [rows, a["num_heads"], beam_size, max_decode_length, size], self.compute_dtype)
    else:
      zeros = lambda size: tf.zeros([rows, a["num_heads"], max_decode_length, size],
                                    self.compute_dtype)
    return {"self": {"k": zeros(a["key_size"]), "v": zeros(a["value_size"])},
            "memory": self.encdec_attention.project_memory(memory)}

  def call(self, x, memory=None, self_mask=None, memory_mask=None, cache=None,
           cache_index=None, training=False, return_attention=False, h=None,
           next_norm=None):
    if h is None:
      h = self.self_attention_residual.sublayer_input(x)
    y, self_cache = self.self_attention(
        h, attention_mask=self_mask, cache=None if cache is None else cache["self"],
        cache_index=cache_index, training=training)
    x, h = self._add(self.self_attention_residual, x, y, training,
                     next_norm=self._then(self.encdec_attention_residual))
    folded = cache is not None and cache["self"]["k"].shape.rank == 5
    y, _, weights = self.encdec_attention(
        h, memory, attention_mask=memory_mask,
        cache=None if cache is None else cache["memory"], memory_kv=cache is not None,
        beams=cache["self"]["k"].shape[2] if folded else None, training=training,
        return_weights=True)
    x, h = self._add(self.encdec_attention_residual, x, y, training,
                     next_norm=self._then(self.ffn_residual))
    y = self.ffn(h, training=training, output_bias=False)
    x = self.ffn_residual(x, y, training=training, bias=self.ffn.output_dense.bias,
                          next_norm=next_norm)
    if cache is not None:
      cache = {"self": self_cache, "memory": cache["memory"]}
    if return_attention:
      return x, cache, weights
    return x, cache
