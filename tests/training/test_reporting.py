"""training/reporting.py and its progress window: the progress line, its ETA and
tokens/s, and what goes to metrics.jsonl, against hand-worked figures."""

import json
import types

import pytest

from t2t_keras.training import reporting


@pytest.mark.parametrize("seconds, text", [
    (0, "0:00:00"), (59.9, "0:00:59"), (3725.9, "1:02:05"), (36 * 3600 + 61, "36:01:01"),
    (-3, "0:00:00")])
def test_format_time(seconds, text):
  assert reporting.format_time(seconds) == text


def test_progress_window_line_and_history(tmp_path, monkeypatch):
  """Three steps of 1,000 and 2,000 and 3,000 target tokens over 4 s, 0.5 s of them
  waiting for input (the trainer had waited 7 s before the window): loss the mean of the
  three, 1,500 tokens/s, (100 - 40) steps left at 4/3 s a step: 80 s, input wait 12.5%."""
  clock = [1000.0]
  monkeypatch.setattr(reporting.time, "time", lambda: clock[0])
  lines = []
  reporter = reporting.Reporter(str(tmp_path), chief=True, log=lines.append, start_step=0)
  loop = types.SimpleNamespace(input_wait=7.0)
  window = reporting.ProgressWindow(loop)
  for loss, tokens in ((3.0, 1000), (2.0, 2000), (1.0, 3000)):
    window.add(loss, tokens)
  clock[0] += 4.0
  loop.input_wait += 0.5
  window.report(reporter, step=40, train_steps=100, learning_rate=1.25e-3)
  reporter.flush()
  assert lines == ["step      40  loss 2.0000  lr 1.250e-03  1,500 tgt tok/s  ETA 0:01:20  "
                   "input wait 12.5%"]
  record = json.loads((tmp_path / "metrics.jsonl").read_text().splitlines()[0])
  assert {k: record[k] for k in ("step", "loss", "lr", "tokens_per_second", "input_wait")} == {
      "step": 40, "loss": 2.0, "lr": 1.25e-3, "tokens_per_second": 1500.0, "input_wait": 0.125}
  # A new window, from now and from the wait so far.
  assert (window.steps, window.tokens, window.start, window.input_wait) == (0, 0.0, 1004.0, 7.5)
