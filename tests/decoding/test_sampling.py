"""Sampling (decode hparams sampling_method=random): the hash, the filters, greedy as the
limit, reproducibility, and sampled frequencies against the model's softmax."""

import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_model
from t2t_keras.decoding import translate, sampling, search
from t2t_keras.decoding.search_common import SearchOptions, prepare, step_log_probs
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.hparams_lib import HParamsError

VOCAB = 12
Z_999 = 3.090  # the standard normal's 0.999 quantile: every test below rejects at p < 0.001


def chi_square_critical(df):
  """The 0.999 quantile of chi-square(df), Wilson-Hilferty's approximation."""
  return df * (1 - 2 / (9 * df) + Z_999 * (2 / (9 * df)) ** 0.5) ** 3


def ks_uniform_statistic(x):
  """Kolmogorov-Smirnov distance of samples x from the uniform law on (0, 1)."""
  x = np.sort(np.asarray(x, np.float64))
  n = len(x)
  return max(np.max(np.arange(1, n + 1) / n - x), np.max(x - np.arange(n) / n))


@pytest.fixture(scope="module")
def model():
  m = tiny_model(VOCAB, seed=11)
  # Sharper than a fresh model's near-uniform softmax, so the frequencies test means something.
  m.embedding.embeddings.assign(m.embedding.embeddings * 4.0)
  return m


INPUTS = np.array([[3, 4, 5, 1, 0, 0], [7, 1, 0, 0, 0, 0], [9, 8, 7, 6, 2, 1]], np.int32)


def _mix32_numpy(x):
  x = np.asarray(x, np.uint32)
  with np.errstate(over="ignore"):
    x = x ^ (x >> np.uint32(16))
    x = (x * np.uint32(0x7feb352d)).astype(np.uint32)
    x = x ^ (x >> np.uint32(15))
    x = (x * np.uint32(0x846ca68b)).astype(np.uint32)
    return x ^ (x >> np.uint32(16))


def test_mix32_is_lowbias32():
  x = np.array([0, 1, 2, 12345, 2**31, 2**32 - 1], np.uint32)
  np.testing.assert_array_equal(sampling.mix32(tf.constant(x)).numpy(), _mix32_numpy(x))
  assert _mix32_numpy([1])[0] != _mix32_numpy([2])[0]


def test_noise_is_uniform_and_uncorrelated():
  keys = sampling.sentence_keys(tf.constant(INPUTS), 5)
  u = np.concatenate([sampling.uniform_noise(keys, step, 4096).numpy() for step in range(8)])
  assert u.min() > 0 and u.max() < 1
  flat = u.ravel()  # 3 rows x 8 steps x 4096 tokens
  assert ks_uniform_statistic(flat) < 1.95 / len(flat) ** 0.5  # Kolmogorov's 0.999 quantile
  assert abs(np.corrcoef(flat[:-1], flat[1:])[0, 1]) < 0.02  # neighbouring tokens
  assert abs(np.corrcoef(u[0], u[3])[0, 1]) < 0.05  # the same row at steps 0 and 1


def test_sentence_keys_depend_on_the_ids_and_seed_not_the_padding():
  keys = sampling.sentence_keys(tf.constant(INPUTS), 5).numpy()
  wider = np.pad(INPUTS, [[0, 0], [0, 3]])
  np.testing.assert_array_equal(sampling.sentence_keys(tf.constant(wider), 5).numpy(), keys)
  assert len(set(keys.tolist())) == 3
  assert (sampling.sentence_keys(tf.constant(INPUTS), 6).numpy() != keys).all()
  swapped = INPUTS.copy()
  swapped[0, :2] = swapped[0, 1::-1]
  assert sampling.sentence_keys(tf.constant(swapped), 5).numpy()[0] != keys[0]


def test_top_k_and_top_p_filters_by_hand():
  log_probs = tf.math.log(tf.constant([[0.5, 0.3, 0.15, 0.05], [0.05, 0.15, 0.3, 0.5]]))
  kept = lambda x: (x.numpy() > -1e6).astype(int).tolist()  # noqa: E731
  assert kept(sampling.filter_top_k(log_probs, 2)) == [[1, 1, 0, 0], [0, 0, 1, 1]]
  # Kept while the mass before a token is < p: 0.79 keeps {0.5, 0.3}; 0.81 adds 0.15.
  assert kept(sampling.filter_top_p(log_probs, 0.79)) == [[1, 1, 0, 0], [0, 0, 1, 1]]
  assert kept(sampling.filter_top_p(log_probs, 0.81)) == [[1, 1, 1, 0], [0, 1, 1, 1]]
  assert kept(sampling.filter_top_p(log_probs, 0.1)) == [[1, 0, 0, 0], [0, 0, 0, 1]]
  assert kept(sampling.filter_top_p(log_probs, 1.0)) == [[1, 1, 1, 1], [1, 1, 1, 1]]


