"""The SavedModel's graph batching, apart from its signatures (`serving_module.py`): text
to source ids (UTF-8 repaired, tokenized, cut to the input limit, EOS), length-sorted chunks
of at most batch_size rows padded to length_bucket multiples through a search, and back to
text; target prefixes and terminology phrases tokenized and checked against the limits.
`translate.translate_ids` batches the same way in Python.
"""

import tensorflow as tf

from t2t_keras.decoding.search_common import NEG_INF, output_limit, prefix_width
from t2t_keras.ids import EOS_ID, PAD_ID


def _next_power_of_two(n):
  """The smallest power of two >= n (int32 scalar tensor, n >= 1), in exact integers."""
  powers = tf.bitwise.left_shift(1, tf.range(31))
  return tf.reduce_min(tf.where(powers >= n, powers, powers[-1]))


class ServingGraph(tf.Module):
  """The pieces of the export's graph that `ServingModule`'s signatures call.

  A subclass sets: tokenizer (source text in, target text out), target_tokenizer,
  source_tokenizer, beam_size, max_input_length (ids an input keeps, EOS included),
  batch_size, length_bucket, extra_length, max_decode_length, max_positions (or None),
  max_phrases, max_phrase_pieces, preprocess and postprocess (or None: the problem's
  `serving_preprocess()` and `serving_postprocess()`) and `_search` (the default search,
  int32 [rows, width] -> ids [rows, beam, len], scores [rows, beam]).
  """

  def _with_eos(self, inputs, limit, tokenizer=None):
    """strings [n] -> (ragged ids [n, (len)] with EOS, at most `limit` ids; bool [n] cut),
    tokenized as source text (or by `tokenizer`)."""
    text = tf.strings.unicode_transcode(inputs, "UTF-8", "UTF-8", errors="replace",
                                        replacement_char=0xFFFD)
    tokens = (tokenizer or self.tokenizer).tokenize(text)
    cut = tokens.row_lengths() > limit - 1
    tokens = tokens[:, :limit - 1]  # room for EOS
    eos = tf.RaggedTensor.from_tensor(tf.fill([tf.shape(inputs)[0], 1], EOS_ID))
    return tf.concat([tokens, eos], axis=1), cut

  def _source_ids(self, inputs):
    """strings [n] -> (ragged ids [n, (len)] with EOS, bool [n] non-empty, bool [n] truncated)."""
    sources, truncated = self._with_eos(inputs, self.max_input_length)
    return sources, sources.row_lengths() > 1, truncated

  def _detokenize(self, ids, beam):
    """ids int32 [n, beam, len] (beam_search output) -> strings [n, beam].

    As `SubwordVocabulary.decode`: stop at the first EOS, drop PAD.
    """
    before_eos = tf.equal(tf.cumsum(tf.cast(tf.equal(ids, EOS_ID), tf.int32), axis=-1), 0)
    keep = tf.logical_and(before_eos, tf.not_equal(ids, PAD_ID))
    length = tf.shape(ids)[-1]
    flat = tf.ragged.boolean_mask(tf.reshape(ids, [-1, length]), tf.reshape(keep, [-1, length]))
    return tf.reshape(self.tokenizer.detokenize(flat), [-1, beam])

  def _translate_sources(self, sources, search, beam, prefixes=None, row_inputs=()):
    """Ragged ids [n, (len)] (n > 0) -> (strings [n, beam], scores [n, beam], met bool [n])
    of `search` (int32 [rows, width] -> ids [rows, beam, len], scores [rows, beam] and,
    for a constrained search, met [rows]; met is all true for the others).

    Longest first, in chunks of at most batch_size rows (rounded up to a power
    of two, padded by repeating the last row), each padded to a multiple of
    length_bucket tokens, as `translate.translate_ids` batches. `prefixes`: ragged
    target ids [n, (P)], given to `search` as a second input, int32 [rows, P] 0-padded,
    with the sources widened where needed so that the output buffer holds them
    (`translate.source_width`). `row_inputs`: dense tensors [n, ...] given to `search`
    after the sources, a chunk's rows each (the constrained search's phrases).
    """
    n = sources.nrows(out_type=tf.int32)
    lengths = tf.cast(sources.row_lengths(), tf.int32)
    order = tf.argsort(lengths, direction="DESCENDING", stable=True)
    sources = tf.gather(sources, order)
    lengths = tf.gather(lengths, order)
    row_inputs = tuple(tf.gather(x, order) for x in row_inputs)
    if prefixes is not None:
      prefixes = tf.gather(prefixes, order)
      prefix_lengths = tf.cast(prefixes.row_lengths(), tf.int32)
    rows = tf.minimum(_next_power_of_two(n), self.batch_size)
    chunks = (n + rows - 1) // rows

    def body(c, texts, scores, mets):
      index = tf.minimum(c * rows + tf.range(rows), n - 1)  # spare rows repeat the last
      width = tf.reduce_max(tf.gather(lengths, index))
      extra = tuple(tf.gather(x, index) for x in row_inputs)
      if prefixes is not None:
        longest = tf.reduce_max(tf.gather(prefix_lengths, index))
        width = self._check_prefix_fits(longest, width)
        prefix_width = (tf.maximum(longest, 1) + self.length_bucket - 1) // \
            self.length_bucket * self.length_bucket
        extra = (tf.gather(prefixes, index).to_tensor(
            default_value=PAD_ID, shape=tf.stack([rows, prefix_width])),)
      width = (width + self.length_bucket - 1) // self.length_bucket * self.length_bucket
      batch = tf.gather(sources, index).to_tensor(default_value=PAD_ID,
                                                  shape=tf.stack([rows, width]))
      out = search(batch, *extra)
      met = out[2] if len(out) > 2 else tf.ones([rows], tf.bool)
      return (c + 1, texts.write(c, self._detokenize(out[0], beam)), scores.write(c, out[1]),
              mets.write(c, met))

    _, texts, scores, mets = tf.while_loop(
        lambda c, *_: c < chunks, body,
        (tf.constant(0), tf.TensorArray(tf.string, size=chunks, element_shape=[None, beam]),
         tf.TensorArray(tf.float32, size=chunks, element_shape=[None, beam]),
         tf.TensorArray(tf.bool, size=chunks, element_shape=[None])),
        parallel_iterations=1)
    texts = tf.reshape(texts.stack(), [-1, beam])[:n]
    scores = tf.reshape(scores.stack(), [-1, beam])[:n]
    mets = tf.reshape(mets.stack(), [-1])[:n]
    unsort = tf.math.invert_permutation(order)
    return tf.gather(texts, unsort), tf.gather(scores, unsort), tf.gather(mets, unsort)

  def _check_prefix_fits(self, longest, width):
    """The source width (int32 scalar) whose output buffer holds `longest` prefix ids, as
    `translate.source_width`; InvalidArgumentError where a fixed limit cannot."""
    width = prefix_width(width, longest, self.extra_length, self.max_decode_length)
    limit = output_limit(width, self.extra_length, self.max_decode_length, self.max_positions)
    check = tf.debugging.assert_less_equal(
        longest, limit, message="a target prefix is longer than the output limit "
                                "(max_decode_length, or the model's max_positions)")
    with tf.control_dependencies([check]):
      return tf.identity(width)

  def _nbest(self, inputs, search=None, beam=None, prefixes=None, phrases=None):
    """strings [batch] -> (strings [batch, beam], scores [batch, beam], truncated [batch],
    met [batch]), by beam search (default) or another `search` giving `beam` outputs a
    sentence; `prefixes`: target text [batch] with which each output starts ("": none);
    `phrases`: target phrases [batch, C] each output must hold ("": none), for
    the constrained search (met: whether the outputs hold them; true for the others).
    `preprocess` goes over the inputs before they are tokenized, `postprocess` over the
    outputs with the inputs as given."""
    inputs = tf.reshape(inputs, [-1])
    sources, nonempty, truncated = self._source_ids(
        inputs if self.preprocess is None else self.preprocess(inputs))
    kept = tf.cast(tf.where(nonempty)[:, 0], tf.int32)
    n = tf.size(kept)
    search, beam = search or self._search, beam or self.beam_size
    if prefixes is not None:
      prefixes = tf.reshape(prefixes, [-1])
      same = tf.debugging.assert_equal(
          tf.size(prefixes), tf.size(inputs),
          message="'prefix' needs one target prefix per input ('' for none)")
      with tf.control_dependencies([same]):
        prefixes = self._tokenize(prefixes)
      prefixes = tf.gather(prefixes, kept)
    row_inputs, no_phrases = (), tf.ones_like(nonempty)
    if phrases is not None:
      tokens, lengths = self._phrase_pieces(phrases, tf.size(inputs))
      row_inputs = (tf.gather(tokens, kept), tf.gather(lengths, kept))
      no_phrases = tf.reduce_all(tf.equal(lengths, 0), axis=1)

    def translate():
      return self._translate_sources(tf.gather(sources, kept), search, beam, prefixes,
                                     row_inputs)

    def nothing():
      return (tf.zeros([0, beam], tf.string), tf.zeros([0, beam], tf.float32),
              tf.zeros([0], tf.bool))

    texts, scores, met = tf.cond(n > 0, translate, nothing)
    # Back to the input rows; empty inputs get "" (score 0, NEG_INF for beams > 1),
    # met where they had no phrases.
    slot = tf.where(nonempty, tf.cumsum(tf.cast(nonempty, tf.int32)) - 1, n)
    empty_scores = tf.concat([tf.zeros([1, 1]), tf.fill([1, beam - 1], NEG_INF)], axis=1)
    texts = tf.gather(tf.concat([texts, tf.fill([1, beam], "")], 0), slot)
    scores = tf.gather(tf.concat([scores, empty_scores], 0), slot)
    met = tf.where(nonempty, tf.gather(tf.concat([met, [True]], 0), slot), no_phrases)
    if self.postprocess is not None:
      texts = tf.reshape(self.postprocess(tf.reshape(texts, [-1]), tf.repeat(inputs, beam)),
                         [-1, beam])
    return texts, scores, truncated, met

  def _tokenize(self, texts):
    """Target text strings [n] -> ragged pieces [n, (len)], invalid UTF-8 replaced by U+FFFD."""
    return self.target_tokenizer.tokenize(tf.strings.unicode_transcode(
        texts, "UTF-8", "UTF-8", errors="replace", replacement_char=0xFFFD))

  def _phrase_pieces(self, phrases, batch):
    """Phrases string [batch, C_in] ("": none) -> (pieces int32 [batch, max_phrases,
    max_phrase_pieces], lengths int32 [batch, max_phrases]); InvalidArgumentError for a
    batch size other than the inputs', more phrases or longer ones than those limits."""
    c_in = tf.shape(phrases)[1]
    checks = [
        tf.debugging.assert_equal(tf.shape(phrases)[0], batch, message=(
            "'constraints' needs one list of phrases per input")),
        tf.debugging.assert_less_equal(c_in, self.max_phrases, message=(
            f"more terminology constraints for a sentence than the limit set at export, "
            f"{self.max_phrases}"))]
    with tf.control_dependencies(checks):
      pieces = self._tokenize(tf.reshape(phrases, [-1]))
    lengths = tf.cast(pieces.row_lengths(), tf.int32)
    fits = tf.debugging.assert_less_equal(
        tf.reduce_max(tf.concat([lengths, [0]], 0)), self.max_phrase_pieces, message=(
            f"a terminology constraint longer than the limit set at export, "
            f"{self.max_phrase_pieces} pieces"))
    with tf.control_dependencies([fits]):
      tokens = pieces.to_tensor(PAD_ID, shape=tf.stack([tf.size(lengths),
                                                        self.max_phrase_pieces]))
    pad = [[0, 0], [0, self.max_phrases - c_in]]
    tokens = tf.pad(tf.reshape(tokens, [batch, c_in, self.max_phrase_pieces]), pad + [[0, 0]])
    return tokens, tf.pad(tf.reshape(lengths, [batch, c_in]), pad)

  def _pieces(self, ids, valid, tokenizer=None):
    """ids int32 [n, len], bool [n, len] -> the sentencepiece pieces of the target side (or
    of `tokenizer`'s ids), "" where not valid."""
    return tf.where(valid, (tokenizer or self.tokenizer).id_to_string(ids), "")
