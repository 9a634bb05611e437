"""Where the training step's time goes: a tf.profiler trace of step_bench.py's step, by op type.

    .venv/bin/python benchmarks/profile_step.py [--size small|base|big] [--steps 5]
        [--hparams "..."] [--top 12] [--batch N] [--keep_trace DIR]
    .venv/bin/python benchmarks/profile_step.py --peer [--size ...]   # the peer's step
    .venv/bin/python benchmarks/profile_step.py --trace DIR --steps 5  # read a kept trace

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

On a GPU the trace also has a plane per device, read by `device_summary`: the kernels and
copies the "Stream #" lines hold (CUPTI's), each profiled step marked on the host by a
"train" trace event (`tf.profiler.experimental.Trace`, which both sides' steps run under).
Per device and step: the time some kernel or copy runs (the union over streams), the
device idle within a step's marker and between two markers, kernels a step, the top
kernels, the XLA programs a step (the "XLA Modules" line) and the host-to-device copies.
`--peer` profiles the peer's step instead (benchmarks/model_garden_sized.py under
PEER_PYTHON, default this python, with the size's flags and the precision's policy, as
peer_compare.py runs it; JIT=1 where a GPU is visible, as there). `--keep_trace DIR`
keeps the trace (a GPU visit brings it back); `--trace DIR` (or an .xplane.pb file) reads
one on any machine: `--steps` must then say how many steps it holds where it has no
step markers. benchmarks/gpu_check.sh --profile runs both sides at base in bf16.
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


STEP_MARKER = "train"  # the host trace event around each profiled step
DEVICE_PREFIXES = ("/device:GPU:", "/device:TPU:")


def timed_events(plane, line):
  """[(name, start_ps, end_ps)] of a line's events on the clock every plane shares (the
  line's timestamp plus each event's offset); a trace event's "#k=v#" arguments are cut
  from its name."""
  base = line.timestamp_ns * 1000
  return [(plane.event_metadata[e.metadata_id].name.split("#")[0], base + e.offset_ps,
           base + e.offset_ps + e.duration_ps) for e in line.events]


def covered(intervals, window=None):
  """Picoseconds of the union of [(start, end)] intervals, clipped to `window`."""
  lo, hi = window if window else (float("-inf"), float("inf"))
  total, reach = 0, lo
  for start, end in sorted((max(a, lo), min(b, hi)) for a, b in intervals):
    if end <= start:
      continue
    total += max(0, end - max(start, reach))
    reach = max(reach, end)
  return total


def step_windows(xspace):
  """[(start_ps, end_ps)] of the host's step markers, in time order."""
  return sorted((start, end) for plane in xspace.planes if plane.name == "/host:CPU"
                for line in plane.lines for name, start, end in timed_events(plane, line)
                if name == STEP_MARKER)


def is_copy(name):
  return "memcpy" in name.lower()


def is_host_to_device(name):
  return is_copy(name) and ("H2D" in name or "HtoD" in name)


def device_summary(xspace, steps=None, top=12):
  """A dict per device plane: {"device", "steps", "marked", "busy_ms", "idle_in_step_ms",
  "idle_between_steps_ms", "kernels", "top", "xla_programs", "xla_top", "h2d_copies",
  "h2d_ms"}, figures per step (between steps: per gap between two markers; None with one
  step). The steps are the host's markers; without markers, `steps` (required then) over
  the span from the device's first event to its last. xla_programs is None where the
  trace has no "XLA Modules" line (a line the profiler's viewers derive: a trace as saved
  may lack it)."""
  windows = step_windows(xspace)
  out = []
  for plane in xspace.planes:
    if not plane.name.startswith(DEVICE_PREFIXES):
      continue
    events, modules = [], None
    for line in plane.lines:
      if line.name.startswith("Stream #"):
        events += timed_events(plane, line)
      elif line.name == "XLA Modules":  # a derived line: not in every saved trace
        modules = (modules or []) + timed_events(plane, line)
    if not events:
      continue
    marks = windows or [(min(e[1] for e in events), max(e[2] for e in events))]
    n = len(windows) or steps
    if not n:
      raise ValueError(f"{plane.name}: the trace has no '{STEP_MARKER}' step markers; "
                       "give the number of steps it holds (--steps)")
    inside = [e for e in events if any(a < e[2] and e[1] < b for a, b in marks)]
    spans = [(start, end) for _, start, end in inside]
    busy = sum(covered(spans, w) for w in marks)
    gaps = [(marks[i][1], marks[i + 1][0]) for i in range(len(marks) - 1)]
    kernel_time, kernel_calls = collections.Counter(), collections.Counter()
    for name, start, end in inside:
      if not is_copy(name):
        kernel_time[name] += end - start
        kernel_calls[name] += 1
    copies = [e for e in inside if is_host_to_device(e[0])]
    programs = None if modules is None else collections.Counter(
        name for name, start, end in modules if any(a < end and start < b for a, b in marks))
    out.append({
        "device": plane.name, "steps": n, "marked": bool(windows),
        "busy_ms": busy / 1e9 / n,
        "idle_in_step_ms": (sum(b - a for a, b in marks) - busy) / 1e9 / n,
        "idle_between_steps_ms": (sum(b - a - covered([(s, e) for _, s, e in events], (a, b))
                                      for a, b in gaps) / 1e9 / len(gaps)) if gaps else None,
        "kernels": sum(kernel_calls.values()) / n,
        "top": [(name, ps / 1e9 / n, kernel_calls[name] / n)
                for name, ps in kernel_time.most_common(top)],
        "xla_programs": None if programs is None else sum(programs.values()) / n,
        "xla_top": [] if programs is None else [(name, count / n)
                                                for name, count in programs.most_common(3)],
        "h2d_copies": len(copies) / n,
        "h2d_ms": sum(end - start for _, start, end in copies) / 1e9 / n})
  return out


