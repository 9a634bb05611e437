"""The paper's learning rate (section 5.3): lr = c * d_model^-0.5 * min(step^-0.5, step * warmup^-1.5)."""

import keras
import tensorflow as tf

from t2t_keras.training.adam import FusedAdam


class WarmupRsqrtSchedule(keras.optimizers.schedules.LearningRateSchedule):
  """Linear warmup then inverse square root decay; peaks at step == warmup_steps.

  Steps count from 1 (the optimizer's iteration 0 is step 1); the optimizer
  counts applied updates (the trainer accumulates micro-batches itself).

  Args:
    hidden_size: d_model.
    warmup_steps: warmup.
    constant: c, a constant factor (1.0 in the paper).
  """

  def __init__(self, hidden_size, warmup_steps, constant=1.0):
    self.hidden_size = hidden_size
    self.warmup_steps = warmup_steps
    self.constant = constant

  def __call__(self, iteration):
    step = tf.cast(iteration + 1, tf.float32)
    warmup = tf.cast(self.warmup_steps, tf.float32)
    return (self.constant * self.hidden_size ** -0.5
            * tf.minimum(tf.math.rsqrt(step), step * warmup ** -1.5))

  def get_config(self):
    return {"hidden_size": self.hidden_size, "warmup_steps": self.warmup_steps,
            "constant": self.constant}


def make_optimizer(hparams):
  """Adam(beta1, beta2, epsilon) on the warmup/rsqrt schedule (`FusedAdam`: one kernel per variable).

  Gradient accumulation and clipping (`gradient_accumulation_steps`,
  `clip_grad_norm`) are the trainer's: it sums token-weighted gradients over
  micro-batches and replicas and clips the summed gradient, then applies once,
  so the optimizer's iterations (and the schedule) count applied updates.
  Build it inside `strategy.scope()` before the first step.
  """
  schedule = WarmupRsqrtSchedule(hparams.hidden_size, hparams.learning_rate_warmup_steps,
                                 hparams.learning_rate_constant)
  return FusedAdam(
      learning_rate=schedule, beta_1=hparams.optimizer_adam_beta1,
      beta_2=hparams.optimizer_adam_beta2, epsilon=hparams.optimizer_adam_epsilon)
