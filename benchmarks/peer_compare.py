"""This project against TF Model Garden (and CTranslate2) on this machine, in one run.

    .venv/bin/python benchmarks/peer_compare.py [--parts train,decode,multi30k] [--rounds 2]
        [--budget_min 5] [--peer_python /tmp/peer/bin/python] [--ct2_python /tmp/ct2/bin/python]
        [--bench_dir ../shared/bench] [--work_dir DIR] [--json out.json] [--quick]
        [--precision float32|mixed_bfloat16] [--size small|base|big|tiny] [--batch N]
        [--hparams "norm_type=pre"]

The peer is TF Model Garden's Seq2SeqTransformer, measured by the scripts in
../shared/bench (see its README; the peer needs its own venv). Every figure below is
measured in this run, each side in its own process, alternating peer and ours --rounds
times (peer, ours, peer, ours, ...); a ratio is ours / peer of the medians over the
rounds (each run's own figure is already a median, see below). Nothing is compared with
a number from another day. The machine should be otherwise idle: the load average before
each child is printed and kept.

Sizes (--size; benchmarks/bench_sizes.py): train and decode run at one model size. The
default, small, is described below (every earlier figure used it). base and big are the
paper's transformer_base and transformer_big (post-norm, P_drop 0.1 / 0.3, no attention
or ReLU dropout) with a 37,000-entry vocabulary on [64, 64] batches of random ids (4,096
target tokens; --batch N: N x 64 on both sides); the peer is then
benchmarks/model_garden_sized.py, built from the same hparams (--hparams overrides them on
both sides, e.g. norm_type=pre: Model Garden's post-norm model fails under
mixed_bfloat16), and CTranslate2's model is built with the size's shapes by
ct2_decode_bench.py's own builder. tiny (transformer_tiny) checks that it all runs.

MFU: after the ratios, each side's model FLOPs per step (benchmarks/flops.py: the size's
matmuls, backward = 2 x forward) over its median step time, against this CPU's matmul
peak in the run's precision measured first in a child (TensorFlow's matmul, the best of
[4096, 256] x [256, 1024] and [4096, 1024] x [1024, 4096]) or, on a GPU, against the
card's data-sheet dense peak (float32 as TF32, TensorFlow's default there).

  train     One training step on identical fixed shapes. Peer: model_garden_peer.py
            (vocab 8000, 3+3 layers, d_model 256, 4 heads, d_ff 1024, pre-norm, dropout,
            attention dropout and ReLU dropout 0.1, batch 128 x 32 random ids without
            padding, Adam, label smoothing 0.1). Ours: benchmarks/step_bench.py, the same
            shapes and ids through `Trainer.train_step()` (transformer_multi30k with those
            dropouts; XLA as the Trainer's default: off on a CPU, on where TensorFlow sees a
            GPU). The peer's JIT follows ours: JIT=0 (its default) on a CPU, JIT=1 with a
            GPU, so both compile with XLA or neither does. Both: 1 traced step, 3 warm-up steps, then 15
            timed steps (2 with --quick); figure: 4096 / median step time = target tokens/s.
  decode    Beam 4, alpha 0.6, batch 32, 40 output tokens, sentences/s, from the same two
            processes (after the training steps): the peer's beam search (a plain
            tf.function, max length 40; it may stop at EOS, so its mean decoded length is
            printed) and ours with the decoder's defaults (XLA on) and eos_id=-1, so exactly
            40 tokens. Both: first call apart, then 5 timed calls (1 with --quick), median.
            Plus CTranslate2 float32 and int8 (ct2_decode_bench.py --pre_norm, random weights,
            the same shapes, forced length 40, intra_threads = CPU count, the median of its
            7 calls; 2 with --quick) when --ct2_python exists, run after ours in each round.
  multi30k  Real training throughput on Multi30k over the same minutes of wall clock.
            Peer: model_garden_multi30k.py --budget_min B; its "training done: ... median
            tgt tok/s N" line is read (the median of its 100-step windows, first window
            excluded), then the process is terminated (its decoding is not waited for).
            Ours: t2t-trainer (python -m t2t_keras.bin.trainer) on translate_ende_multi30k,
            transformer_multi30k with attention_dropout=0.1,relu_dropout=0.1 (the peer's
            dropout 0.2 / 0.1 / 0.1), --eval_every=0 --log_every=100, no checkpoint before
            the end, stopped with SIGTERM B minutes after its "training ..." line (the
            trainer saves and exits); figure: the median of its 100-step windows' "tgt tok/s",
            first window excluded (the peer's rule; all windows when there is no other).
            Both count only non-pad target tokens (EOS included): the peer's train_step
            sums tf.not_equal(tgt, PAD_ID), the Trainer's replica_step sums
            tf.not_equal(batch["targets"], 0). Both start their clock at the training
            loop, the first (traced) step included; both use 4096-token length-bucketed
            batches. One difference: the peer's window time is the sum of its train_step
            calls only, ours the window's wall clock (input pipeline and loop included),
            which, if anything, favours the peer. Our datagen runs once before any timing
            and the data dir is reused across rounds (under --work_dir), and so is the
            trainer's persistent XLA cache (t2t_keras/xla_cache.py, emptied at the start:
            round 1 compiles the fused kernels of every new batch shape, 0.5-0.8 s each,
            later rounds load them, as a second run on a user's machine). With --quick:
            0.3 minutes and 1-step windows, just to check that it runs.

Precision: float32 on both sides by default (the peer's scripts as they are). With
--precision mixed_bfloat16 both sides run bfloat16 matmuls with float32 variables: ours
with precision=mixed_bfloat16, the peer's unchanged scripts under tf_keras's global
mixed_bfloat16 policy (set before the script builds its model; Model Garden casts its
logits back to float32). The peer's beam search then runs in bf16 too (its policy); ours
stays float32, as t2t-decoder and the SavedModel run it (they restore the weights into a
float32 model; under XLA on CPU bf16 dots are no faster than float32, so a bf16 search
was slower). CTranslate2 keeps its float32 and int8 types. Training in bf16 pays where
bf16 matmuls are faster (a Zen 5 with AVX512-BF16: 1.85x float32's rate; a Xeon listing
AVX512-BF16 without AMX: 0.55x, and both sides slower; `python -m
t2t_keras.training.precision` measures it).

Peak memory: the peak RSS of each child, measured here with os.wait4 (the kernel's
ru_maxrss of that process), not parsed from its output. The summary gives it for the
train/decode process of each side (model, optimizer, the training steps and beam search;
ours also holds the Trainer's tf.data input pipeline, as `train()` does).

On a GPU machine (TensorFlow in our python sees one; its name is printed) the same parts
run on the GPU, each side placing its ops there as TensorFlow does by default; the peak
RSS is then host memory only.

Printed: the CPU model, TF versions of both sides, each child's output (full logs under
--work_dir/logs), and a summary of lines like

    RATIO train_step_tok_s  ours 5,800 / peer 4,500 = 1.29x   (medians of 2 alternated runs each)

Everything also goes to --json (default <work_dir>/peer_compare.json). Without the peer's
venv it says "peer not installed", how to install it, and exits 0; without CTranslate2's
venv that part is skipped with a message.
"""

