"""A folding problem's decoding in Python (data/casing.py's rule): t2t-decoder's files, stdin,
dev scores' decode_lines and the library's Translator fold each source before the model
reads it and restore the capital on its outputs. The search echoes its source ids, and the vocabulary knows no
capital: a source read unfolded comes back with " ⁇ " where its capital was."""

import io
import types

import pytest

from folded_echo import EXPECTED, FOLDED, SOURCES, echo, lowercase_vocab
from t2t_keras.library.translator import Translator
from t2t_keras.decoding import files, translate
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.decoding.spec import DecodingSpec

@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  """Lowercase pieces only: no capital letter is in it."""
  return lowercase_vocab(tmp_path_factory.mktemp("vocab"))


SETTINGS = parse_decode_hparams("beam_size=1,batch_size=2")


def test_the_vocabulary_knows_no_capital(vocab):
  """What a path that forgot the fold would give: the capital lost to UNK."""
  out = translate.decode_lines(None, vocab, SOURCES, SETTINGS, echo)
  assert out[0].startswith(" ⁇ ne hundred") and out[2].startswith(" ⁇ ber"), out


def test_decode_file_folds_and_restores(vocab, tmp_path):
  """t2t-decoder --decode_from_file's function with the spec's hooks (bin/decoder.py)."""
  source = tmp_path / "in.en"
  source.write_text("\n".join(SOURCES) + "\n", encoding="utf-8")
  out = tmp_path / "out.de"
  hooks = DecodingSpec.for_run(FOLDED).hooks
  summary = files.decode_file(None, vocab, files.InputFiles(str(source)), SETTINGS,
                              files.Outputs(str(out), progress=False), echo, hooks,
                              log=lambda *_: None)
  assert summary["translations"] == EXPECTED
  assert out.read_text(encoding="utf-8").splitlines() == EXPECTED


def test_decode_interactive_folds_and_restores(vocab):
  """--decode_interactive with the run's spec: each line folded, its output restored."""
  printed = []
  files.decode_interactive(None, vocab, DecodingSpec.for_run(FOLDED, "beam_size=1"),
                           io.StringIO("\n".join(SOURCES) + "\n"), printed.append,
                           search_fn=echo)
  assert [line.split("\t")[2] for line in printed] == EXPECTED


def test_decode_lines_restores_with_the_hooks(vocab):
  """Dev BLEU's, trials' and selection's decode_lines: folded in, restored out; the plain
  problem's hooks leave text alone."""
  assert translate.decode_lines(None, vocab, SOURCES, SETTINGS, echo,
                                hooks=DecodingSpec.for_run(FOLDED).hooks) == EXPECTED
  plain = DecodingSpec.for_run("translate_ende_multi30k").hooks
  assert translate.decode_lines(None, vocab, SOURCES, SETTINGS, echo, hooks=plain) == (
      translate.decode_lines(None, vocab, SOURCES, SETTINGS, echo))


def test_the_library_folds_and_restores(vocab, monkeypatch):
  """Translator.translate (t2t_keras.load's) over the echo: its n-best restored too."""
  run = types.SimpleNamespace(model=None, vocab=vocab, info={"problem": FOLDED},
                              checkpoint_path=None)
  translator = Translator(run, DecodingSpec.for_run(FOLDED, "beam_size=1"), "run")
  monkeypatch.setattr(translator, "_search_fn", lambda *_: echo)  # the search, stubbed
  results = translator.translate(SOURCES)
  assert [r.text for r in results] == [r.n_best[0].text for r in results] == EXPECTED
  assert translator.translate("Über fünf").text == "Über fünf"


def test_scoring_folds_both_sides(vocab, monkeypatch, tmp_path):
  """The library's score and t2t-decoder --score_file read pairs as datagen wrote them:
  both sides folded, so no capital reaches the vocabulary as UNK."""
  from t2t_keras.decoding import scoring  # pylint: disable=import-outside-toplevel
  from t2t_keras.ids import EOS_ID, UNK_ID  # pylint: disable=import-outside-toplevel
  seen = []
  monkeypatch.setattr(scoring, "score_ids", lambda model, s, t, *a, **k: seen.append((s, t))
                      or [0.0] * len(s))
  run = types.SimpleNamespace(model=None, vocab=vocab, info={"problem": FOLDED},
                              checkpoint_path=None)
  Translator(run, DecodingSpec.for_run(FOLDED), "run").score(["One hundred and five"],
                                                             ["Über fünf"])
  pairs = tmp_path / "pairs.tsv"
  pairs.write_text("One hundred and five\tÜber fünf\n", encoding="utf-8")
  scoring.score_file(None, vocab, str(pairs), decoding=DecodingSpec.for_run(FOLDED),
                     log=lambda *_: None)
  expected = ([vocab.encode("one hundred and five") + [EOS_ID]],
              [vocab.encode("über fünf") + [EOS_ID]])
  assert seen == [expected, expected]
  assert UNK_ID not in expected[0][0] + expected[1][0]


@pytest.mark.parametrize("decode, suffix", [("beam_size=1", ".beam1.alpha0.6.decodes"),
                                            ("beam_size=1,length_penalty_kind=length",
                                             ".beam1.alpha0.6.lp_length.decodes")])
def test_the_default_output_name_holds_the_length_kind(vocab, tmp_path, decode, suffix):
  """t2t's "<source>.beam<k>.alpha<a>.decodes" (this file's echo search), ".lp_length" added
  for the length kind so that the two decodings do not overwrite each other."""
  source = tmp_path / "in.en"
  source.write_text("nine\n", encoding="utf-8")
  files.decode_file(None, vocab, files.InputFiles(str(source)), parse_decode_hparams(decode),
                    files.Outputs(None, progress=False), echo, log=lambda *_: None)
  assert (tmp_path / ("in.en" + suffix)).read_text(encoding="utf-8") == "nine\n"
