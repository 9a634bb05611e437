"""Dropout whose random numbers are made inside its fused kernels, with and without XLA.

Mask and scale are applied by small XLA-compiled kernels (`dropout`,
`bias_relu_dropout`, and `fused_residual` around the residual adds), one pass
over the tensor forward, also inside a training step that is not XLA-compiled:
TF's own ops took four or five passes each way. Backward, `bias_relu_dropout` is
one kernel too, `dropout` a select on its stored mask. The keep/drop decisions
come from a counter-based hash of (seed, element index) computed in the same
kernel (`random_bits`), so no random tensor is drawn, stored or read: drawing
them with TF's Philox kernel was a large share of a CPU training step (figures:
docs/notebook.md).
"""

import keras
import tensorflow as tf

from t2t_keras.layers.custom_gradient import custom_gradient

_GOLDEN = 0x9E3779B9  # 2^32 / golden ratio: spreads consecutive indices apart


def _mix(x):
  """A bijective avalanche of uint32 x (the "lowbias32" integer hash: two
  multiply-xorshift rounds; every input bit flips each output bit with
  probability close to 1/2)."""
  xor, shift = tf.bitwise.bitwise_xor, tf.bitwise.right_shift
  u32 = lambda v: tf.constant(v, tf.uint32)
  x = xor(x, shift(x, u32(16))) * u32(0x7FEB352D)
  x = xor(x, shift(x, u32(15))) * u32(0x846CA68B)
  return xor(x, shift(x, u32(16)))


def _keys(seed):
  """Two uint32 keys from an int64 [2] stateless seed, each depending on all four
  32-bit halves: seeds that differ anywhere differ in both keys. (With k1 from
  one word only, two seeds sharing it would give masks that are shifted copies
  of one another, bits[i + m] for m = (k0' - k0) / golden mod 2^32.)"""
  seed = tf.cast(seed, tf.int64)
  lo = tf.cast(tf.bitwise.bitwise_and(seed, 0xFFFFFFFF), tf.uint32)
  hi = tf.cast(tf.bitwise.right_shift(seed, 32), tf.uint32)
  xor, u32 = tf.bitwise.bitwise_xor, lambda v: tf.constant(v, tf.uint32)
  a = _mix(xor(lo[0], _mix(xor(hi[0], u32(0x5BD1E995)))))
  b = _mix(xor(lo[1], _mix(xor(hi[1], u32(0x1B873593)))))
  return _mix(xor(a, _mix(xor(b, u32(0x68E31DA4))))), _mix(xor(b, _mix(xor(a, u32(0xB5297A4D)))))


def random_bits(shape, seed):
  """uint32 `shape` of random bits: a keyed hash of each element's flat index.

  bits[i] = mix(mix(i * golden + k0) ^ k1), with k0, k1 from the seed
  (`_keys`). Element-wise, so inside an XLA kernel it fuses with its consumer
  and costs a few integer operations per element, nothing in memory. Integer
  arithmetic only, so the same (shape, seed) gives the same bits on any device;
  it is always run inside an XLA kernel here (`keep_mask` included).
  Dropout needs independent-looking bits across elements and seeds, not
  cryptographic strength: two keyed rounds of a full-avalanche mixer give that.

  The flat index is not materialized: with the shape seen as [rows, cols] (the
  last axis), i * golden + k0 is (r * cols * golden + k0) + c * golden, a
  broadcast add of a per-row and a per-column term. A 1-D tf.range of every
  index became a constant in the compiled program (XLA folds it: a large program,
  slower to compile and load, read at every call) or, when too large to fold, a
  slower index computation (figures: docs/notebook.md).

  Args:
    shape: int32 1-D tensor or a static shape.
    seed: int64 [2], a stateless seed.
  """
  k0, k1 = _keys(seed)
  shape = tf.convert_to_tensor(shape, tf.int32)
  dims = tf.concat([[1], shape], 0)  # rank >= 1: a scalar is one row of one
  rows, cols = tf.reduce_prod(dims[:-1]), dims[-1]
  u32 = lambda v: tf.bitcast(v, tf.uint32)
  golden = tf.constant(_GOLDEN, tf.uint32)
  row = u32(tf.range(rows))[:, None] * (u32(cols) * golden) + k0
  col = u32(tf.range(cols))[None, :] * golden
  bits = _mix(tf.bitwise.bitwise_xor(_mix(row + col), k1))
  return tf.reshape(bits, shape)


def drop_threshold(rate):
  """Drop where the 32 random bits are below this: probability rate to 2^-32."""
  return min(round(rate * 2.0 ** 32), 2 ** 32 - 1)


