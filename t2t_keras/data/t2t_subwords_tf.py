"""tensor2tensor's SubwordTextEncoder in TensorFlow ops, for graphs and SavedModels.

    tok = T2tSubwordVocabulary(path).tf_tokenizer()
    tok.tokenize(tf.constant(["Hello, world!"]))   # ragged int32 [1, (ids)], no EOS
    tok.detokenize(ids)                            # string [n]

The same conventions as `t2t_subwords` (its module docstring), built from TF and TF Text
ops only, so an exported SavedModel loads with `tensorflow` and `tensorflow-text`:
alphanumeric runs from RE2's \\p{L} and \\p{N} per character (so a NUL byte splits like
any other character), the escapes with string ops, the greedy longest match with TF
Text's WordpieceTokenizer (no suffix marker: t2t has one vocabulary for every position).
"""

import tensorflow as tf
import tensorflow_text as tf_text

ALNUM = r"[\p{L}\p{N}]"
_ESCAPE = r"\\u|\\\\|\\[0-9]+;"
_NOT_A_CHARACTER = 0x3013  # t2t's stand-in for an escape that is not a code point


def _position_in_row(ragged):
  """int64 [values]: each flat value's index within its row."""
  return (tf.range(tf.size(ragged.flat_values, out_type=tf.int64))
          - tf.gather(ragged.row_starts(), ragged.value_rowids()))


def _runs(texts):
  """string [n] -> ragged string [n, (tokens)]: runs of alphanumeric / other characters."""
  chars = tf.strings.unicode_split(texts, "UTF-8")                   # [n, (chars)]
  flat = chars.flat_values
  alnum = tf.strings.regex_full_match(flat, ALNUM)
  position = _position_in_row(chars)
  previous = tf.concat([[False], alnum[:-1]], 0)
  starts = tf.logical_or(tf.equal(position, 0), tf.not_equal(alnum, previous))
  segment = tf.cumsum(tf.cast(starts, tf.int64)) - 1
  count = tf.reduce_sum(tf.cast(starts, tf.int64))
  tokens = tf.strings.unsorted_segment_join(flat, segment, count)
  per_row = tf.math.bincount(tf.boolean_mask(chars.value_rowids(), starts),
                             minlength=chars.nrows(), maxlength=chars.nrows(), dtype=tf.int64)
  return tf.RaggedTensor.from_row_lengths(tokens, per_row, validate=False)


def _drop_inner_spaces(tokens):
  """ragged string [n, (tokens)] -> the same without the single-space tokens that are
  neither first nor last in their row (those between two alphanumeric runs). On the
  flat values: ragged masks and comparisons add about a thousand graph ops."""
  flat, rows = tokens.flat_values, tokens.value_rowids()
  index = _position_in_row(tokens)
  last = tf.equal(index, tf.gather(tokens.row_lengths(), rows) - 1)
  keep = tf.logical_or(tf.not_equal(flat, " "), tf.logical_or(tf.equal(index, 0), last))
  lengths = tf.math.bincount(tf.boolean_mask(rows, keep), minlength=tokens.nrows(),
                             maxlength=tokens.nrows(), dtype=tf.int64)
  return tf.RaggedTensor.from_row_lengths(tf.boolean_mask(flat, keep), lengths, validate=False)


