import itertools

import numpy as np
import pytest
import tensorflow as tf

from conftest import tiny_model
from t2t_keras.decoding import beam_search as bs
from t2t_keras.decoding import search
from t2t_keras.decoding.greedy import greedy_decode, greedy_loop, greedy_with_steps
from t2t_keras.decoding.search_common import Prepared, SearchOptions
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.models.transformer import shift_right

VOCAB = 23


@pytest.fixture(scope="module")
def model():
  m = tiny_model(VOCAB, seed=1)
  # Tie EOS's embedding to a common token's, so that some hypotheses end early
  # (all of sentence 2's, one of sentence 0's) and some run to their maximum length
  # (all of sentence 1's).
  emb = m.embedding.embeddings
  emb.assign(tf.tensor_scatter_nd_update(emb, [[1]], emb[7:8] * 0.9))
  return m


SRC = tf.constant([[3, 4, 5, 1, 0, 0], [6, 7, 8, 9, 10, 1], [11, 1, 0, 0, 0, 0]])


def _search(model, **kw):
  args = dict(beam_size=3, alpha=0.6, extra_length=5, max_decode_length=None, eos_id=1,
              stop_early=True, cached=True)
  args.update(kw)
  return search.search_with_steps(model, SRC, SearchOptions(**args))


def test_length_penalty_formula():
  for length, alpha in [(1, 0.6), (7, 0.6), (30, 1.0), (5, 0.0)]:
    assert float(bs.length_penalty(length, alpha)) == pytest.approx(((5 + length) / 6) ** alpha)
    assert float(bs.length_penalty(length, alpha, "length")) == pytest.approx(length ** alpha)
    options = SearchOptions(alpha=alpha, length_penalty_kind="length")
    assert float(options.length_penalty(length)) == pytest.approx(length ** alpha)
  with pytest.raises(ValueError, match="length_penalty_kind='avg': one of gnmt, length"):
    bs.length_penalty(3, 1.0, "avg")


def _short_or_long(i):
  """Log probs (vocab 7, EOS 1) by step i alone: step 0 EOS -1.2, token 3 -0.6; step 1
  token 3 -0.6, EOS -3.0; later steps EOS -0.6, token 3 -1.2; the rest of each step's mass
  on token 2 (and PAD, which the search rules out). The short output [EOS] has log prob
  -1.2, the long [3, 3, EOS] -1.8: at alpha 1 GNMT's penalty keeps the short one (-1.2 /
  1 against -1.8 / (8 / 6) = -1.35), length ** alpha the long one (-1.8 / 3 = -0.6)."""
  table = {0: {1: -1.2, 3: -0.6}, 1: {3: -0.6, 1: -3.0}, 2: {1: -0.6, 3: -1.2}}[min(i, 2)]
  probs = np.full(7, 1e-9)
  for token, log_prob in table.items():
    probs[token] = np.exp(log_prob)
  probs[2] = 1.0 - probs.sum()
  return np.log(probs)


def test_the_length_kind_keeps_the_longer_output_gnmt_the_shorter():
  batch, length = 2, 12
  def fn(ids, i, state):
    logits = tf.numpy_function(lambda i: _short_or_long(int(i)).astype(np.float32), [i],
                               tf.float32)
    return tf.tile(tf.reshape(logits, [1, 7]), [tf.shape(ids)[0], 1]), state
  p = Prepared(fn, {}, batch, length, tf.fill([batch], length))
  for kind, best, score in (("gnmt", [1], -1.2), ("length", [3, 3, 1], -1.8 / 3)):
    ids, scores, _ = bs.beam_search_loop(
        p, SearchOptions(beam_size=3, alpha=1.0, length_penalty_kind=kind))
    assert ids.numpy()[0, 0, :len(best)].tolist() == best, kind
    assert not ids.numpy()[0, 0, len(best):].any(), kind
    assert scores.numpy()[0, 0] == pytest.approx(score, abs=1e-5), kind


