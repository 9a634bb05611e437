import math
import os

import pytest
import sacrebleu

from conftest import SHARED_DATA

from t2t_keras.metrics import bleu

REFS = ["The cat sat on the mat.", "A state-of-the-art model translates well-known texts."]
HYPS = ["The cat sat on a mat.", "A state-of-the-art model translates known texts."]


def test_reference_against_itself_is_100():
  report = bleu.bleu_report(REFS, REFS)
  for key in ("bleu", "chrf", "tokenized_bleu", "multi30k_tok_bleu", "exact_match"):
    assert abs(report[key] - 100.0) < 1e-9, key


def test_sacrebleu_matches_sacrebleu_and_known_value():
  report = bleu.sacrebleu_scores(HYPS, REFS)
  assert report["bleu"] == sacrebleu.corpus_bleu(HYPS, [REFS]).score
  # BLEU("the cat sat on the mat" vs "... a mat"): 83.3/60.0/50.0/33.3, BP 1 -> 53.73.
  single = bleu.sacrebleu_scores(["the cat sat on the mat"], ["the cat sat on a mat"])
  assert round(single["bleu"], 2) == 53.73
  assert "tok:13a" in report["bleu_signature"] and "case:mixed" in report["bleu_signature"]
  assert "chrF2" in report["chrf_signature"] or "nc:6" in report["chrf_signature"]


def test_compound_splitting_as_get_ende_bleu_sh():
  assert bleu.split_compounds("rich-text format") == "rich ##AT##-##AT## text format"
  # perl s///g does not overlap matches: the second hyphen of a-b-c stays.
  assert bleu.split_compounds("a-b-c") == "a ##AT##-##AT## b-c"
  assert bleu.split_compounds("- x -y") == "- x -y"
  tok = bleu.tokenize_for_bleu("Das Ende-zu-Ende-Modell, gut.")
  assert tok == "Das Ende ##AT##-##AT## zu ##AT##-##AT## Ende ##AT##-##AT## Modell , gut ."


def test_tokenized_bleu_counts_compound_parts():
  # Only the second half of the compound differs: tokenized BLEU (with ##AT##
  # splitting) gives partial credit, sacreBLEU's 13a keeps the compound whole.
  hyps, refs = ["das ist ein gut-gemacht Haus"], ["das ist ein gut-gebaut Haus"]
  assert bleu.tokenized_bleu(hyps, refs) > bleu.sacrebleu_scores(hyps, refs)["bleu"]
  # By hand, over "das ist ein gut ##AT##-##AT## gemacht Haus" (7 tokens, as the reference):
  # n-gram precisions 6/7, 4/6, 3/5, 2/4, brevity penalty 1 -> (6/35) ** (1/4).
  assert bleu.tokenized_bleu(hyps, refs) == pytest.approx(100 * (6 / 35) ** 0.25, abs=1e-6)


def test_exact_match_counts_identical_lines():
  assert bleu.bleu_report([REFS[0], HYPS[1]], REFS)["exact_match"] == 50.0
  assert bleu.bleu_report(HYPS, REFS)["exact_match"] == 0.0


def test_multi30k_lowercases_and_escapes():
  assert bleu.multi30k_tokenize('Ein "Hund" & Katze.') == "ein &quot; hund &quot; &amp; katze ."
  assert bleu.multi30k_tok_bleu(["EIN HUND LÄUFT ÜBER DIE WIESE ."],
                                ["Ein Hund läuft über die Wiese."]) == pytest.approx(100.0)


def test_char_bleu_scores_one_word_outputs():
  import numpy as np
  from t2t_keras.metrics import bleu as bleu_lib
  hyps = ["vierhunderteinundzwanzig", "dreitausendzwei"]
  refs = ["vierhunderteinundzwanzig", "dreitausendzwölf"]
  report = bleu_lib.bleu_report(hyps, refs)
  # Word BLEU is 0: one-word sentences have no 4-grams; character BLEU is not. By hand, over
  # characters: the first pair is identical (24 chars: 24, 23, 22, 21 n-grams matched);
  # "dreitausendzwei" against "dreitausendzwölf" matches 13/15 unigrams (clipped: one e and
  # one i too many), 12/14 bigrams, 11/13 trigrams, 10/12 4-grams; 39 against 40 chars.
  assert report["bleu"] == 0.0
  by_hand = 100 * np.exp(1 - 40 / 39) * (37 / 39 * 35 / 37 * 33 / 35 * 31 / 33) ** 0.25
  assert report["char_bleu"] == pytest.approx(by_hand, abs=1e-9)  # 92.03
  assert "tok:char" in report["char_bleu_signature"]
  assert "character-level sacreBLEU" in bleu_lib.format_report(report)


def test_tokenized_reference_file_and_read_lines_gz(tmp_path):
  import gzip
  ref = tmp_path / "ref.lc.norm.tok.de.gz"
  with gzip.open(ref, "wt", encoding="utf-8") as f:
    f.write('ein &quot; hund &quot; läuft .\nzwei katzen schlafen auf dem sofa .\n')
  tok_refs = bleu.read_lines(str(ref))
  assert tok_refs == ['ein &quot; hund &quot; läuft .', "zwei katzen schlafen auf dem sofa ."]
  hyps = ['Ein "Hund" läuft.', "Zwei Katzen schlafen auf dem Sofa."]
  assert bleu.multi30k_tok_bleu_vs_tokenized(hyps, tok_refs) == pytest.approx(100.0)
  assert bleu.multi30k_tok_bleu_vs_tokenized(["Zwei Hunde.", "Ein Sofa."], tok_refs) < 5.0
  with pytest.raises(ValueError, match="2 translations but 1 references"):
    bleu.multi30k_tok_bleu_vs_tokenized(hyps, tok_refs[:1])


