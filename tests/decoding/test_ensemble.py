"""Ensembles: a model with itself is that model, two models against a brute-force mean over
a tiny vocabulary, and the decoder / exporter as a user runs them."""

import itertools
import os

import numpy as np
import pytest
import tensorflow as tf
from conftest import TINY_SENTENCES, make_tiny_run, tiny_model

from t2t_keras import bin as t2t_bin
from t2t_keras import runs
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.data import vocabulary
from t2t_keras.decoding import translate, scoring, search
from t2t_keras.decoding.search_common import SearchOptions, length_penalty
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID
from t2t_keras.models.ensemble import Ensemble

V = 6  # PAD, EOS and four tokens
INPUTS = np.array([[2, 3, 4, 1], [5, 1, 0, 0]], np.int32)


def _model(seed, **changes):
  model = tiny_model(V, seed, **changes)
  for w in model.trainable_variables:  # sharper distributions than a fresh init
    w.assign(w * 3.0)
  return model


@pytest.fixture(scope="module")
def models():
  return _model(1), _model(2, num_decoder_layers=3, norm_type="post")


@pytest.mark.heavy
def test_a_model_with_itself_is_that_model(models):
  model = models[0]
  pair = Ensemble([model, model])
  for beam in (1, 3):
    options = SearchOptions(beam_size=beam, extra_length=4)
    ids, scores = search.search(model, tf.constant(INPUTS), options)
    e_ids, e_scores = search.search(pair, tf.constant(INPUTS), options)
    np.testing.assert_array_equal(e_ids.numpy(), ids.numpy())
    np.testing.assert_allclose(e_scores.numpy(), scores.numpy(), rtol=1e-5, atol=1e-6)


def _teacher_forced_log_probs(model, inputs, targets):
  """float64 [n, len, V]: each model's log softmax under teacher forcing."""
  logits = model({"inputs": tf.constant(inputs), "targets": tf.constant(targets)})
  return tf.nn.log_softmax(tf.cast(logits, tf.float64)).numpy()


def test_beam_search_finds_the_brute_force_best_of_the_mean(models):
  """Every output ended by EOS within 3 tokens, scored by log(mean_m p_m) summed over its
  steps (GNMT penalty, alpha 0.6), PAD excluded: an exhaustive beam search (beam 30 keeps
  every prefix) returns the best of them, with its score (t2t's search prefers any ended
  hypothesis to one cut at the length limit)."""
  pair, alpha, max_len = Ensemble(models), 0.6, 3
  tokens = [t for t in range(1, V)]
  for row in range(len(INPUTS)):
    source = INPUTS[row:row + 1]
    candidates = []
    for length in range(1, max_len + 1):
      for seq in itertools.product(tokens, repeat=length):
        if EOS_ID in seq[:-1] or seq[-1] != EOS_ID:
          continue  # ended at its first EOS
        candidates.append(list(seq))
    targets = np.array([c + [0] * (max_len - len(c)) for c in candidates], np.int32)
    sources = np.repeat(source, len(candidates), axis=0)
    per_model = [_teacher_forced_log_probs(m, sources, targets) for m in models]
    mean = np.logaddexp(per_model[0], per_model[1]) - np.log(2)
    picked = np.take_along_axis(mean, targets[..., None], axis=2)[..., 0]
    lengths = np.array([len(c) for c in candidates])
    log_probs = (picked * (targets != 0)).sum(axis=1)
    best = np.argmax(log_probs / ((5 + lengths) / 6) ** alpha)
    ids, scores = search.search(pair, tf.constant(source), SearchOptions(
        beam_size=30, alpha=alpha, extra_length=max_len, max_decode_length=max_len,
        stop_early=False))
    out = ids.numpy()[0, 0]
    assert list(out[:lengths[best]]) == candidates[best]
    expected = log_probs[best] / float(length_penalty(lengths[best], alpha))
    assert scores.numpy()[0, 0] == pytest.approx(expected, rel=1e-5)


def test_decode_and_scoring_give_the_mean_of_the_probabilities(models):
  pair = Ensemble(models)
  targets = np.array([[3, 4, 1, 0], [2, 1, 0, 0]], np.int32)
  per_model = [_teacher_forced_log_probs(m, INPUTS, targets) for m in models]
  expected = np.log((np.exp(per_model[0]) + np.exp(per_model[1])) / 2)
  np.testing.assert_allclose(_teacher_forced_log_probs(pair, INPUTS, targets), expected,
                             atol=1e-5)
  scores = scoring.score_ids(pair, INPUTS.tolist(), [[3, 4, 1], [2, 1]])
  picked = np.take_along_axis(expected, targets[..., None], axis=2)[..., 0]
  np.testing.assert_allclose(scores, (picked * (targets != 0)).sum(1), rtol=1e-5)
  memory, mask = pair.encode(tf.constant(INPUTS))
  *_, attention = pair.decode(tf.constant(targets), memory, mask, return_attention=True)
  own = [models[i].decode(tf.constant(targets), *models[i].encode(tf.constant(INPUTS)),
                          return_attention=True)[2] for i in (0, 1)]
  assert len(attention) == len(own[0]) + len(own[1]) == 2 + 3  # each member's layers
  for got, want in zip(attention, own[0] + own[1]):
    np.testing.assert_allclose(got.numpy(), want.numpy(), atol=1e-6)


