"""Scoring given translations: log p(target | source) under a model (t2t-decoder --score_file).

    scoring.score_pairs(model, vocab, ["one hundred"], ["einhundert"])   # [-0.12]
    scoring.score_file(model, vocab, "pairs.tsv", "scores.txt")          # "source<TAB>target" lines
"""

import tensorflow as tf

from t2t_keras.data import vocabulary
from t2t_keras.decoding.translate import encode_sources, pad_ids
from t2t_keras.decoding.files import frame_for_model, read_lines, write_lines
from t2t_keras.errors import InputError


def score_pairs(model, vocab, sources, targets, batch_size=32, source_language=None,
                target_language=None, name="sources"):
  """log p(target | source) under the model, summed over the target's subwords and EOS.

  t2t-decoder's --score_file. Args: text lines of equal count; a multilingual model's
  sources tagged as the decoder tags them (`files.frame_for_model`: `target_language`'s
  tag, else each line's own); a language-token model's (M2M-100's) sources led by the
  source language's token and targets by the target language's, the decoder's forced
  first token, whose log-probability the score includes (as translations' scores do).
  Returns a list of floats (natural log), one per pair, in input order.
  """
  return score_ids(model, *encode_pairs(vocab, sources, targets, source_language,
                                        target_language, name), batch_size)


def encode_pairs(vocab, sources, targets, source_language=None, target_language=None,
                 name="sources"):
  """(source ids, target ids) of text pairs as `score_pairs` scores them (framed by
  `frame_pairs`, each EOS-terminated); InputError for unequal counts."""
  if len(sources) != len(targets):
    raise InputError(f"{len(sources)} sources but {len(targets)} targets")
  sources, targets = frame_pairs(vocab, sources, targets, source_language, target_language,
                                 name)
  return (encode_sources(vocab, sources),
          encode_sources(vocabulary.target_side(vocab), targets))


def frame_pairs(vocab, sources, targets, source_language=None, target_language=None,
                name="sources"):
  """(sources, targets) as the model of `vocab` reads them (`files.frame_for_model`); a
  language-token model's targets led by the target language's token (once: a target that
  starts with it keeps it as it is)."""
  sources, prefixes = frame_for_model(vocab, sources, None, None, target_language,
                                      source_language, name)
  if prefixes is not None:
    targets = [t if t.split(" ", 1)[0] == p else f"{p} {t}".strip()
               for p, t in zip(prefixes, targets)]
  return sources, targets


def score_ids(model, src_ids, tgt_ids, batch_size=32, per_piece=False):
  """log p(target ids | source ids): the sum over the given target ids (EOS where given);
  per_piece: the sum over their number (the non-padding ids: the mean log-probability).

  Args: lists of id lists (sources EOS-terminated, as the training data).
  Returns: a list of floats, one per pair, in input order.
  """
  scores = []
  for start in range(0, len(src_ids), batch_size):
    src, tgt = src_ids[start:start + batch_size], tgt_ids[start:start + batch_size]
    batch = {"inputs": pad_ids(src), "targets": pad_ids(tgt)}
    logits = tf.cast(model(batch, training=False), tf.float32)
    log_probs = tf.gather(tf.nn.log_softmax(logits), batch["targets"], axis=2, batch_dims=2)
    mask = tf.cast(batch["targets"] != 0, tf.float32)
    sums = tf.reduce_sum(log_probs * mask, axis=1)
    if per_piece:
      sums /= tf.maximum(tf.reduce_sum(mask, axis=1), 1.0)
    scores.extend(float(x) for x in sums.numpy())
  return scores


def score_file(model, vocab, input_path, output_path=None, decoding=None, log=print,
               source_language=None, target_language=None):
  """Scores "source<TAB>target" lines (t2t's --score_file): one log-probability per line
  (languages as `score_pairs`'). decoding: the run's `DecodingSpec`, or None: its batch
  size (else 32) and its problem's `preprocess` hook, applied to both sides as the
  training data was (the first-letter case fold).

  Writes "%.6f" lines to output_path (atomically) when given; returns the scores.
  """
  sources, targets = [], []
  for lineno, line in enumerate(read_lines(input_path), start=1):
    parts = line.split("\t")
    if len(parts) != 2:
      raise InputError(f"{input_path}:{lineno}: expected 'source<TAB>target', "
                       f"found {len(parts) - 1} tabs")
    sources.append(parts[0].strip())
    targets.append(parts[1].strip())
  batch_size = 32
  if decoding is not None:
    fold, batch_size = decoding.hooks.preprocess, decoding.settings.batching.batch_size
    sources, targets = [fold(x) for x in sources], [fold(x) for x in targets]
  scores = score_pairs(model, vocab, sources, targets, batch_size, source_language,
                       target_language, input_path) if sources else []
  if output_path:
    write_lines(output_path, [f"{x:.6f}" for x in scores])
    log(f"scored {len(scores)} pairs; wrote {output_path}")
  return scores