MULTI30K = os.path.join(SHARED_DATA, "multi30k")


@pytest.mark.skipif(not os.path.isdir(os.path.join(MULTI30K, "tok")),
                    reason=f"Multi30k tok/ files not found under {MULTI30K}")
def test_multi30k_tokenize_reproduces_the_upstream_tok_files():
  """Our hypothesis tokenization equals task1-tokenize.sh on all 1,000 test2016 references.

  (On val, 1 of 1,014 lines differs: a period inside German quotes, „...tea.“,
  which the perl normaliser moves outside.)
  """
  raw = bleu.read_lines(os.path.join(MULTI30K, "test_2016_flickr.de.gz"))
  tok = bleu.read_lines(os.path.join(MULTI30K, "tok", "test_2016_flickr.lc.norm.tok.de.gz"))
  mismatches = [(r, t) for r, t in zip(raw, tok) if bleu.multi30k_tokenize(r) != t]
  assert len(raw) == len(tok) == 1000 and not mismatches, mismatches[:3]


# A line of test2016's tok/ reference, and a hypothesis without "der", partly uppercased.
TOK_REF = "ein kind mit der nummer &quot; 93 &quot; fährt ski ."
TOK_HYP = "EIN kind mit nummer &quot; 93 &quot; fährt ski ."


def _multi_bleu(hyps, refs):
  """multi-bleu.perl -lc with one reference, written out: corpus n-gram matches clipped
  per line, no smoothing, brevity penalty exp(1 - r/c) when c < r."""
  import collections
  import math
  matched, total, hyp_len, ref_len = [0] * 4, [0] * 4, 0, 0
  for hyp, ref in zip(hyps, refs):
    h, r = hyp.lower().split(), ref.lower().split()
    hyp_len, ref_len = hyp_len + len(h), ref_len + len(r)
    for n in range(1, 5):
      h_grams = collections.Counter(tuple(h[i:i + n]) for i in range(len(h) - n + 1))
      r_grams = collections.Counter(tuple(r[i:i + n]) for i in range(len(r) - n + 1))
      matched[n - 1] += sum(min(c, r_grams[g]) for g, c in h_grams.items())
      total[n - 1] += max(0, len(h) - n + 1)
  log_p = sum(math.log(m / t) for m, t in zip(matched, total)) / 4
  return 100 * math.exp(min(0.0, 1 - ref_len / hyp_len) + log_p)


def test_multi30k_tokens_bleu_scores_the_tokens_as_they_are():
  # By hand: 11 reference tokens, 10 hypothesis tokens (lowercased); the n-gram precisions
  # 10/10, 8/9 (not "mit nummer"), 6/8, 4/7; brevity penalty exp(1 - 11/10).
  by_hand = 100 * math.exp(1 - 11 / 10) * (10 / 10 * 8 / 9 * 6 / 8 * 4 / 7) ** 0.25
  score = bleu.multi30k_tokens_bleu([TOK_HYP], [TOK_REF])
  assert score.score == pytest.approx(by_hand, abs=1e-9)  # 64.09
  assert score.score == pytest.approx(_multi_bleu([TOK_HYP], [TOK_REF]), abs=1e-9)
  assert score.score == pytest.approx(sacrebleu.corpus_bleu(
      [TOK_HYP.lower()], [[TOK_REF]], tokenize="none").score, abs=1e-9)
  assert bleu.multi30k_tokens_bleu([TOK_REF], [TOK_REF]).score == pytest.approx(100.0)
  # Tokenizing tokenized text again escapes the escapes: "&quot;" -> "&amp; quot ;". So the
  # detokenized path gives tokenized outputs less than their due.
  assert bleu.multi30k_tokenize(TOK_REF) == TOK_REF.replace("&quot;", "&amp; quot ;")
  assert bleu.multi30k_tok_bleu_vs_tokenized([TOK_REF], [TOK_REF]) < 80.0


@pytest.mark.skipif(not os.path.isdir(os.path.join(MULTI30K, "tok")),
                    reason=f"Multi30k tok/ files not found under {MULTI30K}")
def test_multi30k_tokens_bleu_is_multi_bleu_on_the_test2016_tok_reference():
  """On all 1,000 test2016 tok/ lines (14 XML escapes among them), each hypothesis the
  reference with its second token dropped: the figure of multi-bleu -lc, written out."""
  refs = bleu.read_lines(os.path.join(MULTI30K, "tok", "test_2016_flickr.lc.norm.tok.de.gz"))
  hyps = [" ".join(r.split()[:1] + r.split()[2:]) for r in refs]
  score = bleu.multi30k_tokens_bleu(hyps, refs).score
  assert 50.0 < score < 95.0
  assert score == pytest.approx(_multi_bleu(hyps, refs), abs=1e-9)
