"""The loop's dev evaluations: when they are due, where their metrics go, and early stopping.

    monitor = DevMonitor(config, run_checkpoints, recorded_best, log)
    if monitor.due(step, train_steps):
      stop = monitor.evaluated(step, trainer.evaluate(), reporter)

Every config.eval_every steps and at the last step, the loop evaluates on dev
(`evaluation.Evaluator`) and hands the metrics here. They are reported (log,
TensorBoard, metrics.jsonl); with early stopping (config.early_stopping_steps) a new
best is saved as output_dir/best/ckpt-<step> (`checkpoints.RunCheckpoints.save_best`)
and training stops once `early_stopping.EarlyStopping`'s patience has run out.
"""

from t2t_keras.training.early_stopping import EarlyStopping


class DevMonitor:
  """Dev evaluations during training, and early stopping on them.

  Args:
    config: the run's `TrainerConfig` (eval_every, eval_bleu_sentences,
      early_stopping_steps, early_stopping_metric).
    checkpoints: the run's `checkpoints.RunCheckpoints` (its best/ when early stopping).
    recorded_best: what run.json recorded under "best" ({"metric", "value", "step",
      "checkpoint"}), or None.
    log: a print-like function.
  """

  def __init__(self, config, checkpoints, recorded_best, log):
    self.eval_every, self.bleu_sentences = config.eval_every, config.eval_bleu_sentences
    self.checkpoints, self.log = checkpoints, log
    self.early_stopping = None  # the tracker, without early stopping None
    if config.early_stopping_steps:
      self.early_stopping = EarlyStopping(config.early_stopping_metric,
                                          config.early_stopping_steps, recorded_best)

  def due(self, step, train_steps):
    """Whether the loop evaluates after `step`: every eval_every steps and at the last."""
    return bool(self.eval_every) and (step % self.eval_every == 0 or step == train_steps)

  def stopped_before(self, step):
    """Whether the run had stopped early already when it resumed at `step` (said in the log)."""
    stopped = bool(self.early_stopping and self.early_stopping.should_stop(step))
    if stopped:
      self.log("already stopped: " + self.early_stopping.reason(step))
    return stopped

  def evaluated(self, step, metrics, reporter):
    """Reports the dev `metrics` of `step` to `reporter`; with early stopping, a new best is
    saved. Returns whether training stops early here."""
    reporter.evaluation(step, metrics, self.bleu_sentences)
    if self.early_stopping is None:
      return False
    if self.early_stopping.update(step, metrics):
      self.checkpoints.save_best(step, self.early_stopping)
    if self.early_stopping.should_stop(step):
      self.log(self.early_stopping.reason(step))
      return True
    return False

  def best_record(self):
    """What run.json keeps under "best": the best evaluation so far, or None."""
    if self.early_stopping and self.early_stopping.step is not None:
      return self.early_stopping.record(self.checkpoints.best.latest_checkpoint)
    return None

  def summary(self, early_stopped):
    """train()'s summary entries: {"early_stopped", "best_checkpoint"}, {} without early
    stopping."""
    if self.early_stopping is None:
      return {}
    return {"early_stopped": early_stopped,
            "best_checkpoint": self.checkpoints.best.latest_checkpoint}
