"""Analytic parameter count of a Transformer hparams set."""

from t2t_keras.models.transformer import convention, head_sizes


def analytic_param_count(hparams, vocab_size):
  """Counts weights from the hparams alone (the test pins the model to it).

  Shared embedding V*d; per attention block: W^Q, W^K (d x h d_k), W^V (d x h d_v),
  W^O (h d_v x d), no biases (as in t2t; Marian's add h d_k + h d_k + h d_v + d); FFN 2 d d_ff + d_ff + d; LayerNorm 2d;
  learned positions (row E) add one [max_positions, d] table per side; t2t's
  separate target / pre-softmax matrices V*d each, its target-space table
  num_target_spaces*d; Marian's separate source matrix V*d and logit bias V.
  """
  d, h = hparams.hidden_size, hparams.num_heads
  dk, dv = head_sizes(hparams)
  attention = 2 * d * h * dk + 2 * d * h * dv
  if convention(hparams, "attention_bias"):
    attention += 2 * h * dk + h * dv + d
  ffn = 2 * d * hparams.filter_size + hparams.filter_size + d
  norm = 2 * d
  total = vocab_size * d
  if not convention(hparams, "shared_embedding_and_softmax_weights"):
    total += vocab_size * d * (1 if convention(hparams, "shared_source_target_embedding")
                               else 2)
  elif convention(hparams, "separate_source_embedding"):
    total += vocab_size * d
  if convention(hparams, "logit_bias"):
    total += vocab_size
  total += convention(hparams, "num_target_spaces") * d
  total += hparams.num_encoder_layers * (attention + ffn + 2 * norm)
  total += hparams.num_decoder_layers * (2 * attention + ffn + 3 * norm)
  if hparams.norm_type == "pre":
    total += 2 * norm
  if hparams.pos == "emb":
    total += 2 * hparams.max_positions * d
  return total
