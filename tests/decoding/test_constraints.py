"""LeafCopyConstraint: parse outputs whose leaves copy the input, in beam and greedy search."""

import glob
import os

import numpy as np
import pytest
import tensorflow as tf

from conftest import SHARED_DATA
from t2t_keras import registry
from t2t_keras.data import vocabulary
from t2t_keras.decoding import beam_search as bs
from t2t_keras.decoding import translate
from t2t_keras.decoding.output_constraint import NEG_INF, LeafCopyConstraint
from t2t_keras.decoding.greedy import greedy_loop
from t2t_keras.decoding.search_common import Prepared, SearchOptions
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.ids import EOS_ID

PIECES = ["<pad>", "</s>", "<unk>", "\u2581(", "\u2581)", "S", "NP", "VP", "\u2581the",
          "\u2581do", "g", "\u2581ran", "\u2581fast", "s", "\u2581a"]
OPEN, CLOSE, S, NP, THE, DO, G, RAN = 3, 4, 5, 6, 8, 9, 10, 11
LABELS = {5, 6, 7, 10, 13}  # pieces without "▁": what may follow a bracket
SENTENCES = [[THE, DO, G, RAN], [14, 12, 13], [RAN]]  # "the dog ran", "a fasts", "ran"


def _inputs(sentences, width=6):
  rows = np.zeros([len(sentences), width], np.int32)
  for r, s in enumerate(sentences):
    rows[r, :len(s) + 1] = s + [EOS_ID]
  return tf.constant(rows)


def _step(constraint, prefix, source, vocab=len(PIECES), seed=0):
  """(model log probs, constrained log probs) for the token after `prefix`."""
  logits = tf.random.stateless_normal([1, vocab], [seed, 1])
  ids = tf.constant([[0] + prefix + [0] * 4], tf.int32)
  out = constraint.constrain(logits, ids, tf.constant(len(prefix)), _inputs([source]))
  return tf.nn.log_softmax(logits)[0].numpy(), out[0].numpy()


def _allowed(out):
  return set(np.flatnonzero(out > NEG_INF / 2))


def test_each_state_allows_what_the_grammar_allows():
  c = LeafCopyConstraint(PIECES)
  sent = SENTENCES[0]
  # After a bracket, a label; right after an opening, no closing; inside a word, its rest.
  assert _allowed(_step(c, [OPEN], sent)[1]) == LABELS
  assert _allowed(_step(c, [OPEN, S], sent)[1]) == LABELS | {OPEN, THE}
  # Labels of several pieces ("WH" "ADJP"), up to max_label_pieces.
  assert _allowed(_step(c, [OPEN, S, NP], sent)[1]) == LABELS | {OPEN, THE}
  short = LeafCopyConstraint(PIECES, max_label_pieces=2)
  assert _allowed(_step(short, [OPEN, S, NP], sent)[1]) == {OPEN, THE}
  assert _allowed(_step(short, [OPEN, S, NP, THE], sent)[1]) == {OPEN, CLOSE, DO}
  assert _allowed(_step(c, [OPEN, S, THE, DO], sent)[1]) == {G}
  assert _allowed(_step(c, [OPEN, S, THE], sent)[1]) == {OPEN, CLOSE, DO}
  # Every word out: close what is open, then only EOS; no opening without a word left.
  assert _allowed(_step(c, [OPEN, S, THE, DO, G, RAN], sent)[1]) == {CLOSE}
  assert _allowed(_step(c, [OPEN, S, THE, DO, G, RAN, CLOSE, S], sent)[1]) == LABELS | {EOS_ID}
  # At most max_opens constituents opened in a row (default 10).
  assert c.max_opens == 10
  two = LeafCopyConstraint(PIECES, max_opens=2)
  assert _allowed(_step(two, [OPEN, S, OPEN, NP], sent)[1]) == LABELS | {THE}
  assert _allowed(_step(two, [OPEN, S, THE, OPEN, NP], sent)[1]) == LABELS | {OPEN, DO}
  # An empty sentence may only end.
  assert _allowed(_step(c, [], [])[1]) == {EOS_ID}


