"""Penn Treebank trees: reading, cleaning, linearizing and rebuilding (parsing as translation)."""

import glob
import os

import pytest
from nltk.tree import Tree

from conftest import SHARED_DATA
from t2t_keras.data import trees
from t2t_keras.metrics import evalb

PTB = os.path.join(SHARED_DATA, "ptb_sample")
RAW = "(S (NP-SBJ-1 (-NONE- *)) (VP (VBZ runs) (NP=2 (DT the) (-LRB- -LRB-) (NN race))) (. .))"


def test_clean_drops_empty_elements_and_function_tags():
  cleaned = trees.clean(Tree.fromstring(RAW))
  assert trees.tree_string(cleaned) == \
      "(S (VP (VBZ runs) (NP (DT the) (-LRB- -LRB-) (NN race))) (. .))"
  assert trees.clean(Tree.fromstring("(NP (-NONE- *T*-1))")) is None
  assert [trees.strip_label(x) for x in ("NP-SBJ-1", "PP=2", "-NONE-", "PRP$", "S")] == \
      ["NP", "PP", "-NONE-", "PRP$", "S"]


def test_linearize_and_back():
  cleaned = trees.clean(Tree.fromstring(RAW))
  words, target = trees.linearize(cleaned)
  assert words == ["runs", "the", "-LRB-", "race", "."]
  assert target == "(S (VP XX (NP XX XX XX )NP )VP XX )S"
  rebuilt = trees.delinearize(target.split(), words)
  assert rebuilt == "(S (VP (XX runs) (NP (XX the) (-LRB- -LRB-) (XX race))) (. .))"
  r = evalb.score_sentence(trees.tree_string(cleaned), rebuilt)
  assert (r.status, r.matched, r.gold, r.test) == (0, 3, 3, 3)


@pytest.mark.parametrize("tokens,expected", [
    ("(S (NP XX", "(S (NP (XX a)) (XX b) (. .))"),              # unclosed; words left over
    ("(S (NP XX )NP )S )S )S", "(S (S (NP (XX a))) (XX b) (. .))"),  # extra closes
    ("(S XX XX XX XX XX )S", "(S (XX a) (XX b) (. .))"),       # too many XX
    ("", "(S (XX a) (XX b) (. .))"),                            # nothing: a flat tree
    ("(NP )NP (S XX XX XX )S", "(S (XX a) (XX b) (. .))"),      # empty constituent dropped
    ("(NP XX )NP (VP XX XX )VP", "(S (NP (XX a)) (VP (XX b) (. .)))"),  # two tops: one root
])
def test_delinearize_always_gives_a_well_formed_tree(tokens, expected):
  out = trees.delinearize(tokens.split(), ["a", "b", "."])
  assert out == expected
  assert Tree.fromstring(out).leaves() == ["a", "b", "."]


@pytest.mark.skipif(not os.path.isdir(PTB), reason=f"no Penn Treebank sample at {PTB}")
def test_the_sample_round_trips_through_linearization_with_evalb_f1_100():
  paths = sorted(glob.glob(os.path.join(PTB, "wsj_*.mrg")))
  first = trees.read_mrg(paths[0])
  assert len(first) == 2 and first[0].label() == "S"  # the unlabeled outer bracket is gone
  gold, rebuilt = [], []
  for path in paths[:40]:
    for tree in trees.read_mrg(path):
      cleaned = trees.clean(tree)
      assert "-NONE-" not in trees.tree_string(cleaned)
      words, target = trees.linearize(cleaned)
      gold.append(trees.tree_string(cleaned))
      rebuilt.append(trees.delinearize(target.split(), words))
  result = evalb.evalb(gold, rebuilt)["all"]
  # Errors are sentences where a quote or an oddly tagged word is punctuation in the gold
  # tree but not by its word form (e.g. "'" as '' rather than a possessive).
  assert result["error_sentences"] <= 0.01 * len(gold)
  assert result["f1"] == 100.0