@pytest.mark.heavy
def test_sampling_and_xla_run_an_ensemble(models):
  pair = Ensemble(models)
  beam2, greedy = SearchOptions(beam_size=2, extra_length=4), SearchOptions(beam_size=1,
                                                                             extra_length=4)
  fn = tf.function(lambda x: search.search(pair, x, beam2), jit_compile=True)
  ids, _ = fn(tf.constant(INPUTS))
  eager, _ = search.search(pair, tf.constant(INPUTS), beam2)
  np.testing.assert_array_equal(ids.numpy(), eager.numpy())
  argmax, _ = search.search(pair, tf.constant(INPUTS), greedy)
  cold, _ = search.search(pair, tf.constant(INPUTS),
                          greedy.replace(sampling=search.Sampling(0.0, 0, 1.0, 1)))
  np.testing.assert_array_equal(cold.numpy(), argmax.numpy())


@pytest.fixture(scope="module")
def two_runs(tmp_path_factory):
  base = tmp_path_factory.mktemp("ensemble_runs")
  for name in "ab":
    (base / name).mkdir()
  return (make_tiny_run(base / "a", seed=3, num_encoder_layers=1),
          make_tiny_run(base / "b", seed=4, num_encoder_layers=1, num_decoder_layers=1))


@pytest.mark.heavy
def test_t2t_decoder_and_exporter_take_several_runs(two_runs, tmp_path, capsys):
  a, b = two_runs
  source = tmp_path / "in.en"
  source.write_text("\n".join(TINY_SENTENCES) + "\n")
  out = tmp_path / "out.de"
  code = t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={a},{b}", f"--decode_from_file={source}",
      f"--decode_to_file={out}", "--decode_hparams=beam_size=2,extra_length=4,jit=false"])
  assert code == 0, capsys.readouterr().err[-2000:]
  run = runs.load(f"{a},{b}")
  assert run.checkpoint_path == f"{a}/ckpt-7,{b}/ckpt-7"
  assert [m["output_dir"] for m in run.info["ensemble"]] == [a, b]
  settings = parse_decode_hparams("beam_size=2,extra_length=4,jit=false")
  expected = translate.decode_lines(run.model, run.vocab, TINY_SENTENCES, settings)
  assert out.read_text().splitlines() == expected
  assert expected != translate.decode_lines(runs.load(a).model, run.vocab, TINY_SENTENCES,
                                          settings)

  export_dir = tmp_path / "export"
  code = t2t_bin.run_in_process(exporter_bin, [
      "t2t-exporter", f"--output_dir={a},{b}", f"--export_dir={export_dir}",
      "--decode_hparams=beam_size=2,extra_length=4,jit=false", "--export_version=1"])
  assert code == 0, capsys.readouterr().err[-2000:]
  loaded = tf.saved_model.load(str(export_dir / "1"))
  texts = loaded.signatures["serving_default"](inputs=tf.constant(TINY_SENTENCES))["outputs"]
  assert [t.decode() for t in texts.numpy()] == expected


@pytest.mark.parametrize("flags, message", [
    (["--decode_hparams=beam_size=2", "--checkpoint_path=A/ckpt-7"],
     "--checkpoint_path gives 1 checkpoints for 2 runs in --output_dir"),
    (["--engine=ctranslate2"], "--engine=ctranslate2 decodes one converted model"),
])
def test_decoder_refuses_in_one_line(two_runs, tmp_path, capsys, flags, message):
  a, b = two_runs
  source = tmp_path / "in.en"
  source.write_text("nine\n")
  code = t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={a},{b}", f"--decode_from_file={source}",
      *[f.replace("A", a) for f in flags]])
  err = capsys.readouterr().err.strip().splitlines()
  assert code != 0 and message in err[-1]


def test_exporter_needs_an_export_dir_and_runs_need_one_vocabulary(two_runs, tmp_path,
                                                                    capsys):
  a, b = two_runs
  assert t2t_bin.run_in_process(exporter_bin, ["t2t-exporter", f"--output_dir={a},{b}"]) != 0
  assert "names an ensemble: give --export_dir" in capsys.readouterr().err
  (tmp_path / "c").mkdir()
  other = make_tiny_run(tmp_path / "c", seed=5)
  vocabulary.train_sentencepiece(TINY_SENTENCES * 30 + ["neunzehn", "zwanzig"] * 30,
                                 os.path.join(other, runs.VOCAB_FILE), 60, num_threads=1)
  with pytest.raises(InputError, match=r"vocabulary \(.*\) differs from .*: the runs of an "
                                       "ensemble must share one vocabulary"):
    runs.load(f"{a},{other}")
