"""t2t_keras.load / translate / score / attention: the same answers as t2t-decoder, the
export and t2t-import give, and one-line errors (docs/library.md)."""

import os
import subprocess
import sys

import numpy as np
import pytest
from serve_process import DECODE, exported_tiny_run

import marian_fixture
import t2t_keras
import t2t_keras.bin as t2t_bin
from t2t_keras import runs
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import t2t_import as t2t_import_bin
from t2t_keras.decoding import attention_maps, translate
from t2t_keras.decoding.spec import DecodingSpec

# The full suite only (T2T_QUICK=1 leaves it out): the shared export (conftest.py).
pytestmark = pytest.mark.heavy

LINES = ["one hundred and five", "nine", "", "twenty-three seven thousand, four hundred "
         "and twelve"]  # the last is past the run's 12 ids: cut


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return exported_tiny_run(tmp_path_factory)


@pytest.fixture(scope="module")
def translator(run_dir):
  return t2t_keras.load(run_dir, decode_hparams=DECODE)


def _decoder(tmp_path, capsys, *flags):
  capsys.readouterr()
  code = t2t_bin.run_in_process(decoder_bin, ["t2t-decoder", *flags])
  _, err = capsys.readouterr()
  assert code == 0, err[-2000:]


def test_translate_equals_the_decoder_binarys_file(translator, run_dir, tmp_path, capsys):
  """Every line's two candidates and scores as t2t-decoder writes them (return_beams), the
  empty line "" with 0, the long line cut and said so."""
  source, out = tmp_path / "in.en", tmp_path / "out.de"
  source.write_text("\n".join(LINES) + "\n", encoding="utf-8")
  _decoder(tmp_path, capsys, f"--output_dir={run_dir}", f"--decode_from_file={source}",
           f"--decode_to_file={out}", f"--decode_hparams={DECODE},return_beams=true")
  results = translator.translate(LINES, n_best=2)
  for line, result in zip(out.read_text(encoding="utf-8").split("\n")[:-1], results):
    fields = line.split("\t")
    assert [c.text for c in result.n_best] == fields[0::2][:len(result.n_best)]
    np.testing.assert_allclose([c.score for c in result.n_best],
                               [float(s) for s in fields[1::2]][:len(result.n_best)],
                               atol=1e-4)
    assert (result.text, result.score) == (result.n_best[0].text, result.n_best[0].score)
  assert [r.truncated for r in results] == [False, False, False, True]
  assert (results[2].text, results[2].score) == ("", 0.0)
  single = translator.translate(LINES[0])
  assert single == t2t_keras.Translation(results[0].text, results[0].score,
                                         results[0].n_best[:1])


def test_prefixes_terms_and_settings_go_through_the_decoders_functions(translator, run_dir):
  """Per-call beam and alpha, target prefixes and terms: translate_lines' answers."""
  run = runs.load(run_dir)
  spec = DecodingSpec.for_run(run.info["problem"], DECODE, run.hparams)
  settings = spec.settings.replace(beam_size=3, alpha=1.0)
  expected = translate.translate_lines(run.model, run.vocab, LINES[:2], settings,
                                       prefixes=["ein", ""])
  got = translator.translate(LINES[:2], beam_size=3, alpha=1.0, n_best=3,
                             target_prefix=["ein", ""])
  assert [[(c.text, round(c.score, 4)) for c in r.n_best] for r in got] == [
      [(h.text, round(h.score, 4)) for h in hyps] for hyps in expected]
  assert got[0].text.startswith("ein")
  expected = translate.translate_lines(run.model, run.vocab, LINES[:2], spec.settings,
                                       constraints=[["neun"], []])
  got = translator.translate(LINES[:2], terms=[["neun"], []])
  assert [r.text for r in got] == [hyps[0].text for hyps in expected]
  assert got[0].terms_met == ("neun" in got[0].text) and got[1].terms_met
  assert translator.settings["beam_size"] == 2  # a call's keywords are for that call


