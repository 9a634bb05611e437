"""The training loop: the paper's recipe on tf.distribute, XLA-compiled steps, exact resume.

    from t2t_keras.training import trainer
    summary = trainer.train("translate_ende_numbers", "transformer_tiny",
                            data_dir="t2t_data", output_dir="t2t_train/numbers",
                            train_steps=1500)
    # or: Trainer(problem, hparams, data_dir, output_dir, TrainerConfig(seed=2)).train()

Keras 3's `model.fit` fails under MultiWorkerMirroredStrategy in this TF/Keras
version, so the loop is our own, and this module holds it. The update itself
(forward, backward, token-weighted gradient sums, clipping, apply) is
`step.TrainStep`; dev metrics are `evaluation.Evaluator`, and what follows an
evaluation (its report, the best checkpoint, early stopping) `dev_monitor.DevMonitor`;
the loop reports to `reporting.Reporter` (log, TensorBoard, metrics.jsonl, curves), stops
on `signals` (SIGTERM / Ctrl-C, agreed across workers), and saves and resumes through
`checkpoints.RunCheckpoints` (the newest readable checkpoint, or a warm start).
"""

import dataclasses
import functools
import math
import os
import time

import keras
import tensorflow as tf

from t2t_keras import fileio, registry, runs
from t2t_keras.data import pipeline
from t2t_keras.data.pipeline import count_long_pairs, make_dataset
from t2t_keras.errors import InputError
from t2t_keras.hparams_lib import HParams, HParamsError
from t2t_keras.models.transformer import ABSENT_DEFAULTS
from t2t_keras.training import reporting, signals, warm_start
from t2t_keras.training.checkpoints import RunCheckpoints
from t2t_keras.training.config import TrainerConfig
from t2t_keras.training.dev_monitor import DevMonitor
from t2t_keras.training.evaluation import Evaluator
from t2t_keras.training.loss_guard import LossClimbGuard
from t2t_keras.training.schedule import make_optimizer
from t2t_keras.training.step import TrainStep
from t2t_keras.training.strategy import is_chief, make_strategy

# Keys that may change between runs in one output_dir (extending training).
RESUMABLE_KEYS = ("train_steps",)


class NonFiniteLossError(InputError, RuntimeError):
  """A NaN or Inf loss or weight; the last good checkpoint is kept."""


def check_hparams_match(output_dir, hparams):
  """Refuses an output_dir whose saved hparams differ, naming the differing keys."""
  path = os.path.join(output_dir, runs.HPARAMS_FILE)
  if not fileio.exists(path):
    return
  saved = HParams.load(path)
  # A convention key newer than the saved file reads as its default (`ABSENT_DEFAULTS`).
  absent = {k: v for k, v in ABSENT_DEFAULTS.items() if k in hparams and k not in saved}
  saved = HParams(**{**saved.values(), **absent})
  diff = [k for k in saved.diff(hparams) if k not in RESUMABLE_KEYS]
  if diff:
    details = ", ".join(f"{k}: saved {saved.get(k)!r} != new {hparams.get(k)!r}" for k in diff)
    raise HParamsError(
        f"{output_dir} holds a run with different hparams ({details}); "
        "use a new --output_dir or the same hparams")


