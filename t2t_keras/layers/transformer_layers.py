"""One encoder layer and one decoder layer of the Transformer (section 3.1).

A layer is its sublayers in the paper's order, each wrapped in a residual connection
(`Residual`: post-norm LayerNorm(x + Dropout(f(x))) or pre-norm x + Dropout(f(LayerNorm(x)))):

    x = residual(x, sublayer(residual.sublayer_input(x)))

`call` runs exactly that, top to bottom. Beside the layers: the training path of a
model's stack with each residual add, dropout and LayerNorm fused
(`layers/residual_chain.py`) and the decoder layer one step at a time over a cache
(`layers/cached_decoder.py`), each the same sublayers in the same order.
"""

import keras

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

  def call(self, x, attention_mask=None, training=False):
    r = self.self_attention_residual
    x = r(x, self.self_attention(r.sublayer_input(x), attention_mask=attention_mask,
                                 training=training), training=training)
    r = self.ffn_residual
    return r(x, self.ffn(r.sublayer_input(x), training=training), training=training)


class DecoderLayer(_Layer):
  """Masked self-attention, encoder-decoder attention, FFN; each with residual + LayerNorm.

  SUBLAYERS is the one list of them, in the paper's order: `apply_sublayers` runs x
  through each one's residual connection with a function per sublayer, and teacher forcing
  (`call`, `call_with_attention`: the whole target at once under a causal mask), the
  fused training chain (`residual_chain.decoder_sublayers`) and the cached decoding step
  (`cached_decoder.decoder_layer_step`: one token a call) each give their functions.

  Call args:
    x: [batch, tgt_len, d_model].
    memory: encoder output [batch, src_len, d_model].
    self_mask: bool, broadcastable to [batch, 1, tgt_len, tgt_len].
    memory_mask: bool [batch, 1, 1, src_len].
  Returns:
    output [batch, tgt_len, d_model].
  """

  SUBLAYERS = ("self_attention", "encdec_attention", "ffn")  # each with `<name>_residual`

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

  def apply_sublayers(self, x, fns, training=False):
    """x [batch, len, d_model] through SUBLAYERS in order, each `fns[name]` (its input,
    post-norm x, pre-norm its LayerNorm's, -> its output [batch, len, d_model]) under its
    residual connection (`Residual`: dropout, add, post-norm LayerNorm)."""
    for name in self.SUBLAYERS:
      r = getattr(self, f"{name}_residual")
      x = r(x, fns[name](r.sublayer_input(x)), training=training)
    return x

  def call(self, x, memory, self_mask=None, memory_mask=None, training=False):
    return self.call_with_attention(x, memory, self_mask, memory_mask, training)[0]

  def call_with_attention(self, x, memory, self_mask=None, memory_mask=None, training=False):
    """`call`'s output and the encoder-decoder attention weights float32 [batch, heads,
    tgt_len, src_len]."""
    weights = []

    def attend_memory(h):
      y, w = self.encdec_attention.attend(h, memory, memory_mask, training)
      weights.append(w)
      return y

    x = self.apply_sublayers(x, {
        "self_attention": lambda h: self.self_attention(h, attention_mask=self_mask,
                                                        training=training),
        "encdec_attention": attend_memory,
        "ffn": lambda h: self.ffn(h, training=training)}, training)
    return x, weights[0]