def test_scores_word_start_mass_certain_pieces_and_labels():
  c = LeafCopyConstraint(PIECES)
  model, out = _step(c, [OPEN, S, THE], SENTENCES[0], seed=3)
  starts = [i for i, p in enumerate(PIECES) if p.startswith("\u2581") and i not in (OPEN, CLOSE)]
  # The next word's first piece takes every word start's probability.
  assert out[DO] == pytest.approx(np.log(np.exp(model[starts]).sum()), abs=1e-5)
  assert out[OPEN] == pytest.approx(model[OPEN]) and out[CLOSE] == pytest.approx(model[CLOSE])
  _, inside = _step(c, [OPEN, S, THE, DO], SENTENCES[0], seed=3)
  assert inside[G] == 0.0
  model, label = _step(c, [OPEN], SENTENCES[0], seed=4)
  np.testing.assert_allclose(label[sorted(LABELS)], model[sorted(LABELS)], rtol=1e-6)


def test_a_sentence_with_bracket_pieces_is_left_free():
  model, out = _step(LeafCopyConstraint(PIECES), [THE], [THE, OPEN, RAN], seed=2)
  np.testing.assert_allclose(out, model, rtol=1e-6)


def test_rejects_a_vocabulary_without_brackets():
  with pytest.raises(ValueError, match="needs the pieces"):
    LeafCopyConstraint(["<pad>", "</s>", "<unk>", "\u2581a"])


def _random_logits(ids, i, state):
  """A 'model' with random next-token logits (per row and step), EOS made likely."""
  seed = tf.stack([i, tf.reduce_sum(ids)])
  logits = tf.random.stateless_normal([tf.shape(ids)[0], len(PIECES)], seed) * 3.0
  return logits + tf.one_hot(EOS_ID, len(PIECES)) * 4.0, state


def _check_output(tokens, words, max_opens, max_label_pieces):
  """Asserts the grammar on one finished output (ids before EOS)."""
  leaves, depth, run, k, previous = [], 0, 0, 0, None
  while k < len(tokens):
    t = tokens[k]
    if t in (OPEN, CLOSE):
      n = 1
      while k + n < len(tokens) and tokens[k + n] in LABELS:
        n += 1
      assert 2 <= n <= max_label_pieces + 1  # a label of 1 to max_label_pieces pieces
      if t == OPEN:
        depth, run = depth + 1, run + 1
        assert run <= max_opens and len(leaves) < len(words)
      else:
        assert previous != OPEN  # no empty constituent
        depth -= 1
        assert depth >= 0
      previous, k = t, k + n
      continue
    leaves.append(t)
    run, previous, k = 0, t, k + 1
  assert leaves == words and depth == 0


@pytest.mark.parametrize("beam", [1, 3])
def test_every_search_output_copies_the_input_in_a_balanced_tree(beam):
  c = LeafCopyConstraint(PIECES, max_opens=3, max_label_pieces=2)
  inputs = _inputs(SENTENCES)
  batch, length = len(SENTENCES), 60
  fn = c.wrap(_random_logits, tf.repeat(inputs, beam, axis=0))
  lengths = tf.fill([batch], length)
  p = Prepared(fn, {}, batch, length, lengths)
  if beam == 1:
    ids, scores, _ = greedy_loop(p)
    ids, scores = ids.numpy()[:, None], scores.numpy()[:, None]
  else:
    ids, scores, _ = bs.beam_search_loop(p, SearchOptions(beam_size=beam, alpha=0.6,
                                                          stop_early=False))
    ids, scores = ids.numpy(), scores.numpy()
  checked = 0
  for r, words in enumerate(SENTENCES):
    assert scores[r, 0] > -1e6  # the best hypothesis is a real one
    for out, score in zip(ids[r], scores[r]):
      if score > -1e6:  # (empty beam slots score -INF)
        out = list(out)
        assert EOS_ID in out  # always finishes
        _check_output(out[:out.index(EOS_ID)], words, max_opens=3, max_label_pieces=2)
        checked += 1
  assert checked == len(SENTENCES) * beam


