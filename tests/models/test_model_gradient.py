"""The whole model's training gradient equals a plain-ops float64 reference, dropout included.

The fused path: `Transformer.decoder_output(training=True)` with every dropout
on (layer_prepostprocess, attention and relu dropout 0.1), the chunked
projected loss (`projected_cross_entropy`) divided by the target-token count,
exactly as `TrainStep`'s `gradients` computes it, and its gradient with respect
to all of the model's trainable weights through the fused kernels
(`fused_residual`, `layer_norm`, `dropout`, `bias_relu_dropout`, `matmul`, the
custom loss gradient).

The reference: the same Transformer written out again in plain TensorFlow ops
in float64 (einsum projections, the explicit LayerNorm formula, 1/sqrt(d_k) on
the logits, softmax with -1e9 at masked keys, sinusoids, the shared embedding
scaled by sqrt(d_model) and reused as the pre-softmax matrix, the shifted-right
decoder input, log_softmax against an explicit smoothed target), reading the
same weights and applying the same dropout masks. The masks are recomputed
here, in numpy, from each `Dropout` layer's seed (its seed generator's state
before the step: `next_seed` returns it and advances the counter) with the
documented hash of `dropout.random_bits`; the reference's gradient is taken
with tf.GradientTape in float64.

Tolerance: max over weights of ||g_fused - g_ref|| / ||g_ref|| <= 1e-5. The
fused path runs in float32 (unit roundoff 2^-24, about 6e-8). On this tiny
model (2+2 layers, d_model 32, 4 heads, d_ff 64, vocab 50, 13 target tokens)
every sum is short (at most 64 terms) and the forward/backward chain is a few
dozen operations deep, so the float32 rounding accumulates to a relative error
of order 1e-7 to 1e-6 in the gradients; 1e-5 leaves an order of magnitude of
margin against that, yet stays far below what a difference in semantics does:
merely another dropout mask in one layer, in all of them, or no dropout, gives
relative errors above 1000 times the tolerance (`test_reference_with_other_masks_is_far_off`).
"""

import functools
import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.layers.dropout import Dropout, keep_mask
from t2t_keras.models.transformer import Transformer
from t2t_keras.training import step

VOCAB = 50
RATE = 0.1
TOLERANCE = 1e-5

# Three pairs with padding (0) of different lengths; 1 is EOS.
INPUTS = np.array([[5, 17, 9, 33, 2, 41, 1],
                   [7, 3, 28, 1, 0, 0, 0],
                   [12, 1, 0, 0, 0, 0, 0]], np.int32)
TARGETS = np.array([[8, 21, 1, 0, 0, 0],
                    [44, 6, 19, 30, 11, 1],
                    [9, 25, 4, 1, 0, 0]], np.int32)


def _model(norm_type):
  keras.utils.set_random_seed(1234)
  hp = registry.hparams("transformer_tiny").replace(
      num_encoder_layers=2, num_decoder_layers=2, hidden_size=32, filter_size=64,
      num_heads=4, layer_prepostprocess_dropout=RATE, attention_dropout=RATE,
      relu_dropout=RATE, norm_type=norm_type)
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  # Non-trivial LayerNorm scales/offsets and biases (they start at 1 and 0), so a
  # bias or an offset in the wrong place would show in the values too.
  rng = np.random.default_rng(7)
  for v in model.trainable_variables:
    name = v.path.rsplit("/", 1)[-1]
    if name == "gamma":
      v.assign(1.0 + 0.2 * rng.standard_normal(v.shape).astype(np.float32))
    elif name in ("beta", "bias"):
      v.assign(0.2 * rng.standard_normal(v.shape).astype(np.float32))
  return model


def _seed_states(model):
  """{id of each seed generator state variable: its int64 [2] value now}."""
  return {id(v): np.array(v.numpy(), np.int64) for v in model.variables
          if "seed_generator_state" in v.path}


# The fused path: TrainStep's own `gradients` (training/step.py).

@tf.function
def _fused_loss_and_grads(model, batch, smoothing):
  normalizer = tf.maximum(step.count_tokens(batch), 1.0)
  grads, loss_sum = step.gradients(model, batch, normalizer, smoothing, compact=True)
  return loss_sum / normalizer, [tf.convert_to_tensor(g) for g in grads]


# The dropout masks, recomputed in numpy from the documented hash
# (dropout.py: bits[i] = mix(mix(i * golden + k0) ^ k1), keep where bits >= threshold).

_M32 = np.uint64(0xFFFFFFFF)


def _mix(x):
  x = np.asarray(x, np.uint64) & _M32
  x = ((x ^ (x >> np.uint64(16))) * np.uint64(0x7FEB352D)) & _M32
  x = ((x ^ (x >> np.uint64(15))) * np.uint64(0x846CA68B)) & _M32
  return x ^ (x >> np.uint64(16))


