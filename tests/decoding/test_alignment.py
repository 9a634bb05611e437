"""Word alignments (decode hparams return_alignment=true): a hand-made attention pattern,
the batched pass against the plotting pass, and t2t-decoder's .align file."""

import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY_SENTENCES, make_tiny_run

from t2t_keras import bin as t2t_bin
from t2t_keras import runs
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.decoding import alignment, attention_maps, translate
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.errors import InputError

SOURCE = ["\u2581the", "\u2581hou", "se", "\u2581is", "</s>"]   # words 0 1 1 2
OUTPUT = ["\u2581das", "\u2581Ha", "us", "\u2581ist"]            # words 0 1 1 2


def test_word_numbers_follow_the_word_start_marks():
  assert alignment.word_numbers(SOURCE[:-1]) == [0, 1, 1, 2]
  assert alignment.word_numbers(["ab", "c", "\u2581d"]) == [0, 0, 1]
  assert alignment.word_numbers([]) == []


def test_a_hand_made_attention_pattern():
  eos_heavy = [0.1, 0.1, 0.3, 0.0, 0.5]  # most weight on the source EOS: never aligned to it
  weights = np.array([
      [0.7, 0.1, 0.1, 0.0, 0.1],   # das -> the
      [0.0, 0.2, 0.6, 0.1, 0.1],   # Ha  -> se (word 1)
      eos_heavy,                   # us  -> se (word 1), not </s>
      [0.1, 0.0, 0.0, 0.8, 0.1],   # ist -> is
      [0.0, 0.0, 0.0, 0.0, 1.0]])  # the output's EOS row: ignored
  assert alignment.pharaoh(weights, SOURCE, OUTPUT) == "0-0 1-1 2-2"
  crossed = weights[[3, 1, 2, 0, 4]]  # "ist Ha us das": the output words in another order
  assert alignment.pharaoh(crossed, SOURCE, [OUTPUT[3], OUTPUT[1], OUTPUT[2], "\u2581das"]) \
      == "0-2 1-1 2-0"
  assert alignment.pharaoh(weights, SOURCE, []) == ""


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return make_tiny_run(tmp_path_factory.mktemp("align_run"))


@pytest.mark.heavy
def test_the_batched_pass_equals_the_plotting_pass(run_dir):
  run = runs.load(run_dir)
  settings = parse_decode_hparams("beam_size=2,extra_length=4,jit=false")
  nbest = translate.translate_lines(run.model, run.vocab, TINY_SENTENCES, settings)
  sources = translate.encode_sources(run.vocab, TINY_SENTENCES)
  outputs = [h[0].ids for h in nbest]
  for layer in (-1, 0):
    lines = alignment.alignments(run.model, run.vocab, sources, outputs, layer, batch_size=4)
    for src, out, line in zip(sources, outputs, lines):
      one = attention_maps.attention_weights(run.model, src, out)[layer].mean(0)  # [out + 1, src]
      expected = alignment.pharaoh(one, [run.vocab.id_to_piece(t) for t in src],
                                   [run.vocab.id_to_piece(t) for t in out])
      assert line == expected
  with pytest.raises(InputError, match=r"alignment_layer=5: the model has 2 decoder layers"):
    alignment.alignments(run.model, run.vocab, sources, outputs, 5)


@pytest.mark.heavy
def test_t2t_decoder_writes_the_align_file(run_dir, tmp_path, capsys):
  source = tmp_path / "in.en"
  source.write_text("\n".join(TINY_SENTENCES) + "\n")
  out = tmp_path / "out.de"
  code = t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={run_dir}", f"--decode_from_file={source}",
      f"--decode_to_file={out}", "--decode_hparams=beam_size=2,extra_length=4,"
      "return_alignment=true,alignment_layer=0"])
  assert code == 0, capsys.readouterr().err[-2000:]
  translations = out.read_text().splitlines()
  lines = (tmp_path / "out.de.align").read_text().split("\n")[:-1]
  assert len(lines) == len(TINY_SENTENCES) == len(translations)
  for src, hyp, line in zip(TINY_SENTENCES, translations, lines):
    pairs = [tuple(map(int, p.split("-"))) for p in line.split()]
    assert bool(pairs) == bool(hyp.strip())
    assert all(0 <= i < len(src.split()) + 2 and 0 <= j <= len(hyp.split()) for i, j in pairs)
    assert {j for _, j in pairs} == set(range(len({j for _, j in pairs})))  # every out word
