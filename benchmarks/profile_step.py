"""Where the training step's time goes: a tf.profiler trace of step_bench.py's step, by op type.

    .venv/bin/python benchmarks/profile_step.py [--size small|base|big] [--steps 5]
        [--hparams "..."] [--top 12]

The step is benchmarks/step_bench.py's at --size (the peer's configuration, one fixed
batch of the size: [128, 32] at small, [64, 64] at base and big; `Trainer.train_step()`).
TF runs with one inter-op thread, so op times on the executor's thread do not overlap and
add up to the step. After --warmup untimed steps, --steps steps run under
`tf.profiler.experimental`, and the trace (the xplane of the host) is summed by op type
as self time (an event's time minus its children's):

  TF ops   the executor's thread ("tf_Compute"), keyed by op type (`_MklMatMul`,
           `_MklTranspose`, ...); XLA-compiled kernels are launched from there, and the
           launching thread's wait shows up as `~BlockUntilReady`;
  XLA      the kernels XLA's CPU runtime runs on Eigen's threads (its fusions), keyed by
           the fusion's name.

Printed: the wall time per step, the top op types of each group in ms per step with their
calls per step, and the analytic matmul FLOPs of the step (benchmarks/flops.py) over the
time in `MatMul` and `BatchMatMul` ops: the rate those ops reach. Compare it with the
CPU's matmul peak (`python -m t2t_keras.training.precision`) to see how much of the step
is left to gain outside the matmuls. Figures depend on the CPU: write its model beside them.
"""

import argparse
import collections
import glob
import os
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)

import step_bench  # pylint: disable=wrong-import-position

MATMUL_TYPES = ("MatMul", "BatchMatMul")


def op_key(name):
  """An event's group key: the op type of "scope/name:Type" events, "~name" for the rest."""
  if ":" in name and "::" not in name:
    return name.rsplit(":", 1)[1]
  return "~" + name


def self_times(events):
  """Self time and calls per key of one thread's events [(key, start_ps, duration_ps)].

  Events on one thread nest (a child starts and ends inside its parent); an event's
  self time is its duration minus its direct children's. Returns two Counters keyed by
  key: picoseconds of self time, and the number of events.
  """
  total, calls, stack = collections.Counter(), collections.Counter(), []
  for key, start, duration in sorted(events, key=lambda e: (e[1], -e[2])):
    while stack and stack[-1][1] <= start:
      stack.pop()
    if stack:
      total[stack[-1][0]] -= duration
    total[key] += duration
    calls[key] += 1
    stack.append((key, start + duration))
  return total, calls


def summarize(xspace):
  """{"tf": (ps, calls), "xla": (ps, calls)} Counters summed over the host plane's threads."""
  groups = {"tf": (collections.Counter(), collections.Counter()),
            "xla": (collections.Counter(), collections.Counter())}
  for plane in xspace.planes:
    if plane.name != "/host:CPU":
      continue
    for line in plane.lines:
      group = ("tf" if line.name.startswith("tf_Compute")
               else "xla" if "Eigen" in line.name else None)
      if group is None:
        continue
      events = [(op_key(plane.event_metadata[e.metadata_id].name), e.offset_ps, e.duration_ps)
                for e in line.events]
      total, calls = self_times(events)
      groups[group][0].update(total)
      groups[group][1].update(calls)
  return groups


def matmul_ms(tf_total, steps):
  """ms per step in TF's matmul ops (`MatMul`, `_MklMatMul`, `BatchMatMulV2`, ...)."""
  return sum(ps for key, ps in tf_total.items()
             if any(t in key for t in MATMUL_TYPES) and not key.startswith("~")) / 1e9 / steps


def load_xspace(logdir):
  """The newest host xplane the profiler wrote under logdir."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  paths = sorted(glob.glob(os.path.join(logdir, "plugins", "profile", "*", "*.xplane.pb")))
  if not paths:
    sys.exit(f"profile_step: the profiler wrote no *.xplane.pb under {logdir}")
  xspace = xplane_pb2.XSpace()
  with open(paths[-1], "rb") as f:
    xspace.ParseFromString(f.read())
  return xspace


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=5, help="profiled steps (default 5)")
  parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
  parser.add_argument("--top", type=int, default=12, help="op types printed per group")
  parser.add_argument("--hparams", default="", help="extra overrides, as step_bench.py")
  parser.add_argument("--size", default="small", choices=list(step_bench.bench_sizes.SIZES),
                      help="the model and batch (benchmarks/bench_sizes.py; default small)")
  parser.add_argument("--data_dir", default=None, help="as step_bench.py's")
  parser.add_argument("--raw_dir", default=step_bench.DEFAULT_RAW)
  args = parser.parse_args()
  size = step_bench.bench_sizes.get(args.size)
  data_dir = step_bench.size_data_dir(size, args.data_dir, args.raw_dir)
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tf.config.threading.set_inter_op_parallelism_threads(1)
  with tempfile.TemporaryDirectory(prefix="profile_step_") as work:
    trainer, hp = step_bench.bench_trainer(data_dir, os.path.join(work, "run"), args.hparams,
                                           size)
    for _ in range(1 + args.warmup):
      trainer.train_step()
    logdir = os.path.join(work, "trace")
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for _ in range(args.steps):
      trainer.train_step()
    wall_ms = (time.perf_counter() - start) * 1000 / args.steps
    tf.profiler.experimental.stop()
    groups = summarize(load_xspace(logdir))

  print(f"size {size.name}, step: {wall_ms:.1f} ms wall under the profiler (one inter-op thread, "
        f"{args.steps} steps, XLA {'on' if trainer.use_xla else 'off'}, {hp.precision})")
  for group, title in (("tf", "TF ops on the executor's thread"),
                       ("xla", "XLA kernels on Eigen's threads")):
    total, calls = groups[group]
    print(f"{title}: {sum(total.values()) / 1e9 / args.steps:.1f} ms per step in all")
    for key, ps in total.most_common(args.top):
      print(f"  {key[:56]:56s} {ps / 1e9 / args.steps:8.1f} ms  {calls[key] / args.steps:6.0f} calls")
  step_flops = step_bench.bench_sizes.step_flops(hp, size)
  mm_ms = matmul_ms(groups["tf"][0], args.steps)
  if mm_ms:
    print(f"matmul ops: {mm_ms:.1f} ms per step for {step_flops / 1e9:.1f} GFLOP of the step's "
          f"matmuls (benchmarks/flops.py): {step_flops / mm_ms / 1e6:.0f} GFLOP/s")


if __name__ == "__main__":
  main()