def _np_keep_mask(shape, rate, seed):
  seed = np.asarray(seed, np.int64).view(np.uint64)
  lo, hi = seed & _M32, seed >> np.uint64(32)
  a = _mix(lo[0] ^ _mix(hi[0] ^ np.uint64(0x5BD1E995)))
  b = _mix(lo[1] ^ _mix(hi[1] ^ np.uint64(0x1B873593)))
  k0 = _mix(a ^ _mix(b ^ np.uint64(0x68E31DA4)))
  k1 = _mix(b ^ _mix(a ^ np.uint64(0xB5297A4D)))
  index = np.arange(int(np.prod(shape)), dtype=np.uint64)
  bits = _mix(_mix((index * np.uint64(0x9E3779B9) + k0) & _M32) ^ k1)
  threshold = min(round(rate * 2.0 ** 32), 2 ** 32 - 1)
  return (bits >= threshold).reshape(shape)


# The float64 plain-ops reference.

def _reference_loss(model, weights, inputs, targets, mask_for, smoothing):
  """Label-smoothed cross entropy per target token of the model written out in plain
  float64 ops; `weights` maps id(variable) -> float64 tensor, `mask_for(layer,
  shape)` gives the bool keep mask of Dropout `layer` (or None: no dropout)."""
  hp = model.hparams
  d = hp.hidden_size
  w = lambda variable: weights[id(variable)]

  def drop(x, layer):
    keep = mask_for(layer, x.shape)
    if keep is None:
      return x
    return tf.where(keep, x / (1.0 - layer.rate), tf.zeros_like(x))

  def layer_norm(x, norm):
    mean = tf.reduce_mean(x, -1, keepdims=True)
    var = tf.reduce_mean(tf.square(x - mean), -1, keepdims=True)
    return (x - mean) / tf.sqrt(var + hp.norm_epsilon) * w(norm.gamma) + w(norm.beta)

  def attention(att, x, memory, allowed):
    q = tf.einsum("btd,dhk->bhtk", x, w(att.query_dense.kernel))
    k = tf.einsum("btd,dhk->bhtk", memory, w(att.key_dense.kernel))
    v = tf.einsum("btd,dhk->bhtk", memory, w(att.value_dense.kernel))
    logits = tf.matmul(q, k, transpose_b=True) / math.sqrt(att.key_size)
    logits = tf.where(allowed, logits, tf.constant(-1e9, tf.float64))
    probs = drop(tf.nn.softmax(logits, -1), att.attention_dropout)
    return tf.einsum("bhtk,hkd->btd", tf.matmul(probs, v), w(att.output_dense.kernel))

  def ffn(f, x):
    h = tf.nn.relu(tf.matmul(x, w(f.filter_dense.kernel)) + w(f.filter_dense.bias))
    return tf.matmul(drop(h, f.dropout), w(f.output_dense.kernel)) + w(f.output_dense.bias)

  def residual(res, x, sublayer):
    if hp.norm_type == "post":
      return layer_norm(x + drop(sublayer(x), res.dropout), res.layer_norm)
    return x + drop(sublayer(layer_norm(x, res.layer_norm)), res.dropout)

  def embed(ids, dropout_layer):
    length = ids.shape[1]
    position = np.arange(length, dtype=np.float64)[:, None]
    angle = position / np.power(10000.0, np.arange(0, d, 2, dtype=np.float64) / d)
    timing = np.zeros([length, d])
    timing[:, 0::2], timing[:, 1::2] = np.sin(angle), np.cos(angle)
    x = tf.gather(w(model.embedding.embeddings), ids) * math.sqrt(d) + timing[None]
    return drop(x, dropout_layer)

  source_allowed = (inputs != 0)[:, None, None, :]                 # [b, 1, 1, src]
  length = targets.shape[1]
  causal = np.tril(np.ones([length, length], bool))[None, None]    # [1, 1, tgt, tgt]

  x = embed(inputs, model.encoder_dropout)
  for layer in model.encoder_layers:
    x = residual(layer.self_attention_residual, x,
                 lambda h: attention(layer.self_attention, h, h, source_allowed))
    x = residual(layer.ffn_residual, x, lambda h: ffn(layer.ffn, h))
  memory = layer_norm(x, model.encoder_norm) if hp.norm_type == "pre" else x

  decoder_input = np.concatenate([np.zeros([len(targets), 1], np.int32), targets[:, :-1]], 1)
  x = embed(decoder_input, model.decoder_dropout)
  for layer in model.decoder_layers:
    x = residual(layer.self_attention_residual, x,
                 lambda h: attention(layer.self_attention, h, h, causal))
    x = residual(layer.encdec_attention_residual, x,
                 lambda h: attention(layer.encdec_attention, h, memory, source_allowed))
    x = residual(layer.ffn_residual, x, lambda h: ffn(layer.ffn, h))
  if hp.norm_type == "pre":
    x = layer_norm(x, model.decoder_norm)

  logits = tf.matmul(x, w(model.embedding.embeddings), transpose_b=True)
  one_hot = tf.one_hot(targets, VOCAB, dtype=tf.float64)
  smoothed = one_hot * (1.0 - smoothing) + (1.0 - one_hot) * (smoothing / (VOCAB - 1))
  xent = -tf.reduce_sum(smoothed * tf.nn.log_softmax(logits, -1), -1)
  token = tf.constant(targets != 0, tf.float64)
  return tf.reduce_sum(xent * token) / tf.reduce_sum(token)