@pytest.mark.heavy
@pytest.mark.parametrize("prefix_only", [False, True])
def test_cached_equals_uncached_beam(model, prefix_only):
  ids, scores, steps = _search(model)
  finished = (ids.numpy() == 1).any(-1)
  assert finished[2].all() and finished[0].any() and not finished[0].all()
  assert not finished[1].any()
  ids2, scores2, steps2 = _search(model, cached=False, prefix_only=prefix_only)
  np.testing.assert_array_equal(ids.numpy(), ids2.numpy())
  np.testing.assert_allclose(scores.numpy(), scores2.numpy(), rtol=1e-5)
  assert int(steps) == int(steps2)


def test_cached_equals_uncached_greedy(model):
  options = SearchOptions(beam_size=1, extra_length=5, eos_id=1)
  a = greedy_with_steps(model, SRC, options)
  b = greedy_with_steps(model, SRC, options.replace(cached=False))
  np.testing.assert_array_equal(a[0].numpy(), b[0].numpy())
  np.testing.assert_allclose(a[1].numpy(), b[1].numpy(), rtol=1e-5)


def _rescore(model, src, ids, alpha, max_length, kind="gnmt"):
  """Teacher-forced log prob of each hypothesis / its length penalty (GNMT's, or
  length ** alpha for kind "length")."""
  ids = np.asarray(ids)
  logits, _ = model.decode(shift_right(tf.constant(ids)), *model.encode(src))
  log_probs = tf.nn.log_softmax(logits).numpy()
  out = []
  for row, lp in zip(ids, log_probs):
    length = int(np.argmax(row == 1)) + 1 if (row == 1).any() else max_length
    total = sum(lp[t, row[t]] for t in range(length))
    out.append(total / (length ** alpha if kind == "length" else ((5 + length) / 6) ** alpha))
  return np.array(out)


@pytest.mark.parametrize("kind", ["gnmt", "length"])
def test_scores_are_log_prob_over_length_penalty(model, kind):
  ids, scores, _ = _search(model, alpha=0.6, stop_early=False, length_penalty_kind=kind)
  for b in range(SRC.shape[0]):
    valid = scores[b].numpy() > -bs.INF / 2
    max_length = int(np.sum(SRC[b].numpy() != 0)) + 5
    expected = _rescore(model, SRC[b:b + 1].numpy().repeat(3, 0), ids[b].numpy(), 0.6,
                        max_length, kind)
    np.testing.assert_allclose(scores[b].numpy()[valid], expected[valid], rtol=1e-4)
    # n-best lists come best first.
    assert np.all(np.diff(scores[b].numpy()) <= 1e-6)


def test_beam_search_alone_refuses_one_beam(model):
  with pytest.raises(ValueError, match="beam_size >= 2, got 1; decoding.search.search runs greedy"):
    bs.beam_search(model, SRC, SearchOptions(beam_size=1))


def test_beam_one_equals_greedy(model):
  ids, scores = search.search(model, SRC, SearchOptions(beam_size=1, alpha=0.6,
                                                        extra_length=5))
  gids, gscores = greedy_decode(model, SRC, SearchOptions(beam_size=1, extra_length=5))
  np.testing.assert_array_equal(ids.numpy()[:, 0], gids.numpy())
  lengths = [int(np.argmax(r == 1)) + 1 if (r == 1).any() else int(np.sum(s != 0)) + 5
             for r, s in zip(gids.numpy(), SRC.numpy())]
  np.testing.assert_allclose(scores.numpy()[:, 0],
                             gscores.numpy() / ((5 + np.array(lengths)) / 6) ** 0.6, rtol=1e-5)


def _eos_at(step_of_eos, vocab=7):
  """A next-token function whose EOS is certain at decoding step `step_of_eos` (0-based)."""
  def fn(ids, i, state):
    n = tf.shape(ids)[0]
    base = tf.one_hot(tf.fill([n], 3 + (i % 3)), vocab) * 2.0  # a preferred non-EOS token
    eos = tf.one_hot(tf.fill([n], 1), vocab) * 100.0
    return tf.where(i >= step_of_eos, eos, base), state
  return fn


