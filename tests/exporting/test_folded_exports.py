"""A folding problem's exports (data/casing.py's rule): the SavedModel's graph folds each
input before its tokenizer and restores the capital after the search; CTranslate2's and
LiteRT's clients do the same where their info files say so. The cheap tests echo the
source (the vocabulary knows no capital: an input read unfolded comes back with " ⁇ "); the
slow one exports a tiny folded run and holds its SavedModel to t2t-decoder and the library.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf
from binaries import run_binary
from conftest import make_tiny_run
from folded_echo import EXPECTED, FOLDED, SOURCES, lowercase_vocab

import t2t_keras
from t2t_keras import registry
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.data import casing
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.exporting import ct2_convert, ct2_translate, export, litert, litert_translate
from t2t_keras.exporting.serving_graph import ServingGraph

@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  """Lowercase pieces only: no capital letter is in it."""
  return lowercase_vocab(tmp_path_factory.mktemp("vocab"))


class EchoGraph(ServingGraph):
  """The export's batching and text hooks around a search that echoes its source ids."""

  def __init__(self, vocab, problem):
    super().__init__(name="echo")
    self.tokenizer = vocab.tf_tokenizer()
    self.beam_size, self.batch_size, self.length_bucket = 1, 2, 1
    self.max_input_length, self.max_positions = 64, None
    hooks = DecodingSpec.for_run(problem).hooks
    self.preprocess, self.postprocess = hooks.serving_preprocess(), hooks.serving_postprocess()
    self._search = lambda batch: (batch[:, None, :], tf.zeros([tf.shape(batch)[0], 1]))


def test_the_graph_folds_before_its_tokenizer_and_restores_after(vocab):
  texts, _, _, _ = EchoGraph(vocab, FOLDED)._nbest(tf.constant(SOURCES))
  assert [t.decode("utf-8") for t in texts[:, 0].numpy()] == EXPECTED
  texts, _, _, _ = EchoGraph(vocab, "translate_ende_multi30k")._nbest(tf.constant(SOURCES))
  assert texts[0, 0].numpy().decode("utf-8").startswith(" ⁇ ne hundred")


class CharPieces:
  """A sentencepiece stand-in: characters as pieces; `seen` holds the texts it encoded."""

  def __init__(self):
    self.seen = []

  def encode(self, texts, out_type=str):
    del out_type
    self.seen += texts
    return [list(t) for t in texts]

  def decode(self, pieces):
    return "".join(pieces).strip()


def _echo_client(cls, info):
  """A CTranslate2 or LiteRT client whose engine echoes its source pieces."""
  client = cls.__new__(cls)
  client.source_sp = client.target_sp = CharPieces()
  client.marian_pair, client.language_tokens, client.token_pieces = False, {}, frozenset()
  client.settings = client.info = info
  client.translate_pieces = lambda pieces, prefixes=None: [[(p, -1.0)] for p in pieces]
  return client


@pytest.mark.parametrize("cls", [ct2_translate.Ct2Translator, litert_translate.LiteRTTranslator])
def test_the_ct2_and_litert_clients_fold_where_their_info_says(cls):
  client = _echo_client(cls, {"fold_first_letter": True})
  assert client.translate(SOURCES) == [(t, -1.0) for t in EXPECTED]
  assert client.source_sp.seen == [casing.fold(s) for s in SOURCES]
  plain = _echo_client(cls, {})  # an older conversion, or a problem that does not fold
  assert plain.translate(SOURCES) == [(s.strip(), -1.0) for s in SOURCES]
  assert plain.source_sp.seen == SOURCES


def test_the_converters_record_the_rule(vocab):
  """t2t_decoding.json and litert_info.json say whether the run folds."""
  hparams = registry.hparams("transformer_tiny")
  for problem, folds in ((FOLDED, True), ("translate_ende_multi30k", False),
                         (FOLDED + "_rev", True), (None, False)):
    spec = DecodingSpec.for_run(problem, "", hparams)
    assert ct2_convert.decoding_settings(spec, hparams, problem)["fold_first_letter"] is folds
    assert litert.litert_info(spec.settings, spec, hparams, {"problem": problem}, "ckpt-1",
                              "none", ["translate"], vocab, False)["fold_first_letter"] is folds


@pytest.mark.slow
def test_a_folded_export_restores_as_the_decoder_does(tmp_path, capsys):
  """A tiny run of the folded Multi30k (random weights, conftest's vocabulary: no capital
  letter in it), exported: serving_default's outputs are t2t-decoder's and the library's,
  export_info.json says it folds; capitals come back on outputs of sources that start with
  one, or with a digit. Slow (an export, its load, a decoder's
  search): test_the_graph_folds_before_its_tokenizer_and_restores_after runs the export's
  graph around an echoing search, test_folded_decoding.py the decoder's and the library's
  corridors, test_casing.py holds the graph's rule to the Python one, and
  test_export.py the export's searches to the decoder's."""
  (tmp_path / "run").mkdir()
  run = make_tiny_run(tmp_path / "run", 12, num_encoder_layers=1, num_decoder_layers=1)
  info = json.loads((tmp_path / "run" / "run.json").read_text())
  (tmp_path / "run" / "run.json").write_text(json.dumps(dict(info, problem=FOLDED)))
  decode = "beam_size=2,extra_length=4,batch_size=4,jit=false"
  lines = ["One hundred and five", "one hundred and five", "Nine", "nine", "7 thousand",
           "Über", "Éinhundert", "Čtyři"]
  path = export.export_model(run, decode_hparams=decode, log=None)
  with open(os.path.join(path, "assets", "export_info.json")) as f:
    assert json.load(f)["fold_first_letter"] is True
  served = tf.saved_model.load(path).signatures["serving_default"](inputs=tf.constant(lines))
  served = [t.decode("utf-8") for t in served["outputs"].numpy()]
  library = [t.text for t in t2t_keras.load(run, decode_hparams=decode).translate(lines)]
  (tmp_path / "in.txt").write_text("\n".join(lines) + "\n", encoding="utf-8")
  code, _, err = run_binary(capsys, decoder_bin, f"--output_dir={run}",
                            f"--decode_from_file={tmp_path / 'in.txt'}",
                            f"--decode_to_file={tmp_path / 'out.txt'}",
                            f"--decode_hparams={decode}")
  assert code == 0, err
  decoded = (tmp_path / "out.txt").read_text(encoding="utf-8").splitlines()
  assert served == library == decoded
  print("\n".join(f"{a!r} -> {b!r}" for a, b in zip(lines, served)))
  assert served[0] == casing.restore(lines[0], served[1]) and served[0] != served[1]
  assert served[2] == casing.restore(lines[2], served[3]) and served[2] != served[3]
  capital_first = [t for t in np.array(served)[[4, 5, 6, 7]] if t[:1].isalpha()]
  assert capital_first and all(t[:1].isupper() for t in capital_first)
