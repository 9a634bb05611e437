import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.training import loss as loss_lib
from t2t_keras.training.loss import (projected_cross_entropy, smoothed_cross_entropy,
                                     smoothed_xent, token_metrics)
from t2t_keras.training.schedule import WarmupRsqrtSchedule, make_optimizer


def test_schedule_matches_formula_and_peaks_at_warmup():
  d, warmup = 512, 4000
  sched = WarmupRsqrtSchedule(d, warmup)
  for step in (1, 100, 3999, 4000, 4001, 100000):
    expected = d ** -0.5 * min(step ** -0.5, step * warmup ** -1.5)
    assert float(sched(step - 1)) == pytest.approx(expected, rel=1e-5)
  values = [float(sched(i)) for i in range(0, 8000, 10)]
  assert int(np.argmax(values)) * 10 + 1 in range(warmup - 10, warmup + 10)
  assert float(WarmupRsqrtSchedule(d, warmup, constant=2.0)(99)) == pytest.approx(
      2 * float(sched(99)))


def test_optimizer_is_the_papers_adam():
  opt = make_optimizer(registry.hparams("transformer_base"))
  assert (opt.beta_1, opt.beta_2, opt.epsilon) == (0.9, 0.98, 1e-9)
  assert isinstance(opt.learning_rate_schedule if hasattr(opt, "learning_rate_schedule")
                    else opt._learning_rate, WarmupRsqrtSchedule)


def _numpy_smoothed(logits, targets, eps):
  v = logits.shape[-1]
  logp = logits - logits.max(-1, keepdims=True)
  logp = logp - np.log(np.exp(logp).sum(-1, keepdims=True))
  q = np.full(logits.shape, eps / (v - 1))
  np.put_along_axis(q, targets[..., None], 1 - eps, -1)
  xent = -(q * logp).sum(-1)
  w = (targets != 0).astype(float)
  return (xent * w).sum(), w.sum()


@pytest.mark.parametrize("eps", [0.0, 0.1, 0.2])
def test_label_smoothing_against_numpy(eps):
  rng = np.random.RandomState(0)
  logits = rng.randn(3, 5, 11).astype("float32") * 3
  targets = rng.randint(1, 11, size=(3, 5)).astype("int32")
  targets[1, 3:] = 0
  got_sum, got_n = smoothed_cross_entropy(tf.constant(logits), tf.constant(targets), eps)
  ref_sum, ref_n = _numpy_smoothed(logits.astype("float64"), targets, eps)
  assert float(got_n) == ref_n == 13
  assert float(got_sum) == pytest.approx(ref_sum, rel=1e-5)


def test_token_metrics_counts_non_pad_only():
  logits = tf.constant([[[0.0, 0.0, 5.0], [0.0, 5.0, 0.0], [5.0, 0.0, 0.0]]])
  targets = tf.constant([[2, 2, 0]])
  xent, correct, n = token_metrics(logits, targets)
  assert (float(correct), float(n)) == (1.0, 2.0)
  p = np.exp(5) / (np.exp(5) + 2)
  assert float(xent) == pytest.approx(-np.log(p) - np.log(1 - p) + np.log(2) - 0.0, rel=1e-4)


@pytest.mark.parametrize("eps", [0.0, 0.1])
def test_label_smoothing_gradient_is_p_minus_q(eps):
  """The fused loss's hand-written gradient equals autodiff of the textbook formula."""
  rng = np.random.RandomState(1)
  logits = tf.constant(rng.randn(2, 4, 9).astype("float32") * 2)
  targets = tf.constant(rng.randint(0, 9, size=(2, 4)).astype("int32"))
  weights = tf.constant(rng.rand(8).astype("float32"))

  with tf.GradientTape(persistent=True) as tape:
    tape.watch(logits)
    flat = tf.reshape(logits, [-1, 9])
    fused = tf.reduce_sum(smoothed_xent(flat, tf.reshape(targets, [-1]), eps) * weights)
    q = tf.one_hot(tf.reshape(targets, [-1]), 9, on_value=1.0 - eps, off_value=eps / 8)
    reference = tf.reduce_sum(-tf.reduce_sum(q * tf.nn.log_softmax(flat), -1) * weights)
  assert float(fused) == pytest.approx(float(reference), rel=1e-5)
  np.testing.assert_allclose(tape.gradient(fused, logits).numpy(),
                             tape.gradient(reference, logits).numpy(), atol=1e-6)


