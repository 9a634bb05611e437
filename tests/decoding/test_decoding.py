import os

import numpy as np
import pytest
import tensorflow as tf

import numpy_transformer
from t2t_keras import registry
from t2t_keras.data import vocabulary
from t2t_keras.decoding import translate, files
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.models.transformer import Transformer
from t2t_keras import runs
import t2t_keras.bin as t2t_bin
from t2t_keras.bin import decoder as decoder_bin

SENTENCES = ["one hundred and five", "twenty-three", "seven thousand, four hundred",
             "nine", "eighty-eight thousand and one", "six hundred and twelve"]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("vocab") / "vocab.model")
  corpus = SENTENCES * 20 + ["einhundertfünf", "dreiundzwanzig", "neun"] * 20
  return vocabulary.train_sentencepiece(corpus, path, 60, num_threads=1)


@pytest.fixture(scope="module")
def model(vocab):
  tf.keras.utils.set_random_seed(3)
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32, num_heads=2)
  m = Transformer(vocab.vocab_size, hp)
  m.build_for_ids()
  return m


def _hp(**changes):
  return parse_decode_hparams("beam_size=2,extra_length=4,batch_size=2,jit=false").replace(
      **changes)


def test_decode_hparams_overrides():
  settings = parse_decode_hparams("beam_size=1,alpha=0.0,batch_size=8")
  assert (settings.search.beam_size, settings.search.alpha, settings.batching.batch_size,
          settings.search.extra_length) == (1, 0.0, 8, 50)


def test_outputs_come_back_in_input_order():
  # A fake search that "translates" a sentence into its own length: any
  # mix-up of the length-sorted batches shows in the output.
  def search(batch):
    lengths = tf.reduce_sum(tf.cast(batch > 0, tf.int32), 1)
    ids = tf.stack([lengths + 10, tf.ones_like(lengths)], 1)[:, None]  # [b, 1, 2]
    return ids, tf.cast(lengths, tf.float32)[:, None]

  sources = [[5] * n + [1] for n in (3, 9, 1, 6, 2, 2, 7)]
  out = translate.translate_ids(None, sources, _hp(batch_size=3), search_fn=search)
  assert [hyps[0][0] for hyps in out] == [[len(s) + 10] for s in sources]
  assert [hyps[0][1] for hyps in out] == [float(len(s)) for s in sources]


def test_empty_sources_get_empty_outputs_without_a_search():
  """EOS alone (an empty or whitespace-only line): "" with score 0 and no search, whatever
  its prefix, as the SavedModel answers (export.py); unmet where it has phrases. Found by
  test_fuzz_inputs.py: the decoder searched from EOS and wrote the model's guess."""
  searched = []

  def search(batch, *more):
    searched.append(batch.shape[0] if hasattr(batch, "shape") else len(batch))
    lengths = tf.reduce_sum(tf.cast(batch > 0, tf.int32), 1)
    ids = tf.stack([lengths + 10, tf.ones_like(lengths)], 1)[:, None]
    return ids, tf.cast(lengths, tf.float32)[:, None]

  sources = [[1], [5, 5, 1], [1]]
  out = translate.translate_ids(None, sources, _hp(batch_size=3), search_fn=search)
  assert [list(h) for h in out] == [[([], 0.0)], [([13], 3.0)], [([], 0.0)]]
  assert searched == [3]  # one batch, of the one non-empty source (spare rows repeat it)
  out = translate.translate_ids(None, [[1], [1]], _hp(), search_fn=search,
                                prefixes=[[7], []])
  assert [list(h) for h in out] == [[([], 0.0)], [([], 0.0)]] and searched == [3]

  def lexical_search(batch, *constraints):
    ids, scores = search(batch)
    return ids, scores, tf.ones([batch.shape[0]], tf.bool)

  out = translate.translate_ids(None, [[1], [5, 1], [1]], _hp(), search_fn=lexical_search,
                                phrases=[[[7]], [[7]], []])
  assert out.unmet == [0]  # the empty line cannot hold its phrase; the third has none


@pytest.mark.heavy
def test_batched_decoding_equals_one_by_one(model, vocab):
  whole = DecodingSpec(None, _hp()).search_fn(model, vocab)  # one search for both calls
  batched = translate.translate_lines(model, vocab, SENTENCES, _hp(), search_fn=whole)
  one = _hp(batch_size=1)
  search_fn = DecodingSpec(None, one).search_fn(model, vocab)
  for line, hyps in zip(SENTENCES, batched):
    alone = translate.translate_lines(model, vocab, [line], one, search_fn=search_fn)[0]
    assert [h.ids for h in hyps] == [h.ids for h in alone]
    np.testing.assert_allclose([h.score for h in hyps], [h.score for h in alone], rtol=1e-4)
  best = [h[0].text for h in batched]
  assert translate.decode_lines(model, vocab, SENTENCES, _hp(), whole) == best


@pytest.mark.heavy
def test_decode_file_with_reference_and_plots(model, vocab, tmp_path):
  src, ref = tmp_path / "in.en", tmp_path / "ref.de"
  src.write_text("\n".join(SENTENCES[:3]) + "\n")
  ref.write_text("\n".join(["a b c", "d e", "f"]) + "\n")
  out = tmp_path / "out" / "decoded.de"
  summary = files.decode_file(model, vocab, files.InputFiles(str(src), str(ref)),
                              _hp(max_attention_plots=2),
                              files.Outputs(str(out), str(tmp_path / "p"), progress=False),
                              log=lambda msg: None)
  lines = out.read_text().split("\n")[:-1]
  assert lines == summary["translations"] and len(lines) == 3
  assert set(summary["bleu"]) >= {"bleu", "bleu_signature", "chrf", "tokenized_bleu"}
  assert sorted(os.listdir(tmp_path / "p")) == ["attention_00000.png", "attention_00001.png"]


