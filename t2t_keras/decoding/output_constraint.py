"""Output constraints for the searches: which next tokens a hypothesis may take.

A constraint wraps a next-token function (see `beam_search_loop`): the logits of
tokens it forbids become -INF, so beam search and greedy search only ever build
outputs it allows. Everything is graph TensorFlow over fixed shapes (XLA, and
inside a SavedModel signature).

`LeafCopyConstraint` is for parsing with words as leaves
(`parsing_english_ptb8k_words`): targets such as

    (S (NP Savin Corp. )NP (VP reported ...

are brackets ("▁(" or "▁)" followed by a label's pieces) between the input's
words. Input and output share one sentencepiece vocabulary, and pieces never
cross whitespace, so a word's pieces are the same in both: the output's leaves
must be the input's pieces, in order. The constraint allows, at each step:

  * after "▁(" or "▁)": a label (pieces not starting with "▁", no special id);
  * inside a word: its next piece only;
  * between words: the next word's first piece, "▁(" while a word is left (at
    most `max_opens` in a row: 10; the sample's training trees have up to 6), "▁)"
    while a constituent is open (not right after it opened: no empty
    constituents), and EOS once every word is out and every constituent closed.

So every step has an allowed token, and within its length limit the decoder can
no longer skip, repeat or misspell a word, or stop early: only the tree is its
choice (a hypothesis cut at the limit is finished by the problem's
postprocessing). Words are whitespace-separated, so each starts with a "▁" piece
(sentencepiece's dummy prefix, as the project trains it). Between words
the next word's first piece takes the probability the model gives to every
word start (it decides where a word goes; the input decides which word), and
inside a word the next piece is certain; the searches renormalize over what is
allowed. It raises the parser's EVALB F1 on the sample's dev files (docs/parsing.md).
"""

import numpy as np
import tensorflow as tf

from t2t_keras.decoding.search_common import NEG_INF
from t2t_keras.ids import EOS_ID, PAD_ID, UNK_ID

OPEN, CLOSE = "\u2581(", "\u2581)"


