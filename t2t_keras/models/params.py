"""Analytic parameter count of a Transformer hparams set."""

from t2t_keras.models.transformer import head_sizes


def analytic_param_count(hparams, vocab_size):
  """Counts weights from the hparams alone (the test pins the model to it).

  Shared embedding V*d; per attention block: W^Q, W^K (d x h d_k), W^V (d x h d_v),
  W^O (h d_v x d), no biases (as in t2t); FFN 2 d d_ff + d_ff + d; LayerNorm 2d;
  learned positions (row E) add one [max_positions, d] table per side; t2t's
  separate target / pre-softmax matrices V*d each, its target-space table
  num_target_spaces*d.
  """
  d, h = hparams.hidden_size, hparams.num_heads
  dk, dv = head_sizes(hparams)
  attention = 2 * d * h * dk + 2 * d * h * dv
  ffn = 2 * d * hparams.filter_size + hparams.filter_size + d
  norm = 2 * d
  total = vocab_size * d
  if not hparams.get("shared_embedding_and_softmax_weights", True):
    total += vocab_size * d * (1 if hparams.get("shared_source_target_embedding", True) else 2)
  total += hparams.get("num_target_spaces", 0) * d
  total += hparams.num_encoder_layers * (attention + ffn + 2 * norm)
  total += hparams.num_decoder_layers * (2 * attention + ffn + 3 * norm)
  if hparams.norm_type == "pre":
    total += 2 * norm
  if hparams.pos == "emb":
    total += 2 * hparams.max_positions * d
  return total