@pytest.mark.parametrize("eos_step", [0, 3])
def test_early_stopping_counts_steps(eos_step):
  batch, beam, length = 2, 4, 20
  lengths = tf.fill([batch], length)
  p = Prepared(_eos_at(eos_step), {}, batch, length, lengths)
  ids, scores, steps = bs.beam_search_loop(p, SearchOptions(beam_size=beam))
  assert int(steps) == eos_step + 1
  assert ids.numpy()[0, 0, eos_step] == 1 and not ids.numpy()[0, 0, eos_step + 1:].any()
  _, _, steps = bs.beam_search_loop(p, SearchOptions(beam_size=beam, stop_early=False))
  assert int(steps) == length
  _, _, steps = greedy_loop(p)
  assert int(steps) == eos_step + 1


def test_max_length_without_eos():
  # No end symbol (eos_id=-1): every sentence stops at its own maximum length.
  lengths = tf.constant([4, 9])
  ids, scores, steps = bs.beam_search_loop(Prepared(_eos_at(100), {}, 2, 12, lengths),
                                           SearchOptions(beam_size=3, alpha=0.6, eos_id=-1))
  assert int(steps) == 9
  assert ids.numpy()[0, 0].tolist() == [3, 4, 5, 3] + [0] * 8
  assert ids.numpy()[1, 0].tolist() == [3, 4, 5] * 3 + [0] * 3
  assert scores.numpy()[0, 0] == pytest.approx(
      float(tf.reduce_sum(tf.nn.log_softmax(tf.one_hot(3, 7) * 2.0)[3])) * 4
      / ((5 + 4) / 6) ** 0.6, rel=1e-4)


@pytest.mark.heavy
def test_sentence_result_does_not_depend_on_batch(model):
  ids, scores, _ = _search(model)
  for b in range(SRC.shape[0]):
    alone = tf.constant(SRC.numpy()[b:b + 1])
    ids1, scores1 = bs.beam_search(model, alone, SearchOptions(
        beam_size=3, extra_length=5, max_decode_length=ids.shape[-1]))
    np.testing.assert_array_equal(ids1.numpy()[0], ids.numpy()[b])
    np.testing.assert_allclose(scores1.numpy()[0], scores.numpy()[b], rtol=1e-5)


@pytest.mark.heavy
@pytest.mark.parametrize("jit", [False, True])
def test_compiles_in_tf_function(model, jit):
  options = SearchOptions(beam_size=3, extra_length=5)
  fn = tf.function(lambda x: bs.beam_search(model, x, options),
                   jit_compile=jit, input_signature=[tf.TensorSpec([None, None], tf.int32)])
  ids, scores = fn(SRC)
  eager_ids, eager_scores = bs.beam_search(model, SRC, options)
  np.testing.assert_array_equal(ids.numpy(), eager_ids.numpy())
  np.testing.assert_allclose(scores.numpy(), eager_scores.numpy(), rtol=1e-4)


def test_blocked_top_k_equals_top_k():
  rng = np.random.RandomState(3)
  for n, k in [(32000, 8), (4 * 1031, 8), (2048, 2), (500, 8)]:
    scores = tf.constant(rng.randn(5, n).astype("float32"))
    values, indices = bs.top_k(scores, k)
    want_values, want_indices = tf.math.top_k(scores, k)
    np.testing.assert_array_equal(values.numpy(), want_values.numpy())
    np.testing.assert_array_equal(indices.numpy(), want_indices.numpy())
  # The k best all in one block, and ties: values still exact.
  scores = np.full((2, 4096), -5.0, "float32")
  scores[0, 130:138] = np.arange(8)
  scores[1, :] = 1.0
  values, indices = bs.top_k(tf.constant(scores), 8)
  assert sorted(indices.numpy()[0].tolist()) == list(range(130, 138))
  assert values.numpy()[1].tolist() == [1.0] * 8