def test_smoothed_cross_entropy_with_unknown_shapes():
  """As traced with relaxed shapes (reduce_retracing, strategies): no static vocab size."""
  spec = tf.TensorSpec([None, None, None], tf.float32)
  fn = tf.function(lambda z, t: smoothed_cross_entropy(z, t, 0.1),
                   input_signature=[spec, tf.TensorSpec([None, None], tf.int32)])
  rng = np.random.RandomState(2)
  logits = rng.randn(2, 3, 7).astype("float32")
  targets = rng.randint(0, 7, size=(2, 3)).astype("int32")
  got = fn(tf.constant(logits), tf.constant(targets))
  want = _numpy_smoothed(logits.astype("float64"), targets, 0.1)
  assert float(got[0]) == pytest.approx(want[0], rel=1e-5) and float(got[1]) == want[1]


@pytest.mark.parametrize("shape,compact,jit", [
    ((3, 5), True, False), ((3, 5), False, False), ((3, 5), False, True),
    ((4, 8), True, False), ((4, 8), False, True), ((2, 9), True, False), ((1, 1), True, False)])
def test_projected_cross_entropy_equals_logits_then_loss(monkeypatch, shape, compact, jit):
  """Value and both gradients as smoothed_cross_entropy(hidden @ table^T): full chunks,
  a padded partial chunk, no full chunk, all padding; graph, XLA and compacted rows."""
  monkeypatch.setattr(loss_lib, "CHUNK_ROWS", 8)
  rng = np.random.RandomState(3)
  hidden = tf.constant(rng.randn(*shape, 6).astype("float32"))
  table = tf.constant(rng.randn(13, 6).astype("float32"))
  targets = rng.randint(1, 13, size=shape).astype("int32")
  targets[0, -2:] = 0
  targets = tf.constant(targets)

  @tf.function(jit_compile=jit)
  def both(hidden, table, targets):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([hidden, table])
      got, got_n = projected_cross_entropy(hidden, table, targets, 0.1, compact=compact)
      want, want_n = smoothed_cross_entropy(tf.matmul(hidden, table, transpose_b=True),
                                            targets, 0.1)
      got3, want3 = got * 3.0, want * 3.0  # a non-unit incoming gradient
    return (got, got_n, want, want_n, tape.gradient(got3, [hidden, table]),
            tape.gradient(want3, [hidden, table]))

  got, got_n, want, want_n, got_grads, want_grads = both(hidden, table, targets)
  assert float(got_n) == float(want_n) == np.count_nonzero(targets.numpy())
  assert float(got) == pytest.approx(float(want), rel=1e-5, abs=1e-5)
  for g, w in zip(got_grads, want_grads):
    np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5)


def test_projected_cross_entropy_with_unknown_shapes_and_bfloat16(monkeypatch):
  """As the training step traces it (one trace for every batch shape), and in bf16."""
  monkeypatch.setattr(loss_lib, "CHUNK_ROWS", 16)
  rng = np.random.RandomState(4)
  fn = tf.function(lambda h, w, t: projected_cross_entropy(h, w, t, 0.1),
                   input_signature=[tf.TensorSpec([None, None, 8], tf.bfloat16),
                                    tf.TensorSpec([11, 8], tf.bfloat16),
                                    tf.TensorSpec([None, None], tf.int32)])
  for shape in ((2, 3), (5, 7)):
    hidden = rng.randn(*shape, 8).astype("float32")
    table = rng.randn(11, 8).astype("float32")
    targets = rng.randint(0, 11, size=shape).astype("int32")
    got, n = fn(tf.constant(hidden, tf.bfloat16), tf.constant(table, tf.bfloat16),
                tf.constant(targets))
    logits = tf.cast(tf.constant(hidden, tf.bfloat16), tf.float32) @ tf.transpose(
        tf.cast(tf.constant(table, tf.bfloat16), tf.float32))
    want, want_n = _numpy_smoothed(logits.numpy().astype("float64"), targets, 0.1)
    assert float(n) == want_n
    assert float(got) == pytest.approx(want, rel=2e-2)