def print_devices(devices):
  if not devices:
    print("devices: no plane with kernels in this trace (a CPU run, or no CUPTI)")
  for d in devices:
    marked = "host markers" if d["marked"] else "no markers: the span of its events"
    programs = ("(no XLA Modules line: see the host's XlaLaunch calls)"
                if d["xla_programs"] is None else f"{d['xla_programs']:.1f}")
    between = (f", {d['idle_between_steps_ms']:.2f} between two steps"
               if d["idle_between_steps_ms"] is not None else "")
    print(f"{d['device']}: {d['steps']} steps ({marked}); a step: {d['busy_ms']:.2f} ms busy, "
          f"idle {d['idle_in_step_ms']:.2f} ms within it{between}; {d['kernels']:.0f} "
          f"kernels; {programs} XLA programs; {d['h2d_copies']:.1f} host-to-device "
          f"copies ({d['h2d_ms']:.3f} ms)")
    for name, ms, calls in d["top"]:
      print(f"  {name[:56]:56s} {ms:8.2f} ms  {calls:6.1f} calls")
    for name, count in d["xla_top"]:
      print(f"  XLA program {name[:60]}: {count:.1f} a step")


def load_xspace(path):
  """The xplane at `path` (an .xplane.pb file), or the newest one the profiler wrote
  under the log directory `path`."""
  from tensorflow.tsl.profiler.protobuf import xplane_pb2  # pylint: disable=import-outside-toplevel
  paths = [path] if path.endswith(".xplane.pb") else sorted(
      glob.glob(os.path.join(path, "plugins", "profile", "*", "*.xplane.pb")),
      key=os.path.getmtime)
  if not paths or not os.path.isfile(paths[-1]):
    sys.exit(f"profile_step: no *.xplane.pb at {path} (a trace's log directory, or the file)")
  xspace = xplane_pb2.XSpace()
  with open(paths[-1], "rb") as f:
    xspace.ParseFromString(f.read())
  return xspace


def report(xspace, steps, top, header=""):
  """Prints the host's groups (per step: the trace's step markers, else `steps`) and each
  device's summary; returns the groups."""
  if header:
    print(header)
  steps = len(step_windows(xspace)) or steps
  if not steps:
    sys.exit(f"profile_step: the trace has no '{STEP_MARKER}' step markers; give the number "
             "of steps it holds (--steps)")
  groups = summarize(xspace)
  for group, title in (("tf", "TF ops on the executor's thread"),
                       ("xla", "XLA kernels on Eigen's threads")):
    total, calls = groups[group]
    if not total:
      continue
    print(f"{title}: {sum(total.values()) / 1e9 / steps:.1f} ms per step in all")
    for key, ps in total.most_common(top):
      print(f"  {key[:56]:56s} {ps / 1e9 / steps:8.1f} ms  {calls[key] / steps:6.0f} calls")
  print_devices(device_summary(xspace, steps, top))
  return groups


