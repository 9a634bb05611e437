"""R-Drop (`--hparams=rdrop_alpha=A`): the batch runs twice through dropout and the two
output distributions' symmetric KL is added (`loss.projected_rdrop_loss`, `step.loss_sum`),
checked against a NumPy formula written from fairseq's
`label_smoothed_cross_entropy_with_rdrop` (`compute_kl_loss`: kl_div(log p, q) +
kl_div(log q, p), halved, pad positions left out), its hand-written gradient against
autodiff of that formula, and through the model and the trainer.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.models.transformer import Transformer
from t2t_keras.training import loss as loss_lib
from t2t_keras.training import step

VOCAB = 50
INPUTS = np.array([[5, 17, 9, 33, 2, 41, 1], [7, 3, 28, 1, 0, 0, 0],
                   [12, 1, 0, 0, 0, 0, 0]], np.int32)
TARGETS = np.array([[8, 21, 1, 0, 0, 0], [44, 6, 19, 30, 11, 1],
                    [9, 25, 4, 1, 0, 0]], np.int32)
ALPHA, EPS = 2.5, 0.1


def _numpy_objective(hidden, table, targets, bias, eps=EPS, alpha=ALPHA):
  """fairseq's R-Drop objective in float64, halved: per non-pad position the mean of the
  two copies' label-smoothed cross-entropy (1 - eps on the label, eps / (V - 1) on every
  other id) plus alpha / 2 times (KL(Q || P) + KL(P || Q)) / 2, P the first copy's
  softmax, Q the second's. Returns (objective, the KL term's sum alone)."""
  b, v = targets.shape[0], table.shape[0]
  logits = np.einsum("btd,vd->btv", hidden.astype(np.float64), table.astype(np.float64))
  logits = logits + (0.0 if bias is None else bias.astype(np.float64))
  logits -= logits.max(-1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  lp, lq = log_probs[:b], log_probs[b:]
  kl_qp = (np.exp(lq) * (lq - lp)).sum(-1)
  kl_pq = (np.exp(lp) * (lp - lq)).sum(-1)
  q = np.full(lp.shape, eps / (v - 1))
  np.put_along_axis(q, targets[..., None], 1 - eps, -1)
  xent = -0.5 * ((q * lp).sum(-1) + (q * lq).sum(-1))
  weights = targets != 0
  kl = float(((kl_qp + kl_pq) / 2 * weights).sum())
  return float((xent * weights).sum()) + 0.5 * alpha * kl, kl


def _tf_objective(hidden, table, targets):
  """The same objective in plain TensorFlow ops (log_softmax, no custom gradient): its
  autodiff is the reference for the hand-written gradient."""
  b = targets.shape[0]
  log_probs = tf.nn.log_softmax(tf.einsum("btd,vd->btv", hidden, table))
  lp, lq = log_probs[:b], log_probs[b:]
  kl = 0.5 * tf.reduce_sum((tf.exp(lp) - tf.exp(lq)) * (lp - lq), -1)
  v = table.shape[0]
  q = tf.one_hot(targets, v, 1 - EPS, EPS / (v - 1), dtype=hidden.dtype)
  xent = -0.5 * tf.reduce_sum(q * (lp + lq), -1)
  weights = tf.cast(targets != 0, hidden.dtype)
  return tf.reduce_sum((xent + 0.5 * ALPHA * kl) * weights)


@pytest.mark.parametrize("compact,jit,with_bias", [
    (True, False, False), (True, False, True), (False, False, False), (False, True, True)])
def test_the_objective_against_numpy(monkeypatch, compact, jit, with_bias):
  """Value against fairseq's formula: full chunks and a padded partial one (8-row chunks
  over 12 non-pad positions, 18 with padding), graph and XLA, with a logit bias that
  masks PAD; equal copies have no KL."""
  monkeypatch.setattr(loss_lib, "CHUNK_ROWS", 8)
  rng = np.random.default_rng(3)
  hidden = rng.standard_normal((2 * 3, 6, 8)).astype(np.float32)
  table = rng.standard_normal((VOCAB, 8)).astype(np.float32)
  bias = None
  if with_bias:  # a logit bias with PAD outside the softmax (softmax_excludes_pad)
    bias = rng.standard_normal(VOCAB).astype(np.float32)
    bias[0] = -1e9
  fn = tf.function(lambda h: loss_lib.projected_rdrop_loss(
      h, tf.constant(table), tf.constant(TARGETS), EPS, ALPHA, compact=compact,
      bias=None if bias is None else tf.constant(bias)), jit_compile=jit)
  theirs, kl = _numpy_objective(hidden, table, TARGETS, bias)
  assert kl > 1.0 and float(fn(tf.constant(hidden))) == pytest.approx(theirs, rel=1e-5)
  same = np.concatenate([hidden[:3], hidden[:3]])  # equal copies: no divergence
  assert float(fn(tf.constant(same))) == pytest.approx(
      _numpy_objective(same, table, TARGETS, bias, alpha=0.0)[0], rel=1e-5)


@pytest.mark.parametrize("compact,jit", [(True, False), (False, True)])
def test_the_hand_written_gradient_against_autodiff(monkeypatch, compact, jit):
  """d/dhidden and d/dtable of the chunked objective (its gradient formed in the forward
  pass, p - q and the KL's p (d - E_p[d]) + p - q) against autodiff of the plain formula,
  scaled by a non-unit incoming gradient."""
  monkeypatch.setattr(loss_lib, "CHUNK_ROWS", 8)
  rng = np.random.default_rng(4)
  hidden = tf.constant(rng.standard_normal((2 * 3, 6, 8)).astype(np.float32))
  table = tf.constant(rng.standard_normal((VOCAB, 8)).astype(np.float32))

  @tf.function(jit_compile=jit)
  def both(hidden, table):
    with tf.GradientTape(persistent=True) as tape:
      tape.watch([hidden, table])
      got = 3.0 * loss_lib.projected_rdrop_loss(hidden, table, tf.constant(TARGETS), EPS,
                                                ALPHA, compact=compact)
      want = 3.0 * _tf_objective(hidden, table, tf.constant(TARGETS))
    return got, want, tape.gradient(got, [hidden, table]), tape.gradient(want, [hidden, table])

  got, want, got_grads, want_grads = both(hidden, table)
  assert float(got) == pytest.approx(float(want), rel=1e-5)
  for g, w in zip(got_grads, want_grads):
    w = tf.convert_to_tensor(w).numpy()
    assert np.abs(w).max() > 0.1  # the reference gradient is not trivially zero
    np.testing.assert_allclose(tf.convert_to_tensor(g).numpy(), w, atol=2e-5, rtol=1e-4)


def _model(rate):
  keras.utils.set_random_seed(1234)
  hp = registry.hparams("transformer_tiny").replace(
      num_encoder_layers=1, num_decoder_layers=1, hidden_size=32, filter_size=64,
      num_heads=4, layer_prepostprocess_dropout=rate, attention_dropout=rate,
      relu_dropout=rate)
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  return model


def _seed_states(model):
  return [(v, v.numpy()) for v in model.variables if "seed_generator_state" in v.path]


def _loss(model, alpha, compact=True, states=None):
  """(loss_sum, gradients) of the batch at rdrop_alpha=alpha; the dropout seeds first
  set back to `states` (the same masks at every call)."""
  for variable, value in states or ():
    variable.assign(value)
  batch = {"inputs": tf.constant(INPUTS), "targets": tf.constant(TARGETS)}
  grads, total = step.gradients(model, batch, 1.0, 0.1, compact=compact, rdrop_alpha=alpha)
  return float(total), [tf.convert_to_tensor(g).numpy() for g in grads]


def test_without_dropout_it_is_the_plain_loss():
  """Without dropout the two copies are one model: no divergence, and the mean of the
  two copies' cross-entropy is the plain loss, value and gradients (XLA's path too)."""
  model = _model(0.0)
  plain, plain_grads = _loss(model, 0.0)
  for alpha, compact in ((5.0, True), (5.0, False)):
    total, grads = _loss(model, alpha, compact)
    assert abs(total - plain) < 1e-5 * plain
    for g, h in zip(grads, plain_grads):
      np.testing.assert_allclose(g, h, rtol=1e-4, atol=1e-6)


def test_with_dropout_the_copies_differ_and_the_term_grows_with_alpha():
  """With dropout each copy has its own masks (the halves' outputs differ), and at the
  same masks the loss is linear in alpha with a positive slope (the KL term)."""
  model = _model(0.1)
  batch = {key: tf.constant(np.concatenate([v, v])) for key, v in
           (("inputs", INPUTS), ("targets", TARGETS))}
  hidden = model.decoder_output(batch, training=True).numpy()
  assert np.abs(hidden[:3] - hidden[3:]).max() > 1e-2
  states = _seed_states(model)
  losses = [_loss(model, alpha, states=states)[0] for alpha in (1.0, 2.0, 3.0)]
  slope = losses[1] - losses[0]
  assert slope > 1e-3 and abs((losses[2] - losses[1]) - slope) < 1e-4 * losses[0]
