"""One training update on tf.distribute: forward, backward, token-weighted sums, clipping, apply.

    step = TrainStep(model, optimizer, hparams, strategy, element_spec, use_xla=False)
    loss, tokens = step.update(next_batches)            # one update; floats

Read from batch to update: `loss_sum` (the label-smoothed cross-entropy summed
over the batch's target tokens), `gradients` (of that sum over the update's
token count), `clip` (by the global norm of the gradient summed over replicas)
and `apply` (the optimizer). `TrainStep` composes them, per replica under
`strategy.run`, into `one_step(batches)`, or with gradient accumulation into
`micro_step(batches)` then `apply_step()`.

Each replica's gradient is that of its loss *sum*; the update divides the sum
over all micro-batches and replicas once by their total number of target
tokens, so N micro-batches on R replicas equal one batch of their union. The
optimizer sums the replicas' shares as it applies them, once per update, so its
iterations (and the learning-rate schedule) count updates. With use_xla on a
single device without accumulation the optimizer's update is compiled into the
forward/backward program (`fused_apply`): applied op by op, Adam's small kernels
made a GPU step host-bound (docs/notebook.md). With several replicas, or
accumulation, gradients are applied outside it (an XLA function that touches
another logical device's variables fails).
"""

import keras
import tensorflow as tf

from t2t_keras.models.transformer import convention
from t2t_keras.training.loss import projected_cross_entropy, projected_rdrop_loss

SUM = tf.distribute.ReduceOp.SUM


def loss_sum(model, batch, label_smoothing, compact, rdrop_alpha=0.0):
  """float32 []: the label-smoothed cross-entropy summed over the batch's target tokens.

  batch: {"inputs" int32 [B, S], "targets" int32 [B, T], packing features}. The
  pre-softmax projection happens inside the loss, a chunk of rows at a time;
  `compact` skips padding rows (a dynamic shape: not under XLA).

  With `rdrop_alpha` > 0 (R-Drop) the batch runs twice, as one batch of 2B rows, each
  copy under its own dropout masks, and the loss is `loss.projected_rdrop_loss`: the
  mean of the two copies' cross-entropy sums plus rdrop_alpha / 2 times their symmetric
  KL (fairseq's `label_smoothed_cross_entropy_with_rdrop` objective halved, so the loss
  reads as one pass's; Adam's update does not change with the scale but for its epsilon).
  """
  targets = batch["targets"]
  if rdrop_alpha:
    batch = {key: tf.concat([value, value], 0) for key, value in batch.items()}
  hidden = model.decoder_output(batch, training=True)                     # [B, T, d]
  table, bias = model.softmax_weights(hidden.dtype), model.softmax_bias()
  skip_pad = convention(model.hparams, "softmax_excludes_pad")
  if rdrop_alpha:
    return projected_rdrop_loss(hidden, table, targets, label_smoothing, rdrop_alpha,
                                compact=compact, bias=bias, skip_pad=skip_pad)
  return projected_cross_entropy(hidden, table, targets, label_smoothing, compact=compact,
                                 bias=bias, skip_pad=skip_pad)[0]


def count_tokens(batch):
  """float32 []: the batch's target tokens (non-pad)."""
  return tf.reduce_sum(tf.cast(tf.not_equal(batch["targets"], 0), tf.float32))


def gradients(model, batch, normalizer, label_smoothing, compact, scaler=None,
              rdrop_alpha=0.0):
  """(gradients of loss_sum / normalizer for model.trainable_variables, loss_sum []).

  scaler: the LossScaleOptimizer of mixed_float16 (the loss is scaled before the
  gradient), or None.
  """
  with tf.GradientTape() as tape:
    total = loss_sum(model, batch, label_smoothing, compact, rdrop_alpha)
    loss = total / normalizer
    scaled = scaler.scale_loss(loss) if scaler else loss
  return tape.gradient(scaled, model.trainable_variables), total