def test_score_equals_the_decoders_score_file(translator, run_dir, tmp_path, capsys):
  pairs, out = tmp_path / "pairs.tsv", tmp_path / "scores.txt"
  targets = ["einhundertfünf", "neun", "dreiundzwanzig", "neun"]
  pairs.write_text("".join(f"{s}\t{t}\n" for s, t in zip(LINES, targets)), encoding="utf-8")
  _decoder(tmp_path, capsys, f"--output_dir={run_dir}", f"--score_file={pairs}",
           f"--decode_to_file={out}")
  expected = [float(x) for x in out.read_text().split()]
  np.testing.assert_allclose(translator.score(LINES, targets), expected, atol=2e-6)


def test_attention_is_the_teacher_forced_pass(translator, run_dir):
  run = runs.load(run_dir)
  got = translator.attention("one hundred and five", "einhundertfünf")
  source_ids = translate.encode_sources(run.vocab, ["one hundred and five"])[0]
  target_ids = run.vocab.encode("einhundertfünf")
  np.testing.assert_array_equal(got.weights, attention_maps.attention_weights(
      run.model, source_ids, target_ids))
  assert got.weights.shape[2:] == (len(target_ids) + 1, len(source_ids))
  assert got.source_pieces[-1] == got.target_pieces[-1] == "</s>"
  assert "".join(got.target_pieces[:-1]).replace("▁", "") == "einhundertfünf"


def test_an_export_translates_as_its_run(translator, run_dir):
  """The SavedModel's signatures behind the same calls: serving_default, nbest, prefix,
  constrained; its fixed search is refused otherwise, and it cannot score."""
  exported = t2t_keras.load(os.path.join(run_dir, "export"))
  assert exported.settings == translator.settings
  for kwargs in ({}, {"n_best": 2}, {"target_prefix": ["ein", "", "", "zwei"]},
                 {"terms": [["neun"], [], [], ["neun"]]}):
    got, expected = exported.translate(LINES, **kwargs), translator.translate(LINES, **kwargs)
    assert [[c.text for c in r.n_best] for r in got] == [
        [c.text for c in r.n_best] for r in expected], kwargs
    np.testing.assert_allclose([c.score for r in got for c in r.n_best],
                               [c.score for r in expected for c in r.n_best], atol=1e-4)
    assert [(r.truncated, r.terms_met) for r in got] == [
        (r.truncated, r.terms_met) for r in expected]
  with pytest.raises(t2t_keras.InputError, match=r"this export decodes with beam_size=2 "
                                                 r"\(fixed when it was exported\)"):
    exported.translate("nine", beam_size=4)
  with pytest.raises(t2t_keras.InputError, match="an export cannot score pairs"):
    exported.score(["nine"], ["neun"])


def test_a_marian_release_is_imported_on_the_fly_and_says_so(tmp_path, capsys):
  """By t2t_keras.load and by t2t-decoder (which loads through it): each says so and
  translates as the release's t2t-import run."""
  logged, lines = [], ["a small dog", "the house"]
  release = tmp_path / "release"
  files = marian_fixture.write_release(str(release), "pre_relu_tied_all")
  decode = "beam_size=2,extra_length=4,jit=false"
  translator = t2t_keras.load(str(release), log=logged.append, decode_hparams=decode)
  assert logged[0].startswith(f"importing the Marian model in {release} into "
                              "a temporary run ("), logged
  code = t2t_bin.run_in_process(t2t_import_bin, [
      "t2t-import", "--from=marian", f"--marian_dir={release}",
      f"--output_dir={tmp_path / 'imported'}"])
  assert code == 0 and files
  run = runs.load(str(tmp_path / "imported"))
  expected = translate.decode_lines(run.model, run.vocab, lines, translator.decoding.settings)
  assert [r.text for r in translator.translate(lines)] == expected
  source, out = tmp_path / "in.en", tmp_path / "out.de"
  source.write_text("\n".join(lines) + "\n", encoding="utf-8")
  capsys.readouterr()
  code = t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={release}", f"--decode_from_file={source}",
      f"--decode_to_file={out}", f"--decode_hparams={decode}"])
  printed = capsys.readouterr()
  assert code == 0, printed.err[-2000:]
  assert f"importing the Marian model in {release} into a temporary run (" in printed.out
  assert out.read_text(encoding="utf-8").splitlines() == expected