def test_attention_weights_equal_a_float64_numpy_transformer(model, vocab):
  """Each layer's and head's weights of the output row by row (EOS appended) against the
  paper's formulas in float64 NumPy (`numpy_transformer`); weights lie in [0, 1], so
  float32 rounding stays far below 1e-5."""
  from t2t_keras.decoding.attention_maps import attention_weights
  w = attention_weights(model, [5, 6, 7, 1], [8, 9])
  assert w.shape == (2, 2, 3, 4)  # layers, heads, output + EOS, source
  _, reference = numpy_transformer.forward(model, [5, 6, 7, 1], [8, 9, 1])
  np.testing.assert_allclose(w, reference, atol=1e-5, rtol=0)


@pytest.mark.heavy
def test_decode_split_of_generated_problem(model, vocab):
  """The split's first num_samples sources, translated as decode_lines translates them,
  with BLEU against those sources' own references (was: counts only)."""
  from t2t_keras.metrics import bleu
  search_fn = DecodingSpec(None, _hp()).search_fn(model, vocab)  # one search for both
  summary = files.decode_split(model, vocab, files.Split("translate_ende_numbers", "test"),
                               _hp(num_samples=3), files.Outputs(progress=False),
                               search_fn=search_fn, log=lambda msg: None)
  sources, references = files.split_pairs("translate_ende_numbers", split="test")
  assert summary["translations"] == translate.decode_lines(model, vocab, sources[:3], _hp(),
                                                           search_fn)
  assert summary["bleu"] == bleu.bleu_report(summary["translations"], references[:3])


@pytest.mark.heavy
def test_t2t_decoder_binary(model, vocab, tmp_path, capsys):
  run_dir = tmp_path / "run"
  runs.save_run_info(str(run_dir), model.hparams, "translate_ende_numbers",
                         vocab.vocab_size, vocab_path=vocab.model_path)
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(run_dir), 1,
                             checkpoint_name="ckpt").save()
  src = tmp_path / "in.en"
  src.write_text("\n".join(SENTENCES[:2]) + "\n")
  out = tmp_path / "out.de"
  capsys.readouterr()
  code = t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={run_dir}", f"--decode_from_file={src}",
      f"--decode_to_file={out}", f"--decode_reference={src}",
      "--decode_hparams=beam_size=2,extra_length=3,jit=false"])
  stdout, stderr = capsys.readouterr()
  assert code == 0, stderr[-2000:]
  assert "sacreBLEU" in stdout and "tokenized BLEU" in stdout
  expected = translate.decode_lines(model, vocab, SENTENCES[:2], _hp(extra_length=3))
  assert out.read_text().split("\n")[:-1] == expected


@pytest.mark.heavy
def test_decode_interactive_prints_each_lines_nbest(model, vocab):
  """Lines of a stream (blank ones skipped) -> "k<TAB>score<TAB>text" per hypothesis, the
  best only unless return_beams, as translate_lines ranks them one sentence at a time."""
  import io
  # One search for the expected lines and the second session; the first builds its own.
  search_fn = DecodingSpec(None, _hp(batch_size=1)).search_fn(model, vocab)
  expected = []
  for line in SENTENCES[:2]:
    hyps = translate.translate_lines(model, vocab, [line], _hp(batch_size=1), search_fn)[0]
    expected.append([f"{k}\t{h.score:.4f}\t{h.text}" for k, h in enumerate(hyps)])
  assert [len(e) for e in expected] == [2, 2]  # beam_size 2
  for return_beams in (False, True):
    printed = []
    files.decode_interactive(model, vocab, _hp(return_beams=return_beams),
                             stream=io.StringIO(f"{SENTENCES[0]}\n\n  {SENTENCES[1]}  \n"),
                             log=printed.append, search_fn=search_fn if return_beams else None)
    assert printed == [t for e in expected for t in e[:None if return_beams else 1]]


def test_decode_interactive_builds_one_prefix_search_for_language_tokens(tmp_path,
                                                                          monkeypatch):
  """A language-token model's stdin lines (M2M-100's: each output forced to start with the
  target language's token) go through one search that takes the prefix, built once for
  the session however many lines follow; an echoing search stands in for the model."""
  import io
  import types
  from folded_echo import echo, lowercase_vocab
  base = lowercase_vocab(tmp_path)
  vocab = types.SimpleNamespace(labels=("__en__", "__de__"), encode=base.encode,
                                decode=base.decode, vocab_size=base.vocab_size)
  built = []

  def search_fn(spec, model, vocab, takes="ids", phrase_shape=None):
    built.append(takes)
    return echo if takes == "ids" else lambda ids, prefix: echo(ids)
  monkeypatch.setattr(files.DecodingSpec, "search_fn", search_fn)
  printed = []
  files.decode_interactive(None, vocab, _hp(), io.StringIO("__en__ nine\n__en__ seven\n"
                                                           "__en__ nine\n"),
                           log=printed.append, target_language="de")
  assert built == ["ids", "prefix"]
  assert len(printed) == 3 and printed[0] == printed[2] != printed[1], printed