class T2tSubwordTokenizer(tf.Module):
  """Text <-> ids with a SubwordTextEncoder vocabulary, in TF ops.

  Args:
    subtokens: the vocabulary's subtoken strings in id order ('<pad>', '<EOS>', ...).
    alphabet: the characters left unescaped (the subtokens' characters and "\\_u;0-9").
  """

  def __init__(self, subtokens, alphabet, name=None):
    super().__init__(name=name)
    ids = {s: i for i, s in enumerate(subtokens) if s}
    self.subtokens = tf.constant(list(subtokens))
    self.vocab_size = len(subtokens)
    self._lookup = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        list(ids), list(ids.values()), tf.string, tf.int64), -1)
    kept = sorted(set(alphabet) - {"\n"})
    self._alphabet = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        kept, [True] * len(kept), tf.string, tf.bool), False)
    self._wordpiece = tf_text.WordpieceTokenizer(
        self._lookup, suffix_indicator="", max_bytes_per_word=1 << 30,
        max_chars_per_token=max(len(s) for s in subtokens), token_out_type=tf.int64,
        unknown_token=None)

  def _escape(self, tokens):
    """string [m] -> escaped string [m], each ending in "_"."""
    tokens = tf.strings.regex_replace(tokens, r"\\", r"\\\\")
    tokens = tf.strings.regex_replace(tokens, "_", r"\\u")
    chars = tf.strings.unicode_split(tokens, "UTF-8")
    codes = tf.strings.unicode_decode(tokens, "UTF-8").flat_values
    escaped = tf.strings.join(["\\", tf.strings.as_string(codes), ";"])
    kept = tf.where(self._alphabet.lookup(chars.flat_values), chars.flat_values, escaped)
    return tf.strings.reduce_join(chars.with_flat_values(kept), axis=-1) + "_"

  def tokenize(self, texts):
    """string [n] -> ragged int32 [n, (ids)], tensor2tensor's ids without EOS."""
    tokens = _drop_inner_spaces(_runs(texts))
    pieces = self._wordpiece.tokenize(self._escape(tokens.flat_values))  # [m, (ids)]
    return tf.cast(tokens.with_flat_values(pieces).merge_dims(1, 2), tf.int32)

  def id_to_string(self, ids):
    """int [...] or ragged -> the subtoken strings ("" out of range)."""
    if isinstance(ids, tf.RaggedTensor):  # on the flat values: ragged where/gather add
      return tf.ragged.map_flat_values(self.id_to_string, ids)  # thousands of graph ops
    ids = tf.cast(ids, tf.int32)
    valid = tf.logical_and(ids >= 0, ids < self.vocab_size)
    return tf.where(valid, tf.gather(self.subtokens, tf.where(valid, ids, 0)), "")

  def _unescape(self, parts):
    """string [m] (escaped tokens without "_") -> the tokens."""
    pieces = tf_text.regex_split(parts, _ESCAPE, _ESCAPE)             # [m, (pieces)]
    flat = pieces.flat_values
    length = tf.strings.length(flat)
    digits = tf.strings.substr(flat, tf.ones_like(length), tf.maximum(length - 2, 0))
    is_code = tf.strings.regex_full_match(flat, r"\\[0-9]+;")
    numeric = tf.logical_and(is_code, length <= 9)  # at most 7 digits: no int64 overflow
    code = tf.strings.to_number(tf.where(numeric, digits, "0"), tf.int64)
    code = tf.where(tf.logical_and(numeric, code <= 0x10FFFF), code, _NOT_A_CHARACTER)
    character = tf.strings.unicode_encode(tf.expand_dims(tf.cast(code, tf.int32), 1), "UTF-8",
                                          errors="replace")
    flat = tf.where(is_code, character, flat)
    flat = tf.where(tf.equal(flat, "\\u"), "_", tf.where(tf.equal(flat, "\\\\"), "\\", flat))
    return tf.strings.reduce_join(pieces.with_flat_values(flat), axis=-1)

  def detokenize(self, ids):
    """ragged int [n, (len)] (no EOS, no PAD) -> string [n], as tensor2tensor decodes."""
    joined = tf.strings.reduce_join(self.id_to_string(ids), axis=-1)
    parts = tf.strings.split(joined, "_")
    parts = tf.ragged.boolean_mask(parts, tf.strings.length(parts) > 0)
    tokens = parts.with_flat_values(self._unescape(parts.flat_values))
    tokens = tf.ragged.boolean_mask(tokens, tf.strings.length(tokens) > 0)
    first = tf.strings.substr(tokens, 0, 1, unit="UTF8_CHAR")
    alnum = tf.strings.regex_full_match(first.flat_values, ALNUM)
    index = _position_in_row(tokens)
    previous = tf.concat([[False], alnum[:-1]], 0)
    space = tf.logical_and(tf.logical_and(alnum, previous), index > 0)
    flat = tf.where(space, " " + tokens.flat_values, tokens.flat_values)
    return tf.strings.reduce_join(tokens.with_flat_values(flat), axis=-1)
