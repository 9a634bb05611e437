"""Dropout whose random numbers are cheap on CPU, with and without XLA."""

import keras
import tensorflow as tf

# Keep/drop is decided on 16 random bits: the drop probability is
# round(rate * 2^16) / 2^16, within 8e-6 of `rate`.
_BITS = 16


def keep_mask(shape, rate, seed):
  """bool `shape`, True with probability 1 - round(rate * 2^16) / 2^16.

  Draws one 32-bit Philox word per two elements and splits it into two
  16-bit halves (a bitcast, no copy). Drawing uniform floats instead cost
  8.2 ms for 4M elements against 0.5 ms for these words without XLA, and
  33 ms against 2.4 ms with XLA on a 2-core AMD EPYC (Zen 5) CPU.

  Args:
    shape: int32 1-D tensor, the mask's shape.
    rate: drop probability in [0, 1).
    seed: int64 [2], a stateless seed.
  """
  size = tf.reduce_prod(shape)
  words = tf.random.stateless_uniform(
      [(size + 1) // 2], seed=seed, alg="philox", minval=None, maxval=None, dtype=tf.int32)
  halves = tf.reshape(tf.bitcast(words, tf.uint16), [-1])[:size]
  threshold = tf.constant(round(rate * (1 << _BITS)), tf.uint16)
  return tf.reshape(halves >= threshold, shape)


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
  and float draws are themselves the slow part on CPU (see `keep_mask`).
  Seeds still come from the layer's SeedGenerator, whose state the trainer
  checkpoints, so runs stay reproducible; under tf.distribute each replica
  folds its id into the seed (`replica_seed`), so replicas draw different masks.

  Call: x [...] -> x with each element zeroed with probability `rate` (to 2^-16)
  and the rest scaled by 1 / (1 - rate) when training; x unchanged otherwise.
  """

  def call(self, inputs, training=False):
    if not training or self.rate == 0:
      return inputs
    seed = replica_seed(tf.cast(self.seed_generator.next(), tf.int64))
    keep = keep_mask(tf.shape(inputs), self.rate, seed)
    return tf.where(keep, inputs * tf.cast(1.0 / (1.0 - self.rate), inputs.dtype),
                    tf.zeros_like(inputs))