def clip_factor(grads, clip_norm, scaler=None):
  """min(1, clip_norm / global norm of grads) (unscaled first under loss scaling)."""
  norm = tf.linalg.global_norm(grads)
  if scaler:
    norm /= tf.cast(scaler.dynamic_scale, norm.dtype)
  return tf.minimum(1.0, clip_norm / tf.maximum(norm, 1e-12))


def _summed_clip_factor(strategy, grads, clip_norm, scaler):
  """Cross-replica context (merge_call): the clip factor of the replicas' gradients
  summed, as the optimizer will sum them."""
  total = strategy.extended.batch_reduce_to(SUM, [(g, g) for g in grads])
  return clip_factor([strategy.experimental_local_results(t)[0] for t in total],
                     clip_norm, scaler)


def clip(grads, clip_norm, scaler=None):
  """Replica context: grads scaled by the clip factor of their sum over all replicas."""
  dense = [tf.convert_to_tensor(g) for g in grads]  # embedding grads are IndexedSlices
  ctx = tf.distribute.get_replica_context()
  factor = (clip_factor(dense, clip_norm, scaler) if ctx.num_replicas_in_sync == 1
            else ctx.merge_call(_summed_clip_factor, args=(dense, clip_norm, scaler)))
  return [g * tf.cast(factor, g.dtype) for g in dense]


def apply(optimizer, variables, grads, clip_norm, scaler=None):
  """Replica context: `grads` (this replica's share of the summed, normalized gradient),
  clipped when clip_norm > 0, applied to `variables`."""
  if clip_norm > 0:
    grads = clip(grads, clip_norm, scaler)
  optimizer.apply_gradients(zip(grads, variables))