class Trainer:
  """Owns model, optimizer, data, checkpoints and the loop of one run.

  The order of the set-up steps is what makes a resumed run bit-exact: the seed,
  then model and optimizer in the strategy's scope, then the input iterator in
  the checkpoint.

  Args:
    problem: a Text2TextProblem whose data is in data_dir.
    hparams: the run's HParams.
    data_dir, output_dir: where data is read and checkpoints/logs are written.
    config: a `TrainerConfig` (seed, save / eval / log cadence, checkpoints kept, warm
      start, early stopping, the training stream's settings); default TrainerConfig().
    strategy: a tf.distribute strategy (default: `make_strategy()`).
    log: a print-like function.
  """

  def __init__(self, problem, hparams, data_dir, output_dir, config=None, *, strategy=None,
               log=functools.partial(print, flush=True)):
    config = TrainerConfig() if config is None else config
    self.problem, self.hparams, self.config = problem, hparams, config
    self.data_dir, self.output_dir = data_dir, output_dir
    self.strategy = strategy or make_strategy()
    self.use_xla = (bool(tf.config.list_logical_devices("GPU")) if config.use_xla is None
                    else config.use_xla)
    self.chief = is_chief(self.strategy)
    self.log = log if self.chief else (lambda *a, **k: None)

    recorded = self._check_output_dir()
    keras.utils.set_random_seed(config.seed)
    self.vocab = problem.get_vocabulary(data_dir)
    self.warm_start = self._warm_start_source(recorded.get("warm_start"))
    self._build_model_and_optimizer()
    self.input_context = _input_context(self.strategy)
    self.local_replicas = max(1, self.input_context.num_replicas_in_sync
                              // self.input_context.num_input_pipelines)
    self.bucket_mode = self._bucket_mode(recorded.get("bucket_mode"))
    self.shuffle_buffer = self._kept_input_setting("shuffle_buffer", recorded,
                                                   pipeline.DEFAULT_SHUFFLE_BUFFER)
    self.input_streams = self._kept_input_setting("input_streams", recorded, 1)
    self.input_wait = 0.0  # seconds spent waiting in next(self.iterator)
    self.resumed_from = None  # the checkpoint restore() resumed from
    self.iterator = iter(make_dataset(problem, data_dir, "train", hparams,
                                      self._training_stream(),
                                      input_context=self.input_context))
    self.checkpoints = RunCheckpoints(
        self.model, self.optimizer, self.step, self.iterator, self.output_dir,
        None if self.chief else self.strategy.cluster_resolver.task_id, config, self.log)
    self.step_fn = TrainStep(self.model, self.optimizer, hparams, self.strategy,
                             self.iterator.element_spec, use_xla=self.use_xla,
                             single_device=self._single_device())
    self.agreement = signals.WorkerAgreement(self.strategy,
                                             self.input_context.num_input_pipelines, self.chief)
    self.evaluator = Evaluator(problem, data_dir, hparams, self.strategy, self.model, self.vocab,
                               eval_steps=config.eval_steps,
                               bleu_sentences=config.eval_bleu_sentences,
                               chief=self.chief, from_chief=self.agreement.from_chief)
    self.dev = DevMonitor(config, self.checkpoints, recorded.get("best"), self.log)

  # Set-up, in __init__'s order.

  def _check_output_dir(self):
    """Refuses an output_dir holding another run; returns its run record ({} when new)."""
    recorded = {}
    if fileio.exists(os.path.join(self.output_dir, runs.RUN_FILE)):
      runs.check_run_matches(self.output_dir, problem=self.problem.name,
                             model=self.config.model_name,
                             hparams_set=self.config.hparams_set, compare_values=False)
      recorded = runs.load_run_info(self.output_dir)[1]
    check_hparams_match(self.output_dir, self.hparams)
    return recorded

  def _warm_start_source(self, recorded):
    """{"from": checkpoint, "optimizer": bool} of --warm_start_from (checked now: the
    path resolves, the vocabulary is the same file), or what the run recorded, or None."""
    if not self.config.warm_start_from:
      return recorded
    source = warm_start.resolve(self.config.warm_start_from)
    warm_start.check_vocabulary(source, self.problem.vocab_path(self.data_dir))
    given = {"from": source.checkpoint, "optimizer": self.config.warm_start_optimizer}
    if recorded and recorded != given:
      self.log(f"warning: this run started from {recorded} (run.json) and keeps it; "
               f"--warm_start_from now gives {given}")
      return recorded
    return given

  def _build_model_and_optimizer(self):
    """model, optimizer (built) and the step counter, in the strategy's scope and the
    precision's dtype policy."""
    hp = self.hparams
    if hp.precision != "float32":
      keras.mixed_precision.set_dtype_policy(hp.precision)
    with self.strategy.scope():
      self.model = runs.build_model(hp, self.vocab.vocab_size, self.config.model_name)
      optimizer = make_optimizer(hp)
      if hp.precision == "mixed_float16":
        optimizer = keras.optimizers.LossScaleOptimizer(optimizer)
      self.optimizer = optimizer
      self.optimizer.build(self.model.trainable_variables)
      self.step = tf.Variable(0, dtype=tf.int64, trainable=False, name="global_step")
    keras.mixed_precision.set_dtype_policy("float32")

  def _bucket_mode(self, recorded):
    """hparams.bucket_mode, with "auto" resolved: the least padding where one trace
    serves every batch shape (TrainStep); XLA and several replicas trace and compile
    once per shape. A resumed run keeps what its start chose (`recorded`): the same
    batch sequence."""
    mode = self.hparams.get("bucket_mode", "auto")
    if mode != "auto":
      return mode
    return recorded or ("pair" if self._single_device() and not self.use_xla else "max")

  def _kept_input_setting(self, name, recorded, default):
    """The training stream's `name` (shuffle_buffer, input_streams): what a resumed run
    recorded (its checkpointed iterator restores only into the pipeline that wrote it; a
    different flag is warned about and ignored), else the config's, else `default`."""
    given = getattr(self.config, name)
    if recorded.get("problem") is None:
      return given or default
    kept = recorded.get(name, default)
    if given is not None and given != kept:
      self.log(f"warning: this run reads its training data with {name}={kept} (run.json) "
               f"and keeps it; --{name}={given} applies to new runs")
    return kept

  def _training_stream(self):
    """The training stream's `pipeline.InputSettings`: shuffled and repeated from the seed."""
    return pipeline.InputSettings(shuffle=True, seed=self.config.seed, repeat=True,
                                  bucket_mode=self.bucket_mode,
                                  shuffle_buffer=self.shuffle_buffer,
                                  streams=self.input_streams,
                                  data_service=self.config.data_service_address)

  # Steps.

  def _single_device(self):
    return self.local_replicas == 1 and self.strategy.num_replicas_in_sync == 1

  def _next_batches(self):
    """This worker's next batch for each of its replicas, as distributed values; the
    time it waited for them is added to self.input_wait (seconds)."""
    start = time.perf_counter()
    try:
      local = [next(self.iterator) for _ in range(self.local_replicas)]
    except tf.errors.DataLossError as e:
      error = pipeline.damaged_shard_error(self.problem, self.data_dir, "train", e)
      if isinstance(error, pipeline.ShardsWholeNow) and self.resumed_from and \
          not self.config.reset_input_position:
        raise InputError(
            f"{error}; or {self.resumed_from}, which this run resumed from, holds it: tf.data "
            "saves what it has read ahead with each checkpoint, a read error included, so "
            "checkpoints written after the read-ahead met a damaged record meet it again. "
            "Train again with --reset_input_position: the model, optimizer and step resume "
            "from it, the data order starts afresh from --seed") from None
      raise InputError(f"{error}. The run keeps its checkpoints and resumes from the "
                       "newest") from None
    self.input_wait += time.perf_counter() - start
    if self._single_device():
      return local[0]
    return self.strategy.experimental_distribute_values_from_function(
        lambda ctx: local[ctx.replica_id_in_sync_group % self.local_replicas])

  def train_step(self):
    """One update (gradient_accumulation_steps micro-batches); returns (loss, target tokens).

    The loss is the label-smoothed cross-entropy per target token of the update.
    """
    loss, tokens = self.step_fn.update(self._next_batches)
    self.step.assign_add(1)
    return loss, tokens

  def evaluate(self, steps=None):
    """Dev loss (plain cross-entropy per token), perplexity, token accuracy (and greedy BLEU)."""
    return self.evaluator.evaluate(steps)

  # The loop.

  @property
  def manager(self):
    """The tf.train.CheckpointManager of this worker's checkpoints."""
    return self.checkpoints.manager

  def restore(self):
    """Restores the newest readable checkpoint of output_dir; without one, the warm start's
    weights (if any). Returns the step."""
    self.resumed_from = self.checkpoints.restore(self.warm_start)
    return int(self.step.numpy())

  def save(self):
    """Saves a checkpoint of this step; refuses (NonFiniteLossError) when a weight is NaN or
    Inf, and (InputError) when the output directory lost its run.json since the start (it
    was removed or replaced: a checkpoint there would be no run's)."""
    run_file = os.path.join(self.output_dir, runs.RUN_FILE)
    if self.chief and not fileio.exists(run_file):
      raise InputError(f"{run_file} is gone: the output directory was removed or replaced "
                       f"while training, so step {int(self.step.numpy())} is not saved there. "
                       "Train again into a new --output_dir (or restore the directory and "
                       "resume)")
    if not bool(tf.reduce_all([tf.reduce_all(tf.math.is_finite(v))
                               for v in self.model.trainable_variables])):
      raise NonFiniteLossError(
          f"non-finite weights after step {int(self.step.numpy())} (the update was not finite); "
          f"not saved. The last good checkpoint ({self.manager.latest_checkpoint}) is kept. "
          f"{self.checkpoints.recovery(self.hparams.learning_rate_constant)}")
    path = self.checkpoints.save()
    if self.chief:
      self.log(f"saved {path}")
    return path

  def _climb_warning(self, step, climb):
    """One line: where the loss climbed, at what learning rate, and which hparams to lower."""
    hp = self.hparams
    advice = f"lower learning_rate_constant (now {hp.learning_rate_constant:g})"
    if hp.norm_type != "pre":
      advice += f" or train pre-norm with norm_type=pre (now {hp.norm_type})"
    return (f"warning: step {step}, learning rate {float(self.optimizer.learning_rate):.3e}: "
            f"{climb}; the recipe is on the edge of stability: {advice}")

  def train(self, train_steps=None):
    """Trains to `train_steps` (default hparams.train_steps); returns a summary dict.

    Resumes from the newest readable checkpoint in output_dir. SIGTERM / Ctrl-C
    save a checkpoint and return with summary["interrupted"] set; with several
    workers, a signal to any of them stops all after the same step. A non-finite
    loss raises NonFiniteLossError naming the step, keeping the last good checkpoint.
    """
    train_steps = train_steps or self.hparams.train_steps
    if train_steps < 1:
      raise InputError(f"train_steps must be >= 1, got {train_steps}")
    start_step = self._start(train_steps)
    reporter = reporting.Reporter(self.output_dir, chief=self.chief, log=self.log,
                                  start_step=start_step)
    t0 = time.time()
    with signals.StopSignals() as stop_signals:
      try:
        result = self._loop(start_step, train_steps, reporter, stop_signals)
      finally:
        reporter.flush()
    summary = {"step": result["step"], "start_step": start_step, "loss": result["loss"],
               "seconds": time.time() - t0, "interrupted": result["interrupted"],
               "checkpoint": self.manager.latest_checkpoint, **result["eval"]}
    summary.update(self.dev.summary(result["early_stopped"]))
    png = reporter.close()
    if png:
      summary["curves_png"] = png
    self.log("done: " + ", ".join(
        f"{k}={v:.4g}" if isinstance(v, float) else f"{k}={v}" for k, v in summary.items()))
    return summary

  def _start(self, train_steps):
    """Records the run (chief), restores the newest checkpoint, logs the start; returns
    the step training starts from."""
    if self.chief:
      runs.save_run_info(self.output_dir, self.hparams.replace(train_steps=train_steps),
                         self.problem.name, self.vocab.vocab_size,
                         self.problem.vocab_path(self.data_dir), self.config.model_name,
                         self.config.hparams_set, bucket_mode=self.bucket_mode,
                         shuffle_buffer=self.shuffle_buffer,
                         input_streams=self.input_streams, warm_start=self.warm_start,
                         best=self.dev.best_record())
    start_step = self.restore()
    self.agreement.same_step(start_step, self.output_dir)
    if start_step == 0 and self.chief:  # datagen's length histogram (older data: a pass)
      counts = count_long_pairs(self.problem, self.data_dir, "train", self.hparams.max_length)
      self.log(f"train split: {counts['dropped']} of {counts['total']} pairs are longer than "
               f"max_length={self.hparams.max_length} and are dropped")
    batching = ("packed rows" if self.hparams.get("packed_length", 0)
                else self.bucket_mode + " buckets")
    if self.config.data_service_address:
      batching += f" made by the tf.data service at {self.config.data_service_address}"
    self.log(f"training {self.problem.name} with {self.model.count_params():,} parameters "
             f"on {self.strategy.num_replicas_in_sync} replica(s), XLA "
             f"{'on' if self.use_xla else 'off'}, {batching}, "
             f"steps {start_step} -> {train_steps}")
    return start_step

  def _loop(self, step, train_steps, reporter, stop_signals):
    """Steps to train_steps: update, check, log, evaluate, agree, save; then the final
    checkpoint. Returns {"step", "loss" (the last), "eval" (the last metrics),
    "interrupted", "early_stopped"}."""
    config = self.config
    window = reporting.ProgressWindow(self)
    guard = LossClimbGuard(self.hparams.learning_rate_warmup_steps)
    last_save, last_loss, eval_metrics, interrupted = time.time(), float("nan"), {}, False
    early = self.dev.stopped_before(step)
    while step < train_steps and not early:
      loss, tokens = self.train_step()
      step = int(self.step.numpy())
      self._check_loss(step, loss, guard)
      last_loss = loss
      window.add(loss, tokens)
      if step % config.log_every == 0 or step == train_steps:
        window.report(reporter, step, train_steps, float(self.optimizer.learning_rate))
      if self.dev.due(step, train_steps):
        eval_metrics = self.evaluate()
        early = self.dev.evaluated(step, eval_metrics, reporter)
        window.restart()
      stop, save_now = self.agreement(
          stop_signals.received is not None,
          0 < config.save_every_minutes * 60 < time.time() - last_save)
      if step % config.save_every == 0 or save_now:
        self.save()
        last_save = time.time()
      if stop:
        interrupted = True
        break
    if self.manager.latest_checkpoint is None or \
        not self.manager.latest_checkpoint.endswith(f"ckpt-{step}"):
      self.save()
    if interrupted:  # said after the save: a sweep's trainer whose sweep died cannot print
      self.log(f"signal {stop_signals.received} received at step {step}: saved, exiting"
               if stop_signals.received is not None else
               f"another worker was stopped at step {step}: saved, exiting")
    return {"step": step, "loss": last_loss, "eval": eval_metrics, "interrupted": interrupted,
            "early_stopped": early}

  def _check_loss(self, step, loss, guard):
    """NonFiniteLossError for a NaN / Inf loss; the loss-climb warning when the guard fires."""
    if not math.isfinite(loss):
      raise NonFiniteLossError(
          f"loss is {loss} at step {step}; stopping. The last good checkpoint "
          f"({self.manager.latest_checkpoint}) is kept. "
          f"{self.checkpoints.recovery(self.hparams.learning_rate_constant)}")
    climb = guard.update(step, loss)
    if climb:
      self.log(self._climb_warning(step, climb))


def _input_context(strategy):
  """The tf.distribute.InputContext this worker's input pipeline gets from `strategy`."""
  captured = []
  def capture(ctx):
    captured.append(ctx)
    return tf.data.Dataset.range(1)
  strategy.distribute_datasets_from_function(capture)
  return captured[0]


def train(problem_name, hparams_set, data_dir, output_dir, *, hparams="", train_steps=None,
          generate_data=False, tmp_dir=None, problem_kwargs=None, config=None, strategy=None,
          log=functools.partial(print, flush=True), **settings):
  """One call that does what `t2t-trainer` does; returns the summary dict.

      train("translate_ende_numbers", "transformer_tiny", "t2t_data", "t2t_train/numbers",
            train_steps=1500, seed=2, eval_every=250)   # or config=TrainerConfig(...)

  Args:
    problem_name: a registered problem (`_rev` allowed).
    hparams_set: a registered hparams set; `hparams`: overrides "a=1,b=2". None
      with `warm_start_from` a run: that run's hparams (hparams.json) and set name.
    data_dir, output_dir: data and run directories.
    train_steps: default hparams.train_steps.
    generate_data: run datagen first (skips finished files); with several workers the
      chief does, and the others wait until every split's files are finished.
    tmp_dir: datagen's downloads and raw files.
    problem_kwargs: the problem's constructor arguments (`datagen.make_problem`: raw_dir,
      parallel-text files, vocab_size; None values dropped), for datagen and training.
    config: a `TrainerConfig` (default TrainerConfig()); `settings`: fields of it to
      replace (seed=2, save_every=100, ...), a convenience for notebooks and sweeps.
    strategy, log: as `Trainer`'s.
  """
  from t2t_keras.data import datagen
  config = dataclasses.replace(config or TrainerConfig(), **settings)
  if hparams_set is None:
    base, hparams_set = _source_hparams(config.warm_start_from)
  else:
    base = registry.hparams(hparams_set)
  config = dataclasses.replace(config, hparams_set=hparams_set)
  hp = base.override(hparams)
  if train_steps:
    hp = hp.replace(train_steps=train_steps)
  problem_kwargs = problem_kwargs or {}
  if generate_data:
    strategy = strategy or make_strategy()
    if is_chief(strategy):
      datagen.generate(problem_name, data_dir, tmp_dir, log=log, num_workers=0,
                       **problem_kwargs)
    else:
      datagen.wait_for(problem_name, data_dir, log=log)
  problem = datagen.make_problem(problem_name, **problem_kwargs)
  trainer = Trainer(problem, hp, data_dir, output_dir, config, strategy=strategy, log=log)
  return trainer.train(hp.train_steps)


def _source_hparams(warm_start_from):
  """(HParams, hparams set name) of the run --warm_start_from names, for a run started
  without --hparams_set."""
  source = warm_start.resolve(warm_start_from) if warm_start_from else None
  if source is None or source.run_dir is None:
    raise InputError("no --hparams_set given, and --warm_start_from names no run directory "
                     "whose hparams.json could stand in for it")
  saved, info = runs.load_run_info(source.run_dir)
  return saved, info.get("hparams_set")