import argparse
import json
import os
import queue
import re
import shutil
import signal
import statistics
import subprocess
import sys
import tempfile
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
from step_bench import data_ready  # noqa: E402  (no TensorFlow at import)
import bench_sizes  # noqa: E402
ROOT = os.path.dirname(HERE)
DEFAULT_BENCH = os.path.normpath(os.path.join(ROOT, "..", "shared", "bench"))
DEFAULT_RAW = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
DEFAULT_WORK = os.path.join(tempfile.gettempdir(), "t2t_peer_compare")
PEER_INSTALL = ("python3 -m venv /tmp/peer && /tmp/peer/bin/pip install -q tf-models-official "
                "sentencepiece sacremoses")
CT2_INSTALL = "python3 -m venv /tmp/ct2 && /tmp/ct2/bin/pip install ctranslate2 numpy"
SCRIPTS = {"step": "model_garden_peer.py", "ct2": "ct2_decode_bench.py",
           "multi30k": "model_garden_multi30k.py"}
SIZED_PEER = os.path.join(HERE, "model_garden_sized.py")  # the peer at tiny, base, big
# A CTranslate2 model of a size's shapes, built with ct2_decode_bench.py's own builder
# (random weights) under the CTranslate2 venv's python: argv = bench_dir, model_dir, then
# vocab, layers, d_model, heads, d_ff, pre_norm.
CT2_BUILD_CODE = (
    "import sys\n"
    "sys.path.insert(0, sys.argv[1])\n"
    "import ct2_decode_bench as b\n"
    "v, n, d, h, f, pre = map(int, sys.argv[3:9])\n"
    "spec = b.build_spec(vocab_size=v, layers=n, d=d, heads=h, d_ff=f, pre_norm=bool(pre))\n"
    "print(f'built {sys.argv[2]}: {b.param_count(spec):,} params')\n"
    "b.RandomSpecConverter(spec).convert(sys.argv[2], quantization='float32', force=True)\n")
# The measured matmul peak of this CPU in a precision's dtype (TensorFlow's own matmul, as
# the training step runs it): the best of an FFN-sized and a larger product, GFLOP/s as
# JSON. Not on a GPU, whose MFU is against its data-sheet peak (a first try timed this
# way on an H200 read 54 TFLOP/s in bf16: a figure of the timing, not of the card).
PEAK_CODE = (
    "import json, os, sys\n"
    "os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
    "import tensorflow as tf\n"
    "from t2t_keras.training.precision import matmul_gflops\n"
    "dtype = tf.bfloat16 if sys.argv[1] == 'mixed_bfloat16' else tf.float32\n"
    "print(json.dumps(max(matmul_gflops(dtype),\n"
    "                     matmul_gflops(dtype, 4096, 1024, 4096, reps=10))))\n")
# Dense tensor-core peaks from NVIDIA's data sheets (without sparsity), TFLOP/s: float32
# runs on TF32 tensor cores there (TensorFlow's default on Ampere and later).
GPU_PEAK_TFLOPS = (("H100 PCIe", {"float32": 378.0, "mixed_bfloat16": 756.0}),
                   ("H100 NVL", {"float32": 417.5, "mixed_bfloat16": 835.0}),
                   ("H100", {"float32": 494.7, "mixed_bfloat16": 989.4}),
                   ("H200", {"float32": 494.7, "mixed_bfloat16": 989.4}),
                   ("A100", {"float32": 156.0, "mixed_bfloat16": 312.0}))
PARTS = ("train", "decode", "multi30k")
PRECISIONS = ("float32", "mixed_bfloat16")
# The peer under a Keras mixed-precision policy: Model Garden's layers follow tf_keras's
# global policy (its logits are cast back to float32), so setting it before the unchanged
# script builds its model is all a Model Garden user would do.
PEER_POLICY_CODE = ("import runpy, sys, tf_keras\n"
                    "tf_keras.mixed_precision.set_global_policy(sys.argv[1])\n"
                    "sys.argv = sys.argv[2:]\n"
                    "runpy.run_path(sys.argv[0], run_name='__main__')\n")
PROBLEM = "translate_ende_multi30k"
STEP_RESULT_TAG = "STEP_BENCH_RESULT "
CT2_TYPES = ("float32", "int8")

# Child output lines not echoed (they stay in the log files): TensorFlow's start-up chatter.
_NOISE = re.compile(r"^(I0000|W0000|E0000|WARNING: All log messages)|cudart_stub|"
                    r"oneDNN custom operations|computation_placer|cpu_feature_guard")