class _Vocab:
  vocab_size = len(PIECES)

  def id_to_piece(self, i):
    return PIECES[i]


def test_the_words_problem_constrains_unless_turned_off():
  assert parse_decode_hparams().search.constrain
  got = DecodingSpec.for_run("parsing_english_ptb8k_words").constraint(_Vocab())
  assert isinstance(got, LeafCopyConstraint) and got.open_id == OPEN
  off = DecodingSpec.for_run("parsing_english_ptb8k_words", "constrain=false")
  assert off.constraint(_Vocab()) is None
  assert DecodingSpec.for_run("parsing_english_ptb8k").constraint(_Vocab()) is None
  assert DecodingSpec.for_run("translate_ende_numbers").constraint(_Vocab()) is None


PTB = os.path.join(SHARED_DATA, "ptb_sample")


@pytest.mark.skipif(not glob.glob(os.path.join(PTB, "wsj_01[67]*.mrg")),
                    reason=f"the Penn Treebank sample is not in {PTB}")
def test_every_gold_dev_tree_is_allowed(tmp_path):
  """Teacher forcing the sample's dev trees: the constraint allows every gold token."""
  problem = registry.problem("parsing_english_ptb8k_words")
  problem.raw_dir = PTB
  pairs = [(s["inputs"], s["targets"]) for s in problem.generate_forward_samples("dev")]
  vocab = vocabulary.train_sentencepiece(
      (line for pair in pairs for line in pair), str(tmp_path / "spm.model"), 2000,
      num_threads=1)
  c = LeafCopyConstraint.from_vocab(vocab)
  sources = [vocab.encode(s) + [EOS_ID] for s, _ in pairs]
  targets = [vocab.encode(t) + [EOS_ID] for _, t in pairs]
  width, length = max(map(len, sources)), max(map(len, targets))
  inputs = np.zeros([len(pairs), width], np.int32)
  ids = np.zeros([len(pairs), length + 1], np.int32)
  for r, (s, t) in enumerate(zip(sources, targets)):
    inputs[r, :len(s)], ids[r, 1:len(t) + 1] = s, t
  step = tf.function(lambda i: c.constrain(
      tf.zeros([len(pairs), vocab.vocab_size]), tf.constant(ids), i, tf.constant(inputs)))
  forbidden = []
  for i in range(length):
    out = step(tf.constant(i)).numpy()
    for r, t in enumerate(targets):
      if i < len(t) and out[r, t[i]] <= NEG_INF / 2:
        forbidden.append((r, i, vocab.id_to_piece(t[i])))
  assert len(pairs) > 250 and not forbidden, forbidden[:5]


def test_the_old_names_warn_and_are_the_new_ones():
  """One release of the names from before "output constraint" and "terms" were told apart:
  the module decoding.constraints, lexical.Constraints and lexical.constraint_tensors."""
  import importlib  # pylint: disable=import-outside-toplevel
  import sys  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding import lexical, output_constraint  # pylint: disable=import-outside-toplevel
  sys.modules.pop("t2t_keras.decoding.constraints", None)
  with pytest.warns(DeprecationWarning, match="now t2t_keras.decoding.output_constraint"):
    assert importlib.import_module("t2t_keras.decoding.constraints") is output_constraint
  with pytest.warns(DeprecationWarning, match="lexical.Constraints is now lexical.Terms"):
    assert lexical.Constraints is lexical.Terms
  with pytest.warns(DeprecationWarning, match="now lexical.term_tensors"):
    assert lexical.constraint_tensors is lexical.term_tensors
  with pytest.raises(AttributeError, match="no attribute 'Constrains'"):
    getattr(lexical, "Constrains")