def test_the_decoder_binary_refuses_what_it_cannot_decode_in_one_line(run_dir, tmp_path,
                                                                     capsys):
  """An export; a model to import with t2t's run flags or another engine: refused before
  anything loads or is imported."""
  source, release = tmp_path / "in.en", tmp_path / "release"
  source.write_text("nine\n", encoding="utf-8")
  marian_fixture.write_release(str(release), "pre_relu_tied_all")
  export = os.path.join(run_dir, "export")
  for output_dir, flags, message in [
      (export, [], f"--output_dir={export} is a SavedModel export, whose search is fixed when "
                   "it is exported: t2t-decoder decodes its run (t2t-serve or t2t_keras.load "
                   "translate with the export)"),
      (release, ["--problem=translate_ende_wmt32k", "--hparams_set=transformer_base"],
       f"--problem, --hparams_set name a run's records, and {release} is a model to import, "
       "not a run: leave them out, or t2t-import it into a run first"),
      (release, ["--engine=ctranslate2"],
       f"--engine=ctranslate2 reads a converted model in a run; t2t-import {release} into a "
       "run and convert that (t2t-exporter), or use --engine=tensorflow")]:
    capsys.readouterr()
    code = t2t_bin.run_in_process(decoder_bin, [
        "t2t-decoder", f"--output_dir={output_dir}", f"--decode_from_file={source}", *flags])
    printed = capsys.readouterr()
    assert code == 1 and printed.err.strip().splitlines() == [
        f"t2t-decoder: error: {message}"], printed.err
    assert "importing" not in printed.out, printed.out


@pytest.mark.parametrize("call, message", [
    (lambda t: t.translate(5), "lines must be a list of str, got int"),
    (lambda t: t.translate([b"one"]), r"lines\[0\] must be a str, got bytes"),
    (lambda t: t.translate(["one"], n_best=3), r"n_best must be an int from 1 to beam_size "
                                               r"\(2\), got 3"),
    (lambda t: t.translate(["one", "two"], target_prefix="ein"),
     "target_prefix for a list of lines must be a list with one item per line"),
    (lambda t: t.translate(["one", "two"], terms=[["eins"]]), "1 terms items for 2 lines"),
    (lambda t: t.translate("one", terms="eins"),
     r"terms must be a list of non-empty str, got 'eins'"),
    (lambda t: t.translate("one", terms=[""]),
     r"terms must be a list of non-empty str, got \[''\]"),
    (lambda t: t.translate("one", beam_size="4"),
     "hparam 'beam_size': expected int, got str '4'"),
    (lambda t: t.translate("one", decode_hparams="beam=4"), "unknown hparam 'beam'"),
    (lambda t: t.translate("one", target_language="fr"), "target language"),
    (lambda t: t.translate("one", source_language="en"),
     "a source language is for models whose vocabulary has language tokens"),
    (lambda t: t.score(["one"], ["eins", "zwei"]), "1 sources but 2 targets"),
])
def test_bad_calls_raise_the_binaries_one_line_errors(translator, call, message):
  with pytest.raises(t2t_keras.InputError, match=message) as error:
    call(translator)
  assert "\n" not in str(error.value)


def test_load_lists_what_it_takes(tmp_path):
  with pytest.raises(t2t_keras.InputError, match=r"no such directory; expected one of: "
                                                 r"a run directory \(run.json\); .* a Hugging "
                                                 r"Face model directory \(config.json\)"):
    t2t_keras.load(str(tmp_path / "nowhere"))
  with pytest.raises(t2t_keras.InputError, match="nothing recognised in it"):
    t2t_keras.load(str(tmp_path))


def test_import_t2t_keras_loads_no_tensorflow():
  """The launcher's --version and a user's `import t2t_keras` pay nothing for TensorFlow."""
  code = ("import sys, t2t_keras; t2t_keras.load; t2t_keras.Translation; "
          "print(sorted(m for m in ('tensorflow', 'keras') if m in sys.modules))")
  out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                       timeout=60, check=True).stdout
  assert out.strip() == "[]"
