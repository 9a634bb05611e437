"""The Transformer of "Attention Is All You Need" as a subclassed Keras 3 model.

    model = Transformer(vocab_size=8000, hparams=registry.hparams("transformer_tiny"))
    logits = model({"inputs": src_ids, "targets": tgt_ids})      # teacher forcing
    memory, mask = model.encode(src_ids)
    cache = model.init_cache(memory, max_decode_length=60)
    step_logits, cache = model.decode(prev_ids, memory, mask, cache=cache, cache_index=i)

Ids: 0 is padding (and the decoder's start symbol, as in t2t), 1 is EOS.

Models imported from tensor2tensor (`t2t_keras.importing`) keep t2t's conventions,
each an hparam whose default is the paper's: separate input / target / pre-softmax
matrices (`shared_embedding_and_softmax_weights`, `shared_source_target_embedding`),
id 0 embedding as zeros (`zero_pad_embedding`), a target-space row added to the
encoder input (`num_target_spaces`, `target_space_id`) and t2t's layout of the
sinusoids (pos="timing_t2t").

Models imported from Marian (OPUS-MT) keep Marian's, again each an hparam off by
default: biases on the attention projections (`attention_bias`), swish in the FFN
(`ffn_activation`), a bias on the output logits (`logit_bias`), a source embedding of
its own beside a target embedding tied to the softmax (`separate_source_embedding`,
Marian's tied-embeddings), a decoder that starts from a zero vector
(`zero_pad_embedding`) and PAD kept out of the softmax (`softmax_excludes_pad`: a
Marian vocabulary has no padding entry; the importer adds id 0 for ours).

Packed rows (t2t's packed datasets, `t2t_keras.data.packing`) add
"inputs_segmentation", "targets_segmentation", "inputs_position" and
"targets_position" to the features: attention stays within a segment, positions
restart with each segment, and the decoder input is shifted right within it.
"""

import keras
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.hparams_lib import HParams
from t2t_keras.layers import (DecoderLayer, Dropout, EncoderLayer, LayerNorm, PositionalEncoding,
                              SharedEmbedding, TargetSpaceEmbedding, causal_mask, packed_masks,
                              padding_mask)
from t2t_keras.layers.cached_decoder import decoder_layer_step
from t2t_keras.layers.residual_chain import decoder_sublayers, encoder_sublayers, run_chained
from t2t_keras.models.decode_cache import init_cache, step_mask


# The imported models' conventions, each the paper's when a run's hparams.json (written
# before the key existed) does not name it.
ABSENT_DEFAULTS = dict(
    shared_embedding_and_softmax_weights=True, shared_source_target_embedding=True,
    zero_pad_embedding=False, num_target_spaces=0, target_space_id=0,
    attention_bias=False, ffn_activation="relu", logit_bias=False,
    separate_source_embedding=False, softmax_excludes_pad=False, position_offset=0,
    decoder_start_id=0)


def convention(hparams, key):
  """hparams' value of one of ABSENT_DEFAULTS' keys (its default when absent)."""
  return hparams.get(key, ABSENT_DEFAULTS[key])


def shift_right(targets, positions=None):
  """[batch, len] -> decoder input [batch, len]: a 0 (start) then targets[:, :-1].

  With `positions` (int [batch, len], packed rows) every segment starts with 0.
  """
  shifted = tf.pad(targets, [[0, 0], [1, 0]])[:, :-1]
  if positions is not None:
    shifted = tf.where(tf.equal(positions, 0), tf.zeros_like(shifted), shifted)
  return shifted


def head_sizes(hparams):
  """(d_k, d_v) per head; 0 in hparams means d_model // h."""
  default = hparams.hidden_size // hparams.num_heads
  return (hparams.attention_key_channels or default,
          hparams.attention_value_channels or default)


