"""The fused kernels of the training step equal the plain TF/Keras computations they replace."""

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_keras.layers import FeedForward, LayerNorm
from t2t_keras.layers.dropout import bias_relu_dropout, dropout, keep_mask
from t2t_keras.layers.fused_residual import add_dropout_norm
from t2t_keras.layers.layer_norm import layer_norm
from t2t_keras.layers.matmul import matmul
from t2t_keras.training.adam import FusedAdam

SEED = tf.constant([5, 6], tf.int64)


def _value_and_grads(fn, args, dy):
  args = [tf.convert_to_tensor(a) for a in args]
  with tf.GradientTape() as tape:
    tape.watch(args)
    y = fn(*args)
  return [y] + tape.gradient(y, args, output_gradients=dy)


@pytest.mark.parametrize("graph", [False, True])
def test_dropout_is_the_keep_mask_scaled_forward_and_backward(graph):
  rng = np.random.default_rng(0)
  x = rng.normal(size=[3, 7, 5]).astype(np.float32)
  dy = rng.normal(size=x.shape).astype(np.float32)
  fn = lambda x: dropout(x, 0.25, SEED)
  run = tf.function(_value_and_grads, autograph=False) if graph else _value_and_grads
  y, dx = run(fn, [x], tf.constant(dy))
  keep = keep_mask(tf.constant(x.shape), 0.25, SEED).numpy()
  assert 0 < keep.mean() < 1
  np.testing.assert_allclose(y, np.where(keep, x / 0.75, 0), rtol=1e-6)
  np.testing.assert_allclose(dx, np.where(keep, dy / 0.75, 0), rtol=1e-6)


def test_bias_relu_dropout_equals_the_unfused_ops():
  rng = np.random.default_rng(1)
  h = rng.normal(size=[4, 6, 16]).astype(np.float32)
  bias = rng.normal(size=[16]).astype(np.float32)
  dy = rng.normal(size=h.shape).astype(np.float32)
  plain = lambda h, b: tf.where(keep_mask(tf.shape(h), 0.3, SEED), tf.nn.relu(h + b) / 0.7, 0.0)
  fused = lambda h, b: bias_relu_dropout(h, b, 0.3, SEED)
  want = _value_and_grads(plain, [h, bias], dy)
  got = _value_and_grads(fused, [h, bias], dy)
  for g, w in zip(got, want):
    np.testing.assert_allclose(g, w, rtol=1e-5, atol=1e-6)
  assert (want[0].numpy() == 0).mean() > 0.4  # both ReLU and dropout zeros are exercised


def test_feed_forward_training_path_is_dense_relu_dropout_dense():
  ffn = FeedForward(8, 32, relu_dropout=0.2)
  x = tf.random.stateless_normal([2, 5, 8], [1, 2])
  ffn.build(x.shape)
  state = ffn.dropout.seed_generator.state.numpy()
  y = ffn(x, training=True)
  ffn.dropout.seed_generator.state.assign(state)
  seed = ffn.dropout.next_seed()
  h = tf.nn.relu(ffn.filter_dense(x))  # dense, then ReLU
  keep = keep_mask(tf.shape(h), 0.2, seed)
  want = ffn.output_dense(tf.where(keep, h / 0.8, 0.0))
  np.testing.assert_allclose(y, want, rtol=1e-5, atol=1e-6)
  np.testing.assert_allclose(ffn(x, training=False), ffn.output_dense(h), rtol=1e-6)


@pytest.mark.parametrize("k,n", [(12, 5), (5, 12), (6, 6)])
def test_matmul_equals_tf_matmul_values_and_gradients(k, n):
  # k > n takes the weight gradient as (dy^T x)^T, otherwise as x^T dy.
  rng = np.random.default_rng(k * n)
  x, w = rng.normal(size=[9, k]).astype(np.float32), rng.normal(size=[k, n]).astype(np.float32)
  dy = rng.normal(size=[9, n]).astype(np.float32)
  want = _value_and_grads(tf.matmul, [x, w], dy)
  for fn in (matmul, tf.function(matmul)):
    got = _value_and_grads(fn, [x, w], dy)
    for g, ww in zip(got, want):
      assert g.shape == ww.shape
      np.testing.assert_allclose(g, ww, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("dtype", ["float32", "bfloat16"])
def test_layer_norm_equals_keras_layer_normalization(dtype):
  rng = np.random.default_rng(2)
  x = (rng.normal(size=[3, 4, 32]) * 3 + 1).astype(np.float32)
  gamma = rng.normal(size=[32]).astype(np.float32) + 1
  beta = rng.normal(size=[32]).astype(np.float32)
  dy = rng.normal(size=x.shape).astype(np.float32)
  keras_ln = lambda x, g, b: keras.ops.layer_normalization(x, g, b, epsilon=1e-6)
  fused_ln = lambda x, g, b: layer_norm(x, g, b, 1e-6)
  cast = lambda a: tf.cast(a, dtype)
  want = _value_and_grads(keras_ln, [cast(x), gamma, beta], cast(dy))
  got = _value_and_grads(fused_ln, [cast(x), gamma, beta], cast(dy))
  assert got[0].dtype == dtype and got[1].dtype == dtype
  tol = 1e-5 if dtype == "float32" else 2e-2
  for g, w in zip(got, want):
    np.testing.assert_allclose(tf.cast(g, tf.float32), tf.cast(w, tf.float32),
                               rtol=tol, atol=tol * np.abs(w).max())


def test_layer_norm_layer_keeps_keras_variables_and_config():
  ours = LayerNorm(epsilon=1e-6, name="ln")
  ours.build([2, 8])
  theirs = keras.layers.LayerNormalization(epsilon=1e-6)
  theirs.build([2, 8])
  assert [v.path.split("/")[-1] for v in ours.weights] == ["gamma", "beta"]
  assert LayerNorm.from_config(ours.get_config()).epsilon == 1e-6
  ours.gamma.assign(np.arange(8, dtype=np.float32))
  theirs.gamma.assign(np.arange(8, dtype=np.float32))
  x = tf.random.stateless_normal([2, 8], [3, 4])
  np.testing.assert_allclose(ours(x), theirs(x), rtol=1e-5, atol=1e-6)
  other_axis = LayerNorm(axis=0)  # not the last axis: Keras' own path
  np.testing.assert_allclose(other_axis(x), keras.layers.LayerNormalization(axis=0)(x),
                             rtol=1e-5, atol=1e-6)


def test_fused_adam_equals_keras_adam():
  rng = np.random.default_rng(3)
  init = [rng.normal(size=s).astype(np.float32) for s in [(5, 3), (3,)]]
  grads = [[rng.normal(size=v.shape).astype(np.float32) for v in init] for _ in range(6)]
  final = []
  for cls in (keras.optimizers.Adam, FusedAdam):
    variables = [keras.Variable(v) for v in init]
    schedule = keras.optimizers.schedules.InverseTimeDecay(1e-2, 1, 0.5)
    opt = cls(learning_rate=schedule, beta_1=0.9, beta_2=0.98, epsilon=1e-9)
    apply = tf.function(lambda g: opt.apply_gradients(zip(g, variables)))
    for g in grads:
      apply([tf.constant(x) for x in g])
    final.append([v.numpy() for v in variables])
    assert int(opt.iterations) == len(grads)
  for got, want in zip(final[1], final[0]):
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-7)
  assert not np.allclose(final[1][0], init[0])