def _nucleus_reference(log_probs, p):
  """The nucleus by the definition, in float64 NumPy: sort, keep while the mass before
  a token is < p, and every token tied with the last kept one."""
  kept = np.zeros(log_probs.shape, bool)
  for row, lp in enumerate(np.asarray(log_probs, np.float64)):
    order = np.argsort(-lp, kind="stable")
    before = np.concatenate([[0.0], np.cumsum(np.exp(lp[order]))[:-1]])
    least = lp[order][before < p].min()
    kept[row] = lp >= least
  return kept


@pytest.mark.parametrize("jit", [False, True])
def test_nucleus_by_bisection_equals_sorting_by_the_definition(jit):
  """Rows of 2,048 log probs, peaked and flat, with ties, at several p: the tokens kept
  are those of a float64 sort by the definition, eagerly and under XLA."""
  rng = np.random.RandomState(3)
  logits = np.concatenate([rng.normal(size=(6, 2048)) * 4.0, rng.normal(size=(2, 2048)) * 0.3,
                           np.round(rng.normal(size=(2, 2048)))])  # the last rows: ties
  log_probs = tf.nn.log_softmax(tf.constant(logits, tf.float32))
  fn = tf.function(sampling.filter_top_p, jit_compile=True) if jit else sampling.filter_top_p
  for p in (0.05, 0.3, 0.9, 0.99):
    kept = fn(log_probs, p).numpy() > -1e6
    np.testing.assert_array_equal(kept, _nucleus_reference(log_probs.numpy(), p))
  assert 1 < kept.sum(axis=-1).min() < 2048  # p=0.99 kept more than one and not all


def _search(model, sampling_settings, beam_size=1, inputs=INPUTS, **kwargs):
  kwargs.setdefault("extra_length", 6)
  ids, scores = search.search(model, tf.constant(inputs), SearchOptions(
      beam_size=beam_size, sampling=sampling_settings, **kwargs))
  return ids.numpy(), scores.numpy()


@pytest.mark.parametrize("settings", [search.Sampling(0.0, 0, 1.0, 1),
                                      search.Sampling(1.3, 1, 1.0, 1),
                                      search.Sampling(0.7, 0, 1e-6, 2)])
def test_the_greedy_limits_equal_greedy_search(model, settings):
  """Temperature 0, top-k 1 or a tiny nucleus leave one choice: greedy's, with its scores."""
  greedy_ids, greedy_scores = _search(model, None)
  ids, scores = _search(model, settings)
  np.testing.assert_array_equal(ids, greedy_ids)
  np.testing.assert_allclose(scores, greedy_scores, rtol=1e-6)


@pytest.mark.heavy
def test_a_seed_repeats_and_a_sentence_samples_alike_in_any_batch(model):
  settings = search.Sampling(1.0, 0, 1.0, 7)
  ids, scores = _search(model, settings, beam_size=3)
  again, _ = _search(model, settings, beam_size=3)
  np.testing.assert_array_equal(ids, again)
  alone, alone_scores = _search(model, settings, beam_size=3, inputs=INPUTS[1:2, :2])
  np.testing.assert_array_equal(alone[0, :, :alone.shape[2]], ids[1, :, :alone.shape[2]])
  np.testing.assert_allclose(alone_scores[0], scores[1], rtol=1e-5)
  other, _ = _search(model, search.Sampling(1.0, 0, 1.0, 8), beam_size=3)
  assert not np.array_equal(other, ids)
  assert (np.diff(scores, axis=1) <= 0).all()  # samples best first


@pytest.mark.heavy
def test_xla_gives_the_same_samples(model):
  settings = search.Sampling(0.9, 5, 0.95, 3)
  options = SearchOptions(beam_size=2, extra_length=6, sampling=settings)
  fn = tf.function(lambda x: search.search(model, x, options), jit_compile=True)
  ids, scores = fn(tf.constant(INPUTS))
  eager_ids, eager_scores = _search(model, settings, beam_size=2)
  np.testing.assert_array_equal(ids.numpy(), eager_ids)
  np.testing.assert_allclose(scores.numpy(), eager_scores, rtol=1e-5)


