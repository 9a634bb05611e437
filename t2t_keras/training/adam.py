"""Adam whose per-variable update is TensorFlow's fused kernel (ResourceApplyAdam)."""

import keras
import tensorflow as tf


class FusedAdam(keras.optimizers.Adam):
  """keras.optimizers.Adam, each variable updated by one `ResourceApplyAdam` kernel.

  The same update as Keras' Adam (Kingma & Ba with epsilon outside the bias
  correction: m += (g - m)(1 - b1); v += (g^2 - v)(1 - b2); var -= lr *
  sqrt(1 - b2^t) / (1 - b1^t) * m / (sqrt(v) + eps)), the same slot variables
  (checkpoints are interchangeable), but one kernel per variable instead of about
  twelve, which made the update severalfold faster (figures: docs/notebook.md). The kernel
  has an XLA lowering, so it compiles into an XLA step as well. amsgrad falls
  back to Keras' update; sparse gradients (IndexedSlices) are made dense.
  """

  def update_step(self, gradient, variable, learning_rate):
    if self.amsgrad:
      return super().update_step(gradient, variable, learning_rate)
    dtype = variable.dtype
    step = tf.cast(self.iterations + 1, dtype)
    index = self._get_variable_index(variable)
    tf.raw_ops.ResourceApplyAdam(
        var=variable.handle, m=self._momentums[index].handle,
        v=self._velocities[index].handle,
        beta1_power=tf.pow(tf.cast(self.beta_1, dtype), step),
        beta2_power=tf.pow(tf.cast(self.beta_2, dtype), step),
        lr=tf.cast(learning_rate, dtype), beta1=tf.cast(self.beta_1, dtype),
        beta2=tf.cast(self.beta_2, dtype), epsilon=tf.cast(self.epsilon, dtype),
        grad=tf.cast(tf.convert_to_tensor(gradient), dtype))
    return None