def _plain_add_norm(x, y, b, rate, g, beta):
  """The residual add, bias, dropout and LayerNorm as separate ops (what the fused kernel replaces)."""
  yb = y if b is None else y + tf.cast(b, y.dtype)
  z = x + tf.cast(dropout(yb, rate, SEED) if rate else yb, x.dtype)
  return z, keras.ops.layer_normalization(z, g, beta, epsilon=1e-6)


@pytest.mark.parametrize("rate,bias", [(0.3, True), (0.3, False), (0.0, True)])
def test_add_dropout_norm_equals_the_unfused_ops(rate, bias):
  rng = np.random.default_rng(3)
  x, y = (rng.normal(size=[2, 5, 16]).astype(np.float32) for _ in range(2))
  b = rng.normal(size=[16]).astype(np.float32) if bias else None
  g = rng.normal(size=[16]).astype(np.float32) + 1
  beta = rng.normal(size=[16]).astype(np.float32)
  dz, dh = (tf.constant(rng.normal(size=x.shape).astype(np.float32)) for _ in range(2))
  b_args = [b] if bias else []

  def both(fn):
    def run(x, y, g, beta, *b):
      z, h = fn(x, y, b[0] if b else None, g, beta)
      return z * dz + h * dh  # both outputs carry gradient
    return run

  plain = both(lambda x, y, b, g, beta: _plain_add_norm(x, y, b, rate, g, beta))
  fused = both(lambda x, y, b, g, beta: add_dropout_norm(x, y, rate, SEED, g, beta, 1e-6,
                                                          bias=b))
  ones = tf.ones(x.shape)
  want = _value_and_grads(plain, [x, y, g, beta] + b_args, ones)
  got = _value_and_grads(fused, [x, y, g, beta] + b_args, ones)
  for gt, w in zip(got, want):
    np.testing.assert_allclose(gt, w, rtol=1e-4, atol=1e-5)
  # Post-norm: the normalized output alone; the stream's gradient is the norm's only.
  post_plain = lambda x, y, g, beta, *b: _plain_add_norm(x, y, b[0] if b else None, rate,
                                                         g, beta)[1]
  post_fused = lambda x, y, g, beta, *b: add_dropout_norm(
      x, y, rate, SEED, g, beta, 1e-6, bias=b[0] if b else None, keep_stream=False)
  want = _value_and_grads(post_plain, [x, y, g, beta] + b_args, dh)
  got = _value_and_grads(post_fused, [x, y, g, beta] + b_args, dh)
  for gt, w in zip(got, want):
    np.testing.assert_allclose(gt, w, rtol=1e-4, atol=1e-5)


def test_fused_residual_keeps_a_bfloat16_sublayer_output_and_float32_stream():
  rng = np.random.default_rng(5)
  x = rng.normal(size=[4, 8]).astype(np.float32)
  y = tf.cast(rng.normal(size=[4, 8]), tf.bfloat16)
  g, beta = tf.ones([8]), tf.zeros([8])
  with tf.GradientTape() as tape:
    tape.watch(y)
    z, h = add_dropout_norm(tf.constant(x), y, 0.1, SEED, g, beta, 1e-6, h_dtype="bfloat16")
    loss = tf.reduce_sum(z) + tf.reduce_sum(tf.cast(h, tf.float32) ** 2)
  assert (z.dtype, h.dtype, tape.gradient(loss, y).dtype) == (tf.float32, tf.bfloat16,
                                                              tf.bfloat16)
  want_z, want_h = _plain_add_norm(tf.constant(x), y, None, 0.1, g, beta)
  np.testing.assert_allclose(z, want_z, rtol=1e-2, atol=3e-2)
  np.testing.assert_allclose(tf.cast(h, tf.float32), want_h, rtol=2e-2, atol=3e-2)