# Parsing and arithmetic (pure; tested in tests/benchmarks/test_peer_compare.py).

def cpu_model(cpuinfo_text):
  """The first 'model name' of /proc/cpuinfo text, with its family/model numbers when
  the name alone is vague (a VM's "AMD EPYC" is a Zen 2 to Zen 5), or None."""
  fields = {}
  for line in cpuinfo_text.splitlines():
    key, _, value = line.partition(":")
    fields.setdefault(key.strip(), value.strip())
  name = fields.get("model name")
  if name and "cpu family" in fields and "model" in fields:
    flags = fields.get("flags", "").split()
    extra = [f for f in ("avx512f", "avx512_bf16", "amx_bf16") if f in flags]
    name += f" (family {fields['cpu family']}, model {fields['model']}" + (
        f"; {', '.join(extra)})" if extra else ")")
  return name


def parse_peer_step(text):
  """Figures of model_garden_peer.py's output (keys absent when their line is missing)."""
  out = {}
  m = re.search(r"^tf (\S+) tf_keras (\S+)", text, re.M)
  if m:
    out["tf"], out["tf_keras"] = m.group(1), m.group(2)
  m = re.search(r"^TRAIN jit=(\w+): median step ([\d.]+) ms .*?; ([\d.]+) target tok/s", text,
                re.M)
  if m:
    out["jit"] = m.group(1) == "True"
    out["train_median_step_s"] = float(m.group(2)) / 1000
    out["train_target_tok_s"] = float(m.group(3))
  m = re.search(r"^BEAM beam=(\d+) batch=(\d+) max_len=(\d+): median ([\d.]+)s/batch -> "
                r"([\d.]+) sent/s; decoded lengths mean ([\d.]+)", text, re.M)
  if m:
    out["decode_median_s"] = float(m.group(4))
    out["decode_sent_s"] = float(m.group(5))
    out["decode_length_mean"] = float(m.group(6))
  return out


def parse_step_bench(text):
  """The result dict of benchmarks/step_bench.py's STEP_BENCH_RESULT line, or None."""
  lines = [l for l in text.splitlines() if l.startswith(STEP_RESULT_TAG)]
  return json.loads(lines[-1][len(STEP_RESULT_TAG):]) if lines else None


def parse_peer_multi30k_done(line):
  """model_garden_multi30k.py's 'training done: ...' line -> {steps, minutes, tgt_tok_s}."""
  m = re.search(r"training done: (\d+) steps, ([\d.]+) min, .*median tgt tok/s ([\d.]+)", line)
  if not m:
    return None
  return {"steps": int(m.group(1)), "minutes": float(m.group(2)),
          "tgt_tok_s": float(m.group(3))}


def parse_trainer_progress(line):
  """A Trainer progress line 'step  100  loss ...  lr ...  2,457 tgt tok/s ...' -> (step, tok/s)."""
  m = re.match(r"\s*step\s+(\d+)\s+loss\s+\S+\s+lr\s+\S+\s+([\d,.]+) tgt tok/s", line)
  return (int(m.group(1)), float(m.group(2).replace(",", ""))) if m else None


def is_trainer_start(line):
  """Whether this is the Trainer's 'training <problem> with N parameters ...' line."""
  return re.match(r"training \S+ with [\d,]+ parameters", line) is not None


def window_median(rates):
  """Median of per-window rates without the first window (all of them if that is the only one)."""
  rates = list(rates)
  if not rates:
    return None
  return statistics.median(rates[1:] or rates)


def gpu_peak_tflops(name, precision):
  """The data-sheet dense peak (TFLOP/s) of the GPU called `name` in `precision`, or None."""
  for key, peaks in GPU_PEAK_TFLOPS:
    if key in name:
      return peaks.get(precision)
  return None


def mfu_line(label, tflops_s, peak_tflops, peak_label):
  """'MFU <label>  X TFLOP/s = Y% of <peak_label> Z TFLOP/s'."""
  if tflops_s is None or not peak_tflops:
    return f"MFU {label:<10} n/a ({peak_label}: not measured)"
  return (f"MFU {label:<10} {tflops_s:,.2f} TFLOP/s = {tflops_s / peak_tflops:.1%} of "
          f"{peak_label} {peak_tflops:,.2f} TFLOP/s")


def median(values):
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def format_value(value, unit):
  if value is None:
    return "n/a"
  return f"{value:,.1f}" if unit == "sent_s" else f"{value:,.0f}"


def ratio_line(name, ours, other, other_label, n_ours, n_other, unit, note=""):
  """One summary line: 'RATIO name  ours X / label Y = R.RRx   (...)'."""
  ratio = f"{ours / other:.2f}x" if ours is not None and other else "n/a"
  runs = (f"medians of {n_ours} alternated runs each" if n_ours == n_other else
          f"medians of ours {n_ours} / {other_label} {n_other} runs")
  return (f"RATIO {name:<24} ours {format_value(ours, unit)} / {other_label} "
          f"{format_value(other, unit)} = {ratio}   ({runs}{'; ' + note if note else ''})")


def peer_argv(python, script, precision, args=()):
  """The peer's command line: its script as is, or under tf_keras's global `precision` policy."""
  if precision == "float32":
    return [python, script, *args]
  return [python, "-c", PEER_POLICY_CODE, precision, script, *args]


def precision_line(precision):
  """What --precision means for both sides, as the summary prints it."""
  if precision == "float32":
    return "precision float32 on both sides"
  return (f"precision {precision} on both sides, except our beam search: float32, as "
          "t2t-decoder and the SavedModel run it")


