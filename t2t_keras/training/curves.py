"""Learning-curve history (JSON lines) and its PNG plot in output_dir."""

import json
import os

HISTORY_FILE = "metrics.jsonl"
PNG_FILE = "learning_curves.png"


class History:
  """Appends {"step", metric: value} records; drops records past `start_step` (a resumed run redoes them)."""

  def __init__(self, path, start_step=0):
    self.path = path
    if os.path.exists(path):
      with open(path) as f:
        keep = [line for line in f if line.strip() and json.loads(line)["step"] <= start_step]
      with open(path + ".tmp", "w") as f:
        f.writelines(keep)
      os.replace(path + ".tmp", path)

  def add(self, step, **metrics):
    with open(self.path, "a") as f:
      f.write(json.dumps({"step": int(step), **{k: float(v) for k, v in metrics.items()}}) + "\n")


def read(path):
  with open(path) as f:
    return [json.loads(line) for line in f if line.strip()]


def plot(history_path, output_dir):
  """Writes learning_curves.png (losses, dev accuracy, dev BLEU if evaluated, lr); returns its path."""
  if not os.path.exists(history_path):
    return None
  import matplotlib
  matplotlib.use("Agg")
  import matplotlib.pyplot as plt
  records = read(history_path)
  series = lambda key: ([r["step"] for r in records if key in r], [r[key] for r in records if key in r])
  with_bleu = any("dev_bleu" in r for r in records)
  fig, axes = plt.subplots(1, 4 if with_bleu else 3, figsize=(17 if with_bleu else 13, 3.6))
  for key, label in (("loss", "train loss (label-smoothed)"), ("dev_loss", "dev loss")):
    xs, ys = series(key)
    if xs:
      axes[0].plot(xs, ys, label=label)
  axes[0].set_xlabel("step"); axes[0].set_ylabel("cross-entropy / token"); axes[0].legend()
  xs, ys = series("dev_accuracy")
  axes[1].plot(xs, ys, color="tab:green")
  axes[1].set_xlabel("step"); axes[1].set_ylabel("dev token accuracy")
  if with_bleu:
    for key, label in (("dev_bleu", "sacreBLEU"), ("dev_char_bleu", "character sacreBLEU")):
      xs, ys = series(key)
      axes[2].plot(xs, ys, marker=".", label=label)
    axes[2].set_xlabel("step"); axes[2].set_ylabel("dev BLEU (greedy)"); axes[2].legend()
  xs, ys = series("lr")
  axes[-1].plot(xs, ys, color="tab:orange")
  axes[-1].set_xlabel("step"); axes[-1].set_ylabel("learning rate")
  fig.tight_layout()
  path = os.path.join(output_dir, PNG_FILE)
  fig.savefig(path + ".tmp.png", dpi=90)
  plt.close(fig)
  os.replace(path + ".tmp.png", path)
  return path