class LeafCopyConstraint:
  """Outputs whose leaves copy the input's pieces, between bracket tokens.

    constraint = LeafCopyConstraint.from_vocab(vocab)
    fn = constraint.wrap(fn, inputs)    # inputs int32 [n, src_len], as fn's rows

  Sentences whose own pieces include a bracket piece are left unconstrained.
  """

  def __init__(self, pieces, max_opens=10, max_label_pieces=6):
    """pieces: every vocabulary piece (str), indexed by id; max_opens: the most
    constituents opened in a row (between two words); max_label_pieces: the most
    pieces a label may take ("WHADJP" is "WH" "ADJP" in the sample's vocabulary)."""
    pieces = list(pieces)
    self.max_opens, self.max_label_pieces = int(max_opens), int(max_label_pieces)
    if OPEN not in pieces or CLOSE not in pieces:
      raise ValueError(f"a vocabulary for bracketed outputs needs the pieces {OPEN!r} and "
                       f"{CLOSE!r}; this one ({len(pieces)} pieces) lacks them")
    self.vocab_size = len(pieces)
    self.open_id, self.close_id = pieces.index(OPEN), pieces.index(CLOSE)
    special = np.zeros(len(pieces), bool)
    special[[PAD_ID, EOS_ID, UNK_ID]] = True
    initial = np.array([p.startswith("\u2581") for p in pieces])
    self._bracket = np.zeros(len(pieces), bool)
    self._bracket[[self.open_id, self.close_id]] = True
    self._initial = initial & ~special & ~self._bracket  # a word's first piece
    self._label = ~initial & ~special

  @classmethod
  def from_vocab(cls, vocab):
    """From a SubwordVocabulary (or anything with vocab_size and id_to_piece)."""
    return cls([vocab.id_to_piece(i) for i in range(vocab.vocab_size)])

  def constrain(self, logits, ids, i, inputs):
    """Next-token logits float [n, vocab] -> float32 log probs, NEG_INF where forbidden.

    Long: one pass of masks over the buffer, each built from the previous ones; split,
    the pieces would pass a dozen [n, length] tensors between them.

    Args:
      logits: float [n, vocab], the model's logits for position i + 1.
      ids: int32 [n, max_length + 1], the search's buffer (ids[:, 0] the start
        symbol, ids[:, 1:i + 1] the output so far).
      i: int32 scalar, the step.
      inputs: int32 [n, src_len], each row's source ids (EOS-terminated, 0-padded).
    """
    log_probs = tf.nn.log_softmax(tf.cast(logits, tf.float32))
    bracket, initial, label = (tf.constant(self._bracket), tf.constant(self._initial),
                               tf.constant(self._label))
    positions = tf.range(tf.shape(ids)[1])
    valid = tf.logical_and(positions >= 1, positions <= i)[None, :]
    is_bracket = tf.logical_and(tf.gather(bracket, ids), valid)
    is_open = tf.logical_and(tf.equal(ids, self.open_id), valid)
    # A label is the run of pieces without "▁" after a bracket (at most max_label_pieces);
    # opened: that bracket opened (no closing right after an opening).
    label_piece = tf.logical_and(tf.gather(label, ids), valid)
    run = label_piece  # this piece and the d - 1 before it are label pieces
    is_label = tf.zeros_like(run)
    opened = tf.zeros_like(run)
    for d in range(1, self.max_label_pieces + 1):
      if d > 1:
        run = tf.logical_and(run, _shifted_right(label_piece, d - 1))
      nth = tf.logical_and(run, _shifted_right(is_bracket, d))  # the label's d-th piece
      is_label = tf.logical_or(is_label, nth)
      opened = tf.logical_or(opened, tf.logical_and(run, _shifted_right(is_open, d)))
    is_leaf = tf.logical_and(valid, tf.logical_not(tf.logical_or(is_bracket, is_label)))
    is_leaf = tf.logical_and(is_leaf, ids > EOS_ID)
    taken = tf.reduce_sum(tf.cast(is_leaf, tf.int32), axis=1)  # [n] pieces copied so far
    is_close = tf.logical_and(tf.equal(ids, self.close_id), valid)
    depth = tf.reduce_sum(tf.cast(is_open, tf.int32) - tf.cast(is_close, tf.int32), axis=1)
    last_leaf = tf.reduce_max(tf.where(is_leaf, positions[None, :], 0), axis=1)
    opens_since_leaf = tf.reduce_sum(tf.cast(tf.logical_and(
        is_open, positions[None, :] > last_leaf[:, None]), tf.int32), axis=1)
    latest = lambda x: tf.gather(x, tf.reshape(i, [1]), axis=1)[:, 0]
    after_bracket, in_label, just_opened = latest(is_bracket), latest(is_label), latest(opened)
    # (nth is now the label's max_label_pieces-th piece: no more after it)
    label_goes_on = tf.logical_and(in_label, tf.logical_not(latest(nth)))

    source_length = tf.reduce_sum(tf.cast(inputs > EOS_ID, tf.int32), axis=1)
    free = tf.reduce_any(tf.logical_and(tf.gather(bracket, inputs), inputs > EOS_ID), axis=1)
    has_next = taken < source_length
    next_piece = tf.gather(inputs, tf.minimum(taken, tf.shape(inputs)[1] - 1), axis=1,
                           batch_dims=1)
    mid_word = tf.logical_and(has_next, tf.logical_and(
        taken > 0, tf.logical_not(tf.gather(initial, next_piece))))

    vocab = tf.range(self.vocab_size)[None, :]
    copy = tf.logical_and(tf.equal(vocab, next_piece[:, None]), has_next[:, None])
    # A constituent opened after the last word could never get one.
    may_open = tf.logical_and(has_next, opens_since_leaf < self.max_opens)
    may_close = tf.logical_and(depth > 0, tf.logical_not(just_opened))
    may_end = tf.logical_and(tf.logical_not(has_next), depth <= 0)
    between = tf.logical_or(copy, tf.logical_or(
        tf.logical_and(tf.equal(vocab, self.open_id), may_open[:, None]),
        tf.logical_or(tf.logical_and(tf.equal(vocab, self.close_id), may_close[:, None]),
                      tf.logical_and(tf.equal(vocab, EOS_ID), may_end[:, None]))))
    allowed = tf.where(after_bracket[:, None], label[None, :],
                       tf.where(in_label[:, None], tf.logical_or(
                           tf.logical_and(label[None, :], label_goes_on[:, None]), between),
                                tf.where(mid_word[:, None], copy, between)))
    # The next word's first piece takes the probability of every word start (the model
    # decides where a word goes, the input which word); inside a word its next piece is
    # certain.
    word_mass = tf.reduce_logsumexp(tf.where(initial[None, :], log_probs, NEG_INF), axis=1)
    scores = tf.where(copy, tf.where(mid_word, 0.0, word_mass)[:, None], log_probs)
    out = tf.where(allowed, scores, NEG_INF)
    return tf.where(free[:, None], log_probs, out)

  def wrap(self, symbols_to_logits_fn, inputs):
    """The next-token function with the constraint applied to its logits."""

    def fn(ids, i, state):
      logits, state = symbols_to_logits_fn(ids, i, state)
      return self.constrain(logits, ids, i, inputs), state

    return fn


def _shifted_right(x, d):
  """bool [n, length] -> out[:, j] = x[:, j - d], False for j < d (slices and a concat,
  which LiteRT's builtin ops hold; tf.roll has no builtin)."""
  return tf.concat([tf.logical_and(x[:, :d], False), x[:, :-d]], axis=1)
