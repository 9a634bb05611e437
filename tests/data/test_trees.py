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


def test_words_as_leaves_and_back():
  cleaned = trees.clean(Tree.fromstring(RAW))
  words, target = trees.linearize(cleaned, words_as_leaves=True)
  assert target == "(S (VP runs (NP the -LRB- race )NP )VP . )S"
  rebuilt = trees.delinearize(target.split(), words)
  assert rebuilt == "(S (VP (XX runs) (NP (XX the) (-LRB- -LRB-) (XX race))) (. .))"
  # A leaf takes the next input word whatever it says (the input is the truth), two
  # words when it spells the one after (the model skipped one), none when it repeats
  # the previous one.
  assert trees.delinearize("(S (NP walks )NP jumps )S".split(), ["a", "b"]) == \
      "(S (NP (XX a)) (XX b))"
  assert trees.delinearize("(S (NP c )NP (VP c d )VP )S".split(), ["b", "c", "d"]) == \
      "(S (NP (XX b) (XX c)) (VP (XX d)))"
  assert trees.delinearize("(S (NP b b )NP (VP c )VP )S".split(), ["b", "c"]) == \
      "(S (NP (XX b)) (VP (XX c)))"


@pytest.mark.parametrize("tokens,expected", [
    ("(S (NP XX", "(S (NP (XX a)) (XX b) (. .))"),              # unclosed; words left over
    ("(S (NP XX )NP )S )S )S", "(S (S (NP (XX a))) (XX b) (. .))"),  # extra closes
    ("(S XX XX XX XX XX )S", "(S (XX a) (XX b) (. .))"),       # too many XX
    ("", "(S (XX a) (XX b) (. .))"),                            # nothing: a flat tree
    ("(NP )NP (S XX XX XX )S", "(S (XX a) (XX b) (. .))"),      # empty constituent dropped
    ("(NP XX )NP (VP XX XX )VP", "(S (NP (XX a)) (VP (XX b) (. .)))"),  # two tops: one root
    ("( (NP w )NP ( w w", "(S (NP (XX a)) (XX b) (. .))"),     # lone "(" ignored
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


def _write_ldc_layout(root):
  """A tiny treebank laid out like the LDC distribution: sections 02, 03, 22, 23."""
  tree = "( (S (NP-SBJ (DT The) (NN {w})) (VP (VBD sat) (NP (-NONE- *T*-1))) (. .)) )\n"
  for section, word in (("02", "cat"), ("03", "dog"), ("22", "cow"), ("23", "hen")):
    d = root / "parsed" / "mrg" / "wsj" / section
    d.mkdir(parents=True)
    (d / f"wsj_{section}01.mrg").write_text(tree.format(w=word) * 2)


def test_parsing_problem_reads_the_ldc_layout_with_standard_splits(tmp_path):
  from t2t_keras import registry
  _write_ldc_layout(tmp_path)
  problem = registry.problem("parsing_english_ptb8k")
  problem.raw_dir = str(tmp_path)
  pairs = {s: list(problem.generate_samples(s)) for s in ("train", "dev", "test")}
  assert [len(v) for v in pairs.values()] == [4, 2, 2]
  assert {p["inputs"] for p in pairs["train"]} == {"The cat sat .", "The dog sat ."}
  assert pairs["dev"][0] == {"inputs": "The cow sat .",
                             "targets": "(S (NP XX XX )NP (VP XX )VP XX )S"}
  assert pairs["test"][0]["inputs"] == "The hen sat ."
  words = registry.problem("parsing_english_ptb8k_words")
  words.raw_dir = str(tmp_path)
  assert next(words.generate_samples("dev")) == {
      "inputs": "The cow sat .", "targets": "(S (NP The cow )NP (VP sat )VP . )S"}


def test_parsing_problem_datagen_and_a_missing_directory(tmp_path):
  from t2t_keras.data import datagen
  from t2t_keras.errors import InputError
  _write_ldc_layout(tmp_path / "raw")
  summary = datagen.generate("parsing_english_ptb8k", str(tmp_path / "data"), None,
                             raw_dir=str(tmp_path / "raw"), vocab_size=40, log=None)
  assert summary["splits"]["train"]["pairs"] == 4
  # The evaluation splits as text for EVALB: sentences and cleaned gold trees, line by line.
  data = tmp_path / "data"
  assert (data / "parsing_english_ptb8k.dev.words").read_text() == "The cow sat .\n" * 2
  assert (data / "parsing_english_ptb8k.test.trees").read_text() == \
      "(S (NP (DT The) (NN hen)) (VP (VBD sat)) (. .))\n" * 2
  with pytest.raises((FileNotFoundError, InputError), match="no .mrg files for train, dev, test"):
    datagen.generate("parsing_english_ptb8k", str(tmp_path / "data2"), None,
                     raw_dir=str(tmp_path / "nowhere"), log=None)
  with pytest.raises(InputError, match=r"reads the Penn Treebank's \.mrg files: set --raw_dir "
                                       "to the treebank"):
    datagen.generate("parsing_english_ptb8k", str(tmp_path / "data3"), None, log=None)


@pytest.mark.skipif(not os.path.isdir(PTB), reason=f"no Penn Treebank sample at {PTB}")
def test_parsing_problem_splits_the_sample_by_file():
  from t2t_keras import registry
  problem = registry.problem("parsing_english_ptb8k")
  problem.raw_dir = PTB
  train, dev = problem.split_files("train"), problem.split_files("dev")
  assert os.path.basename(train[-1]) == "wsj_0159.mrg" and len(train) == 159
  assert os.path.basename(dev[0]) == "wsj_0160.mrg" and problem.split_files("test") == dev
  first = next(problem.generate_samples("train"))
  assert first["inputs"].startswith("Pierre Vinken , 61 years old")
  assert first["targets"].startswith("(S (NP (NP XX XX )NP XX (ADJP (NP XX XX )NP XX )ADJP")


def test_right_branching_baseline():
  assert trees.right_branching(["a", "b", "."]) == "(S (XX a) (S (XX b) (. .)))"
  assert trees.right_branching(["a"]) == "(S (XX a))"
  assert trees.right_branching([]) == "(S )"
  # Scored by EVALB against a gold tree: "." is deleted, so the inner S covers "b" alone
  # (and is not the gold VP); the outer S matches.
  r = evalb.score_sentence("(S (NP (DT a)) (VP (VB b)) (. .))", trees.right_branching(
      ["a", "b", "."]))
  assert (r.status, r.gold, r.test, r.matched) == (0, 3, 2, 1)


def test_evalb_by_length_buckets():
  gold = ["(S (NP (DT a)) (VP (VB b)))", "(S (NP (DT a) (NN c)) (VP (VB b) (NP (NN d)) "
          "(ADVP (RB e)) (PP (IN f) (NP (NN g))) (NP (NN h) (NN i) (NN j) (NN k))))"]
  test = ["(S (XX a) (XX b))", gold[1]]
  buckets = dict(evalb.by_length(evalb.evalb(gold, test), edges=(5,)))
  assert set(buckets) == {"1-5", "6+"}
  assert buckets["1-5"]["valid_sentences"] == 1 and buckets["1-5"]["recall"] == 100.0 / 3
  assert buckets["6+"]["f1"] == 100.0
  lines = evalb.format_by_length(evalb.evalb(gold, test)).splitlines()
  assert lines[1].split()[:2] == ["1-10", "1"] and lines[2].split()[:2] == ["11-20", "1"]
  assert lines[-1].split()[:2] == ["41+", "0"]
