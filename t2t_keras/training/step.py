"""One training update on tf.distribute: forward, backward, token-weighted sums, clipping, apply.

    step = TrainStep(model, optimizer, hparams, strategy, element_spec, use_xla=False)
    loss, tokens = step.update(next_batches)            # one update; floats

Each replica's gradient is that of its label-smoothed loss *sum*; the update
divides the sum over all micro-batches (`gradient_accumulation_steps`) and
replicas once by their total number of target tokens, so N micro-batches on R
replicas equal one batch of their union. Clipping (`clip_grad_norm`) scales by
the global norm of that summed gradient. The optimizer sums the replicas'
shares as it applies them, once per update, so its iterations (and the
learning-rate schedule) count updates. Forward and backward run in one
function, XLA-compiled with use_xla. On a single device with use_xla the
optimizer's update is compiled into that same program: applied op by op, Keras'
Adam's few small kernels per variable (about 2,800 launches a step for the
3+3-layer model; FusedAdam, training/adam.py, now takes one per variable) made an
H100 step host-bound, 28 ms against 8 ms of kernel time; compiled
in, the step took 13.2 ms where earlier runs read 30.5-32.7 (benchmarks/step_bench.py,
separate runs, not alternated). With
several replicas, or gradient accumulation, gradients are applied outside it
(an XLA function that touches another logical device's variables fails). On a
CPU without XLA an XLA-compiled update alone ran no faster (1,029-1,041 ms
against 1,036-1,044 ms a step), so the plain one stays.
"""

import keras
import tensorflow as tf

from t2t_keras.training.loss import projected_cross_entropy

SUM = tf.distribute.ReduceOp.SUM