@registry.register_model
class Transformer(keras.Model):
  """Encoder-decoder Transformer with one shared embedding / softmax matrix (by default).

  Args:
    vocab_size: size of the shared source/target vocabulary.
    hparams: `HParams` (or its dict of values) of a transformer hparams set.
  """

  def __init__(self, vocab_size, hparams, **kwargs):
    super().__init__(**kwargs)
    hp = hparams if isinstance(hparams, HParams) else HParams(**hparams)
    self.vocab_size = vocab_size
    self.hparams = hp
    key_size, value_size = head_sizes(hp)
    layer_args = dict(
        hidden_size=hp.hidden_size, filter_size=hp.filter_size, num_heads=hp.num_heads,
        key_size=key_size, value_size=value_size, dropout=hp.layer_prepostprocess_dropout,
        attention_dropout=hp.attention_dropout, relu_dropout=hp.relu_dropout,
        norm_type=hp.norm_type, norm_epsilon=hp.norm_epsilon,
        attention_bias=convention(hp, "attention_bias"),
        ffn_activation=convention(hp, "ffn_activation"), dtype=self.dtype_policy)
    shared_softmax = convention(hp, "shared_embedding_and_softmax_weights")
    separate_source = shared_softmax and convention(hp, "separate_source_embedding")
    table = lambda name, softmax=False: SharedEmbedding(
        vocab_size, hp.hidden_size, name=name, zero_pad=convention(hp, "zero_pad_embedding"),
        logit_bias=softmax and convention(hp, "logit_bias"),
        mask_pad_logit=softmax and convention(hp, "softmax_excludes_pad"),
        dtype=self.dtype_policy)
    # The source's; all three roles when shared (the target's and the softmax's when the
    # source has its own).
    self.embedding = table("shared_embedding", softmax=shared_softmax)
    # Separate matrices only where t2t or Marian had them (attributes, so checkpoints
    # name them); `source_embedding` / `target_embedding` / `softmax_embedding` give the
    # one each role uses.
    if separate_source:
      self.source_table = table("source_embedding")
    if not shared_softmax:
      self.softmax_table = table("softmax_embedding", softmax=True)
      if not convention(hp, "shared_source_target_embedding"):
        self.target_table = table("target_embedding")
    self.target_space = None
    if convention(hp, "num_target_spaces"):
      self.target_space = TargetSpaceEmbedding(
          hp.num_target_spaces, hp.hidden_size, hp.target_space_id,
          name="target_space_embedding", dtype=self.dtype_policy)
    positions = lambda name: PositionalEncoding(
        hp.hidden_size, hp.pos, hp.max_positions, offset=convention(hp, "position_offset"),
        name=name, dtype=self.dtype_policy)
    self.decoder_start_id = convention(hp, "decoder_start_id")
    self.encoder_positions = positions("encoder_positions")
    self.decoder_positions = positions("decoder_positions")
    self.encoder_dropout = Dropout(hp.layer_prepostprocess_dropout)
    self.decoder_dropout = Dropout(hp.layer_prepostprocess_dropout)
    # Layers are attributes, not list items: tf.train.Checkpoint does not see
    # into Keras 3's tracked lists, and attributes give readable names.
    for i in range(hp.num_encoder_layers):
      setattr(self, f"encoder_layer_{i}", EncoderLayer(name=f"encoder_layer_{i}", **layer_args))
    for i in range(hp.num_decoder_layers):
      setattr(self, f"decoder_layer_{i}", DecoderLayer(name=f"decoder_layer_{i}", **layer_args))
    self.pre_norm = hp.norm_type == "pre"
    if self.pre_norm:  # pre-norm stacks end with a LayerNorm
      norm = lambda name: LayerNorm(
          epsilon=hp.norm_epsilon, name=name, dtype=self.dtype_policy)
      self.encoder_norm = norm("encoder_norm")
      self.decoder_norm = norm("decoder_norm")
    else:  # post-norm: each residual ends with its own LayerNorm
      self.encoder_norm = self.decoder_norm = None

  @property
  def source_embedding(self):
    """The encoder input's embedding layer (`embedding` unless Marian's separate one)."""
    return getattr(self, "source_table", self.embedding)

  @property
  def target_embedding(self):
    """The decoder input's embedding layer (`embedding` unless t2t's separate one)."""
    return getattr(self, "target_table", self.embedding)

  @property
  def softmax_embedding(self):
    """The pre-softmax projection's layer (`embedding` unless t2t's separate one)."""
    return getattr(self, "softmax_table", self.embedding)

  @property
  def encoder_layers(self):
    return [getattr(self, f"encoder_layer_{i}") for i in range(self.hparams.num_encoder_layers)]

  @property
  def decoder_layers(self):
    return [getattr(self, f"decoder_layer_{i}") for i in range(self.hparams.num_decoder_layers)]

  def build(self, features_shape=None):
    """Creates every variable from the hparams: each part built for the residual
    stream's shape [batch, len, d_model], in the order `call` first uses them, so a
    seed gives the same initial weights as building by a call. (Without this method
    Keras traces the whole `call` symbolically before the first call, most of a model's
    set-up time.) features_shape: Keras' shapes of `call`'s features, not needed."""
    stream = (None, None, self.hparams.hidden_size)
    parts = [self.source_embedding, self.target_space, self.encoder_positions,
             *self.encoder_layers, self.encoder_norm, self.target_embedding,
             self.decoder_positions, *self.decoder_layers, self.decoder_norm,
             self.softmax_embedding]
    for part in parts:
      if part is not None and not part.built:
        part.build(stream)
    self.built = True

  def build_for_ids(self):
    """Creates every variable (`build`) and runs a one-token batch through the model."""
    ids = tf.ones([1, 1], tf.int32)
    self({"inputs": ids, "targets": ids})

  def _stream(self, x):
    """The residual stream's dtype: float32 under a mixed-precision policy (its
    variable dtype), so the sublayers' updates are added without bfloat16/float16
    rounding (`Residual`); the stacks return the compute dtype."""
    return tf.cast(x, self.dtype_policy.variable_dtype)

  def encode(self, inputs, training=False, mask=None, positions=None):
    """inputs int [batch, src_len] -> (memory [batch, src_len, d], mask).

    mask: the self-attention mask, by default the padding mask bool
    [batch, 1, 1, src_len] (which is also the decoder's memory mask);
    positions: optional int [batch, src_len] (packed rows).
    """
    if mask is None:
      mask = padding_mask(inputs)
    x = self.source_embedding(inputs)
    if self.target_space is not None:
      x = self.target_space(x)
    x = self.encoder_positions(x, positions=positions)
    if training and self.encoder_layers:  # the fused path: the same as the layers' `call`
      self._build(self.encoder_layers, x)
      sublayers = [s for layer in self.encoder_layers for s in encoder_sublayers(layer, mask)]
      x = run_chained(x, self.encoder_dropout, sublayers, self.encoder_norm,
                      self.dtype_policy.variable_dtype)
    else:
      x = self._stream(self.encoder_dropout(x, training=training))
      for layer in self.encoder_layers:
        x = layer(x, attention_mask=mask, training=training)
      if self.pre_norm:
        x = self.encoder_norm(x, training=training)
    return tf.cast(x, self.compute_dtype), mask

  @staticmethod
  def _build(layers, x):
    """Builds the `layers` that are not yet, for input `x`, as their `__call__` would
    (the fused and cached paths call their parts, not the layers)."""
    for layer in layers:
      if not layer.built:
        layer.build(x.shape)

  def init_cache(self, memory, max_decode_length, beam_size=None):
    """Per-layer decoding cache for `max_decode_length` steps over `memory` [batch,
    src_len, d] (`decode_cache.init_cache`: the layout, plain or beam-folded)."""
    return init_cache(self.decoder_layers, memory, max_decode_length, beam_size)

  def decode(self, decoder_input, memory, memory_mask, cache=None, cache_index=None,
             training=False, return_attention=False, self_mask=None, positions=None):
    """Decoder stack and tied softmax: teacher forcing (`decoder_stack`), or one step
    over a cache (`decoder_step`); then `embedding.logits`.

    Args:
      decoder_input: int [batch, tgt_len] (shifted targets; tgt_len 1 with a cache).
      memory, memory_mask: from `encode` (memory may be None with a cache).
      cache: from `init_cache`, or None for teacher forcing.
      cache_index: int scalar, the step being decoded (with a cache).
      training: dropout on (teacher forcing only: a cache decodes without it).
      return_attention: also return each layer's encoder-decoder attention
        weights, float32 [batch, heads, tgt_len, src_len] (teacher forcing,
        not training).
      self_mask: decoder self-attention mask (default: causal, or the cache
        steps so far); positions: optional int [batch, tgt_len] (packed rows).
    Returns:
      (logits float32 [batch, tgt_len, vocab], updated cache or None[, attention list]).
    """
    attention = None
    if cache is None:
      x, attention = self.decoder_stack(decoder_input, memory, memory_mask,
                                        training=training, self_mask=self_mask,
                                        positions=positions)
    else:
      x, cache = self.decoder_step(decoder_input, memory_mask, cache, cache_index, self_mask)
    logits = self.softmax_embedding.logits(x)
    if return_attention:
      if attention is None:
        raise ValueError("return_attention: the attention weights come from teacher "
                         "forcing without training")
      return logits, cache, attention
    return logits, cache

  def _embed_targets(self, decoder_input, start, positions=None):
    """The decoder's input ids [batch, tgt_len] -> embeddings with positions from `start`."""
    if self.decoder_start_id:  # the start symbol (id 0 in the shifted input) is another id
      decoder_input = tf.where(tf.equal(decoder_input, 0),
                               tf.cast(self.decoder_start_id, decoder_input.dtype),
                               decoder_input)
    return self.decoder_positions(self.target_embedding(decoder_input), start_index=start,
                                  positions=positions)

  def decoder_stack(self, decoder_input, memory, memory_mask, training=False, self_mask=None,
                    positions=None):
    """Teacher forcing up to the pre-softmax: (x [batch, tgt_len, d_model] in the compute
    dtype, the encoder-decoder attention weights of each layer, or None when training)."""
    x = self._embed_targets(decoder_input, 0, positions)
    if self_mask is None:
      self_mask = causal_mask(tf.shape(decoder_input)[1])
    self._build(self.decoder_layers, x)
    if training and self.decoder_layers:  # the fused path: the same as the layers' `call`
      sublayers = [s for layer in self.decoder_layers
                   for s in decoder_sublayers(layer, memory, self_mask, memory_mask)]
      x = run_chained(x, self.decoder_dropout, sublayers, self.decoder_norm,
                      self.dtype_policy.variable_dtype)
      return tf.cast(x, self.compute_dtype), None
    x = self._stream(self.decoder_dropout(x, training=training))
    attention = []
    for layer in self.decoder_layers:
      x, weights = layer.call_with_attention(x, memory, self_mask, memory_mask, training)
      attention.append(weights)
    if self.pre_norm:
      x = self.decoder_norm(x, training=training)
    return tf.cast(x, self.compute_dtype), attention

  def decoder_step(self, decoder_input, memory_mask, cache, cache_index, self_mask=None):
    """One decoding step up to the pre-softmax (`cached_decoder.decoder_layer_step` for
    each layer): (x [rows, 1, d_model] in the compute dtype, the updated cache)."""
    x = self._embed_targets(decoder_input, cache_index)
    self._build(self.decoder_layers, x)
    self_mask, new_cache, beams = step_mask(cache, cache_index, self_mask)
    x = self._stream(self.decoder_dropout(x))
    for i, layer in enumerate(self.decoder_layers):
      x, new_cache[f"layer_{i}"] = decoder_layer_step(
          layer, x, cache[f"layer_{i}"], cache_index, self_mask, memory_mask, beams)
    if self.pre_norm:
      x = self.decoder_norm(x)
    return tf.cast(x, self.compute_dtype), new_cache

  def call(self, features, training=False):
    """Teacher forcing: {"inputs" [batch, src_len], "targets" [batch, tgt_len]} -> logits [batch, tgt_len, vocab].

    Packed rows also carry the four segmentation/position features (module docstring).
    """
    return self.softmax_embedding.logits(self.decoder_output(features, training=training))

  def softmax_weights(self, dtype):
    """The pre-softmax matrix [vocab, d_model] (the shared embedding's when tied), in `dtype`."""
    return tf.cast(self.softmax_embedding.embeddings, dtype)

  def softmax_bias(self):
    """float32 [vocab] added to the logits (`logit_bias`, PAD's mask), or None."""
    return self.softmax_embedding.output_bias()

  def decoder_output(self, features, training=False):
    """`call` without the pre-softmax projection: [batch, tgt_len, d_model] in the
    compute dtype (the trainer projects it inside its loss, `projected_cross_entropy`)."""
    if "inputs_segmentation" not in features:
      memory, mask = self.encode(features["inputs"], training=training)
      x, _ = self.decoder_stack(shift_right(features["targets"]), memory, mask,
                                training=training)
      return x
    encoder_mask, decoder_mask, memory_mask = packed_masks(
        features["inputs_segmentation"], features["targets_segmentation"])
    memory, _ = self.encode(features["inputs"], training=training, mask=encoder_mask,
                            positions=features["inputs_position"])
    positions = features["targets_position"]
    x, _ = self.decoder_stack(shift_right(features["targets"], positions), memory,
                                 memory_mask, training=training, self_mask=decoder_mask,
                                 positions=positions)
    return x

  def get_config(self):
    return {"vocab_size": self.vocab_size, "hparams": self.hparams.values(),
            "name": self.name}
