"""Hparams sets of "Attention Is All You Need" (Vaswani et al., 2017).

`transformer_base` and `transformer_big` are the paper's models; every row of
Table 3 is its own set (`transformer_table3_a1` ... `transformer_table3_e`);
`*_single_gpu` sets use a smaller token batch and a longer warmup, as t2t's do;
`transformer_tiny` / `transformer_small` are for CPU work.

Conventions:
  hidden_size = d_model, filter_size = d_ff, num_heads = h.
  attention_key_channels / attention_value_channels are d_k / d_v *per head*;
  0 means hidden_size // num_heads (the paper's d_k = d_v = d_model / h).
  batch_size is the token budget of one training step summed over replicas
  (padded length of the longer side times sentences).
"""

from t2t_keras import registry
from t2t_keras.hparams_lib import HParams


def _paper_defaults():
  return dict(
      # Model (section 3).
      num_encoder_layers=6,
      num_decoder_layers=6,
      hidden_size=512,
      filter_size=2048,
      num_heads=8,
      attention_key_channels=0,
      attention_value_channels=0,
      layer_prepostprocess_dropout=0.1,  # P_drop: sublayer outputs and embeddings.
      attention_dropout=0.0,
      relu_dropout=0.0,
      norm_type="post",  # "post": LayerNorm(x + Sublayer(x)); "pre": x + Sublayer(LayerNorm(x)).
      norm_epsilon=1e-6,
      pos="timing",  # "timing": sinusoids (3.5); "emb": learned (Table 3 row E);
      # "timing_t2t": tensor2tensor's and Marian's layout of the sinusoids (imported
      # models); "timing_hf": that of Hugging Face's and CTranslate2's Marian ports.
      max_positions=1024,  # Size of the learned position table (pos="emb").
      # tensor2tensor's conventions, kept by imported models (docs/migrating.md);
      # the defaults are the paper's.
      shared_embedding_and_softmax_weights=True,  # False: a separate pre-softmax matrix
      shared_source_target_embedding=True,  # False (with the above): a separate target one too
      zero_pad_embedding=False,  # True: id 0 embeds as zeros (the decoder starts from zeros)
      num_target_spaces=0,  # >0: a [num_target_spaces, d] table (t2t: 32) whose row
      target_space_id=0,  # target_space_id is added to every encoder input
      # Marian's conventions, kept by models imported from OPUS-MT (docs/migrating.md).
      attention_bias=False,  # True: biases on the attention projections
      ffn_activation="relu",  # Or "swish" (x * sigmoid(x)).
      logit_bias=False,  # True: a learned bias on the output logits
      separate_source_embedding=False,  # True (with the softmax shared): a source table
      # of its own, the target's tied to the softmax
      softmax_excludes_pad=False,  # True: PAD (id 0) is outside the softmax and the
      # label smoothing (a vocabulary with no padding entry of its own)
      # fairseq's conventions, kept by M2M-100 / NLLB models imported from Hugging Face.
      position_offset=0,  # the first token's position (fairseq: padding_idx + 1 = 2)
      decoder_start_id=0,  # the decoder's first input (0: PAD, t2t's; fairseq: </s>)
      # Training (section 5).
      label_smoothing=0.1,
      rdrop_alpha=0.0,  # >0: R-Drop (Liang et al. 2021), each batch run twice through
      # dropout and the two output distributions' symmetric KL added with this weight
      optimizer_adam_beta1=0.9,
      optimizer_adam_beta2=0.98,
      optimizer_adam_epsilon=1e-9,
      learning_rate_constant=1.0,
      learning_rate_warmup_steps=4000,
      batch_size=25000,
      max_length=256,  # Longer pairs (in subword tokens) are dropped in training.
      # Length buckets: "max" pads both sides to the bucket of the longer one
      # (few batch shapes, so XLA compiles few programs); "pair" buckets inputs
      # and targets separately (less padding, many more shapes); "auto": the
      # trainer takes "pair" where one trace serves every batch shape (one
      # device, no XLA) and "max" elsewhere, and evaluation takes "max".
      bucket_mode="auto",
      bucket_step=1.1,
      packed_length=0,  # >0: pack pairs into rows of this many tokens (t2t's packed datasets)
      train_steps=100000,
      gradient_accumulation_steps=1,
      clip_grad_norm=0.0,  # 0 disables clipping (the paper does not clip).
      precision="float32",  # Or "mixed_bfloat16" / "mixed_float16" (GPU runs).
  )


