"""Encoder-decoder attention heatmaps of decoded sentences (PNG, matplotlib Agg).

After decoding, one teacher-forced pass over the output (uncached, simplest:
`teacher_forced_attention`, also alignment's and the SavedModel's) returns every decoder
layer's encoder-decoder attention. Each sentence gets one
PNG: a row per layer, the first column the heads' average, then one column
per head; axes are labelled with the subword pieces.

    paths = plot_translations(model, vocab, source_ids, output_ids, "plots/")
"""

import os

import numpy as np
import tensorflow as tf

from t2t_keras.data import vocabulary
from t2t_keras.ids import EOS_ID
from t2t_keras.models.transformer import shift_right


def teacher_forced_attention(model, inputs, targets):
  """Every decoder layer's encoder-decoder attention with the targets fed in (one uncached
  pass: encode, then decode the right-shifted targets).

  Args:
    model: a Transformer (or an ensemble of them: `models/ensemble.py`).
    inputs: int32 [batch, src_len] source ids, EOS-terminated, 0-padded.
    targets: int32 [batch, tgt_len] output ids, EOS-terminated, 0-padded.
  Returns:
    a list (one per decoder layer) of float [batch, heads, tgt_len, src_len] tensors; the
    row of target t is the attention that predicted it. Graph-only TF (the SavedModel's
    attention signature runs it).
  """
  memory, mask = model.encode(inputs)
  _, _, attention = model.decode(shift_right(targets), memory, mask, return_attention=True)
  return attention


def attention_weights(model, source_ids, output_ids):
  """Teacher-forced encoder-decoder attention of one sentence pair.

  Args:
    source_ids: list of source ids (EOS-terminated).
    output_ids: list of output ids (without EOS; EOS is appended, its row included).
  Returns:
    float32 [layers, heads, len(output_ids) + 1, len(source_ids)].
  """
  src = tf.constant([list(source_ids)], tf.int32)
  tgt = tf.constant([list(output_ids) + [EOS_ID]], tf.int32)
  return np.stack([a.numpy()[0] for a in teacher_forced_attention(model, src, tgt)])


def plot_attention(weights, source_tokens, output_tokens, path, title=None):
  """Writes a PNG of weights [layers, heads, out, src]: per layer, heads averaged then each head."""
  import matplotlib  # pylint: disable=import-outside-toplevel
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt  # pylint: disable=import-outside-toplevel

  layers, heads, rows, cols = weights.shape
  panels = heads + 1
  cell = 0.28
  fig_w = min(60.0, panels * max(2.5, cols * cell + 1.2))
  fig_h = min(60.0, layers * max(2.5, rows * cell + 1.2))
  fig, axes = plt.subplots(layers, panels, figsize=(fig_w, fig_h), squeeze=False)
  for layer in range(layers):
    for p in range(panels):
      ax = axes[layer][p]
      data = weights[layer].mean(0) if p == 0 else weights[layer, p - 1]
      ax.imshow(data, cmap="viridis", vmin=0.0, vmax=1.0, aspect="auto")
      name = "mean of heads" if p == 0 else f"head {p}"
      ax.set_title(f"layer {layer + 1}, {name}", fontsize=8)
      ax.set_xticks(range(cols))
      ax.set_yticks(range(rows))
      ax.set_xticklabels(source_tokens, rotation=90, fontsize=6)
      ax.set_yticklabels(output_tokens if p == 0 else [], fontsize=6)
  if title:
    fig.suptitle(title, fontsize=9)
  fig.tight_layout()
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  fig.savefig(path, dpi=80)
  plt.close(fig)
  return path


def plot_translations(model, vocab, source_ids, output_ids, plot_dir, prefix="attention"):
  """One PNG per sentence pair: plot_dir/<prefix>_<index:05d>.png; returns the paths."""
  paths, source = [], vocabulary.source_side(vocab)  # a pair's sides may have own ids
  for i, (src, out) in enumerate(zip(source_ids, output_ids)):
    weights = attention_weights(model, src, out)
    src_tokens = [source.id_to_piece(t) for t in src]
    out_tokens = [vocab.id_to_piece(t) for t in list(out) + [EOS_ID]]
    title = f"{source.decode(src)}  ->  {vocab.decode(out)}"
    paths.append(plot_attention(weights, src_tokens, out_tokens,
                                os.path.join(plot_dir, f"{prefix}_{i:05d}.png"), title))
  return paths
