"""Word alignments from the encoder-decoder attention (decode hparams return_alignment=true).

    lines = alignments(model, vocab, source_ids, output_ids, layer=-1)
    # ["0-0 1-1 2-1", ...]: Pharaoh "source word-output word" pairs, 0-based, one line each

For each output piece, the source piece that the chosen decoder layer's
encoder-decoder attention (the mean of its heads, teacher-forced over the
output) weights most, the source's EOS left out; pieces are then merged into
words (a sentencepiece piece starting with "▁" starts a word), and a word pair
is linked when any of its pieces are. This is the attention-argmax alignment
of fairseq's and Marian's decoders; its quality depends on the layer (later
layers are often better, Garg et al. 2019 report the penultimate); no training
signal asks attention to align, so take it as a guide, not a gold alignment.
"""

import numpy as np
import tensorflow as tf

from t2t_keras.data import vocabulary
from t2t_keras.errors import InputError
from t2t_keras.decoding.attention_maps import teacher_forced_attention
from t2t_keras.decoding.translate import pad_ids
from t2t_keras.ids import EOS_ID

WORD_START = "\u2581"  # sentencepiece's "▁"


def word_numbers(pieces):
  """The word each piece belongs to: a piece starting with "▁" starts a new word."""
  numbers, word = [], -1
  for i, piece in enumerate(pieces):
    if i == 0 or piece.startswith(WORD_START):
      word += 1
    numbers.append(word)
  return numbers


def pharaoh(weights, source_pieces, output_pieces):
  """"i-j" pairs of one sentence from weights [>= len(output_pieces), len(source_pieces)].

  source_pieces end with the source's EOS (never aligned to); weights rows beyond
  the output's pieces (its EOS) are ignored. Returns "" for an empty output.
  """
  weights = np.asarray(weights)
  words = len(source_pieces) - 1  # without EOS
  if not output_pieces or words < 1:
    return ""
  src_words, out_words = word_numbers(source_pieces[:words]), word_numbers(output_pieces)
  best = np.argmax(weights[:len(output_pieces), :words], axis=1)
  pairs = sorted({(src_words[s], out_words[t]) for t, s in enumerate(best)})
  return " ".join(f"{i}-{j}" for i, j in pairs)


def layer_attention(model, source_ids, output_ids, layer):
  """Teacher-forced attention of one decoder layer, heads averaged, for a batch of pairs:
  float32 [batch, max output + 1, max source] (outputs get EOS appended)."""
  src = pad_ids([list(s) for s in source_ids])
  tgt = pad_ids([list(o) + [EOS_ID] for o in output_ids])
  attention = teacher_forced_attention(model, src, tgt)
  try:
    chosen = attention[layer]
  except IndexError:
    raise InputError(f"decode hparam alignment_layer={layer}: the model has {len(attention)} decoder "
                     f"layers (0..{len(attention) - 1}, or -1 for the last)") from None
  return tf.reduce_mean(tf.cast(chosen, tf.float32), axis=1).numpy()


def alignments(model, vocab, source_ids, output_ids, layer=-1, batch_size=32):
  """Pharaoh lines for (source ids with EOS, output ids without EOS) pairs, in order."""
  lines, source = [], vocabulary.source_side(vocab)  # a pair's sides may have own ids
  for start in range(0, len(source_ids), batch_size):
    sources = source_ids[start:start + batch_size]
    outputs = output_ids[start:start + batch_size]
    weights = layer_attention(model, sources, outputs, layer)
    for row, (src, out) in enumerate(zip(sources, outputs)):
      lines.append(pharaoh(weights[row], [source.id_to_piece(t) for t in src],
                           [vocab.id_to_piece(t) for t in out]))
  return lines