@pytest.mark.parametrize("temperature,top_k,top_p", [(1.0, 0, 1.0), (0.6, 0, 1.0),
                                                     (1.0, 4, 1.0), (1.0, 0, 0.7)])
def test_first_token_frequencies_match_the_softmax(model, temperature, top_k, top_p):
  """4,000 samples of one sentence's first token against softmax(log p / T), filtered."""
  n = 4000
  source = INPUTS[:1]
  p = prepare(model, tf.constant(source), SearchOptions(beam_size=1, extra_length=1))
  logits, _ = p.fn(tf.zeros([1, 2], tf.int32), tf.constant(0), p.state)
  log_probs = tf.nn.log_softmax(step_log_probs(logits) / temperature)
  if top_k:
    log_probs = sampling.filter_top_k(log_probs, top_k)
  if top_p < 1:
    log_probs = sampling.filter_top_p(log_probs, top_p)
  expected = tf.nn.softmax(log_probs).numpy()[0] * n
  ids, _ = _search(model, search.Sampling(temperature, top_k, top_p, 1), beam_size=n,
                   inputs=source, max_decode_length=1)
  counts = np.bincount(ids[0, :, 0], minlength=VOCAB)
  support = expected > 0.5
  assert counts[~support].sum() == 0  # nothing outside the filtered support
  assert counts[0] == 0  # never PAD
  chi2 = np.sum((counts[support] - expected[support]) ** 2 / expected[support])
  assert chi2 < chi_square_critical(support.sum() - 1)
  assert support.sum() >= 2


def test_decode_hparams_validate_the_sampling_keys():
  settings = parse_decode_hparams("sampling_method=random,sampling_temp=0.5,"
                                  "sampling_keep_top_k=3")
  assert SearchOptions.from_settings(settings.search).sampling == search.Sampling(0.5, 3, 1.0, 1)
  assert SearchOptions.from_settings(parse_decode_hparams("").search).sampling is None
  with pytest.raises(HParamsError, match="sampling_method='multinomial': must be one of "
                                         "argmax, random"):
    parse_decode_hparams("sampling_method=multinomial")
  with pytest.raises(HParamsError, match=r"sampling_keep_top_p=1.5: must be in \(0, 1\]"):
    parse_decode_hparams("sampling_keep_top_p=1.5")
  with pytest.raises(HParamsError, match="sampling_temp=-1.0: must be >= 0"):
    parse_decode_hparams("sampling_temp=-1.0")


@pytest.mark.heavy
def test_t2t_decoder_samples_a_file_alike_in_any_batching(tmp_path, capsys):
  """The decoder (length-sorted batches, search shards; XLA is test_xla_gives_the_same_samples')
  writes each line's samples; a second run with another batch size and no shards writes the
  same file; another seed, another file."""
  from conftest import TINY_SENTENCES, make_tiny_run  # pylint: disable=import-outside-toplevel
  from t2t_keras import bin as t2t_bin  # pylint: disable=import-outside-toplevel
  from t2t_keras.bin import decoder as decoder_bin  # pylint: disable=import-outside-toplevel
  run_dir = make_tiny_run(tmp_path)
  source = tmp_path / "mono.en"
  source.write_text("\n".join(TINY_SENTENCES) + "\n")

  def decode(name, hparams):
    out = tmp_path / name
    code = t2t_bin.run_in_process(decoder_bin, [
        "t2t-decoder", f"--output_dir={run_dir}", f"--decode_from_file={source}",
        f"--decode_to_file={out}", "--decode_hparams=sampling_method=random,extra_length=5,"
        "return_beams=true,jit=false," + hparams])
    assert code == 0, capsys.readouterr().err[-2000:]
    return [line.split("\t") for line in out.read_text().splitlines()]

  first = decode("a", "beam_size=3,batch_size=4")
  assert len(first) == len(TINY_SENTENCES) and all(len(row) == 6 for row in first)
  scores = [[float(x) for x in row[1::2]] for row in first]
  assert all(s == sorted(s, reverse=True) for s in scores)
  assert decode("b", "beam_size=3,batch_size=2,search_shards=1") == first
  assert decode("c", "beam_size=3,batch_size=4,sampling_seed=2") != first