def test_projected_cross_entropy_float16_gradients_keep_small_entries():
  """In float16 the gradients are formed in float32 before the loss scale reaches them:
  the smoothing's share 0.1 / (V - 1) of p - q is 1e-6 here, a float16 subnormal. A
  vocabulary row whose softmax probability is ~0 gets exactly -off * scale * sum of h."""
  rng = np.random.RandomState(5)
  vocab, scale, n = 100000, 2.0 ** 12, 16
  table = rng.randn(vocab, 8) * 3
  table[7] = 0.0  # logit 0 while the largest are ~35: p ~ 1e-15; never a label
  hidden = tf.constant(rng.randn(2, 8, 8), tf.float16)
  targets = tf.constant(rng.randint(10, vocab, size=(2, 8)).astype("int32"))
  table = tf.constant(table, tf.float16)
  with tf.GradientTape() as tape:
    tape.watch(table)
    loss, tokens = projected_cross_entropy(hidden, table, targets, 0.1)
    scaled = loss * scale / tokens  # as the trainer with a float16 loss scale
  got = tf.cast(tape.gradient(scaled, table)[7], tf.float32).numpy()
  off = 0.1 / (vocab - 1)
  want = -off * scale / n * hidden.numpy().astype("float64").reshape(-1, 8).sum(0)
  assert float(tokens) == n
  np.testing.assert_allclose(got, want, rtol=2e-3)


@pytest.mark.parametrize("jit", [False, True])
def test_projected_cross_entropy_with_a_logit_bias_and_pad_outside_the_softmax(
    monkeypatch, jit):
  """A bias on the logits (Marian's) with PAD's masked, the smoothing over the other V - 1
  ids: value and the gradients of hidden, table and bias against -sum q log softmax(z)
  written out, q putting 1 - eps on the label and eps / (V - 2) on every other non-PAD id."""
  monkeypatch.setattr(loss_lib, "CHUNK_ROWS", 8)
  rng = np.random.RandomState(5)
  hidden = tf.constant(rng.randn(3, 7, 6).astype("float32"))
  table = tf.constant(rng.randn(13, 6).astype("float32"))
  learned = tf.constant(rng.randn(13).astype("float32"))
  mask = tf.one_hot(0, 13, on_value=-1e9, off_value=0.0)
  targets = rng.randint(1, 13, size=(3, 7)).astype("int32")
  targets[1, -3:] = 0
  eps, v = 0.1, 13
  q = np.full((3, 7, v), eps / (v - 2), np.float32)
  q[..., 0] = 0.0
  np.put_along_axis(q, targets[..., None], 1 - eps, -1)
  weights = (targets != 0).astype(np.float32)

  @tf.function(jit_compile=jit)
  def both(hidden, table, learned):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([hidden, table, learned])
      got, _ = projected_cross_entropy(hidden, table, targets, eps, compact=False,
                                       bias=learned + mask, skip_pad=True)
      z = tf.matmul(hidden, table, transpose_b=True) + learned + mask
      want = -tf.reduce_sum(tf.reduce_sum(q * tf.nn.log_softmax(z), -1) * weights)
      got3, want3 = got * 3.0, want * 3.0  # a non-unit incoming gradient
    return (got, want, tape.gradient(got3, [hidden, table, learned]),
            tape.gradient(want3, [hidden, table, learned]))

  got, want, got_grads, want_grads = both(hidden, table, learned)
  assert float(got) == pytest.approx(float(want), rel=1e-5)
  for g, w in zip(got_grads, want_grads):
    np.testing.assert_allclose(g.numpy(), w.numpy(), atol=1e-5)
  assert abs(float(got_grads[2][0])) < 1e-6  # PAD's bias: no pull from the smoothing
