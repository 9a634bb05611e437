"""Hparams sets for English constituency parsing (the paper's section 6.3).

`transformer_parsing_big` is the paper's WSJ-only model: "a 4-layer transformer
with d_model = 1024", everything else as the base translation model, with
attention and residual dropout (the paper chose them on section 22; 0.2 each
as tensor2tensor's parsing sets) and room for long linearized trees.
`transformer_parsing_cpu` learns the 3,669-tree sample on 2 CPU cores.
Decoding presets are the problem's (`parsing_english_ptb8k.decode_defaults`:
output length input + 300, beam 21, alpha 0.3, as the paper).
"""

from t2t_keras import registry
from t2t_keras.hparams.transformer import transformer_base


@registry.register_hparams
def transformer_parsing_big():
  """The paper's WSJ-only parser: 4+4 layers, d_model 1024 (d_ff 2048, 8 heads as base)."""
  return transformer_base().replace(
      num_encoder_layers=4, num_decoder_layers=4, hidden_size=1024,
      layer_prepostprocess_dropout=0.2, attention_dropout=0.2, max_length=512)


@registry.register_hparams
def transformer_parsing_cpu():
  """The PTB sample on 2 CPU cores: 3+3 layers, d_model 256, d_ff 1024, 4 heads, pre-norm.

  About 3,000 training trees: strong dropout (0.3 on sublayers, 0.1 on attention
  weights and ReLU outputs), 4096-token batches, warmup 1000 with
  learning-rate constant 2.0 (peak 0.004), as transformer_multi30k.
  """
  return transformer_base().replace(
      num_encoder_layers=3, num_decoder_layers=3, hidden_size=256, filter_size=1024,
      num_heads=4, layer_prepostprocess_dropout=0.3, attention_dropout=0.1,
      relu_dropout=0.1, norm_type="pre", batch_size=4096, learning_rate_warmup_steps=1000,
      learning_rate_constant=2.0, max_length=512, train_steps=20000)