@pytest.mark.parametrize("stop_early", [False, True])
def test_beam_search_equals_exhaustive_search(stop_early):
  """A beam as wide as every prefix finds the best output of an exhaustive search
  (vocabulary 5 less PAD, outputs up to 3 ids, length penalty 0.6); run to the end it
  returns every finished output in exhaustive order. (t2t's early stop guarantees the best
  one only.)"""
  m = tiny_model(5, seed=4)
  src = tf.constant([[3, 1]])  # 2 non-pad ids: outputs up to 2 + 1 = 3 ids
  max_len, alpha, tokens = 3, 0.6, [2, 3, 4]  # every id but PAD (0) and EOS (1)
  candidates = [list(p) + [1] for n in range(max_len) for p in itertools.product(tokens, repeat=n)]
  buffers = np.array([c + [0] * (max_len - len(c)) for c in candidates], np.int32)
  logits, _ = m.decode(shift_right(tf.constant(buffers)),
                       *m.encode(tf.repeat(src, len(candidates), axis=0)))
  log_probs = tf.nn.log_softmax(logits).numpy()
  exhaustive = sorted(
      ((sum(log_probs[i, t, c[t]] for t in range(len(c))) / ((5 + len(c)) / 6) ** alpha, c)
       for i, c in enumerate(candidates)), key=lambda x: -x[0])
  beam = len(tokens) ** max_len
  ids, scores, _ = search.search_with_steps(m, src, SearchOptions(
      beam_size=beam, alpha=alpha, extra_length=1, eos_id=1, stop_early=stop_early))
  found = [(float(s), [int(x) for x in row]) for s, row in zip(scores[0].numpy(), ids[0].numpy())
           if s > -bs.INF / 2]
  by_output = {tuple(c): score for score, c in exhaustive}
  for score, row in found:  # every returned output carries its exhaustive score
    output = tuple(row[:row.index(1) + 1])
    assert score == pytest.approx(by_output[output], abs=1e-4)
  assert found[0][0] == pytest.approx(exhaustive[0][0], abs=1e-4)  # the best is found
  assert found[0][1][:len(exhaustive[0][1])] == exhaustive[0][1]
  if not stop_early:  # run to the end: every finished output, in exhaustive order
    assert len(found) == len(candidates)
    # Within 1e-4, not rounded to 4 places: a score near a rounding boundary
    # (-2.38425) rounded apart on one CPU's kernels.
    np.testing.assert_allclose([x for x, _ in found], [x for x, _ in exhaustive], atol=1e-4)


def test_a_forbidden_eos_is_never_a_finished_hypothesis():
  """One real hypothesis (token 3 x 15, then EOS), every other token at -INF, as a
  constraint leaves them: masked EOS extensions must not count as finished once the
  length penalty exceeds 2 (alpha 1: after 8 tokens), and the search stops right
  after the real one ends."""
  vocab, forced, beam = 6, 15, 2

  def fn(ids, i, state):
    del ids
    token = tf.where(i < forced, 3, 1)
    logits = tf.where(tf.equal(tf.range(vocab), token), 0.0, -bs.INF)
    return tf.tile(logits[None], [beam, 1]), state

  ids, scores, steps = bs.beam_search_loop(Prepared(fn, {}, 1, 40, tf.constant([40])),
                                           SearchOptions(beam_size=beam, alpha=1.0))
  assert list(ids.numpy()[0, 0, :forced + 1]) == [3] * forced + [1]
  assert scores.numpy()[0, 0] > -1.0 and scores.numpy()[0, 1] <= -bs.INF / 2  # empty slot
  assert int(steps) == forced + 1


@pytest.mark.heavy
@pytest.mark.parametrize("shards,rows,jit", [
    (2, 3, True), pytest.param(3, 3, False, marks=pytest.mark.slow),
    pytest.param(4, 3, False, marks=pytest.mark.slow)])
