"""One encoder layer and one decoder layer of the Transformer (section 3.1).

A layer is a list of sublayers, each wrapped in a residual connection (`Residual`):

    for residual, f in sublayers:  x = residual(x, f(residual.sublayer_input(x)))

`call` runs exactly that (`run_sublayers`): the paper's layer, post-norm or pre-norm.
`sublayers()` hands the list out, so that a pre-norm stack can train through the fused
path of `layers/residual_chain.py` (each LayerNorm computed inside the residual add
before it) without the layers knowing about it.
"""

import collections

import keras
import tensorflow as tf

from t2t_keras.layers.attention import MultiHeadAttention
from t2t_keras.layers.feed_forward import FeedForward
from t2t_keras.layers.residual import Residual

Sublayer = collections.namedtuple("Sublayer", ["residual", "fn", "bias"])
Sublayer.__doc__ = """One sublayer and its residual connection.

residual: its `Residual`; fn: h [batch, len, d_model] -> y [batch, len, d_model]
(the sublayer's output before its residual add); bias: None or [d_model], added to y
inside the residual (the FFN's output bias, so a fused kernel adds it).
"""

def run_sublayers(x, sublayers, training=False):
  """x [batch, len, d_model] through each `Sublayer` in turn with its residual connection."""
  for s in sublayers:
    x = s.residual(x, s.fn(s.residual.sublayer_input(x)), training=training, bias=s.bias)
  return x


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
    attention_bias: biases on the attention projections (Marian's; not the paper's).
    ffn_activation: "relu" (the paper's) or "swish" (`FeedForward`).

  The input x is not cast to the compute dtype: under a mixed-precision policy the
  residual stream stays float32 (see `Residual`).
  """

  def __init__(self, hidden_size, filter_size, num_heads, key_size, value_size,
               dropout=0.1, attention_dropout=0.0, relu_dropout=0.0,
               norm_type="post", norm_epsilon=1e-6, attention_bias=False,
               ffn_activation="relu", **kwargs):
    super().__init__(**kwargs)
    self.autocast = False
    self._args = dict(hidden_size=hidden_size, filter_size=filter_size,
                      num_heads=num_heads, key_size=key_size, value_size=value_size,
                      dropout=dropout, attention_dropout=attention_dropout,
                      relu_dropout=relu_dropout, norm_type=norm_type,
                      norm_epsilon=norm_epsilon, attention_bias=attention_bias,
                      ffn_activation=ffn_activation)

  def _attention(self, name):
    a = self._args
    return MultiHeadAttention(a["num_heads"], a["key_size"], a["value_size"],
                              a["hidden_size"], a["attention_dropout"],
                              use_bias=a["attention_bias"], name=name, dtype=self.dtype_policy)

  def _residual(self, name):
    a = self._args
    return Residual(a["dropout"], a["norm_type"], a["norm_epsilon"], name=name,
                    dtype=self.dtype_policy)

  def _ffn(self):
    a = self._args
    return FeedForward(a["hidden_size"], a["filter_size"], a["relu_dropout"],
                       a["ffn_activation"], name="ffn", dtype=self.dtype_policy)

  def _ffn_sublayer(self, training):
    """The FFN as a `Sublayer`: its output bias is added by the residual."""
    return Sublayer(self.ffn_residual,
                    lambda h: self.ffn(h, training=training, output_bias=False),
                    self.ffn.output_dense.bias)

  def get_config(self):
    config = super().get_config()
    config.update(self._args)
    return config


class EncoderLayer(_Layer):
  """Self-attention then FFN, each wrapped in residual + dropout + LayerNorm.

  Call: x [batch, src_len, d_model], attention_mask bool [batch, 1, 1, src_len]
  -> [batch, src_len, d_model].
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

  def sublayers(self, attention_mask=None, training=False):
    """[self-attention, FFN] as `Sublayer`s."""
    attend = lambda h: self.self_attention(h, attention_mask=attention_mask,
                                           training=training)[0]
    return [Sublayer(self.self_attention_residual, attend, None),
            self._ffn_sublayer(training)]

  def call(self, x, attention_mask=None, training=False):
    return run_sublayers(x, self.sublayers(attention_mask, training), training)


class DecoderLayer(_Layer):
  """Masked self-attention, encoder-decoder attention, FFN; each with residual + LayerNorm.

  Teacher forcing runs the whole target at once under a causal mask; incremental
  decoding runs one token per call with a cache and the step's index.

  Call args:
    x: [batch, tgt_len, d_model] (tgt_len 1 with a step).
    memory: encoder output [batch, src_len, d_model] (unused with a cache: it
      holds the memory's keys/values).
    self_mask: bool, broadcastable to [batch, 1, tgt_len, keys].
    memory_mask: bool [batch, 1, 1, src_len] (one row per sentence with a
      beam-folded cache).
    cache: None (teacher forcing) or the layer's {"self": {"k", "v"}, "memory":
      {"k", "v"}} (`init_cache`); cache_index: int scalar, the step decoded.
    beams: None, or the beam size when the cache is beam-folded.
  Returns:
    (output [batch, tgt_len, d_model], the updated cache or None, the
     encoder-decoder attention weights float32 [batch, heads, tgt_len, src_len]).
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
    beams = [beam_size] if beam_size else []
    zeros = lambda size: tf.zeros([rows, a["num_heads"]] + beams + [max_decode_length, size],
                                  self.compute_dtype)
    return {"self": {"k": zeros(a["key_size"]), "v": zeros(a["value_size"])},
            "memory": self.encdec_attention.project_memory(memory)}

  def sublayers(self, memory, self_mask=None, memory_mask=None, cache=None,
                cache_index=None, beams=None, training=False):
    """([self-attention, encoder-decoder attention, FFN] as `Sublayer`s, a dict that
    running them fills: "self_cache" (the self-attention cache after this step, with a
    cache) and "attention" (the encoder-decoder attention weights))."""
    out = {}

    def attend_self(h):
      y, out["self_cache"] = self.self_attention(
          h, attention_mask=self_mask, cache=cache and cache["self"], cache_index=cache_index,
          beams=beams, training=training)
      return y

    def attend_memory(h):
      y, _, out["attention"] = self.encdec_attention(
          h, memory, attention_mask=memory_mask, cache=cache and cache["memory"],
          memory_kv=cache is not None, beams=beams, training=training, return_weights=True)
      return y

    return [Sublayer(self.self_attention_residual, attend_self, None),
            Sublayer(self.encdec_attention_residual, attend_memory, None),
            self._ffn_sublayer(training)], out

  def call(self, x, memory=None, self_mask=None, memory_mask=None, cache=None,
           cache_index=None, beams=None, training=False):
    sublayers, out = self.sublayers(memory, self_mask, memory_mask, cache, cache_index, beams,
                                    training)
    x = run_sublayers(x, sublayers, training)
    if cache is not None:
      cache = {"self": out["self_cache"], "memory": cache["memory"]}
    return x, cache, out["attention"]
