"""Learning-curve history (JSON lines) and its PNG plot in output_dir."""

import io
import json
import os

from t2t_keras import fileio

HISTORY_FILE = "metrics.jsonl"
PNG_FILE = "learning_curves.png"


class History:
  """Appends {"step", metric: value} records; drops records past `start_step` (a resumed run redoes them)."""

  def __init__(self, path, start_step=0):
    self.path = path
    if fileio.exists(path):
      keep = [line + "\n" for line in fileio.read_text(path).splitlines()
              if line.strip() and json.loads(line)["step"] <= start_step]
      fileio.write_atomic(path, "".join(keep))

  def add(self, step, **metrics):
    with fileio.open(self.path, "a") as f:
      f.write(json.dumps({"step": int(step), **{k: float(v) for k, v in metrics.items()}}) + "\n")


class NoHistory:
  """What a worker other than the chief records: nothing."""
  path = None

  def add(self, step, **metrics):
    del step, metrics


def read(path):
  return [json.loads(line) for line in fileio.read_text(path).splitlines() if line.strip()]


def panels(records):
  """What `plot` draws, one panel per entry: [(y label, [(line label, steps, values)])]:
  losses, dev accuracy, dev BLEU (when evaluated), learning rate."""
  def line(key, label):
    return label, [r["step"] for r in records if key in r], [r[key] for r in records if key in r]

  out = [("cross-entropy / token", [l for l in (line("loss", "train loss (label-smoothed)"),
                                                line("dev_loss", "dev loss")) if l[1]]),
         ("dev token accuracy", [line("dev_accuracy", "dev token accuracy")])]
  if any("dev_bleu" in r for r in records):
    out.append(("dev BLEU (greedy)", [line("dev_bleu", "sacreBLEU"),
                                      line("dev_char_bleu", "character sacreBLEU")]))
  return out + [("learning rate", [line("lr", "learning rate")])]


def plot(history_path, output_dir):
  """Writes learning_curves.png (`panels` of the history, side by side); returns its path."""
  if not fileio.exists(history_path):
    return None
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  drawn = panels(read(history_path))
  fig, axes = plt.subplots(1, len(drawn), figsize=(4 * len(drawn) + 1, 3.6))
  for ax, (ylabel, lines) in zip(axes, drawn):
    for label, xs, ys in lines:
      ax.plot(xs, ys, label=label, marker="." if "BLEU" in ylabel else None)
    ax.set_xlabel("step")
    ax.set_ylabel(ylabel)
    if len(lines) > 1:
      ax.legend()
  fig.tight_layout()
  path = os.path.join(output_dir, PNG_FILE)
  png = io.BytesIO()
  fig.savefig(png, format="png", dpi=90)
  plt.close(fig)
  fileio.write_atomic(path, png.getvalue())
  return path
