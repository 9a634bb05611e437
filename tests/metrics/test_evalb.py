"""EVALB (COLLINS.prm) on hand-computed cases, one rule at a time."""

import math

import pytest

from t2t_keras.errors import InputError
from t2t_keras.metrics import evalb


def one(gold, test):
  return evalb.score_sentence(gold, test)


def test_basic_recall_precision_crossing_and_tags():
  gold = "(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))"
  test = "(S (NP (DT The)) (VP (NN cat) (VBD sat)) (. .))"
  r = one(gold, test)
  # Gold: S[0,3] NP[0,2] VP[2,3]; test: S[0,3] NP[0,1] VP[1,3]; only S matches.
  assert (r.status, r.gold, r.test, r.matched) == (0, 3, 3, 1)
  assert r.crossing == 1  # test VP[1,3] crosses gold NP[0,2]; test NP[0,1] crosses nothing
  assert (r.words, r.correct_tags, r.length) == (3, 3, 4)  # "." is in the length, not the words
  s = evalb.evalb([gold], [test])["all"]
  assert s["recall"] == s["precision"] == pytest.approx(100 / 3)
  assert s["f1"] == pytest.approx(100 / 3) and s["complete_match"] == 0.0


def test_punctuation_is_deleted_before_spans():
  gold = "(S (NP (NNP John)) (, ,) (VP (VBZ runs)) (. .))"
  test = "(S (NP (NNP John) (, ,)) (VP (VBZ runs) (. .)))"
  r = one(gold, test)
  assert (r.gold, r.test, r.matched, r.crossing, r.words) == (3, 3, 3, 0, 2)
  # Every COLLINS punctuation tag goes: `` '' : , .
  r = one("(S (`` ``) (NP (NN x)) (: ;) (VP (VB y)) ('' ''))", "(S (NP (NN x)) (VP (VB y)))")
  assert (r.status, r.words, r.matched, r.gold) == (0, 2, 3, 3)


def test_top_is_deleted_and_the_unlabeled_outer_bracket_counts():
  inner = "(S (NP (PRP I)) (VP (VBP run)))"
  assert one(f"(TOP {inner})", f"(TOP {inner})").gold == 3
  r = one(f"( {inner})", f"( {inner})")
  assert (r.gold, r.matched) == (4, 4)  # the empty-label bracket is a constituent
  assert one(f"( {inner})", inner).matched == 3


def test_empty_elements_and_the_constituents_they_leave_empty():
  gold = "(S (NP-SBJ (-NONE- *)) (VP (VBZ runs) (NP (-NONE- *T*-1))))"
  r = one(gold, "(S (VP (VBZ runs)))")
  # Words: "runs"; NP-SBJ and the inner NP cover nothing and are dropped.
  assert (r.status, r.words, r.gold, r.test, r.matched, r.length) == (0, 1, 2, 2, 2, 1)


def test_function_tags_and_indices_are_stripped():
  r = one("(S (NP-SBJ-1 (PRP it)) (VP (VBZ is) (PP-LOC=2 (IN in) (NP (NN town)))))",
          "(S (NP (PRP it)) (VP (VBZ is) (PP (IN in) (NP (NN town)))))")
  assert (r.gold, r.matched) == (5, 5)


def test_advp_and_prt_are_one_label():
  r = one("(S (VP (VB give) (PRT (RP up))))", "(S (VP (VB give) (ADVP (RP up))))")
  assert r.matched == 3
  assert one("(S (VP (VB give) (PRT (RP up))))", "(S (VP (VB give) (NP (RP up))))").matched == 2


def test_preterminals_are_not_constituents():
  r = one("(S (NN a) (NN b))", "(S (NN a) (NN b))")
  assert (r.gold, r.test) == (1, 1)


def test_repeated_brackets_match_with_multiplicity():
  gold = "(S (NP (NP (NN a))) (VP (VB b)))"  # NP[0,1] twice
  r = one(gold, "(S (NP (NN a)) (VP (VB b)))")
  assert (r.gold, r.test, r.matched) == (4, 3, 3)
  r = one(gold, "(S (NP (NP (NP (NN a)))) (VP (VB b)))")
  assert (r.gold, r.test, r.matched) == (4, 5, 4)


def test_unlabeled_mode_ignores_labels():
  params = evalb.Params(labeled=False)
  r = evalb.score_sentence("(S (NP (NN a)) (VP (VB b)))", "(S (VP (NN a)) (NP (VB b)))", params)
  assert r.matched == 3