def ours_overrides(precision, *overrides):
  """Our side's hparams overrides: the non-empty `overrides`, then precision=... unless float32."""
  extra = [o for o in overrides if o]
  if precision != "float32":
    extra.append(f"precision={precision}")
  return ",".join(extra)


# Children.

class Child:
  """A subprocess whose merged output is echoed, logged and handed over line by line.

  Its peak RSS comes from os.wait4 when it is reaped.
  """

  def __init__(self, label, argv, log_path, env=None):
    self.label = label
    self.load_before = os.getloadavg()
    self.start = time.time()
    print(f"\n--- {label}  (load average before: "
          f"{' '.join(f'{x:.2f}' for x in self.load_before)})\n    $ {' '.join(argv)}",
          flush=True)
    os.makedirs(os.path.dirname(log_path), exist_ok=True)
    self.log_path = log_path
    self._log = open(log_path, "w", encoding="utf-8")  # pylint: disable=consider-using-with
    self.proc = subprocess.Popen(  # pylint: disable=consider-using-with
        argv, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, stdin=subprocess.DEVNULL,
        text=True, errors="replace", bufsize=1, env=env)
    self.lines = []
    self._queue = queue.Queue()
    self._reader = threading.Thread(target=self._read, daemon=True)
    self._reader.start()
    self.returncode = None
    self.max_rss_mib = None
    self.seconds = None

  def _read(self):
    for line in self.proc.stdout:
      line = line.rstrip("\n")
      self._log.write(line + "\n")
      self._log.flush()
      if not _NOISE.search(line):
        print(f"    {line}", flush=True)
      self._queue.put(line)
    self._queue.put(None)

  def next_line(self, timeout=None):
    """The next output line; None at the end of the output; raises queue.Empty on timeout."""
    line = self._queue.get(timeout=timeout)
    if line is not None:
      self.lines.append(line)
    return line

  def drain(self):
    """Reads the rest of the output (until the child closes it)."""
    while self.next_line() is not None:
      pass

  def output(self):
    return "\n".join(self.lines)

  def signal(self, sig):
    if self.returncode is None:
      try:
        os.kill(self.proc.pid, sig)
      except ProcessLookupError:
        pass

  def reap(self, timeout=None):
    """Waits (at most timeout s, then SIGKILL) and reaps with os.wait4: exit code, peak RSS."""
    if self.returncode is not None:
      return self.returncode
    deadline = None if timeout is None else time.time() + timeout
    while True:
      pid, status, usage = os.wait4(self.proc.pid, os.WNOHANG if deadline else 0)
      if pid:
        break
      if time.time() > deadline:
        print(f"    ({self.label}: still running after {timeout:.0f} s: killed)", flush=True)
        self.signal(signal.SIGKILL)
        deadline = None
        continue
      time.sleep(0.2)
    self.returncode = os.waitstatus_to_exitcode(status)
    self.proc.returncode = self.returncode  # reaped here: Popen must not wait again
    self.max_rss_mib = usage.ru_maxrss / 1024  # KiB on Linux
    self.seconds = time.time() - self.start
    self._reader.join(timeout=10)
    self._log.close()
    print(f"--- {self.label}: exit code {self.returncode}, {self.seconds:.0f} s, peak RSS "
          f"{self.max_rss_mib:,.0f} MiB", flush=True)
    return self.returncode

  def record(self, **figures):
    """The child's figures with what was measured here (a figure of the same name, as
    step_bench's self-reported max_rss_mib, is kept as child_<name>)."""
    measured = {"label": self.label, "load_before": self.load_before, "rc": self.returncode,
                "max_rss_mib": self.max_rss_mib, "seconds": self.seconds, "log": self.log_path}
    out = {("child_" + k if k in measured else k): v for k, v in figures.items()}
    out.update(measured)
    return out

  def kill_if_running(self):
    if self.returncode is None and self.proc.poll() is None:
      self.signal(signal.SIGKILL)


GPU_PROBE_CODE = ("import os, json\n"
                  "os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'\n"
                  "import tensorflow as tf\n"
                  "gpus = tf.config.list_physical_devices('GPU')\n"
                  "print(json.dumps([tf.config.experimental.get_device_details(g).get("
                  "'device_name', g.name) for g in gpus]))\n")


def gpu_names(python):
  """Names of the GPUs TensorFlow sees under `python` ([] on a CPU machine or on failure)."""
  try:
    proc = subprocess.run([python, "-c", GPU_PROBE_CODE], capture_output=True, text=True,
                          timeout=300, check=False)
    names = json.loads(proc.stdout.strip().splitlines()[-1])
    return [str(n) for n in names] if isinstance(names, list) else []
  except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
    return []


def child_env(**extra):
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
  env.update({k: str(v) for k, v in extra.items()})
  return env


def package_versions(python, dists):
  """{distribution: version or None} as installed for `python` (no TensorFlow import)."""
  code = ("import importlib.metadata as m, json, sys\n"
          "out = {}\n"
          "for d in sys.argv[1:]:\n"
          "  try: out[d] = m.version(d)\n"
          "  except m.PackageNotFoundError: out[d] = None\n"
          "print(json.dumps(out))")
  try:
    proc = subprocess.run([python, "-c", code] + list(dists), capture_output=True, text=True,
                          timeout=120, check=False)
    return json.loads(proc.stdout.strip().splitlines()[-1])
  except (OSError, ValueError, IndexError, subprocess.TimeoutExpired):
    return {d: None for d in dists}


# The comparison.