class TrainStep:
  """The compiled functions of one update.

  Args:
    model, optimizer: built under `strategy.scope()` (a LossScaleOptimizer for
      mixed_float16).
    hparams: label_smoothing, rdrop_alpha, gradient_accumulation_steps, clip_grad_norm,
      batch_size (the per-token scale of micro-batch losses).
    strategy: the tf.distribute strategy.
    element_spec: the input pipeline's element spec (dict of TensorSpec).
    use_xla: jit-compile forward/backward (on a single device without gradient
      accumulation, the optimizer's update too: `fused_apply`).
    single_device: one replica fed plain batches: then one trace serves every
      batch shape.
  """

  def __init__(self, model, optimizer, hparams, strategy, element_spec, *, use_xla=False,
               single_device=True):
    self.model, self.optimizer, self.hparams = model, optimizer, hparams
    self.strategy = strategy
    self.element_spec = element_spec
    self.use_xla = use_xla
    self.single_device = single_device
    self.accumulate = hparams.gradient_accumulation_steps
    self.scaler = optimizer if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else None
    self.fused_apply = use_xla and single_device and self.accumulate == 1
    self._forward_backward = tf.function(self._gradients, jit_compile=use_xla, autograph=False)
    self._compiled_update = tf.function(self._gradients_and_apply, jit_compile=True,
                                        autograph=False)
    if self.accumulate > 1:
      self._make_accumulators()
      self.micro_step = self._compile(self._micro_step)
    self.one_step = self._compile(self._one_step)

  # The pieces, bound to this model and hparams.

  def _gradients(self, batch, normalizer):
    hp = self.hparams
    return gradients(self.model, batch, normalizer, hp.label_smoothing,
                     compact=not self.use_xla, scaler=self.scaler,
                     rdrop_alpha=float(hp.get("rdrop_alpha", 0.0)))

  def _apply(self, grads):
    apply(self.optimizer, self.model.trainable_variables, grads, self.hparams.clip_grad_norm,
          self.scaler)

  def _gradients_and_apply(self, batch, normalizer):
    grads, total = self._gradients(batch, normalizer)
    self._apply(grads)
    return total

  def _reduce_sums(self, total, tokens):
    return (self.strategy.reduce(SUM, total, axis=None),
            self.strategy.reduce(SUM, tokens, axis=None))

  # One update from one batch per replica.

  def _replica_step(self, batch):
    """Replica context: (loss sum [], target tokens []) of this replica's batch, applied."""
    tokens = count_tokens(batch)
    all_tokens = tf.distribute.get_replica_context().all_reduce(SUM, tokens)
    normalizer = tf.maximum(all_tokens, 1.0)
    if self.fused_apply:
      return self._compiled_update(batch, normalizer), tokens
    grads, total = self._forward_backward(batch, normalizer)
    self._apply(grads)
    return total, tokens

  def _one_step(self, batches):
    """(loss per target token [], target tokens []) of one update over all replicas."""
    total, tokens = self._reduce_sums(*self.strategy.run(self._replica_step, args=(batches,)))
    return total / tf.maximum(tokens, 1.0), tokens

  # Gradient accumulation: micro_step per micro-batch, then apply_step.

  def _make_accumulators(self):
    # Micro-batch losses are divided by this constant (a typical token count)
    # before the gradient, so fp16 loss scaling sees per-token magnitudes; the
    # update multiplies it back.
    self._unit = float(max(self.hparams.batch_size, 1))
    with self.strategy.scope():
      local = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                   aggregation=tf.VariableAggregation.SUM)
      self._accumulators = [tf.Variable(tf.zeros(v.shape, v.dtype), **local)
                            for v in self.model.trainable_variables]
      self._accumulated_tokens = tf.Variable(0.0, **local)

  def _replica_micro_step(self, batch):
    tokens = count_tokens(batch)
    grads, total = self._forward_backward(batch, self._unit)
    for acc, g in zip(self._accumulators, grads):
      acc.assign_add(tf.convert_to_tensor(g))
    self._accumulated_tokens.assign_add(tokens)
    return total, tokens

  def _micro_step(self, batches):
    """Adds one micro-batch's gradient sums; returns (loss sum [], target tokens [])."""
    return self._reduce_sums(*self.strategy.run(self._replica_micro_step, args=(batches,)))

  def _replica_apply_step(self):
    ctx = tf.distribute.get_replica_context()
    all_tokens = ctx.all_reduce(SUM, self._accumulated_tokens.read_value())
    grads = [acc.read_value() * (self._unit / tf.maximum(all_tokens, 1.0))
             for acc in self._accumulators]
    self._apply(grads)
    for acc in self._accumulators:
      acc.assign(tf.zeros_like(acc))
    self._accumulated_tokens.assign(0.0)

  @tf.function(autograph=False)
  def apply_step(self):
    """Applies the accumulated gradient (divided by the update's target tokens) and resets."""
    self.strategy.run(self._replica_apply_step)

  def _compile(self, fn):
    if self.use_xla or not self.single_device:
      # One trace per batch shape (the pipeline's buckets keep them few): XLA
      # compiles per shape anyway, and distributed values carry no signature.
      return tf.function(fn, autograph=False)
    # One trace for every batch shape: each retrace of forward, backward and Adam
    # costs seconds and memory (docs/notebook.md). The graph does not depend on
    # which shape came first, so a resumed run runs the same kernels and resume
    # stays bit-exact.
    spec = {k: tf.TensorSpec([None] * v.shape.rank, v.dtype)
            for k, v in self.element_spec.items()}
    return tf.function(fn, input_signature=[spec], autograph=False)

  def update(self, next_batches):
    """One update from `next_batches()` (called once per micro-batch): (loss per target
    token, target tokens), floats."""
    if self.accumulate == 1:
      loss, tokens = self.one_step(next_batches())
      return float(loss), float(tokens)
    total = tokens = 0.0
    for _ in range(self.accumulate):
      s, n = self.micro_step(next_batches())
      total, tokens = total + float(s), tokens + float(n)
    self.apply_step()
    return total / max(tokens, 1.0), tokens
