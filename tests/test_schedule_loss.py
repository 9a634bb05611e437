import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.training.loss import smoothed_cross_entropy, smoothed_xent, token_metrics
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
