"""Early stopping (--eval_early_stopping_steps): the step it stops at, the best checkpoint,
its record, resume, and the one-line errors."""

import json
import os

import numpy as np
import pytest

from t2t_keras import bin as t2t_bin
from t2t_keras import runs
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.errors import InputError
from t2t_keras.training.early_stopping import EarlyStopping
from test_trainer import copy_data, make_trainer  # noqa: F401  (fixture)


def test_tracker_directions_patience_and_record():
  loss = EarlyStopping("loss", 10)
  assert [loss.update(s, {"dev_loss": v}) for s, v in ((5, 3.0), (10, 2.5), (15, 2.5))] == [
      True, True, False]  # equal is not better
  assert not loss.should_stop(19) and loss.should_stop(20)
  bleu = EarlyStopping("bleu", 5, best={"metric": "bleu", "value": 30.0, "step": 100})
  assert not bleu.update(105, {"dev_bleu": 29.0}) and bleu.should_stop(105)
  assert bleu.update(110, {"dev_bleu": 31.0}) and bleu.record("c") == {
      "metric": "bleu", "value": 31.0, "step": 110, "checkpoint": "c"}
  # A best recorded for another metric does not carry over.
  assert EarlyStopping("loss", 5, best={"metric": "bleu", "value": 31.0, "step": 1}).step is None
  with pytest.raises(ValueError, match="one of loss, accuracy, bleu, char_bleu"):
    EarlyStopping("perplexity", 5)


def _scripted(trainer, values, key="dev_loss"):
  """trainer.evaluate returns values[step] as `key` for the current step (the rest fixed)."""
  def evaluate(steps=None):
    metrics = {"dev_loss": 1.0, "dev_perplexity": 2.7, "dev_accuracy": 0.5, "dev_tokens": 9.0,
               "dev_bleu": 1.0, "dev_char_bleu": 1.0}
    metrics[key] = values[int(trainer.step.numpy())]
    return metrics
  trainer.evaluate = evaluate
  return trainer


def _weights(model):
  return [np.array(v.numpy()) for v in model.trainable_variables]


@pytest.mark.heavy
def test_stops_at_the_right_step_and_keeps_the_best(copy_data, tmp_path):  # noqa: F811
  out = tmp_path / "run"
  kwargs = dict(eval_every=5, save_every=5, early_stopping_steps=10)
  losses = {5: 3.0, 10: 2.5, 15: 2.6, 20: 2.55, 25: 2.0}
  summary = _scripted(make_trainer(copy_data, out, **kwargs), losses).train(40)
  assert summary["step"] == 20 and summary["early_stopped"] and not summary["interrupted"]
  best = os.path.join(str(out), "best", "ckpt-10")
  assert summary["best_checkpoint"] == best
  info = json.loads((out / runs.RUN_FILE).read_text())
  assert info["best"] == {"metric": "loss", "value": 2.5, "step": 10, "checkpoint": best}
  # best/ is a run directory holding the step-10 weights.
  from_best = runs.load(str(out / "best"))
  assert from_best.checkpoint_path == best
  at_10 = runs.load(str(out), checkpoint_path=str(out / "ckpt-10")).model
  for a, b in zip(_weights(from_best.model), _weights(at_10)):
    np.testing.assert_array_equal(a, b)
  # Run again with the same flags: it stopped already and trains no further.
  messages = []
  again = _scripted(make_trainer(copy_data, out, log=messages.append, **kwargs), losses)
  summary = again.train(40)
  assert summary["step"] == 20 and summary["early_stopped"]
  assert any(m.startswith("already stopped: early stopping at step 20: dev loss has not "
                          "improved for 10 steps (best 2.5 at step 10") for m in messages)
  assert json.loads((out / runs.RUN_FILE).read_text())["best"]["step"] == 10


@pytest.mark.heavy
def test_a_higher_is_better_metric_and_a_run_that_never_stops(copy_data, tmp_path):  # noqa: F811
  bleu = {4: 10.0, 8: 12.0, 12: 11.0, 16: 12.5}
  trainer = _scripted(make_trainer(copy_data, tmp_path / "run", eval_every=4,
                                   eval_bleu_sentences=8, early_stopping_steps=8,
                                   early_stopping_metric="bleu"), bleu, key="dev_bleu")
  summary = trainer.train(16)
  assert summary["step"] == 16 and not summary["early_stopped"]
  assert summary["best_checkpoint"].endswith(os.path.join("best", "ckpt-16"))
  assert os.listdir(tmp_path / "run" / "best").count("ckpt-8.index") == 0  # only the best


@pytest.mark.parametrize("kwargs, message", [
    (dict(eval_every=0, early_stopping_steps=5), "needs evaluations: set --eval_every > 0"),
    (dict(eval_every=5, early_stopping_steps=5, early_stopping_metric="bleu"),
     "--eval_early_stopping_metric=bleu needs dev BLEU: set --eval_bleu_sentences > 0"),
])
def test_settings_that_cannot_work_are_refused(copy_data, tmp_path, kwargs, message):  # noqa: F811
  with pytest.raises(InputError, match=message.replace("(", r"\(")):
    make_trainer(copy_data, tmp_path / "run", **kwargs)


def test_t2t_trainer_flag(copy_data, tmp_path, capsys):  # noqa: F811
  args = ["t2t-trainer", "--problem=algorithmic_copy", f"--data_dir={copy_data}",
          f"--output_dir={tmp_path / 'run'}", "--train_steps=2", "--eval_every=0",
          "--eval_early_stopping_steps=100"]
  assert t2t_bin.run_in_process(trainer_bin, args) != 0
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1] == ("t2t-trainer: error: --eval_early_stopping_steps needs evaluations: set "
                     "--eval_every > 0")
