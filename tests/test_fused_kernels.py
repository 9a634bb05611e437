"""The fused kernels of the training step equal the plain TF/Keras computations they replace."""

import keras
import numpy as np
import tensorflow as tf

from t2t_keras.training.adam import FusedAdam


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
