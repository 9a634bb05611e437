"""MirroredStrategy over N logical devices against one device: the same loss and gradients.

    .venv/bin/python benchmarks/multi_device_check.py [--size tiny] [--devices 1,2,4]
        [--steps 10] [--memory_mb 16384] [--json out.json]

The first physical GPU (or, with none, the CPU) is carved into max(--devices) logical
devices (`tf.config.set_logical_device_configuration`; a GPU's each get --memory_mb), so
the design card's multi-GPU path runs on a machine with one card, and on a CPU in the
test suite. For each N: a Trainer of step_bench.py's fixed batch at --size (--batch
sentences, default the size's, split evenly over the replicas as the Trainer's pipeline
hands them out; every dropout 0, so replicas draw no different masks), on
`OneDeviceStrategy` for N = 1 and `MirroredStrategy` over the first N logical devices
otherwise, its model set to the N = 1 model's initial weights, each N in a process of its
own (TensorFlow's collective ops keep one group per key in a process, so a second
MirroredStrategy of another size there fails), the reference's weights and figures passed
on in a temporary folder. Then:

  gradients  the loss sum and the gradient of (loss sum / the update's target tokens) of
             each replica's slice (training/step.py's `gradients`, under strategy.run),
             summed over replicas: each variable's max |g_N - g_1| over max |g_1|;
  updates    --check_steps Trainer.train_step() updates (forward, backward, all-reduce,
             Adam): the loss of each against N = 1's (after the first, each loss is of
             the weights the earlier updates left, so the whole update path is in it;
             weights are not compared element by element: Adam's first steps move a
             weight by about the learning rate whatever its gradient's size, so a
             gradient near 0 whose sign float rounding flips moves it the other way);
  time       then --steps timed updates after 2 untimed: the median step time (one card
             carved N ways shares its compute, so this shows the overhead of N replicas,
             not a speed-up).

On a GPU, TensorFloat-32 is turned off (TensorFlow's default on Ampere and later rounds
float32 matmul inputs to 10 bits of mantissa): this compares float32 with float32. With
--tf32 it stays on, as it was in the first GPU run (docs/notebook.md).

A line `MULTI_DEVICE N=2 ... PASS|FAIL` per N (PASS: every relative difference under
--rtol), naming the variable whose gradient differs most, and one `MULTI_DEVICE_RESULT
{json}` with every figure; exit status 1 if any N fails. The loss per token and gradients
are those of the same global batch, so they must agree up to floating-point summation
order.
"""

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
import bench_sizes  # noqa: E402  pylint: disable=wrong-import-position
import step_bench  # noqa: E402  pylint: disable=wrong-import-position

RESULT_TAG = "MULTI_DEVICE_RESULT "
NO_DROPOUT = "layer_prepostprocess_dropout=0.0,attention_dropout=0.0,relu_dropout=0.0"


def carve(n, memory_mb):
  """Splits the first GPU (else the CPU) into n logical devices; returns (type, names)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  gpus = tf.config.list_physical_devices("GPU")
  device, kind = (gpus[0], "GPU") if gpus else (tf.config.list_physical_devices("CPU")[0], "CPU")
  config = (tf.config.LogicalDeviceConfiguration(memory_limit=memory_mb) if gpus
            else tf.config.LogicalDeviceConfiguration())
  current = tf.config.get_logical_device_configuration(device) or []
  if len(current) < n:
    tf.config.set_logical_device_configuration(device, [config] * n)
  return kind, [d.name for d in tf.config.list_logical_devices(kind)]


def relative_differences(ours, reference):
  """max |a - b| / max |b| for each pair of arrays."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  return [float(np.abs(np.asarray(a, np.float64) - b).max()) / max(float(np.abs(b).max()),
                                                                    1e-30)
          for a, b in zip(ours, reference)]


