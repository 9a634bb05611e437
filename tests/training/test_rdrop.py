"""R-Drop (`--hparams=rdrop_alpha=A`): the batch runs twice through dropout and the two
output distributions' symmetric KL is added (`loss.rdrop_kl_sum`, `step.loss_sum`),
checked against a NumPy formula written from fairseq's
`label_smoothed_cross_entropy_with_rdrop` (`compute_kl_loss`: kl_div(log p, q) +
kl_div(log q, p), halved, pad positions left out), and through the model and the trainer.
"""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.models.transformer import Transformer
from t2t_keras.training import step
from t2t_keras.training.loss import rdrop_kl_sum

VOCAB = 50
INPUTS = np.array([[5, 17, 9, 33, 2, 41, 1], [7, 3, 28, 1, 0, 0, 0],
                   [12, 1, 0, 0, 0, 0, 0]], np.int32)
TARGETS = np.array([[8, 21, 1, 0, 0, 0], [44, 6, 19, 30, 11, 1],
                    [9, 25, 4, 1, 0, 0]], np.int32)


def _numpy_kl(hidden, table, targets, bias):
  """fairseq's compute_kl_loss in float64: (KL(Q || P) + KL(P || Q)) / 2 summed over the
  non-pad positions, P the first copy's softmax, Q the second's."""
  b = targets.shape[0]
  logits = np.einsum("btd,vd->btv", hidden.astype(np.float64), table.astype(np.float64))
  logits = logits + (0.0 if bias is None else bias.astype(np.float64))
  logits -= logits.max(-1, keepdims=True)
  log_probs = logits - np.log(np.exp(logits).sum(-1, keepdims=True))
  lp, lq = log_probs[:b], log_probs[b:]
  kl_qp = (np.exp(lq) * (lq - lp)).sum(-1)
  kl_pq = (np.exp(lp) * (lp - lq)).sum(-1)
  return float(((kl_qp + kl_pq) / 2 * (targets != 0)).sum())


@pytest.mark.parametrize("compact", [True, False])
@pytest.mark.parametrize("with_bias", [False, True])
def test_the_kl_term_against_numpy(compact, with_bias):
  rng = np.random.default_rng(3)
  hidden = rng.standard_normal((2 * 3, 6, 8)).astype(np.float32)
  table = rng.standard_normal((VOCAB, 8)).astype(np.float32)
  bias = None
  if with_bias:  # a logit bias with PAD outside the softmax (softmax_excludes_pad)
    bias = rng.standard_normal(VOCAB).astype(np.float32)
    bias[0] = -1e9
  ours = rdrop_kl_sum(tf.constant(hidden), tf.constant(table), tf.constant(TARGETS),
                      compact=compact, bias=None if bias is None else tf.constant(bias))
  theirs = _numpy_kl(hidden, table, TARGETS, bias)
  assert theirs > 1.0 and abs(float(ours) - theirs) < 1e-5 * theirs
  same = np.concatenate([hidden[:3], hidden[:3]])  # equal copies: no divergence
  assert abs(float(rdrop_kl_sum(tf.constant(same), tf.constant(table),
                                tf.constant(TARGETS), compact=compact))) < 1e-6


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
