"""benchmarks/peer_compare.py's sides: each side's child process and what it prints.

How each side is started (the peer's scripts as they are or under a mixed-precision
policy, our overrides, the environment of every child), a child that echoes, logs and
hands over its output line by line and is reaped with its peak RSS (`Child`), the parsing
of each side's figures from that output, and the probes of the machine and of each venv
(CPU model, GPUs, package versions). Imports no TensorFlow. What is measured and how:
peer_compare.py's docstring.
"""

import json
import os
import queue
import re
import signal
import statistics
import subprocess
import threading
import time

HERE = os.path.dirname(os.path.abspath(__file__))
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


# Each side's figures from its output (pure; tested in tests/benchmarks/test_peer_compare.py).

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


# Command lines.

def peer_argv(python, script, precision, args=()):
  """The peer's command line: its script as is, or under tf_keras's global `precision` policy."""
  if precision == "float32":
    return [python, script, *args]
  return [python, "-c", PEER_POLICY_CODE, precision, script, *args]


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


def child_env(**extra):
  env = dict(os.environ, PYTHONUNBUFFERED="1", TF_CPP_MIN_LOG_LEVEL="3")
  env.update({k: str(v) for k, v in extra.items()})
  return env


# Probes of the machine and of each venv.

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
