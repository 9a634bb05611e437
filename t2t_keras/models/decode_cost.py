"""Analytic multiply-adds per output token of cached incremental decoding (beside params.py).

    decode_macs_per_token(hparams, vocab_size, source_length=16, target_length=16)
    decode_cost_parts(...)   # {"self_attention", "cross_attention", "ffn", "output", "total"}

What a student costs against its teacher at inference (docs/recipes.md, "Distillation");
benchmarks/flops.py's `decode_token_flops` is twice this.
"""

from t2t_keras.models.transformer import head_sizes


def decode_cost_parts(hparams, vocab_size, source_length, target_length):
  """Multiply-adds of one decoding step of one hypothesis, by part, averaged over an output
  of `target_length` pieces (EOS included) for a source of `source_length` pieces.

  d = hidden_size, h = num_heads, d_k / d_v per head, d_ff = filter_size, V = vocab_size,
  S = source_length, L = (target_length + 1) / 2: the average prefix a step attends to
  (step t of T attends to its t positions, itself included). Per decoder layer:

    self_attention   d h d_k (Q) + d h d_k (K) + d h d_v (V) + h d_v d (W^O)
                     + h L d_k (Q K^T over the cached prefix) + h L d_v (A V)
    cross_attention  d h d_k (Q) + h d_v d (W^O) + h S d_k + h S d_v
                     (the source's K and V are projected once per sentence, not per step)
    ffn              d d_ff + d_ff d
  and once per step: output = d V (the projection onto the vocabulary).

  Not counted: the encoder and the source's K / V projections (per sentence), embedding
  lookups, positions, LayerNorm, softmax, biases, activations, the search's bookkeeping.
  A beam of k costs k times this per step. This is the algorithm's count: the cached
  decoder here attends over its whole preallocated buffer, masked (models/decode_cache.py).
  Returns floats (L may be a half).
  """
  d, h, dff = hparams.hidden_size, hparams.num_heads, hparams.filter_size
  dk, dv = head_sizes(hparams)
  prefix = (target_length + 1) / 2
  layers = hparams.num_decoder_layers
  self_attention = 2 * d * h * dk + d * h * dv + h * dv * d + h * prefix * (dk + dv)
  cross_attention = d * h * dk + h * dv * d + h * source_length * (dk + dv)
  ffn = 2 * d * dff
  parts = {"self_attention": layers * self_attention,
           "cross_attention": layers * cross_attention,
           "ffn": layers * ffn, "output": d * vocab_size}
  parts["total"] = sum(parts.values())
  return parts


def decode_macs_per_token(hparams, vocab_size, source_length=16, target_length=16):
  """Multiply-adds per output token (one hypothesis) of cached decoding: `decode_cost_parts`'s
  total. The defaults are about a Multi30k sentence's pieces (EOS included)."""
  return decode_cost_parts(hparams, vocab_size, source_length, target_length)["total"]