@registry.register_hparams
def transformer_base():
  """The paper's base model: 65M parameters, 100k steps of ~25k+25k tokens."""
  return HParams(**_paper_defaults())


@registry.register_hparams
def transformer_big():
  """The paper's big model (en-de): d_model 1024, d_ff 4096, h 16, P_drop 0.3."""
  return transformer_base().replace(
      hidden_size=1024, filter_size=4096, num_heads=16,
      layer_prepostprocess_dropout=0.3, train_steps=300000)


@registry.register_hparams
def transformer_big_enfr():
  """The paper's big model for en-fr, with P_drop 0.1."""
  return transformer_big().replace(layer_prepostprocess_dropout=0.1)


@registry.register_hparams
def transformer_base_single_gpu():
  """Base on one device: 4096-token batches, warmup 16000 (as t2t)."""
  return transformer_base().replace(batch_size=4096, learning_rate_warmup_steps=16000)


@registry.register_hparams
def transformer_big_single_gpu():
  """Big on one device: P_drop 0.1, 4096-token batches, warmup 16000 (as t2t)."""
  return transformer_big().replace(
      layer_prepostprocess_dropout=0.1, batch_size=4096,
      learning_rate_warmup_steps=16000)


@registry.register_hparams
def transformer_small():
  """2+2 layers, d_model 256, d_ff 1024, 4 heads: minutes-scale CPU runs."""
  return transformer_base().replace(
      num_encoder_layers=2, num_decoder_layers=2, hidden_size=256,
      filter_size=1024, num_heads=4, batch_size=4096,
      learning_rate_warmup_steps=1000, train_steps=20000)


@registry.register_hparams
def transformer_tiny():
  """2+2 layers, d_model 128, d_ff 512, 4 heads, pre-norm: learns the default problem on a laptop.

  Pre-norm (as t2t's transformer_tiny, which derives from its pre-norm
  transformer_base) at learning-rate constant 1.0: peak 128^-0.5 * 400^-0.5 =
  4.4e-3 at step 400. It still learns at 1.5x that peak. The paper's post-norm
  at constant 2.0 (`transformer_tiny_v1`) sits on the edge of stability: its
  loss climbs after warmup and, on some CPUs and seeds, the model never
  recovers (docs/recipes.md).
  """
  return transformer_small().replace(
      hidden_size=128, filter_size=512, batch_size=2048, norm_type="pre",
      learning_rate_warmup_steps=400, learning_rate_constant=1.0,
      layer_prepostprocess_dropout=0.1, max_length=64, train_steps=3000)


@registry.register_hparams
def transformer_tiny_v1():
  """transformer_tiny as the paper builds it (post-norm) at the earlier constant 2.0 (peak 8.8e-3).

  Kept by name for comparison: its training loss climbs after warmup on every
  CPU measured, and some seeds end with a model that did not learn.
  """
  return transformer_tiny().replace(norm_type="post", learning_rate_constant=2.0)



@registry.register_hparams
def transformer_multi30k():
  """Multi30k En-De from scratch on 2 CPU cores in at most 2 hours.

  The shape of the baseline this project measured (TF Model Garden's
  Seq2SeqTransformer recipe): 3+3 layers, d_model 256, d_ff 1024, 4 heads,
  dropout 0.2, warmup 1000 with learning-rate constant 2.0 (peak
  2 * 256^-0.5 * 1000^-0.5 = 0.004), 4096-token batches; about 7.6M
  parameters with the 8k joint vocabulary. Pre-norm, as t2t's later
  transformer_base: at this peak learning rate the paper's post-norm
  (`--hparams=norm_type=post`) learned more slowly per step (docs/notebook.md).
  """
  return transformer_base().replace(
      num_encoder_layers=3, num_decoder_layers=3, hidden_size=256,
      filter_size=1024, num_heads=4, layer_prepostprocess_dropout=0.2,
      norm_type="pre", batch_size=4096, learning_rate_warmup_steps=1000,
      learning_rate_constant=2.0, max_length=100, train_steps=100000)