def summed_gradients(trainer, src, tgt):
  """(loss sum, [gradients as float64 arrays]) of the global batch, computed per replica on
  its slice by training/step.py's `gradients` and summed over the replicas."""
  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  from t2t_keras.training import step
  strategy, n = trainer.strategy, trainer.strategy.num_replicas_in_sync
  slices = list(zip(np.split(src, n), np.split(tgt, n)))
  tokens = float(np.count_nonzero(tgt))

  def value(ctx):
    s, t = slices[ctx.replica_id_in_sync_group]
    return {"inputs": tf.constant(s), "targets": tf.constant(t)}

  batches = strategy.experimental_distribute_values_from_function(value)

  @tf.function(autograph=False)
  def run(batches):
    def replica(batch):
      grads, total = step.gradients(trainer.model, batch, tf.constant(tokens),
                                    trainer.hparams.label_smoothing, compact=False)
      return [tf.convert_to_tensor(g) for g in grads], total
    grads, total = strategy.run(replica, args=(batches,))
    return ([strategy.reduce(step.SUM, g, axis=None) for g in grads],
            strategy.reduce(step.SUM, total, axis=None))

  grads, total = run(batches)
  return float(total), [g.numpy().astype(np.float64) for g in grads]


def check(n, devices, args, data_dir, size, work):
  """N replicas' figures; N = 1 writes its initial weights and figures to `work` (npz),
  the others start from those weights and compare with those figures."""
  # pylint: disable=import-outside-toplevel
  import numpy as np
  import tensorflow as tf
  strategy = (tf.distribute.OneDeviceStrategy(devices[0]) if n == 1
              else tf.distribute.MirroredStrategy(devices[:n]))
  reference = os.path.join(work, "reference.npz")
  with tempfile.TemporaryDirectory(prefix="multi_device_") as out:
    trainer, _ = step_bench.bench_trainer(data_dir, out, NO_DROPOUT, size, args.batch,
                                          strategy=strategy)
    assert trainer.strategy.num_replicas_in_sync == n
    if n == 1:
      initial = [w.numpy() for w in trainer.model.weights]
    else:
      ref = np.load(reference)
      for i, var in enumerate(trainer.model.weights):
        var.assign(ref[f"w{i}"])
    src, tgt = step_bench.fixed_batch(size, args.batch)
    total, grads = summed_gradients(trainer, src, tgt)
    losses = [trainer.train_step()[0] for _ in range(args.check_steps)]
    for _ in range(2):
      trainer.train_step()
    times = []
    for _ in range(args.steps):
      start = time.perf_counter()
      trainer.train_step()
      times.append(time.perf_counter() - start)
  fig = {"n": n, "loss_sum": total, "losses": losses, "median_step_s": statistics.median(times),
         "step_times_s": times, "xla": trainer.use_xla}
  if n == 1:
    np.savez(reference, losses=np.array([total] + losses),
             **{f"w{i}": w for i, w in enumerate(initial)},
             **{f"g{i}": g for i, g in enumerate(grads)})
    return fig
  ref = np.load(reference)
  diffs = relative_differences(grads, [ref[f"g{i}"] for i in range(len(grads))])
  grad_diff = max(diffs)
  fig["worst_variable"] = trainer.model.trainable_variables[diffs.index(grad_diff)].path
  loss_diff = max(abs(a - b) / abs(b) for a, b in zip([total] + losses, ref["losses"]))
  fig.update({"grad_rel_diff": grad_diff, "loss_rel_diff": loss_diff,
              "pass": max(grad_diff, loss_diff) < args.rtol})
  return fig


