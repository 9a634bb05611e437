"""A run's settings beside its hparams: what `Trainer` takes and `t2t-trainer`'s flags fill.

    config = TrainerConfig(seed=2, save_every=1000, eval_every=1000)
    Trainer(problem, hparams, data_dir, output_dir, config).train()

HParams say what a run is (a resume with other hparams is refused); a TrainerConfig
says how this process runs it: seed, cadence, checkpoints, warm start, early stopping,
the training stream. It is frozen and checked when made: a bad field raises InputError
naming the field (and its t2t-trainer flag) and what was expected.
"""

import dataclasses
import numbers
import os
from typing import Optional

from t2t_keras.errors import InputError
from t2t_keras.training import early_stopping

# Fields whose t2t-trainer flag has another name.
_FLAG_NAMES = {"model_name": "model", "early_stopping_steps": "eval_early_stopping_steps",
               "early_stopping_metric": "eval_early_stopping_metric"}


@dataclasses.dataclass(frozen=True)
class TrainerConfig:
  """How one training run is carried out (every field has t2t-trainer's default).

  Attributes:
    model_name: a registered model (--model).
    hparams_set: the hparams set's name, recorded in run.json (None: hparams not from a set).
    use_xla: jit-compile the per-replica forward/backward; None: on with GPUs, off on CPU.
    seed: model init, dropout and data order (int).
    save_every: checkpoint every N steps (int >= 1).
    save_every_minutes: and every M minutes (number >= 0; 0: by steps only).
    keep_checkpoints: how many recent checkpoints to keep (int >= 1).
    eval_every: dev metrics every N steps (int >= 0; 0: off).
    eval_steps: dev batches per evaluation (int >= 1).
    eval_bleu_sentences: greedy-decode this many dev sentences for BLEU (int >= 0; 0: off).
    log_every: a progress line every N steps (int >= 1).
    warm_start_from: a run directory, averaged run or checkpoint prefix to start from, or None.
    warm_start_optimizer: also take the warm start's optimizer state (bool).
    early_stopping_steps: stop after this many steps without a better dev metric (0: off).
    early_stopping_metric: that metric, a key of `early_stopping.METRICS`.
    shuffle_buffer: records in the training stream's shuffle buffer (int >= 1); None:
      pipeline.DEFAULT_SHUFFLE_BUFFER (a resumed run keeps its own).
    input_streams: parallel batching streams of the training pipeline (int >= 1); None: 1
      (a resumed run keeps its own).
    data_service_address: a tf.data service dispatcher ("grpc://host:port") that makes the
      training batches, or None (this process).
    reset_input_position: resume the model, optimizer and step but not the checkpoint's
      place in the training data (the data order starts afresh from `seed`): for a
      checkpoint whose saved read-ahead holds a read error (bool).
  """

  model_name: str = "transformer"
  hparams_set: Optional[str] = None
  use_xla: Optional[bool] = None
  seed: int = 1
  save_every: int = 500
  save_every_minutes: float = 10.0
  keep_checkpoints: int = 5
  eval_every: int = 500
  eval_steps: int = 20
  eval_bleu_sentences: int = 64
  log_every: int = 50
  warm_start_from: Optional[str] = None
  warm_start_optimizer: bool = False
  early_stopping_steps: int = 0
  early_stopping_metric: str = "loss"
  shuffle_buffer: Optional[int] = None
  input_streams: Optional[int] = None
  data_service_address: Optional[str] = None
  reset_input_position: bool = False

  def __post_init__(self):
    if isinstance(self.warm_start_from, os.PathLike):
      object.__setattr__(self, "warm_start_from", os.fspath(self.warm_start_from))
    for name, (kind, minimum, optional) in _RULES.items():
      _check(name, getattr(self, name), kind, minimum, optional)
    self._check_early_stopping()

  def _check_early_stopping(self):
    """InputError for an early-stopping metric that is unknown or never measured."""
    metric = self.early_stopping_metric
    if metric not in early_stopping.METRICS:
      raise InputError(f"--eval_early_stopping_metric={metric}: one of "
                       f"{', '.join(early_stopping.METRICS)}")
    if not self.early_stopping_steps:
      return
    if not self.eval_every:
      raise InputError("--eval_early_stopping_steps needs evaluations: set --eval_every > 0")
    if "bleu" in metric and not self.eval_bleu_sentences:
      raise InputError(f"--eval_early_stopping_metric={metric} needs dev BLEU: set "
                       "--eval_bleu_sentences > 0")


# field -> (type: int, float, bool or str; the least value or None; whether None is allowed)
_RULES = {
    "model_name": (str, None, False), "hparams_set": (str, None, True),
    "use_xla": (bool, None, True), "seed": (int, None, False),
    "save_every": (int, 1, False), "save_every_minutes": (float, 0, False),
    "keep_checkpoints": (int, 1, False), "eval_every": (int, 0, False),
    "eval_steps": (int, 1, False), "eval_bleu_sentences": (int, 0, False),
    "log_every": (int, 1, False), "warm_start_from": (str, None, True),
    "warm_start_optimizer": (bool, None, False), "early_stopping_steps": (int, 0, False),
    "early_stopping_metric": (str, None, False), "shuffle_buffer": (int, 1, True),
    "input_streams": (int, 1, True), "data_service_address": (str, None, True),
    "reset_input_position": (bool, None, False),
}
_KINDS = {int: "an int", float: "a number", bool: "a bool", str: "a string"}


def _is(value, kind):
  """Whether `value` is of `kind` (int: any integral but bool; float: any real but bool)."""
  if kind is bool:
    return isinstance(value, bool)
  if isinstance(value, bool):
    return False
  return isinstance(value, {int: numbers.Integral, float: numbers.Real, str: str}[kind])


def _check(name, value, kind, minimum, optional):
  """InputError naming the field and its flag unless `value` is a `kind` >= `minimum`
  (or None where `optional`)."""
  if value is None and optional:
    return
  if _is(value, kind) and (minimum is None or value >= minimum):
    return
  expected = _KINDS[kind] + ("" if minimum is None else f" >= {minimum}") + \
      (" or None" if optional else "")
  raise InputError(f"TrainerConfig.{name}={value!r} (--{_FLAG_NAMES.get(name, name)}): "
                   f"expected {expected}")