def _reference_loss_and_grads(model, mask_for):
  variables = model.trainable_variables
  values = [tf.constant(v.numpy().astype(np.float64)) for v in variables]
  weights = {id(v): t for v, t in zip(variables, values)}
  with tf.GradientTape() as tape:
    tape.watch(values)
    loss = _reference_loss(model, weights, INPUTS, TARGETS, mask_for,
                           model.hparams.label_smoothing)
  return loss, tape.gradient(loss, values)


def _max_relative_error(grads, reference):
  errors = []
  for g, r in zip(grads, reference):
    r = r.numpy()
    errors.append(np.linalg.norm(g.numpy().astype(np.float64) - r) / np.linalg.norm(r))
  return max(errors), errors


@functools.lru_cache(maxsize=None)  # both tests of a norm_type share one model and step
def _fused_and_reference(norm_type):
  """(model, (fused loss, grads), (reference loss, grads), {id of each seed generator
  state: the seed its Dropout drew its mask with})."""
  model = _model(norm_type)
  before = _seed_states(model)
  batch = {"inputs": tf.constant(INPUTS), "targets": tf.constant(TARGETS)}
  loss, grads = _fused_loss_and_grads(model, batch, model.hparams.label_smoothing)
  after = _seed_states(model)
  # Every Dropout drew exactly one mask, with its state before the step as the seed.
  assert after.keys() == before.keys()
  for key in before:
    np.testing.assert_array_equal(after[key], before[key] + [0, 1])
  used = set()

  def same_masks(layer, shape):
    assert isinstance(layer, Dropout) and layer.rate == RATE
    used.add(id(layer.seed_generator.state))
    return _np_keep_mask(shape, layer.rate, before[id(layer.seed_generator.state)])

  ref_loss, ref_grads = _reference_loss_and_grads(model, same_masks)
  assert used == before.keys()  # the reference applied every mask the fused step drew
  return model, (loss, grads), (ref_loss, ref_grads), before


@pytest.mark.heavy
@pytest.mark.parametrize("norm_type", ["post", "pre"])
def test_fused_training_gradient_equals_float64_reference(norm_type):
  model, (loss, grads), (ref_loss, ref_grads), _ = _fused_and_reference(norm_type)
  variables = model.trainable_variables
  assert len(grads) == len(ref_grads) == len(variables)
  assert all(np.linalg.norm(r.numpy()) > 0 for r in ref_grads)  # every weight is exercised
  np.testing.assert_allclose(float(loss), float(ref_loss), rtol=1e-6)
  worst, errors = _max_relative_error(grads, ref_grads)
  print(f"{norm_type}: loss {float(loss):.6f}, max relative gradient error {worst:.2e} "
        f"({variables[int(np.argmax(errors))].path})")
  assert worst <= TOLERANCE, [(v.path, e) for v, e in zip(variables, errors) if e > TOLERANCE]


@pytest.mark.parametrize("norm_type", ["post", "pre"])
def test_reference_with_other_masks_is_far_off(norm_type):
  """The comparison can fail: the reference with the next step's masks (all of them,
  or only one layer's), or with no dropout at all, misses the fused gradient by far
  more than the tolerance (measured: 0.5 to 2.6 relative error, against < 1e-6)."""
  model, (loss, grads), _, seeds = _fused_and_reference(norm_type)
  # The numpy hash is the kernels' mask (a 4-D attention-weights shape here).
  layer = model.decoder_layers[1].encdec_attention.attention_dropout
  seed = seeds[id(layer.seed_generator.state)]
  shape = [3, 4, TARGETS.shape[1], INPUTS.shape[1]]
  np.testing.assert_array_equal(_np_keep_mask(shape, RATE, seed),
                                keep_mask(shape, RATE, tf.constant(seed)).numpy())

  def next_step_masks(only=None):
    """The masks of the next step's seeds: every Dropout's, or only the one of `only`."""
    return lambda layer, shape: _np_keep_mask(
        shape, layer.rate, seeds[id(layer.seed_generator.state)]
        + ([0, 1] if only is None or layer is only else [0, 0]))

  last_residual = model.decoder_layers[-1].ffn_residual.dropout
  no_dropout = lambda layer, shape: None
  for mask_for in (next_step_masks(), next_step_masks(last_residual), no_dropout):
    _, ref_grads = _reference_loss_and_grads(model, mask_for)
    worst, _ = _max_relative_error(grads, ref_grads)
    assert worst > 1000 * TOLERANCE, worst
