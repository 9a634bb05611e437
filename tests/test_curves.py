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


def test_plot_adds_a_bleu_panel_when_bleu_was_evaluated(tmp_path):
  (tmp_path / "a").mkdir()
  (tmp_path / "b").mkdir()
  without = curves.plot(_history(tmp_path / "a", False).path, str(tmp_path / "a"))
  with_bleu = curves.plot(_history(tmp_path / "b", True).path, str(tmp_path / "b"))
  # 13 x 3.6 inches (3 panels) and 17 x 3.6 inches (4 panels) at 90 dpi.
  assert _png_size(without) == (1170, 324)
  assert _png_size(with_bleu) == (1530, 324)


def test_history_drops_records_after_the_resumed_step(tmp_path):
  path = _history(tmp_path, True).path
  curves.History(path, start_step=100)
  assert [r["step"] for r in curves.read(path)] == [100, 100]
  assert curves.plot(str(tmp_path / "missing.jsonl"), str(tmp_path)) is None