def profile_ours(args, size, logdir):
  """Our step under the profiler, each profiled step marked; (header, hparams)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  data_dir = step_bench.size_data_dir(size, args.data_dir, args.raw_dir)
  tf.config.threading.set_inter_op_parallelism_threads(1)
  with tempfile.TemporaryDirectory(prefix="profile_step_") as work:
    trainer, hp = step_bench.bench_trainer(data_dir, os.path.join(work, "run"), args.hparams,
                                           size, batch=args.batch)
    for _ in range(1 + args.warmup):
      trainer.train_step()
    tf.profiler.experimental.start(logdir)
    start = time.perf_counter()
    for i in range(args.steps):
      with tf.profiler.experimental.Trace(STEP_MARKER, step_num=i, _r=1):
        trainer.train_step()
    wall_ms = (time.perf_counter() - start) * 1000 / args.steps
    tf.profiler.experimental.stop()
  header = (f"size {size.name}, step: {wall_ms:.1f} ms wall under the profiler (one inter-op "
            f"thread, {args.steps} steps, XLA {'on' if trainer.use_xla else 'off'}, "
            f"{hp.precision})")
  return header, hp


def profile_peer(args, size, logdir):
  """The peer's step (model_garden_sized.py --profile_dir) under its python; (header, hp),
  the header None where the peer is not installed (said)."""
  import subprocess  # pylint: disable=import-outside-toplevel
  import bench_sizes  # pylint: disable=import-outside-toplevel
  import peer_sides  # pylint: disable=import-outside-toplevel
  hp = bench_sizes.hparams(size, args.hparams)
  python = os.environ.get("PEER_PYTHON", sys.executable)
  if not peer_sides.package_versions(python, ["tf-models-official"]).get("tf-models-official"):
    print(f"peer not installed: {python} has no tf-models-official (PEER_PYTHON; "
          "peer_compare.py says how to install it). Nothing was profiled.")
    return None, hp
  argv = peer_sides.peer_argv(python, os.path.join(HERE, "model_garden_sized.py"),
                              hp.precision, [*bench_sizes.peer_flags(hp, size, args.batch),
                                             f"--steps={args.steps}", "--decode_steps=0",
                                             f"--profile_dir={logdir}"])
  gpus = peer_sides.gpu_names(sys.executable)
  done = subprocess.run(argv, env=peer_sides.child_env(JIT=1 if gpus else 0), text=True,
                        capture_output=True, check=False)
  print(done.stdout, end="")
  if done.returncode != 0:
    sys.exit(f"profile_step: the peer's step failed (exit {done.returncode}):\n"
             f"{done.stderr[-3000:]}")
  return f"the peer's step at size {size.name}, {hp.precision}, JIT {'on' if gpus else 'off'}", hp


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--steps", type=int, default=None,
                      help="profiled steps (default 5); with --trace, the steps it holds "
                           "where it has no step markers")
  parser.add_argument("--warmup", type=int, default=3, help="untimed steps first (default 3)")
  parser.add_argument("--top", type=int, default=12, help="op types printed per group")
  parser.add_argument("--hparams", default="", help="extra overrides, as step_bench.py")
  parser.add_argument("--size", default="small", choices=list(step_bench.bench_sizes.SIZES),
                      help="the model and batch (benchmarks/bench_sizes.py; default small)")
  parser.add_argument("--batch", type=int, default=None,
                      help="sentences a step (default the size's)")
  parser.add_argument("--data_dir", default=None, help="as step_bench.py's")
  parser.add_argument("--raw_dir", default=step_bench.DEFAULT_RAW)
  parser.add_argument("--peer", action="store_true", help="profile the peer's step")
  parser.add_argument("--keep_trace", help="write the trace here (kept) instead of a temp dir")
  parser.add_argument("--trace", help="read this kept trace instead of profiling")
  args = parser.parse_args()
  if args.trace:
    report(load_xspace(args.trace), args.steps, args.top, f"the trace in {args.trace}")
    return
  args.steps = args.steps or 5
  size = step_bench.bench_sizes.get(args.size)
  with tempfile.TemporaryDirectory(prefix="profile_trace_") as work:
    logdir = args.keep_trace or work
    header, hp = (profile_peer if args.peer else profile_ours)(args, size, logdir)
    if header is None:
      return
    groups = report(load_xspace(logdir), args.steps, args.top, header)
  step_flops = step_bench.bench_sizes.step_flops(hp, size, args.batch)
  mm_ms = matmul_ms(groups["tf"][0], args.steps)
  if mm_ms:
    print(f"matmul ops: {mm_ms:.1f} ms per step for {step_flops / 1e9:.1f} GFLOP of the step's "
          f"matmuls (benchmarks/flops.py): {step_flops / mm_ms / 1e6:.0f} GFLOP/s")
  if args.keep_trace:
    print(f"trace kept in {args.keep_trace} (read it again: --trace {args.keep_trace} "
          f"--steps {args.steps})")


if __name__ == "__main__":
  main()