class TrainStep:
  """The compiled functions of one update.

  Args:
    model, optimizer: built under `strategy.scope()` (a LossScaleOptimizer for
      mixed_float16).
    hparams: label_smoothing, gradient_accumulation_steps, clip_grad_norm,
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
    self._build()

  def _build(self):
    """Sets `one_step(batches)` (a one-batch update), and with accumulation
    `micro_step(batches)` (adds one micro-batch) and `apply_step()`."""
    model, optimizer, hp = self.model, self.optimizer, self.hparams
    variables = model.trainable_variables
    scaler = optimizer if isinstance(optimizer, keras.optimizers.LossScaleOptimizer) else None
    sum_op = SUM
    # Micro-batch losses are divided by this constant (a typical token count)
    # before the gradient, so fp16 loss scaling sees per-token magnitudes; the
    # update multiplies it back.
    unit = float(max(hp.batch_size, 1))

    def gradients(batch, normalizer):
      with tf.GradientTape() as tape:
        # The pre-softmax projection happens inside the loss, a chunk of rows at
        # a time, and skips padding rows (except under XLA: a dynamic shape).
        hidden = model.decoder_output(batch, training=True)
        table = tf.cast(model.embedding.embeddings, hidden.dtype)
        loss_sum, _ = projected_cross_entropy(hidden, table, batch["targets"],
                                              hp.label_smoothing, compact=not self.use_xla)
        loss = loss_sum / normalizer
        scaled = scaler.scale_loss(loss) if scaler else loss
      return tape.gradient(scaled, variables), loss_sum

    def count_tokens(batch):
      return tf.reduce_sum(tf.cast(tf.not_equal(batch["targets"], 0), tf.float32))

    def clip_factor(dense):
      """min(1, clip / norm) for the norm of the gradient summed over replicas."""
      norm = tf.linalg.global_norm(dense)
      if scaler:
        norm /= tf.cast(scaler.dynamic_scale, norm.dtype)
      return tf.minimum(1.0, hp.clip_grad_norm / tf.maximum(norm, 1e-12))

    def summed_clip_factor(strategy, dense):
      # Cross-replica context (merge_call): sum the replicas' gradients, as the
      # optimizer will, and take the norm of the sum once.
      total = strategy.extended.batch_reduce_to(sum_op, [(g, g) for g in dense])
      return clip_factor([strategy.experimental_local_results(t)[0] for t in total])

    def apply(grads):
      """Replica context: `grads` are this replica's share of the summed, normalized gradient."""
      if hp.clip_grad_norm > 0:
        ctx = tf.distribute.get_replica_context()
        dense = [tf.convert_to_tensor(g) for g in grads]  # embedding grads are IndexedSlices
        factor = (clip_factor(dense) if ctx.num_replicas_in_sync == 1
                  else ctx.merge_call(summed_clip_factor, args=(dense,)))
        grads = [g * tf.cast(factor, g.dtype) for g in dense]
      optimizer.apply_gradients(zip(grads, variables))

    def gradients_and_apply(batch, normalizer):
      grads, loss_sum = gradients(batch, normalizer)
      apply(grads)
      return loss_sum

    self.fused_apply = self.use_xla and self.single_device and self.accumulate == 1
    compiled_update = tf.function(gradients_and_apply, jit_compile=True)
    forward_backward = tf.function(gradients, jit_compile=self.use_xla)

    def replica_step(batch):
      tokens = count_tokens(batch)
      global_tokens = tf.distribute.get_replica_context().all_reduce(sum_op, tokens)
      if self.fused_apply:
        return compiled_update(batch, tf.maximum(global_tokens, 1.0)), tokens
      grads, loss_sum = forward_backward(batch, tf.maximum(global_tokens, 1.0))
      apply(grads)
      return loss_sum, tokens

    def reduce_sums(loss_sum, tokens):
      return (self.strategy.reduce(sum_op, loss_sum, axis=None),
              self.strategy.reduce(sum_op, tokens, axis=None))

    def train_step(batches):
      loss_sum, tokens = reduce_sums(*self.strategy.run(replica_step, args=(batches,)))
      return loss_sum / tf.maximum(tokens, 1.0), tokens

    def replica_micro_step(batch):
      tokens = count_tokens(batch)
      grads, loss_sum = forward_backward(batch, unit)
      for acc, g in zip(self._accumulators, grads):
        acc.assign_add(tf.convert_to_tensor(g))
      self._accumulated_tokens.assign_add(tokens)
      return loss_sum, tokens

    def micro_step(batches):
      """Adds one micro-batch's gradient sums; returns (loss sum, target tokens)."""
      return reduce_sums(*self.strategy.run(replica_micro_step, args=(batches,)))

    def replica_apply_step():
      ctx = tf.distribute.get_replica_context()
      global_tokens = ctx.all_reduce(sum_op, self._accumulated_tokens.read_value())
      grads = [acc.read_value() * (unit / tf.maximum(global_tokens, 1.0))
               for acc in self._accumulators]
      apply(grads)
      for acc in self._accumulators:
        acc.assign(tf.zeros_like(acc))
      self._accumulated_tokens.assign(0.0)

    @tf.function
    def apply_step():
      self.strategy.run(replica_apply_step)

    if hp.gradient_accumulation_steps > 1:
      with self.strategy.scope():
        local = dict(trainable=False, synchronization=tf.VariableSynchronization.ON_READ,
                     aggregation=tf.VariableAggregation.SUM)
        self._accumulators = [tf.Variable(tf.zeros(v.shape, v.dtype), **local)
                              for v in variables]
        self._accumulated_tokens = tf.Variable(0.0, **local)
      self.micro_step, self.apply_step = self._compile(micro_step), apply_step
    self.one_step = self._compile(train_step)

  def _compile(self, fn):
    if self.use_xla or not self.single_device:
      # One trace per batch shape (the pipeline's buckets keep them few): XLA
      # compiles per shape anyway, and distributed values carry no signature.
      return tf.function(fn)
    # One trace for every batch shape: each retrace of forward, backward and
    # Adam cost ~5.5 s and ~0.2 GB (Multi30k: 10 shapes, 62 s of warm-up;
    # benchmarks/train_bench.py). The graph does not depend on which shape came
    # first, so a resumed run runs the same kernels and resume stays bit-exact.
    spec = {k: tf.TensorSpec([None] * v.shape.rank, v.dtype)
            for k, v in self.element_spec.items()}
    return tf.function(fn, input_signature=[spec])

  def update(self, next_batches):
    """One update from `next_batches()` (called once per micro-batch): (loss per target
    token, target tokens), floats."""
    if self.accumulate == 1:
      loss, tokens = self.one_step(next_batches())
      return float(loss), float(tokens)
    loss_sum = tokens = 0.0
    for _ in range(self.accumulate):
      s, n = self.micro_step(next_batches())
      loss_sum, tokens = loss_sum + float(s), tokens + float(n)
    self.apply_step()
    return loss_sum / max(tokens, 1.0), tokens
