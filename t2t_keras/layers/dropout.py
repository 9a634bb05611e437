"""Dropout whose random numbers are cheap on CPU, with and without XLA.

Mask and scale are applied by small XLA-compiled kernels (`dropout`,
`bias_relu_dropout`), one pass over the tensor forward and one backward, also
inside a training step that is not XLA-compiled: TF's own ops took four or five
passes each way. On the peer benchmark's step (benchmarks/step_bench.py, 2-core
Intel Xeon family 6 model 207) these kernels, the fused LayerNorm and FusedAdam
together took the step from 1,050-1,107 ms to 972-999 ms (alternated).
"""

import keras
import tensorflow as tf

# Keep/drop is decided on 16 random bits: the drop probability is
# round(rate * 2^16) / 2^16, within 8e-6 of `rate`.
_BITS = 16


def random_halves(shape, seed):
  """uint16 `shape` of uniform random bits: 16-bit halves of Philox int32 words.

  Draws one 32-bit word per two elements and splits it (a bitcast, no copy).
  Drawing uniform floats instead cost 8.2 ms for 4M elements against 0.5 ms for
  these words without XLA, and 33 ms against 2.4 ms with XLA on a 2-core AMD
  EPYC (Zen 5) CPU.

  Args:
    shape: int32 1-D tensor.
    seed: int64 [2], a stateless seed.
  """
  size = tf.reduce_prod(shape)
  words = tf.random.stateless_uniform(
      [(size + 1) // 2], seed=seed, alg="philox", minval=None, maxval=None, dtype=tf.int32)
  return tf.reshape(tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size], shape)


def _threshold(rate):
  return round(rate * (1 << _BITS))


def keep_mask(shape, rate, seed):
  """bool `shape`, True with probability 1 - round(rate * 2^16) / 2^16.

  Args:
    shape: int32 1-D tensor, the mask's shape.
    rate: drop probability in [0, 1).
    seed: int64 [2], a stateless seed.
  """
  return _keep(random_halves(shape, seed), _threshold(rate))


def _keep(halves, threshold):
  return halves >= tf.constant(threshold, tf.uint16)


def _masked_scale(x, keep, scale):
  return tf.where(keep, x * tf.cast(scale, x.dtype), tf.zeros_like(x))


@tf.function(jit_compile=True, autograph=False)
def _drop(x, halves, threshold, scale):
  """(x * scale where kept else 0, the bool keep mask): one XLA-fused pass.

  Without XLA the same took four TF kernels and passes over x (compare, scale,
  zeros, select), forward and again backward.
  """
  keep = _keep(halves, threshold)
  return _masked_scale(x, keep, scale), keep


_drop_grad = tf.function(_masked_scale, jit_compile=True, autograph=False)


def dropout(x, rate, seed):
  """x with each element zeroed with probability round(rate * 2^16) / 2^16 and
  the rest scaled by 1 / (1 - rate); forward and backward one fused kernel each.

  Args:
    x: float [...].
    rate: drop probability in (0, 1), a Python float.
    seed: int64 [2], a stateless seed.
  """
  halves = random_halves(tf.shape(x), seed)
  threshold, scale = _threshold(rate), 1.0 / (1.0 - rate)

  @tf.custom_gradient
  def fn(x):
    y, keep = _drop(x, halves, threshold, scale)
    def grad(dy):
      return _drop_grad(dy, keep, scale)
    return y, grad

  return fn(x)


@tf.function(jit_compile=True, autograph=False)
def _bias_relu_drop(h, bias, halves, threshold, scale):
  return _masked_scale(tf.nn.relu(h + bias), _keep(halves, threshold), scale)


@tf.function(jit_compile=True, autograph=False)
def _bias_relu_drop_grad(dy, y, scale):
  dh = _masked_scale(dy, y > 0, scale)
  return dh, tf.reduce_sum(tf.reshape(dh, [-1, dh.shape[-1]]), axis=0)


def bias_relu_dropout(h, bias, rate, seed):
  """dropout(relu(h + bias), rate, seed), forward and backward one fused kernel each.

  The gradient reads the kept ReLU units off the output (y > 0: kept and
  active), which the next matmul's gradient keeps anyway, so no mask is stored.

  Args:
    h: float [..., n], pre-activations without bias.
    bias: [n].
    rate: drop probability in (0, 1), a Python float.
    seed: int64 [2], a stateless seed.
  """
  halves = random_halves(tf.shape(h), seed)
  threshold, scale = _threshold(rate), 1.0 / (1.0 - rate)

  @tf.custom_gradient
  def fn(h, bias):
    y = _bias_relu_drop(h, bias, halves, threshold, scale)
    def grad(dy):
      dh, dbias = _bias_relu_drop_grad(dy, y, scale)
      return dh, tf.cast(dbias, bias.dtype)
    return y, grad

  return fn(h, tf.convert_to_tensor(bias))  # a tensor: its gradient is returned above


def replica_seed(seed):
  """`seed` made distinct per replica of a tf.distribute strategy (unchanged with one).

  The seed generator's state is a mirrored variable, so without this every
  replica (and every worker) would draw the same dropout mask. The replica id
  is global across workers, and it is folded in, not added, so replica r's
  stream is not another replica's shifted.
  """
  ctx = tf.distribute.get_replica_context()
  if ctx is None or ctx.num_replicas_in_sync == 1:
    return seed
  replica = tf.cast(ctx.replica_id_in_sync_group, tf.int32)
  return tf.random.experimental.stateless_fold_in(seed, replica, alg="philox")


class Dropout(keras.layers.Dropout):
  """keras.layers.Dropout drawing its mask from 16-bit halves of Philox words.

  Keras' own dropout draws uniform floats with TF's default algorithm (ThreeFry
  under XLA on CPU: 128 ms for a [2048, 128] mask against 0.4 ms with Philox),
  and float draws are themselves the slow part on CPU (see `random_halves`); the
  mask is applied by one fused XLA kernel each way (`dropout`).
  Seeds still come from the layer's SeedGenerator, whose state the trainer
  checkpoints, so runs stay reproducible; under tf.distribute each replica
  folds its id into the seed (`replica_seed`), so replicas draw different masks.

  Call: x [...] -> x with each element zeroed with probability `rate` (to 2^-16)
  and the rest scaled by 1 / (1 - rate) when training; x unchanged otherwise.
  """

  def call(self, inputs, training=False):
    if not training or self.rate == 0:
      return inputs
    return dropout(inputs, self.rate, self.next_seed())

  def next_seed(self):
    """The next mask's stateless seed, int64 [2] (advances the generator)."""
    return replica_seed(tf.cast(self.seed_generator.next(), tf.int64))
