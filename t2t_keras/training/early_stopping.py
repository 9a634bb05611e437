"""Early stopping on a dev metric (t2t's --eval_early_stopping_steps), and the best checkpoint.

    tracker = EarlyStopping("loss", patience_steps=2000)
    if tracker.update(step, evaluator.evaluate()):   # a new best: save it
        ...
    if tracker.should_stop(step):                     # 2000 steps without a better one
        ...

The Trainer evaluates every eval_every steps; after each evaluation it asks the
tracker. A new best (strictly better than every earlier evaluation) is saved as
output_dir/best/ckpt-<step>, beside a copy of the run's hparams.json, run.json
and vocabulary, so `best/` is a run directory the decoder, exporter and t2t-avg-all
read as they read any run; run.json records {"metric", "value", "step",
"checkpoint"} under "best". Training stops once `patience_steps` steps have passed
since the best evaluation; a resumed run reads the best back from run.json, so
restarting a run that stopped early trains no further.
"""

METRICS = {  # the name the flag takes -> (the evaluator's key, whether lower is better)
    "loss": ("dev_loss", True),
    "accuracy": ("dev_accuracy", False),
    "bleu": ("dev_bleu", False),
    "char_bleu": ("dev_char_bleu", False),
}
BEST_DIR = "best"


class EarlyStopping:
  """The best value of one dev metric so far, and when it was seen.

  Args:
    metric: a key of METRICS.
    patience_steps: stop once this many steps passed since the best evaluation.
    best: what a run recorded before ({"value", "step", ...}), or None.
  """

  def __init__(self, metric, patience_steps, best=None):
    if metric not in METRICS:
      raise ValueError(f"early-stopping metric {metric!r}: one of {', '.join(METRICS)}")
    self.metric, self.patience_steps = metric, patience_steps
    self.key, self.lower_is_better = METRICS[metric]
    best = best if best and best.get("metric") == metric else {}
    self.value, self.step = best.get("value"), best.get("step")

  def update(self, step, metrics):
    """Takes an evaluation's metrics at `step`; True when it is a new best."""
    value = float(metrics[self.key])
    better = self.value is None or (value < self.value if self.lower_is_better
                                    else value > self.value)
    if better:
      self.value, self.step = value, step
    return better

  def should_stop(self, step):
    return self.step is not None and step - self.step >= self.patience_steps

  def record(self, checkpoint):
    """What run.json keeps under "best"."""
    return {"metric": self.metric, "value": self.value, "step": self.step,
            "checkpoint": checkpoint}

  def reason(self, step):
    """One line: why training stops at `step`."""
    return (f"early stopping at step {step}: dev {self.metric} has not improved for "
            f"{step - self.step} steps (best {self.value:.4g} at step {self.step}, "
            f"patience {self.patience_steps})")
