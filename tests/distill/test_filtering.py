"""distill/filtering.py: the teacher's pairs kept or dropped by score and by length ratio."""

import json

import pytest

from t2t_keras.distill import filtering
from t2t_keras.errors import InputError

# (source, translation, score): the expected fate, by hand, at min_score=-1.0, max_ratio=2.0
# in words.
PAIRS = [
    ("a dog runs", "ein Hund rennt", -0.5, "kept"),                 # 3 / 3 words
    ("a dog runs", "ein Hund", -0.2, "kept"),                       # 3 / 2 = 1.5
    ("a dog", "ein Hund rennt schnell weg", -0.3, "ratio"),         # 5 / 2 = 2.5
    ("a dog runs", "ein Hund rennt", -1.5, "score"),                # below -1.0
    ("two dogs", "", -0.1, "ratio"),                                # an empty side
    ("a", "ein ein ein ein ein ein", -3.0, "score"),                # both fail: score first
    ("one two three four", "eins zwei", -1.0, "kept"),              # -1.0 and 2.0: both kept
    ("", "", 0.0, "ratio"),                                         # 0 / 0
]


def _write(tmp_path, rows):
  paths = []
  for name, column in (("src", 0), ("hyp", 1), ("scores", 2)):
    path = tmp_path / name
    path.write_text("".join(f"{row[column]}\n" for row in rows), encoding="utf-8")
    paths.append(str(path))
  return paths


def test_counts_and_kept_pairs_against_a_hand_count(tmp_path):
  out = tmp_path / "out"
  summary = filtering.filter_pairs(*_write(tmp_path, PAIRS), str(out), min_score=-1.0,
                                   max_ratio=2.0, log=None)
  fates = [row[3] for row in PAIRS]
  expected = {"lines": 8, "kept": fates.count("kept"), "dropped_score": fates.count("score"),
              "dropped_ratio": fates.count("ratio")}
  assert expected == {"lines": 8, "kept": 3, "dropped_score": 2, "dropped_ratio": 3}
  assert {k: summary[k] for k in expected} == expected
  kept = [row for row in PAIRS if row[3] == "kept"]
  assert (out / filtering.SOURCE_FILE).read_text().splitlines() == [r[0] for r in kept]
  assert (out / filtering.TARGET_FILE).read_text().splitlines() == [r[1] for r in kept]
  assert json.loads((out / filtering.SUMMARY_FILE).read_text())["unit"] == "words"
  # No tests given: everything kept, the empty pairs too.
  summary = filtering.filter_pairs(*_write(tmp_path, PAIRS), str(out), log=None)
  assert (summary["kept"], summary["dropped_score"], summary["dropped_ratio"]) == (8, 0, 0)


def test_lengths_in_a_vocabularys_pieces(tmp_path):
  """With a vocabulary the ratio counts its pieces (one German number word is several
  pieces, as several English words are): at max_ratio 2, words and pieces disagree on both
  pairs."""
  from conftest import TINY_SENTENCES  # pylint: disable=import-outside-toplevel
  from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
  vocab_path = str(tmp_path / "spm.model")
  vocab = vocabulary.train_sentencepiece(
      TINY_SENTENCES * 20 + ["einhundertfünf", "dreiundzwanzig", "neun"] * 20, vocab_path, 60,
      num_threads=1)
  rows = [("one hundred and five", "einhundertfünf", -0.1), ("nine", "dreiundzwanzig", -0.1)]
  pieces = [filtering.length_ratio(len(vocab.encode(s)), len(vocab.encode(t)))
            for s, t, _ in rows]
  words = [filtering.length_ratio(len(s.split()), len(t.split())) for s, t, _ in rows]
  assert words == [4.0, 1.0] and pieces[0] <= 2.0 < pieces[1], pieces
  for vocab_given, kept in ((vocab_path, rows[:1]), (None, rows[1:])):
    out = tmp_path / f"out_{bool(vocab_given)}"
    summary = filtering.filter_pairs(*_write(tmp_path, rows), str(out), max_ratio=2.0,
                                     vocab_path=vocab_given, log=None)
    assert (summary["kept"], summary["dropped_ratio"]) == (1, 1)
    assert summary["unit"] == ("pieces" if vocab_given else "words")
    assert (out / filtering.TARGET_FILE).read_text().splitlines() == [kept[0][1]]


def test_refusals(tmp_path):
  src, hyp, scores = _write(tmp_path, PAIRS)
  (tmp_path / "short").write_text("x\n")
  with pytest.raises(InputError, match=r"has 8 lines but .*short has 1"):
    filtering.filter_pairs(src, str(tmp_path / "short"), scores, str(tmp_path / "o"), log=None)
  (tmp_path / "bad").write_text("".join("-1\n" for _ in range(7)) + "nan?\n")
  with pytest.raises(InputError, match=r"bad:8: 'nan\?' is not a score"):
    filtering.filter_pairs(src, hyp, str(tmp_path / "bad"), str(tmp_path / "o"), log=None)
  with pytest.raises(InputError, match="at least 1"):
    filtering.filter_pairs(src, hyp, scores, str(tmp_path / "o"), max_ratio=0.5, log=None)


def test_lines_the_teacher_cut_are_dropped_first(tmp_path):
  """truncated.txt's 1s are dropped before the score and ratio tests (the kept pair at -0.5
  and the score-failing one at -1.5 alike), and counted."""
  src, hyp, scores = _write(tmp_path, PAIRS)
  flags = ["1", "0", "0", "1", "0", "0", "0", "0"]
  (tmp_path / "cut").write_text("".join(f"{f}\n" for f in flags))
  summary = filtering.filter_pairs(src, hyp, scores, str(tmp_path / "o"), min_score=-1.0,
                                   max_ratio=2.0, truncated_path=str(tmp_path / "cut"),
                                   log=None)
  assert {k: summary[k] for k in ("kept", "dropped_truncated", "dropped_score",
                                  "dropped_ratio")} == {
      "kept": 2, "dropped_truncated": 2, "dropped_score": 1, "dropped_ratio": 3}
  # The teacher's max_lines: only the sources' first lines were translated.
  for name in ("hyp", "scores", "cut"):
    path = tmp_path / name
    path.write_text("".join(path.read_text().splitlines(keepends=True)[:5]))
  summary = filtering.filter_pairs(src, hyp, scores, str(tmp_path / "o"), max_lines=5,
                                   truncated_path=str(tmp_path / "cut"), log=None)
  assert (summary["lines"], summary["dropped_truncated"], summary["kept"]) == (5, 2, 3)
  (tmp_path / "cut").write_text("0\n1\nyes\n0\n0\n")
  with pytest.raises(InputError, match=r"cut:3: 'yes' is not 0 or 1"):
    filtering.filter_pairs(src, hyp, scores, str(tmp_path / "o"), max_lines=5,
                           truncated_path=str(tmp_path / "cut"), log=None)
