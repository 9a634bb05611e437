"""Resident memory of one process that trains again and again: what a sweep, a server's
hot reload or the test suite does.

    python benchmarks/graph_memory.py            # 5 trainings of 20 steps, both decorators

In a child process per decorator, `transformer_tiny` trains on `translate_ende_numbers`
--trainings times (--steps each, a new run directory each time), then Keras' session is
cleared, garbage collected and malloc trimmed. Printed per training: the resident memory
(VmRSS, MiB) and the number of entries in TensorFlow's gradient registry, for the
package's `layers/custom_gradient.custom_gradient` and for plain `tf.custom_gradient`
(each module's `custom_gradient` name pointed at it, feed_forward's `matmul` decorated
with it). One run on one CPU: compare the two
columns, not runs across machines.
"""

import argparse
import ctypes
import gc
import json
import os
import subprocess
import sys
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

# The modules that decorate inside their functions (each call looks the name up).
_USERS = ("t2t_keras.layers.dropout", "t2t_keras.layers.fused_residual",
          "t2t_keras.layers.layer_norm", "t2t_keras.training.loss")


def _rss_mib():
  with open("/proc/self/status") as f:
    return next(int(line.split()[1]) // 1024 for line in f if line.startswith("VmRSS"))


def measure(decorator, trainings, steps):
  """[(VmRSS MiB, registry entries)] after each training, in this process."""
  import importlib  # pylint: disable=import-outside-toplevel

  import keras  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel,no-name-in-module
  from tensorflow.python.framework import ops

  from t2t_keras.training import trainer  # pylint: disable=import-outside-toplevel
  if decorator == "tf.custom_gradient":
    for name in _USERS:
      importlib.import_module(name).custom_gradient = tf.custom_gradient
    # matmul is decorated where it is defined: its one user gets TensorFlow's decoration.
    from t2t_keras.layers import feed_forward, matmul  # pylint: disable=import-outside-toplevel
    feed_forward.matmul = tf.custom_gradient(matmul.matmul.__wrapped__)
  registry = ops._gradient_registry._registry  # pylint: disable=protected-access
  root = tempfile.mkdtemp(prefix="graph_memory_")
  rows = []
  for i in range(trainings):
    trainer.train("translate_ende_numbers", "transformer_tiny", f"{root}/data", f"{root}/run{i}",
                  train_steps=steps, generate_data=i == 0, log=lambda *a, **k: None)
    keras.backend.clear_session()
    gc.collect()
    ctypes.CDLL("libc.so.6").malloc_trim(0)
    rows.append((_rss_mib(), len(registry)))
  return rows


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--trainings", type=int, default=5)
  parser.add_argument("--steps", type=int, default=20)
  parser.add_argument("--child", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.child:
    print(json.dumps(measure(args.child, args.trainings, args.steps)))
    return
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from peer_sides import cpu_model  # pylint: disable=import-outside-toplevel
  with open("/proc/cpuinfo") as f:
    print(f"CPU: {cpu_model(f.read()) or 'unknown'}; {args.trainings} trainings of "
          f"{args.steps} steps in one process")
  columns = {}
  for decorator in ("layers.custom_gradient", "tf.custom_gradient"):
    out = subprocess.run([sys.executable, __file__, f"--child={decorator}",
                          f"--trainings={args.trainings}", f"--steps={args.steps}"],
                         check=True, capture_output=True, text=True).stdout
    columns[decorator] = json.loads(out.strip().splitlines()[-1])
  print(f"{'training':>8}  {'ours: MiB, entries':>20}  {'tf.custom_gradient: MiB, entries':>33}")
  for i, (ours, theirs) in enumerate(zip(*columns.values())):
    print(f"{i + 1:>8}  {ours[0]:>13,} {ours[1]:>6}  {theirs[0]:>26,} {theirs[1]:>6}")
  growth = {k: (v[-1][0] - v[0][0]) / max(1, len(v) - 1) for k, v in columns.items()}
  print("growth per training after the first: "
        + ", ".join(f"{k} {g:.0f} MiB" for k, g in growth.items()))


if __name__ == "__main__":
  main()