class Comparison:
  """Runs the parts, keeps every run's figures, and writes the JSON after each child."""

  def __init__(self, args):
    self.args = args
    self.runs = []
    self.failures = []
    self.current = None
    self.size = bench_sizes.get(args.size)
    self.data_dir = os.path.join(args.work_dir, "data", PROBLEM)  # the multi30k part's
    self.step_data_dir = os.path.join(args.work_dir, "data", self.size.problem)
    self.peak_gflops = None
    self.report = {"args": vars(args), "runs": self.runs, "failures": self.failures}

  def save(self):
    with open(self.args.json, "w") as f:
      json.dump(self.report, f, indent=2)

  def child(self, label, argv, env=None):
    safe = re.sub(r"[^A-Za-z0-9_.-]+", "_", label)
    self.current = Child(label, argv, os.path.join(self.args.work_dir, "logs", f"{safe}.log"),
                         env or child_env())
    return self.current

  def finish(self, child, part, side, rnd, figures, ok):
    run = child.record(part=part, side=side, round=rnd, **(figures or {}))
    self.runs.append(run)
    if not ok:
      self.failures.append(f"{child.label}: exit code {child.returncode}, no figures "
                           f"(log {child.log_path})")
      print(f"!!! {child.label} failed: see {child.log_path}", flush=True)
    self.save()
    return run

  def prepare_data(self, parts):
    """Our datagen of each problem the parts read, in its own process, before anything is
    timed: the size's for train/decode, Multi30k for the multi30k part."""
    needed = {}
    if {"train", "decode"} & set(parts):
      needed[self.size.problem] = self.step_data_dir
    if "multi30k" in parts:
      needed[PROBLEM] = self.data_dir
    for problem, data_dir in needed.items():
      if data_ready(data_dir, problem):
        print(f"data: {problem} in {data_dir} (reused)", flush=True)
        continue
      raw = [f"--raw_dir={self.args.raw_dir}"] if problem == PROBLEM else []
      c = self.child(f"datagen {problem} (not timed)", [
          sys.executable, "-m", "t2t_keras.bin.datagen", f"--problem={problem}",
          f"--data_dir={data_dir}", *raw])
      c.drain()
      c.reap()
      if c.returncode:
        self.failures.append(f"datagen {problem} failed (log {c.log_path})")
        return False
    return True

  def measure_peak(self):
    """This machine's measured matmul peak in the run's precision (GFLOP/s), in a child
    of our python, before anything else is timed; None if it fails."""
    c = self.child("matmul peak (not a comparison)", [sys.executable, "-c", PEAK_CODE,
                                                      self.args.precision])
    c.drain()
    c.reap()
    try:
      return float(c.output().strip().splitlines()[-1])
    except (ValueError, IndexError):
      return None

  # train + decode

  def step_round(self, rnd, with_ct2, decode):
    """One round of the peer's step (+ beam search when `decode`), ours, and CTranslate2."""
    a, quick, size = self.args, self.args.quick, self.size
    steps, dsteps = (2, 1) if quick else (15, 5)
    dsteps = dsteps if decode else 0
    env = child_env(STEPS=steps, DSTEPS=dsteps, JIT=1 if a.gpus else 0)
    if size.name == "small" and not a.batch:  # the shared script, as every earlier figure
      argv = peer_argv(a.peer_python, os.path.join(a.bench_dir, SCRIPTS["step"]), a.precision)
    else:
      argv = peer_argv(a.peer_python, SIZED_PEER, a.precision,
                       bench_sizes.peer_flags(bench_sizes.hparams(size, a.hparams), size,
                                              a.batch))
    c = self.child(f"peer step{'+beam' if decode else ''} r{rnd}", argv, env)
    c.drain()
    c.reap()
    fig = parse_peer_step(c.output())
    self.finish(c, "step", "peer", rnd, fig, c.returncode == 0 and "train_target_tok_s" in fig
                and (not decode or "decode_sent_s" in fig))

    c = self.child(f"ours step{'+beam' if decode else ''} r{rnd}", [
        sys.executable, os.path.join(HERE, "step_bench.py"), f"--size={size.name}",
        *([f"--batch={a.batch}"] if a.batch else []), f"--steps={steps}",
        f"--decode_steps={dsteps}", f"--data_dir={self.step_data_dir}",
        f"--raw_dir={a.raw_dir}",
        f"--hparams={ours_overrides(a.precision, a.hparams, a.ours_hparams)}"])
    c.drain()
    c.reap()
    fig = parse_step_bench(c.output())
    self.finish(c, "step", "ours", rnd, fig, c.returncode == 0 and fig is not None)

    if with_ct2 and decode:
      model_dir = os.path.join(a.work_dir, f"ct2_{size.name}_model")
      out = os.path.join(a.work_dir, f"ct2_r{rnd}.json")
      if os.path.exists(out):
        os.remove(out)
      argv = [a.ct2_python, os.path.join(a.bench_dir, SCRIPTS["ct2"]),
              f"--model_dir={model_dir}", f"--json={out}",
              f"--intra_threads={os.cpu_count() or 1}", f"--compute_types={','.join(CT2_TYPES)}"]
      if rnd == 1:  # built in this run; later rounds reuse it
        if size.name == "small":
          argv += ["--pre_norm", "--rebuild"]
        else:
          hp = bench_sizes.hparams(size, a.hparams)
          c = self.child(f"ct2 build {size.name} (not timed)", [
              a.ct2_python, "-c", CT2_BUILD_CODE, a.bench_dir, model_dir,
              *map(str, (size.vocab_size, hp.num_encoder_layers, hp.hidden_size,
                         hp.num_heads, hp.filter_size, int(hp.norm_type == "pre")))])
          c.drain()
          c.reap()
      if quick:
        argv += ["--warmup=1", "--repeats=2"]
      c = self.child(f"ct2 beam r{rnd}", argv)
      c.drain()
      c.reap()
      fig = {}
      if c.returncode == 0 and os.path.exists(out):
        with open(out) as f:
          res = json.load(f)["results"]
        fig = {f"{t}_sent_s": res[t]["median_sentences_per_s"] for t in CT2_TYPES if t in res}
        fig["compute_types_used"] = {t: res[t].get("compute_type_used") for t in res}
      self.finish(c, "step", "ct2", rnd, fig, bool(fig))

  # multi30k

  def multi30k_round(self, rnd):
    a = self.args
    log_every = 1 if a.quick else 100  # --quick: a few steps in 0.3 min
    budget_s = a.budget_min * 60
    hard_limit = budget_s + 1800  # setup (BPE, data, tracing) plus training, at most

    out_dir = os.path.join(a.work_dir, "peer_multi30k")
    shutil.rmtree(out_dir, ignore_errors=True)
    c = self.child(f"peer multi30k r{rnd}", peer_argv(
        a.peer_python, os.path.join(a.bench_dir, SCRIPTS["multi30k"]), a.precision, [
        f"--budget_min={a.budget_min:g}", f"--out_dir={out_dir}", f"--data_dir={a.raw_dir}",
        f"--log_every={log_every}", "--decode_limit=8", "--score_last=none", "--avg_last=1"]))
    done, deadline = None, time.time() + hard_limit
    try:
      while done is None:
        line = c.next_line(timeout=max(1.0, deadline - time.time()))
        if line is None:
          break
        done = parse_peer_multi30k_done(line)
    except queue.Empty:
      print(f"    ({c.label}: no 'training done' line within {hard_limit / 60:.0f} min)")
    c.signal(signal.SIGTERM)  # its decoding and scoring are not part of the measurement
    c.reap(timeout=60)
    c.drain()
    self.finish(c, "multi30k", "peer", rnd, done, done is not None)

    out_dir = os.path.join(a.work_dir, "ours_multi30k")
    shutil.rmtree(out_dir, ignore_errors=True)
    c = self.child(f"ours multi30k r{rnd}", [
        sys.executable, "-m", "t2t_keras.bin.trainer", f"--problem={PROBLEM}",
        "--hparams_set=transformer_multi30k", "--hparams=" + ours_overrides(
            a.precision, "attention_dropout=0.1,relu_dropout=0.1", a.ours_hparams),
        f"--data_dir={self.data_dir}", f"--output_dir={out_dir}", "--eval_every=0",
        f"--log_every={log_every}", "--save_every=1000000000", "--save_every_minutes=1000000",
        "--keep_checkpoints=1"])
    windows, started, stopped = [], None, None
    deadline = time.time() + hard_limit
    while True:
      now = time.time()
      if started is not None and stopped is None and now >= started + budget_s:
        print(f"    ({c.label}: {a.budget_min:g} min of training: SIGTERM)", flush=True)
        c.signal(signal.SIGTERM)  # the trainer finishes the step, saves and exits
        stopped, deadline = now, now + 300
      limit = deadline if started is None or stopped is not None else started + budget_s
      try:
        line = c.next_line(timeout=max(0.05, limit - now))
      except queue.Empty:
        if time.time() >= deadline:
          print(f"    ({c.label}: still running at its time limit: killed)", flush=True)
          c.signal(signal.SIGKILL)
          c.drain()
          break
        continue
      if line is None:
        break
      if started is None and is_trainer_start(line):
        started = time.time()
      progress = parse_trainer_progress(line)
      if progress and started is not None:
        windows.append(progress)
    c.reap(timeout=60)
    rates = [r for _, r in windows]
    fig = None
    if rates:
      fig = {"tgt_tok_s": window_median(rates), "windows": windows, "steps": windows[-1][0],
             "minutes": ((stopped or time.time()) - started) / 60}
    self.finish(c, "multi30k", "ours", rnd, fig, fig is not None)

  # summary

  def values(self, part, side, key):
    return [r[key] for r in self.runs
            if r["part"] == part and r["side"] == side and r.get(key) is not None]

  def summary(self, parts, with_ct2):
    lines, ratios = [], []

    def add(name, part, ours_key, other_side, other_key, unit, note="", ours_side="ours"):
      ours_v = self.values(part, ours_side, ours_key)
      other_v = self.values(part, other_side, other_key)
      o, p = median(ours_v), median(other_v)
      label = other_side if other_side != "ct2" else f"ct2_{other_key.split('_')[0]}"
      lines.append(ratio_line(name, o, p, label, len(ours_v), len(other_v), unit, note))
      ratios.append({"name": name, "ours": o, "other": p, "other_label": label,
                     "ratio": o / p if o is not None and p else None,
                     "ours_runs": ours_v, "other_runs": other_v})

    size = self.size
    batch = size.sentences(self.args.batch)
    if "train" in parts:
      add("train_step_tok_s", "step", "train_target_tok_s", "peer", "train_target_tok_s",
          "tok_s", f"size {size.name}, batch {batch} x {size.length}, "
          f"{size.tokens(batch)} target tokens/step")
    if "decode" in parts:
      lengths = self.values("step", "peer", "decode_length_mean")
      note = "beam 4, batch 32, 40 tokens"
      if lengths and min(lengths) < 40:
        note += f"; the peer's mean decoded length was {min(lengths):.1f} (stops at EOS)"
      add("decode_sent_s", "step", "decode_sent_s", "peer", "decode_sent_s", "sent_s", note)
      if with_ct2:
        for t in CT2_TYPES:
          add("decode_sent_s", "step", "decode_sent_s", "ct2", f"{t}_sent_s", "sent_s",
              "CTranslate2 " + t)
    if "multi30k" in parts:
      add("multi30k_tok_s", "multi30k", "tgt_tok_s", "peer", "tgt_tok_s", "tok_s",
          f"{self.args.budget_min:g} min each; median of {1 if self.args.quick else 100}-step "
          "windows, first excluded")
    if "train" in parts:
      add("train_step_peak_rss_mib", "step", "max_rss_mib", "peer", "max_rss_mib", "mib",
          "peak RSS of the train+decode process, os.wait4; lower is better")
    if "train" in parts:
      lines.extend(self.mfu_lines())
    self.report["ratios"] = ratios
    self.report["summary"] = lines
    return lines

  def mfu_lines(self):
    """Each side's model FLOPs per step (benchmarks/flops.py; both run the same model on the
    same batch) over its median step time, against the measured matmul peak of this
    machine in the run's precision and, on a GPU, the card's data-sheet dense peak."""
    size, a = self.size, self.args
    step_flops = bench_sizes.step_flops(bench_sizes.hparams(size, a.hparams), size, a.batch)
    lines = [f"MFU model {step_flops / 1e12:.3f} TFLOP a step (matmuls, backward = 2 x "
             "forward; benchmarks/flops.py)"]
    peaks = [] if a.gpus else [(f"measured {a.precision} matmul peak",
                                self.peak_gflops / 1000 if self.peak_gflops else None)]
    for name in a.gpus:
      peaks.append((f"{name} dense {a.precision} peak", gpu_peak_tflops(name, a.precision)))
    self.report["mfu"] = {"flops_per_step": step_flops, "peaks_tflops": dict(peaks)}
    for side in ("ours", "peer"):
      step_s = median(self.values("step", side, "train_median_step_s"))
      tflops_s = step_flops / step_s / 1e12 if step_s else None
      self.report["mfu"][side] = tflops_s
      for label, peak in peaks:
        lines.append(mfu_line(side, tflops_s, peak, label))
    return lines


