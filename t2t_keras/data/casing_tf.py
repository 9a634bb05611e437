"""`casing.py`'s first-letter fold and restore in TensorFlow ops, for the SavedModel's graph.

    FirstLetterFold()(texts)                   # strings [n] -> [n]
    FirstLetterRestore()(outputs, sources)     # strings [n], [n] -> [n]

The same rule as `casing.fold` / `casing.restore` (tests compare them on hand examples and
on Multi30k's lines): the first character is cut with tf.strings.substr's UTF8_CHAR unit,
cased with tf.strings.lower / upper's utf-8 encoding (ICU's full mappings, as Python's
str.lower and str.upper). Invalid UTF-8 is read as U+FFFD, as the export's tokenizer reads
it. TensorFlow 2.21's ICU tables predate Unicode 14: its new letters (Ⱟ, Ꟁ, Ꟑ, Ꟗ, Ꟙ and
their small forms) are uncased here, cased in Python 3.11. Core TensorFlow ops only: an
export that folds loads with TensorFlow (and TF Text for its vocabulary) alone.
"""

import tensorflow as tf

_LEADING_SPACE = r"^[ \t\n\r\f\v]+"  # casing.SPACE


def _valid(texts):
  """strings [n] with invalid UTF-8 replaced by U+FFFD (as the export's tokenizer reads it)."""
  return tf.strings.unicode_transcode(texts, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)


def _split_first(texts):
  """Valid UTF-8 strings [n] -> (leading whitespace, first character, the rest), strings
  [n] each."""
  body = tf.strings.regex_replace(texts, _LEADING_SPACE, "", replace_global=False)
  size = tf.strings.length(body)
  zeros = tf.zeros_like(size)  # substr's pos and len: one shape
  lead = tf.strings.substr(texts, zeros, tf.strings.length(texts) - size)
  first = tf.strings.substr(body, zeros, tf.ones_like(size), unit="UTF8_CHAR")
  rest = tf.strings.substr(body, tf.strings.length(first), size)
  return lead, first, rest


def _lower(chars):
  return tf.strings.lower(chars, encoding="utf-8")


def _upper(chars):
  return tf.strings.upper(chars, encoding="utf-8")


def is_capital(chars):
  """bool [n]: whether each of strings [n] (one character, or "") is a capital
  (`casing.is_capital`)."""
  lower = _lower(chars)
  return tf.logical_and(
      tf.logical_and(tf.equal(tf.strings.length(lower, unit="UTF8_CHAR"), 1),
                     tf.not_equal(lower, chars)),
      tf.equal(_upper(lower), chars))


def fold(texts):
  """strings [n] -> [n], each first letter lowercased where it is a capital (`casing.fold`)."""
  texts = _valid(texts)
  lead, first, rest = _split_first(texts)
  return tf.where(is_capital(first), tf.strings.join([lead, _lower(first), rest]), texts)


def is_lowercase(chars):
  """bool [n]: whether uppercasing changes each of strings [n] (`casing.is_lowercase`)."""
  return tf.not_equal(_upper(chars), chars)


def restore(outputs, sources):
  """strings [n], [n] -> [n]: each output's first letter uppercased where it is a folded
  capital, unless its source's first character is a lowercase one (`casing.restore`)."""
  _, source_first, _ = _split_first(_valid(sources))
  outputs = _valid(outputs)
  lead, first, rest = _split_first(outputs)
  upper = _upper(first)
  back = tf.logical_and(is_capital(upper), tf.equal(_lower(upper), first))
  return tf.where(tf.logical_and(tf.logical_not(is_lowercase(source_first)), back),
                  tf.strings.join([lead, upper, rest]), outputs)


class FirstLetterFold(tf.Module):
  """Callable: strings [n] -> [n] (`fold`); a problem's `serving_preprocess()`."""

  def __call__(self, texts):
    return fold(texts)


class FirstLetterRestore(tf.Module):
  """Callable: (outputs [n], sources [n]) -> [n] (`restore`); a problem's
  `serving_postprocess()`."""

  def __call__(self, outputs, sources):
    return restore(outputs, sources)