def test_sharded_search_equals_the_whole_batch(model, shards, rows, jit):
  """Under XLA where two slices of different shapes are compiled apart (2 of 3 rows); the
  other cases in graph mode (the slicing does not depend on XLA, and every export test
  runs the default two shards compiled). Those two are slow: test_export.py's
  test_mixed_batch_equals_one_by_one runs the graph export's two shards on batches of 1
  (fewer rows than shards) and of 4 and 3, and test_sharded_search_runs_the_slices the
  slicing in graph mode."""
  from t2t_keras.decoding.spec import DecodingSpec
  settings = f"extra_length=5,jit={str(jit).lower()}"
  whole = DecodingSpec(None, parse_decode_hparams(f"{settings},search_shards=1")).search_fn(
      model, None)
  sharded = DecodingSpec(
      None, parse_decode_hparams(f"{settings},search_shards={shards}")).search_fn(model, None)
  src = SRC[:rows]
  ids, scores = whole(src)
  got_ids, got_scores = sharded(src)  # 4 shards of 3 rows: searched whole
  # Each slice's loop stops early on its own sentences; the results are the same.
  np.testing.assert_array_equal(got_ids, ids)
  np.testing.assert_allclose(got_scores, scores, rtol=1e-5)
  assert ids.shape[0] == rows


def test_sharded_search_runs_the_slices():
  from t2t_keras.decoding.sharding import sharded_search
  seen = []

  def search(inputs):
    seen.append(inputs.shape)
    return inputs[:, None, :] * 2, tf.cast(inputs[:, :1], tf.float32)

  fn = tf.function(sharded_search(search, 3))
  ids, scores = fn(tf.reshape(tf.range(14), [7, 2]))
  np.testing.assert_array_equal(ids[:, 0], np.arange(14).reshape(7, 2) * 2)
  np.testing.assert_array_equal(scores[:, 0], np.arange(0, 14, 2))
  assert len(seen) == 4  # three slices, and the whole batch in the small-batch branch
  assert sharded_search(search, 1) is search


def test_search_shards_must_not_be_negative():
  from t2t_keras.hparams_lib import HParamsError
  with pytest.raises(HParamsError, match="search_shards=-1: must be >= 0"):
    parse_decode_hparams("search_shards=-1")


def test_pad_is_never_an_output_and_scores_stay_the_models_log_probs():
  """A next-token function that prefers PAD (logit 5) over token 3 (logit 4): both searches
  take 3, and its score is log_softmax over the whole vocabulary (PAD's mass included), as
  `scoring` computes it. Before PAD was ruled out, an untrained pre-norm model decoded PAD
  and its beam score disagreed with scoring's."""
  vocab, length = 6, 3

  def fn(ids, i, state):
    n = tf.shape(ids)[0]
    logits = tf.tile(tf.constant([[5.0, -1.0, 0.0, 4.0, 0.0, 0.0]]), [n, 1])
    return logits, state

  log_p3 = float(tf.nn.log_softmax([5.0, -1.0, 0.0, 4.0, 0.0, 0.0])[3])
  lengths = tf.fill([2], length)
  p = Prepared(fn, {}, 2, length, lengths)
  ids, scores, _ = greedy_loop(p)
  assert ids.numpy().tolist() == [[3, 3, 3]] * 2
  np.testing.assert_allclose(scores.numpy(), [3 * log_p3] * 2, rtol=1e-6)
  ids, scores, _ = bs.beam_search_loop(p, SearchOptions(beam_size=2, alpha=0.0))
  assert ids.numpy()[:, 0].tolist() == [[3, 3, 3]] * 2
  assert not (ids.numpy()[:, 1] == 0).all()  # the second beam holds real tokens too
  np.testing.assert_allclose(scores.numpy()[:, 0], [3 * log_p3] * 2, rtol=1e-6)


@pytest.mark.parametrize("prefix_only", [False, True])
def test_one_beam_uncached_equals_cached(model, prefix_only):
  """search_with_steps at beam 1 (greedy) passes prefix_only to the uncached decoder too."""
  options = SearchOptions(beam_size=1, alpha=0.6, extra_length=5, eos_id=1)
  ids, scores, steps = search.search_with_steps(model, SRC, options)
  ids2, scores2, steps2 = search.search_with_steps(
      model, SRC, options.replace(cached=False, prefix_only=prefix_only))
  np.testing.assert_array_equal(ids.numpy(), ids2.numpy())
  np.testing.assert_allclose(scores.numpy(), scores2.numpy(), rtol=1e-5)
  assert int(steps) == int(steps2)
