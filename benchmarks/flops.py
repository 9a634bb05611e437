"""Analytic matmul FLOPs of one Transformer training step (for MFU in train_bench.py).

Pure Python (no TensorFlow; `decode_token_flops` imports the library on first use), so a
test can pin it to a hand count:

    from benchmarks.flops import train_step_flops
    flops = train_step_flops(hparams, vocab_size, [(batch, src_len, tgt_len)])
"""


def _head_sizes(hparams):
  """(d_k, d_v) per head; 0 means d_model // h (as t2t_keras.models.transformer.head_sizes)."""
  default = hparams.hidden_size // hparams.num_heads
  return (hparams.attention_key_channels or default,
          hparams.attention_value_channels or default)


def forward_flops(hparams, vocab_size, batch, src_len, tgt_len):
  """Matmul FLOPs (2 x multiply-adds) of one teacher-forced forward pass.

  Counted on the padded shapes the model actually runs (batch B, source length
  S, target length T), with d = hidden_size, h = num_heads, d_k / d_v per head,
  d_ff = filter_size, V = vocab_size:

    attention block, queries of length Lq over keys of length Lk:
      Q projection    2 B Lq d (h d_k)
      K projection    2 B Lk d (h d_k)
      V projection    2 B Lk d (h d_v)
      Q K^T           2 B h Lq Lk d_k
      A V             2 B h Lq Lk d_v
      W^O             2 B Lq (h d_v) d
    FFN over L positions: 2 B L d d_ff (W1) + 2 B L d_ff d (W2)

    encoder layer = self-attention (Lq = Lk = S) + FFN(S)
    decoder layer = self-attention (Lq = Lk = T) + enc-dec attention (Lq = T,
                    Lk = S) + FFN(T)
    softmax projection onto the shared embedding: 2 B T d V

  Causal self-attention is counted over the full T x T square, because the
  model computes it that way (masking, not skipping). Embedding lookups,
  positional encodings, softmax, LayerNorm, dropout, biases, ReLU and the loss
  are elementwise / gathers and are not counted (standard MFU convention).
  """
  d, h, dff = hparams.hidden_size, hparams.num_heads, hparams.filter_size
  dk, dv = _head_sizes(hparams)
  b = batch

  def attention(lq, lk):
    projections = 2 * b * lq * d * h * dk + 2 * b * lk * d * h * dk + 2 * b * lk * d * h * dv
    scores = 2 * b * h * lq * lk * dk + 2 * b * h * lq * lk * dv
    output = 2 * b * lq * h * dv * d
    return projections + scores + output

  def ffn(length):
    return 2 * (2 * b * length * d * dff)

  encoder = hparams.num_encoder_layers * (attention(src_len, src_len) + ffn(src_len))
  decoder = hparams.num_decoder_layers * (
      attention(tgt_len, tgt_len) + attention(tgt_len, src_len) + ffn(tgt_len))
  softmax = 2 * b * tgt_len * d * vocab_size
  return encoder + decoder + softmax


def train_step_flops(hparams, vocab_size, shapes):
  """Model FLOPs of training on batches of `shapes` [(batch, src_len, tgt_len), ...].

  Backward = 2 x forward (a gradient for each matmul operand), so a training
  step is 3 x `forward_flops`, summed over the given batches (one per replica /
  accumulation micro-step). Not 6 x params x tokens: that ignores the
  attention score matmuls and the source/target length split of seq2seq.
  """
  return sum(3 * forward_flops(hparams, vocab_size, b, s, t) for b, s, t in shapes)


def decode_token_flops(hparams, vocab_size, source_length=16, target_length=16):
  """Matmul FLOPs (2 x multiply-adds) per output token of one hypothesis in cached
  incremental decoding: t2t_keras/models/decode_cost.py's count (its docstring gives the
  formula; imported here on first use, so this module stays free of TensorFlow)."""
  from t2t_keras.models.decode_cost import decode_macs_per_token  # pylint: disable=import-outside-toplevel
  return 2 * decode_macs_per_token(hparams, vocab_size, source_length, target_length)