def run_child(args, n, work):
  """This script for N replicas in a process of its own; its figures (None on failure)."""
  import subprocess  # pylint: disable=import-outside-toplevel
  argv = [sys.executable, os.path.abspath(__file__), f"--replicas={n}", f"--work={work}",
          f"--size={args.size}", f"--devices={args.devices}", f"--steps={args.steps}",
          f"--check_steps={args.check_steps}", f"--rtol={args.rtol}",
          f"--memory_mb={args.memory_mb}", *([f"--batch={args.batch}"] if args.batch else []),
          *(["--tf32"] if args.tf32 else []),
          *([f"--data_dir={args.data_dir}"] if args.data_dir else [])]
  proc = subprocess.run(argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                        check=False)
  lines = proc.stdout.splitlines()
  found = [l for l in lines if l.startswith(RESULT_TAG)]
  if proc.returncode or not found:
    print("\n".join(lines[-30:]), flush=True)
    print(f"MULTI_DEVICE N={n}: the process failed (exit code {proc.returncode})", flush=True)
    return None
  return json.loads(found[-1][len(RESULT_TAG):])


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--size", default="tiny", choices=list(bench_sizes.SIZES))
  parser.add_argument("--batch", type=int, default=None,
                      help="sentences a step (default the size's; divisible by every N)")
  parser.add_argument("--devices", default="1,2,4", help="replica counts, 1 first")
  parser.add_argument("--check_steps", type=int, default=3, help="updates compared")
  parser.add_argument("--steps", type=int, default=10, help="timed updates per N")
  parser.add_argument("--rtol", type=float, default=1e-3,
                      help="largest relative difference that passes (default 1e-3: float32 "
                           "sums in another order, TF32 matmuls on a GPU)")
  parser.add_argument("--memory_mb", type=int, default=16384,
                      help="memory of each logical GPU (default 16384)")
  parser.add_argument("--data_dir", default=None, help="as step_bench.py's")
  parser.add_argument("--json", help="also write the figures here")
  parser.add_argument("--tf32", action="store_true",
                      help="leave TensorFloat-32 matmuls on (a GPU's default; off otherwise)")
  parser.add_argument("--replicas", type=int, default=None, help=argparse.SUPPRESS)
  parser.add_argument("--work", default=None, help=argparse.SUPPRESS)
  args = parser.parse_args()
  counts = [int(n) for n in args.devices.split(",")]
  size = bench_sizes.get(args.size)
  batch = size.sentences(args.batch)
  if counts[0] != 1 or any(batch % n for n in counts):
    parser.error(f"--devices must start with 1 and divide the batch ({batch}): {args.devices}")
  data_dir = step_bench.size_data_dir(size, args.data_dir)

  kind, devices = None, None
  if args.replicas:  # a child: one N
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.config.experimental.enable_tensor_float_32_execution(args.tf32)
    kind, devices = carve(max(counts), args.memory_mb)
    fig = check(args.replicas, devices, args, data_dir, size, args.work)
    print(RESULT_TAG + json.dumps(dict(fig, kind=kind, devices=devices)), flush=True)
    return 0

  figures = []
  with tempfile.TemporaryDirectory(prefix="multi_device_ref_") as work:
    for n in counts:
      fig = run_child(args, n, work)
      if fig is None:
        figures.append({"n": n, "pass": False})
        break
      if n == 1:
        print(f"{len(fig['devices'])} logical {fig['kind']} devices: "
              f"{', '.join(fig['devices'])}; size {size.name}, batch {batch} x {size.length}",
              flush=True)
      figures.append(fig)
      verdict = ("reference" if n == 1 else
                 f"losses {fig['loss_rel_diff']:.1e}, gradients {fig['grad_rel_diff']:.1e} "
                 f"(relative; most: {fig['worst_variable']}) "
                 f"{'PASS' if fig['pass'] else 'FAIL'}")
      print(f"MULTI_DEVICE N={n} {fig['kind']}: median step {fig['median_step_s'] * 1000:.1f} "
            f"ms (x{fig['median_step_s'] / figures[0]['median_step_s']:.2f} of N=1), XLA "
            f"{'on' if fig['xla'] else 'off'}; {verdict}", flush=True)
  print(RESULT_TAG + json.dumps({"size": size.name, "batch": batch, "rtol": args.rtol,
                                 "results": figures}), flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump(figures, f, indent=2)
  return 0 if all(f.get("pass", True) for f in figures) else 1


if __name__ == "__main__":
  sys.exit(main())
