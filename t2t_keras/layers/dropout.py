"""Dropout whose random numbers are fast under XLA on CPU."""

import keras
import tensorflow as tf


class Dropout(keras.layers.Dropout):
  """keras.layers.Dropout drawing its mask with the Philox generator.

  Keras' dropout uses TF's default stateless algorithm, which XLA lowers to
  ThreeFry on CPU: 128 ms for a [2048, 128] mask under jit_compile against
  0.4 ms with Philox (measured on the 2-core CPU this was written on), about
  half of a transformer_tiny training step. Seeds still come from the layer's
  SeedGenerator, whose state the trainer checkpoints, so runs stay reproducible.

  Call: x [...] -> x with each element zeroed with probability `rate` and the
  rest scaled by 1 / (1 - rate) when training; x unchanged otherwise.
  """

  def call(self, inputs, training=False):
    if not training or self.rate == 0:
      return inputs
    seed = tf.cast(self.seed_generator.next(), tf.int64)
    uniform = tf.random.stateless_uniform(tf.shape(inputs), seed=seed, alg="philox")
    keep = uniform >= self.rate
    return tf.where(keep, inputs / tf.cast(1.0 - self.rate, inputs.dtype),
                    tf.zeros_like(inputs))
