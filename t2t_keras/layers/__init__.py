"""Keras layers of the Transformer; they know nothing of flags, files or problems."""

from t2t_keras.layers.dropout import Dropout
from t2t_keras.layers.attention import (MultiHeadAttention, causal_mask, packed_masks,
                                        padding_mask, scaled_dot_product_attention)
from t2t_keras.layers.cached_decoder import beam_history_mask, cache_step_mask
from t2t_keras.layers.embedding import (PositionalEncoding, SharedEmbedding, TargetSpaceEmbedding,
                                        sinusoid_encoding, t2t_timing_signal)
from t2t_keras.layers.feed_forward import FeedForward
from t2t_keras.layers.layer_norm import LayerNorm, layer_norm
from t2t_keras.layers.residual import Residual
from t2t_keras.layers.transformer_layers import DecoderLayer, EncoderLayer