def test_length_cutoff_counts_punctuation_but_not_empty_elements():
  words = " ".join(f"(NN w{i})" for i in range(39))
  forty = f"(S {words} (. .))"                      # 39 words + "." = 40
  forty_one = f"(S {words} (, ,) (. .))"            # 41
  with_none = f"(S {words} (-NONE- *) (. .))"       # 40: -NONE- does not count
  result = evalb.evalb([forty, forty_one, with_none], [forty, forty_one, with_none])
  assert [r.length for r in result["sentences"]] == [40, 41, 40]
  assert result["len<=40"]["sentences"] == 2 and result["all"]["sentences"] == 3


def test_tagging_accuracy_complete_match_and_crossing_totals():
  gold = ["(S (NP (DT a) (NN b)) (VP (VB c)))", "(S (NP (NN x)) (VP (VB y) (NP (NN z))))"]
  test = ["(S (NP (DT a) (VB b)) (VP (VB c)))", "(S (NP (NN x) (VB y)) (NP (NN z)))"]
  s = evalb.evalb(gold, test)["all"]
  assert s["tagging_accuracy"] == pytest.approx(100 * 5 / 6)
  assert s["complete_match"] == 50.0
  # Sentence 2: gold S[0,3] NP[0,1] VP[1,3] NP[2,3]; test S[0,3] NP[0,2] NP[2,3].
  assert (s["matched"], s["gold_brackets"], s["test_brackets"]) == (3 + 2, 3 + 4, 3 + 3)
  assert s["average_crossing"] == 0.5 and s["no_crossing"] == 50.0
  assert s["two_or_less_crossing"] == 100.0


def test_error_and_skipped_sentences_do_not_count():
  good = "(S (NP (NN a)) (VP (VB b)))"
  result = evalb.evalb(
      [good, good, good, good, good],
      [good, "(S (NP (NN a)))",                 # length mismatch: error
       "(S (NP (NN a)) (VP (VB c)))",           # word mismatch: error
       "(S (NP (NN a)) (VP (VB b))",            # unbalanced: error
       ""])                                     # no words: skipped
  s = result["all"]
  assert [r.status for r in result["sentences"]] == [0, 1, 1, 1, 2]
  assert (s["valid_sentences"], s["error_sentences"], s["skipped_sentences"]) == (1, 3, 1)
  assert s["f1"] == 100.0


def test_no_brackets_gives_nan_f1_as_evalb_prints():
  s = evalb.evalb(["(NN a)"], ["(NN a)"])["all"]
  assert (s["recall"], s["precision"]) == (0.0, 0.0) and math.isnan(s["f1"])


def test_different_line_counts_are_an_input_error():
  with pytest.raises(InputError, match="2 gold trees but 1 test trees"):
    evalb.evalb(["(S (NN a))", "(S (NN b))"], ["(S (NN a))"])


def test_report_has_both_sections():
  text = evalb.format_report(evalb.evalb(["(S (NP (NN a)) (VP (VB b)))"] * 2,
                                         ["(S (NP (NN a)) (VP (VB b)))"] * 2))
  assert "-- All --" in text and "-- len<=40 --" in text
  assert "Bracketing FMeasure       = 100.00" in text


def test_t2t_evalb_binary(tmp_path, capsys):
  from t2t_keras import bin as t2t_bin
  from t2t_keras.bin import evalb as evalb_bin
  gold, test = tmp_path / "gold.trees", tmp_path / "test.trees"
  gold.write_text("(S (NP (DT The) (NN cat)) (VP (VBD sat)) (. .))\n")
  test.write_text("(S (NP (DT The)) (VP (NN cat) (VBD sat)) (. .))\n")
  code = t2t_bin.run_in_process(evalb_bin, ["t2t-evalb", f"--gold_file={gold}",
                                            f"--test_file={test}", "--per_sentence"])
  out = capsys.readouterr().out
  assert code == 0 and "Bracketing FMeasure       =  33.33" in out and "-- len<=40 --" in out
  test.write_text("")
  code = t2t_bin.run_in_process(evalb_bin, ["t2t-evalb", f"--gold_file={gold}",
                                            f"--test_file={test}"])
  assert code == 1 and "1 gold trees but 0 test trees" in capsys.readouterr().err