def kept(shape, seed, threshold):
  """bool `shape`: True where `random_bits(shape, seed)` >= threshold (`drop_threshold`)."""
  return random_bits(shape, seed) >= tf.constant(threshold, tf.uint32)


@tf.function(jit_compile=True, autograph=False)
def _keep_mask(shape, seed, threshold):
  return kept(shape, seed, threshold)


def keep_mask(shape, rate, seed):
  """bool `shape`, True with probability 1 - rate (to 2^-32): the mask `dropout`
  and `bias_relu_dropout` apply for this (shape, rate, seed).

  Args:
    shape: int32 1-D tensor, the mask's shape.
    rate: drop probability in [0, 1).
    seed: int64 [2], a stateless seed.
  """
  return _keep_mask(tf.convert_to_tensor(shape, tf.int32), tf.cast(seed, tf.int64),
                    drop_threshold(rate))


def masked_scale(x, keep, scale):
  """x * scale where `keep`, else 0 (x's dtype)."""
  return tf.where(keep, x * tf.cast(scale, x.dtype), tf.zeros_like(x))


@tf.function(jit_compile=True, autograph=False)
def _drop(x, seed, threshold, scale):
  """(x * scale where kept else 0, the bool keep mask): one XLA-fused pass,
  random bits included.

  Without XLA the same took four TF kernels and passes over x (compare, scale,
  zeros, select), forward and again backward.
  """
  keep = kept(tf.shape(x), seed, threshold)
  return masked_scale(x, keep, scale), keep


def _drop_grad(dy, keep, scale):
  """The gradient through the mask: TF's multiply and select, not an XLA program.
  `_drop` compiles for every new attention size (rows = batch x heads x query
  length); a second program each for the gradient cost more compile time per
  new batch shape than its one pass saves in a run."""
  return tf.where(keep, dy * tf.cast(scale, dy.dtype), tf.zeros([], dy.dtype))


def dropout(x, rate, seed):
  """x with each element zeroed with probability `rate` (to 2^-32) and the rest
  scaled by 1 / (1 - rate); the forward one fused kernel, which sees x as
  [rows, last axis] (a new batch shape with as many rows compiles nothing), the
  backward a select on the stored mask (`_drop_grad`).

  Args:
    x: float [...].
    rate: drop probability in (0, 1), a Python float.
    seed: int64 [2], a stateless seed.
  """
  threshold, scale = drop_threshold(rate), 1.0 / (1.0 - rate)

  @custom_gradient
  def fn(x):
    y, keep = _drop(x, seed, threshold, scale)
    def grad(dy):
      return _drop_grad(dy, keep, scale)
    return y, grad

  # As [rows, last axis]: the kernels compile per (rows, width), not per shape,
  # and the mask is the same (`random_bits` hashes the flat index).
  rows = tf.reshape(x, [-1, tf.shape(x)[-1]] if x.shape.rank else [1, 1])
  return tf.reshape(fn(rows), tf.shape(x))


@tf.function(jit_compile=True, autograph=False)
def _bias_relu_drop(h, bias, seed, threshold, scale):
  return masked_scale(tf.nn.relu(h + bias), kept(tf.shape(h), seed, threshold), scale)


@tf.function(jit_compile=True, autograph=False)
def _bias_relu_drop_grad(dy, y, scale):
  dh = masked_scale(dy, y > 0, scale)
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
  threshold, scale = drop_threshold(rate), 1.0 / (1.0 - rate)

  @custom_gradient
  def fn(h, bias):
    y = _bias_relu_drop(h, bias, seed, threshold, scale)
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
  """keras.layers.Dropout whose mask is hashed inside one fused kernel each way (`dropout`).

  Keras' own dropout draws uniform floats with TF's default algorithm (ThreeFry
  under XLA on CPU, hundreds of times slower than Philox integer words; figures:
  docs/notebook.md), and any drawn random tensor costs a kernel, memory and passes
  that `random_bits` does not.
  Seeds still come from the layer's SeedGenerator, whose state the trainer
  checkpoints, so runs stay reproducible; under tf.distribute each replica
  folds its id into the seed (`replica_seed`), so replicas draw different masks.

  Call: x [...] -> x with each element zeroed with probability `rate` (to 2^-32)
  and the rest scaled by 1 / (1 - rate) when training; x unchanged otherwise.
  """

  def call(self, inputs, training=False):
    if not training or self.rate == 0:
      return inputs
    return dropout(inputs, self.rate, self.next_seed())

  def next_seed(self):
    """The next mask's stateless seed, int64 [2] (advances the generator)."""
    return replica_seed(tf.cast(self.seed_generator.next(), tf.int64))
