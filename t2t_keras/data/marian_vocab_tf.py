"""A Marian vocabulary pair in TF ops (`marian_vocab.MarianVocabulary.tf_tokenizer`): the
SavedModel's tokenizer, with the same ids as the Python side."""

import tensorflow as tf

from t2t_keras.data.languages import label_pattern
from t2t_keras.data.sentencepiece_tf import sentencepiece_tokenizer
from t2t_keras.ids import UNK_ID


class MarianTokenizer(tf.Module):
  """Text -> ids through one sentencepiece model and the joint pieces; ids -> text
  through another (source and target of a pair, or one side twice).

  Args:
    tokenize_proto: the serialized sentencepiece model `tokenize` splits text with.
    detokenize_proto: the one `detokenize` joins pieces with.
    pieces: the piece of each id, in our id order (`MarianVocabulary`).
    detokenize_pieces: the same for `detokenize` and `id_to_string`, where the ids out
      are not the ids in (separate vocabularies); default `pieces`.
    labels: language tokens that are one piece at a line's start and are dropped from
      output text (`marian_vocab.split_label`).
  """

  def __init__(self, tokenize_proto, detokenize_proto, pieces, labels=(), name=None,
               detokenize_pieces=None):
    super().__init__(name=name)
    self._label = label_pattern(labels)
    out_pieces = list(detokenize_pieces if detokenize_pieces is not None else pieces)
    index = {piece: i for i, piece in enumerate(out_pieces)}
    self._label_ids = tf.constant(sorted(index[label] for label in labels if label in index)
                                  or [-1], tf.int32)
    self.vocab_size = len(out_pieces)
    self.pieces = tf.constant(out_pieces)
    self._ids = tf.lookup.StaticHashTable(tf.lookup.KeyValueTensorInitializer(
        list(pieces), list(range(len(pieces))), tf.string, tf.int32), UNK_ID)
    self._split = sentencepiece_tokenizer(tokenize_proto, tf.string)
    self._join = (self._split if detokenize_proto == tokenize_proto else
                  sentencepiece_tokenizer(detokenize_proto, tf.string))

  def tokenize(self, texts):
    """string [n] -> ragged int32 [n, (ids)], without EOS (a piece not in the
    vocabulary: UNK); a leading language label (`>>fra<<`) is one piece, as
    `marian_vocab.split_label` splits it."""
    label = tf.strings.regex_replace(tf.strings.regex_replace(texts, self._label, r"\1"),
                                     " $", "")
    rest = tf.strings.regex_replace(texts, self._label, r"\2")
    pieces = tf.concat([tf.ragged.boolean_mask(label[:, None], label[:, None] != ""),
                        self._split.tokenize(rest)], axis=1)
    return pieces.with_flat_values(self._ids.lookup(pieces.flat_values))

  def id_to_string(self, ids):
    """int [...] or ragged -> the pieces ("" out of range)."""
    if isinstance(ids, tf.RaggedTensor):
      return tf.ragged.map_flat_values(self.id_to_string, ids)
    ids = tf.cast(ids, tf.int32)
    valid = tf.logical_and(ids >= 0, ids < self.vocab_size)
    return tf.where(valid, tf.gather(self.pieces, tf.where(valid, ids, 0)), "")

  def detokenize(self, ids):
    """ragged int [n, (len)] (no EOS, no PAD) -> string [n], the pieces decoded by the
    detokenizing model, "▁" left a space, the ends stripped (`marian_vocab.join_pieces`)."""
    keep = tf.ragged.map_flat_values(lambda v: tf.reduce_all(
        tf.not_equal(tf.cast(v, tf.int32)[:, None], self._label_ids), axis=-1), ids)
    ids = tf.ragged.boolean_mask(ids, keep)
    text = self._join.detokenize(self.id_to_string(ids))
    return tf.strings.strip(tf.strings.regex_replace(text, "\u2581", " "))
