"""The teacher's translations filtered into a student's training pairs: by score, by length ratio.

    counts = filter_pairs("train.en", "teacher/translations.txt", "teacher/scores.txt",
                          "filtered", min_score=-1.5, max_ratio=2.0,
                          truncated_path="teacher/truncated.txt")
    # {"lines": 29000, "kept": 28008, "dropped_truncated": 3, "dropped_score": 712,
    #  "dropped_ratio": 277, ...}
    # filtered/train.source, filtered/train.target, filtered/filter.json

A pair is dropped where the teacher cut its source at the input limit (teacher.py's
truncated.txt: the output translates part of the source, and its score is not
comparable); else by score where the teacher's length-normalised score (scores.txt) is
below min_score; else by ratio where its sides' lengths differ by more than max_ratio
times either way (a side of length 0: always). Each pair is counted once, under the first
test it fails, in that order. Lengths are whitespace-separated words, or with a
vocabulary the pieces it cuts each side into (words miscount compounding languages: one
German number word is several English ones).
"""

import json
import math

from t2t_keras import fileio
from t2t_keras.errors import InputError

SOURCE_FILE, TARGET_FILE, SUMMARY_FILE = "train.source", "train.target", "filter.json"


def length_ratio(source_length, target_length):
  """max / min of two lengths; inf where either is 0 (an empty side is never kept)."""
  if min(source_length, target_length) == 0:
    return math.inf
  return max(source_length, target_length) / min(source_length, target_length)


def filter_pairs(sources_path, translations_path, scores_path, output_dir, *, min_score=None,
                 max_ratio=None, vocab_path=None, truncated_path=None, max_lines=None,
                 log=print):
  """Writes the kept (source, translation) pairs to output_dir/train.source and
  train.target (atomically) and the counts to filter.json; returns the counts
  {"lines", "kept", "dropped_truncated", "dropped_score", "dropped_ratio"} with the
  settings. min_score / max_ratio None: no such test. vocab_path: lengths in that
  vocabulary's pieces (a run's vocab.model), else in words. truncated_path: the
  teacher's truncated.txt (None: no line known cut). max_lines: the sources' first N
  lines only (the teacher's max_lines)."""
  log = log or (lambda message: None)
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  sources, targets = read_lines(sources_path), read_lines(translations_path)
  if max_lines is not None:
    sources = sources[:max_lines]
  scores = _read_scores(scores_path)
  truncated = (_read_flags(truncated_path) if truncated_path
               else [False] * len(sources))
  for path, lines in ((translations_path, targets), (scores_path, scores),
                      (truncated_path, truncated)):
    if len(lines) != len(sources):
      raise InputError(f"{sources_path} has {len(sources)} lines but {path} has {len(lines)}: "
                       "give the teacher's finished outputs for that input")
  if max_ratio is not None and max_ratio < 1:
    raise InputError(f"max_ratio={max_ratio}: a ratio of lengths is at least 1")
  lengths = _length_function(vocab_path)
  kept, counts = [], {"lines": len(sources), "kept": 0, "dropped_truncated": 0,
                      "dropped_score": 0, "dropped_ratio": 0}
  for source, target, score, cut in zip(sources, targets, scores, truncated):
    if cut:
      counts["dropped_truncated"] += 1
    elif min_score is not None and score < min_score:
      counts["dropped_score"] += 1
    elif max_ratio is not None and length_ratio(*lengths(source, target)) > max_ratio:
      counts["dropped_ratio"] += 1
    else:
      kept.append((source, target))
  counts["kept"] = len(kept)
  summary = dict(counts, min_score=min_score, max_ratio=max_ratio,
                 unit="pieces" if vocab_path else "words", vocab=vocab_path)
  fileio.makedirs(output_dir)
  for name, column in ((SOURCE_FILE, 0), (TARGET_FILE, 1)):
    with fileio.atomic_open(fileio.join(output_dir, name)) as f:
      f.write("".join(pair[column] + "\n" for pair in kept))
  fileio.write_atomic(fileio.join(output_dir, SUMMARY_FILE), json.dumps(summary, indent=1) + "\n")
  log(f"kept {counts['kept']} of {counts['lines']} pairs; dropped "
      f"{counts['dropped_truncated']} cut at the input limit, {counts['dropped_score']} "
      f"by score (< {min_score}), {counts['dropped_ratio']} by length ratio (> {max_ratio} "
      f"{summary['unit']})")
  return summary


def _read_scores(path):
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  scores = []
  for number, line in enumerate(read_lines(path), start=1):
    try:
      scores.append(float(line))
    except ValueError:
      raise InputError(f"{path}:{number}: {line[:40]!r} is not a score") from None
  return scores


def _read_flags(path):
  """truncated.txt's lines as booleans ("1" / "0"); InputError naming a line of neither."""
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  flags = []
  for number, line in enumerate(read_lines(path), start=1):
    if line not in ("0", "1"):
      raise InputError(f"{path}:{number}: {line[:40]!r} is not 0 or 1")
    flags.append(line == "1")
  return flags


def _length_function(vocab_path):
  """(source, target) -> (source length, target length), in words or in pieces."""
  if not vocab_path:
    return lambda source, target: (len(source.split()), len(target.split()))
  from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
  vocab = vocabulary.load(vocab_path)
  source_side, target_side = vocabulary.source_side(vocab), vocabulary.target_side(vocab)
  return lambda source, target: (len(source_side.encode(source)),
                                 len(target_side.encode(target)))