def check_bench_dir(bench_dir, parts, with_ct2, size="small"):
  """Names of the shared scripts these parts need that bench_dir lacks (the small size's
  peer step is the shared script; the other sizes' is benchmarks/model_garden_sized.py)."""
  need = []
  if {"train", "decode"} & set(parts) and size == "small":
    need.append(SCRIPTS["step"])
  if "decode" in parts and with_ct2:
    need.append(SCRIPTS["ct2"])
  if "multi30k" in parts:
    need.append(SCRIPTS["multi30k"])
  return [s for s in need if not os.path.isfile(os.path.join(bench_dir, s))]


def main():
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      epilog="See the module docstring for exactly what is measured.")
  parser.add_argument("--parts", default=",".join(PARTS),
                      help="comma-separated: train, decode, multi30k (default: all)")
  parser.add_argument("--rounds", type=int, default=2,
                      help="alternations peer, ours per part (default 2: peer, ours, peer, ours)")
  parser.add_argument("--budget_min", type=float, default=None,
                      help="minutes of Multi30k training per side and round (default 5; "
                           "--quick: 0.3)")
  parser.add_argument("--peer_python",
                      default=os.environ.get("PEER_PYTHON", "/tmp/peer/bin/python"),
                      help="the peer venv's python (default: $PEER_PYTHON or /tmp/peer/bin/python)")
  parser.add_argument("--ct2_python", default="/tmp/ct2/bin/python",
                      help="CTranslate2 venv's python (skipped when absent)")
  parser.add_argument("--bench_dir", default=DEFAULT_BENCH,
                      help="the peer's scripts (default: ../shared/bench beside the repository)")
  parser.add_argument("--raw_dir", default=DEFAULT_RAW, help="raw Multi30k (train.en.gz ...)")
  parser.add_argument("--work_dir", default=DEFAULT_WORK,
                      help="data, logs, model and run dirs (reused across rounds and runs)")
  parser.add_argument("--json",
                      help="write everything here (default: <work_dir>/peer_compare.json)")
  parser.add_argument("--hparams", default="",
                      help="overrides of the model on both sides, e.g. norm_type=pre (the "
                           "peer is built from them: layers, widths, norm placement, dropouts; "
                           "not with the small size's shared peer script)")
  parser.add_argument("--ours_hparams", default="",
                      help='extra overrides for our side only, e.g. "bucket_mode=max" '
                           "(printed in the summary; default: none, the peer's configuration)")
  parser.add_argument("--precision", default="float32", choices=PRECISIONS,
                      help="both sides: ours with precision=..., the peer under tf_keras's "
                           "global mixed-precision policy (default float32, as the peer's "
                           "scripts; mixed_bfloat16 pays where bf16 matmuls are faster: "
                           "python -m t2t_keras.training.precision)")
  parser.add_argument("--size", default="small", choices=list(bench_sizes.SIZES),
                      help="the model and batch of train/decode (benchmarks/bench_sizes.py): "
                           "small (3+3, d 256, 8k vocabulary; the default), base and big "
                           "(the paper's, 37k vocabulary), tiny (a check that it runs)")
  parser.add_argument("--batch", type=int, default=None,
                      help="sentences a training step on both sides (default: the size's; "
                           "e.g. more on a GPU)")
  parser.add_argument("--quick", action="store_true",
                      help="tiny step counts and a 0.3-minute budget: checks that it runs")
  args = parser.parse_args()
  parts = [p for p in args.parts.split(",") if p]
  unknown = [p for p in parts if p not in PARTS]
  if unknown or not parts:
    parser.error(f"--parts: unknown {unknown}; choose from {', '.join(PARTS)}")
  if args.rounds < 1:
    parser.error("--rounds must be at least 1")
  if args.hparams and args.size == "small":
    parser.error("--hparams builds the peer from the overrides: use --size tiny, base or big "
                 "(the small size's peer is the shared script, fixed)")
  if "multi30k" in parts and args.size != "small":
    parser.error("--parts multi30k measures the small size's recipe only; drop it or use "
                 "--size small")
  if args.budget_min is None:
    args.budget_min = 0.3 if args.quick else 5.0
  args.work_dir = os.path.abspath(args.work_dir)
  args.bench_dir = os.path.abspath(args.bench_dir)
  args.json = os.path.abspath(args.json or os.path.join(args.work_dir, "peer_compare.json"))

  peer_versions = (package_versions(args.peer_python, ["tensorflow", "tf-keras",
                                                       "tf-models-official"])
                   if os.path.exists(args.peer_python) else {})
  if not peer_versions.get("tf-models-official"):
    print(f"peer not installed: {args.peer_python} "
          f"{'has no tf-models-official' if os.path.exists(args.peer_python) else 'not found'}."
          f"\nInstall TF Model Garden in its own venv (about 2 minutes; "
          f"../shared/bench/README.md):\n    {PEER_INSTALL}\nthen run this again "
          f"(or pass --peer_python / set PEER_PYTHON). Nothing was compared.")
    return 0
  with_ct2 = "decode" in parts and os.path.exists(args.ct2_python)
  ct2_versions = package_versions(args.ct2_python, ["ctranslate2"]) if with_ct2 else {}
  if with_ct2 and not ct2_versions.get("ctranslate2"):
    with_ct2 = False
  missing = check_bench_dir(args.bench_dir, parts, with_ct2, args.size)
  if missing:
    print(f"peer_compare: {args.bench_dir} lacks {', '.join(missing)} (the peer's scripts; "
          f"pass --bench_dir DIR)", file=sys.stderr)
    return 2
  needs_multi30k = "multi30k" in parts or args.size == "small"
  if (needs_multi30k and not data_ready(os.path.join(args.work_dir, "data", PROBLEM))
      and not os.path.exists(os.path.join(args.raw_dir, "train.en.gz"))):
    print(f"peer_compare: Multi30k not found in {args.raw_dir} (train.en.gz ...; pass "
          f"--raw_dir): the multi30k part and the small size need it (step_bench.py its "
          f"8000-piece vocabulary)", file=sys.stderr)
    return 2

  os.makedirs(args.work_dir, exist_ok=True)
  ours_versions = package_versions(sys.executable, ["tensorflow", "keras"])
  try:
    with open("/proc/cpuinfo") as f:
      cpu = cpu_model(f.read())
  except OSError:
    cpu = None
  args.gpus = gpu_names(sys.executable)
  print(f"CPU: {cpu or 'unknown'}; {os.cpu_count()} CPUs; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
  print(f"GPU: {', '.join(args.gpus)}: both sides train with XLA (ours: the Trainer's "
        f"default on a GPU; the peer: JIT=1)" if args.gpus else
        "GPU: none (both sides train without XLA: the Trainer's CPU default, the peer's JIT=0)")
  print(f"ours: {sys.executable}: " + ", ".join(f"{k} {v}" for k, v in ours_versions.items()))
  print(f"peer: {args.peer_python}: " + ", ".join(f"{k} {v}" for k, v in peer_versions.items()))
  if "decode" in parts:
    print(f"ct2:  {args.ct2_python}: " + (
        ", ".join(f"{k} {v}" for k, v in ct2_versions.items()) if with_ct2 else
        f"not installed: the CTranslate2 comparison is skipped (install: {CT2_INSTALL})"))
  print(f"parts {','.join(parts)}; {args.rounds} rounds; {precision_line(args.precision)}; "
        f"work dir {args.work_dir}"
        + ("; --quick: figures are noise" if args.quick else ""), flush=True)

  # Our binaries' persistent XLA cache (t2t_keras/xla_cache.py), emptied here:
  # round 1 compiles every program, later rounds load round 1's, as a user's
  # second run on this machine would.
  xla_dir = os.path.join(args.work_dir, "xla_cache")
  shutil.rmtree(xla_dir, ignore_errors=True)
  os.environ["T2T_XLA_CACHE"] = xla_dir
  print(f"ours: XLA cache {xla_dir}, emptied: round 1 compiles, later rounds load round 1's "
        "programs", flush=True)

  comp = Comparison(args)
  comp.report.update({"cpu_model": cpu, "cpus": os.cpu_count(), "gpus": args.gpus,
                      "parts": parts,
                      "versions": {"ours": ours_versions, "peer": peer_versions,
                                   "ct2": ct2_versions}})
  try:
    if comp.prepare_data(parts):
      if {"train", "decode"} & set(parts):
        comp.peak_gflops = None if args.gpus else comp.measure_peak()
        print(f"matmul peak ({args.precision}): " + (
            f"{comp.peak_gflops:,.0f} GFLOP/s" if comp.peak_gflops else
            "not measured (a GPU's MFU is against its data-sheet peak)" if args.gpus else
            "not measured (the measurement failed)"), flush=True)
        comp.report["peak_gflops"] = comp.peak_gflops
        for rnd in range(1, args.rounds + 1):
          comp.step_round(rnd, with_ct2, "decode" in parts)
      if "multi30k" in parts:
        for rnd in range(1, args.rounds + 1):
          comp.multi30k_round(rnd)
  finally:
    if comp.current is not None:
      comp.current.kill_if_running()
  lines = comp.summary(parts, with_ct2)
  comp.save()
  print("\n=== summary (ours / other; each figure the median over this run's rounds)"
        + (" --quick: noise, not a measurement" if args.quick else ""))
  print(precision_line(args.precision) + "\n"
        + (f"both sides with --hparams={args.hparams}\n" if args.hparams else "")
        + (f"ours with --ours_hparams={args.ours_hparams}\n" if args.ours_hparams else "")
        + f"CPU {cpu}" + (f"; GPU {', '.join(args.gpus)}" if args.gpus else "")
        + f"; ours tensorflow {ours_versions.get('tensorflow')}, peer tensorflow "
        f"{peer_versions.get('tensorflow')} (tf-models-official "
        f"{peer_versions.get('tf-models-official')})")
  print("\n".join(lines))
  for failure in comp.failures:
    print(f"FAILED {failure}")
  print(f"written: {args.json}")
  return 1 if comp.failures else 0


if __name__ == "__main__":
  sys.exit(main())
