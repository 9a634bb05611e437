"""training/curves.py: metrics.jsonl history and the learning-curve PNG."""

import struct

from t2t_keras.training import curves


def _png_size(path):
  with open(path, "rb") as f:
    header = f.read(24)
  assert header[:8] == b"\x89PNG\r\n\x1a\n"
  return struct.unpack(">II", header[16:24])


def _history(tmp_path, with_bleu):
  history = curves.History(str(tmp_path / curves.HISTORY_FILE))
  for step in (100, 200):
    history.add(step, loss=5.0 - step / 100, lr=1e-3, tokens_per_second=2000.0)
    extra = {"dev_bleu": step / 10, "dev_char_bleu": step / 5} if with_bleu else {}
    history.add(step, dev_loss=4.0, dev_accuracy=0.5, **extra)
  return history


def test_panels_hold_the_history_and_a_bleu_panel_when_bleu_was_evaluated(tmp_path):
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  without = curves.panels(curves.read(_history(tmp_path / "a", False).path))
  with_bleu = curves.panels(curves.read(_history(tmp_path / "b", True).path))
  assert [y for y, _ in without] == ["cross-entropy / token", "dev token accuracy",
                                     "learning rate"]
  assert [y for y, _ in with_bleu] == ["cross-entropy / token", "dev token accuracy",
                                       "dev BLEU (greedy)", "learning rate"]
  # _history's records, line by line: loss 5 - step / 100, dev 4.0, BLEU step / 10 ...
  assert with_bleu[0][1] == [("train loss (label-smoothed)", [100, 200], [4.0, 3.0]),
                             ("dev loss", [100, 200], [4.0, 4.0])]
  assert with_bleu[1][1] == [("dev token accuracy", [100, 200], [0.5, 0.5])]
  assert with_bleu[2][1] == [("sacreBLEU", [100, 200], [10.0, 20.0]),
                             ("character sacreBLEU", [100, 200], [20.0, 40.0])]
  assert with_bleu[3][1] == [("learning rate", [100, 200], [1e-3, 1e-3])]


def test_plot_writes_one_panel_per_entry(tmp_path):
  """4 inches a panel plus 1, 3.6 high, at 90 dpi."""
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  assert _png_size(curves.plot(_history(tmp_path / "a", False).path, str(tmp_path / "a"))) == (
      1170, 324)
  assert _png_size(curves.plot(_history(tmp_path / "b", True).path, str(tmp_path / "b"))) == (
      1530, 324)


def test_history_drops_records_after_the_resumed_step(tmp_path):
  path = _history(tmp_path, True).path
  curves.History(path, start_step=100)
  assert [r["step"] for r in curves.read(path)] == [100, 100]
  assert curves.plot(str(tmp_path / "missing.jsonl"), str(tmp_path)) is None
