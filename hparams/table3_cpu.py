"""Table 3 at CPU scale: every row of the paper's Table 3 applied to a half-size base.

`transformer_table3_cpu` halves the paper's base in depth and width: N = 3,
d_model 256, d_ff 1024, h = 8 (so d_k = d_v = 32), P_drop 0.1, label smoothing
0.1, post-norm and sinusoids as the paper. Each `transformer_table3_cpu_<row>`
makes the paper row's change in the same proportion (`scale_changes`): layer
counts by 3/6, d_model, d_k and d_v by 256/512, d_ff by 1024/2048; head
counts, dropout, label smoothing and positions as the paper. So (A) keeps
h x d_k = 256 (h 1/4/16/32 with d_k 256/64/16/8), (B) d_k 8 and 16, (C) N 1/2/4,
d_model 128/512, d_ff 512/2048.

Training: 4096-token batches, the paper's learning rate d_model^-0.5 *
min(step^-0.5, step * warmup^-1.5) with warmup 400 (peak 0.0031 for d_model
256), for the step budget the sweep gives every row (recipes/table3.sh).

PAPER_DEV holds the paper's Table 3 dev figures (newstest2013, perplexity per
wordpiece and BLEU) for each row, for the comparison the sweep prints.
"""

from t2t_keras import registry
from t2t_keras.hparams.transformer import TABLE3, make_variant, transformer_base

PAPER_BASE = dict(num_layers=6, hidden_size=512, filter_size=2048)
CPU_BASE = dict(num_layers=3, hidden_size=256, filter_size=1024)

# Table 3 of the paper, dev (newstest2013): (perplexity per wordpiece, BLEU).
PAPER_DEV = {
    "base": (4.92, 25.8),
    "a1": (5.29, 24.9), "a2": (5.00, 25.5), "a3": (4.91, 25.8), "a4": (5.01, 25.4),
    "b1": (5.16, 25.1), "b2": (5.01, 25.4),
    "c1": (6.11, 23.7), "c2": (5.19, 25.3), "c3": (4.88, 25.5), "c4": (5.75, 24.5),
    "c5": (4.66, 26.0), "c6": (5.12, 25.4), "c7": (4.75, 26.2),
    "d1": (5.77, 24.6), "d2": (4.95, 25.5), "d3": (4.67, 25.3), "d4": (5.47, 25.7),
    "e": (4.92, 25.7),
}


def scale_changes(changes):
  """A Table 3 row's changes to the paper's base, scaled to the CPU base in proportion."""
  width = CPU_BASE["hidden_size"] / PAPER_BASE["hidden_size"]
  scaled = {}
  for key, value in changes.items():
    if key in ("num_encoder_layers", "num_decoder_layers"):
      value = max(1, round(value * CPU_BASE["num_layers"] / PAPER_BASE["num_layers"]))
    elif key in ("hidden_size", "attention_key_channels", "attention_value_channels"):
      value = max(1, round(value * width))
    elif key == "filter_size":
      value = round(value * CPU_BASE["filter_size"] / PAPER_BASE["filter_size"])
    scaled[key] = value
  return scaled


@registry.register_hparams
def transformer_table3_cpu():
  """The paper's base at half depth and width (module docstring): Table 3 at CPU scale."""
  return transformer_base().replace(
      num_encoder_layers=CPU_BASE["num_layers"], num_decoder_layers=CPU_BASE["num_layers"],
      hidden_size=CPU_BASE["hidden_size"], filter_size=CPU_BASE["filter_size"],
      batch_size=4096, learning_rate_warmup_steps=400, max_length=100, train_steps=1200,
      # The sweep's first rows were trained with "max" buckets, before "auto"
      # became the default: every row keeps them, so rows stay comparable.
      bucket_mode="max")


CPU_ROWS = {row: scale_changes(changes) for row, (changes, _) in TABLE3.items()}
for _row, _changes in CPU_ROWS.items():
  registry.register_hparams(make_variant(
      f"transformer_table3_cpu_{_row}", transformer_table3_cpu, _changes,
      f"Table 3 row ({_row.upper()}) at CPU scale: transformer_table3_cpu with {_changes}."))


def paper_row(hparams_set):
  """The Table 3 row ("base", "a1", ...) a set stands for (paper's or CPU-scaled), or None."""
  if hparams_set in ("transformer_base", "transformer_table3_cpu"):
    return "base"
  for prefix in ("transformer_table3_cpu_", "transformer_table3_"):
    if hparams_set.startswith(prefix) and hparams_set[len(prefix):] in PAPER_DEV:
      return hparams_set[len(prefix):]
  return None