@registry.register_hparams
def transformer_multi30k_tiny():
  """Multi30k's small-data regime: 4+4 layers, d_model 128, d_ff 256, 4 heads, dropout 0.3.

  The shape of the strongest text-only Multi30k Transformer in a primary
  source (Wu et al., 2021, "Transformer-Tiny": 41.02 lowercased tokenized
  BLEU on test2016 after 8k updates of two 4096-token GPU batches, peak
  learning rate 0.005 after 2000 warmup steps). Here: 8192-token batches,
  warmup 2000, learning-rate constant 2.5 (peak 2.5 * 128^-0.5 * 2000^-0.5 =
  0.0050), pre-norm as transformer_multi30k; 2.3M parameters with the 8k
  joint vocabulary. recipes/multi30k.sh's default (its results: docs/recipes.md).
  """
  return transformer_multi30k().replace(
      num_encoder_layers=4, num_decoder_layers=4, hidden_size=128,
      filter_size=256, num_heads=4, layer_prepostprocess_dropout=0.3,
      batch_size=8192, learning_rate_warmup_steps=2000,
      learning_rate_constant=2.5)


@registry.register_hparams
def transformer_multi30k_student():
  """A distillation student of transformer_multi30k_tiny: 4+2 layers, d_model 64, dropout 0.1.

  At most half the teacher's multiply-adds per output token (models/decode_cost.py: 37%
  with the 8k vocabulary, whose output projection, d_model x V, dominates at this size;
  hence the narrower d_model, not only fewer decoder layers); the encoder runs once per
  sentence and keeps 4 layers. Less dropout than the teacher: a teacher's outputs are
  easier to fit than references (Kim & Rush, 2016). Untuned (docs/recipes.md, Distillation).
  """
  return transformer_multi30k_tiny().replace(
      num_encoder_layers=4, num_decoder_layers=2, hidden_size=64, filter_size=256,
      num_heads=4, layer_prepostprocess_dropout=0.1)


# Table 3 of the paper: each row changes the base model as listed; the paper's
# parameter count (millions, where the paper gives one) rides along for the
# comparison printed by `t2t-param-table`.
TABLE3 = {
    # (A) attention heads and per-head sizes, computation kept constant.
    "a1": (dict(num_heads=1, attention_key_channels=512, attention_value_channels=512), None),
    "a2": (dict(num_heads=4, attention_key_channels=128, attention_value_channels=128), None),
    "a3": (dict(num_heads=16, attention_key_channels=32, attention_value_channels=32), None),
    "a4": (dict(num_heads=32, attention_key_channels=16, attention_value_channels=16), None),
    # (B) smaller attention keys.
    "b1": (dict(attention_key_channels=16), 58),
    "b2": (dict(attention_key_channels=32), 60),
    # (C) model size.
    "c1": (dict(num_encoder_layers=2, num_decoder_layers=2), 36),
    "c2": (dict(num_encoder_layers=4, num_decoder_layers=4), 50),
    "c3": (dict(num_encoder_layers=8, num_decoder_layers=8), 80),
    "c4": (dict(hidden_size=256, attention_key_channels=32, attention_value_channels=32), 28),
    "c5": (dict(hidden_size=1024, attention_key_channels=128, attention_value_channels=128), 168),
    "c6": (dict(filter_size=1024), 53),
    "c7": (dict(filter_size=4096), 90),
    # (D) dropout and label smoothing.
    "d1": (dict(layer_prepostprocess_dropout=0.0), None),
    "d2": (dict(layer_prepostprocess_dropout=0.2), None),
    "d3": (dict(label_smoothing=0.0), None),
    "d4": (dict(label_smoothing=0.2), None),
    # (E) learned positional embedding instead of sinusoids.
    "e": (dict(pos="emb"), None),
}

PAPER_PARAMS_MILLIONS = {"transformer_base": 65, "transformer_big": 213}


def make_variant(name, base, changes, doc):
  """An hparams-set function named `name`: base() with `changes` (for registering rows)."""
  def fn():
    return base().replace(**changes)
  fn.__name__, fn.__doc__ = name, doc
  return fn


for _row, (_changes, _paper) in TABLE3.items():
  registry.register_hparams(make_variant(
      f"transformer_table3_{_row}", transformer_base, _changes,
      f"Table 3 row ({_row.upper()}): base with {_changes}."))
  PAPER_PARAMS_MILLIONS[f"transformer_table3_{_row}"] = _paper
