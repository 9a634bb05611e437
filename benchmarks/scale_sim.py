"""WMT scale on this machine: a synthetic corpus of WMT shape, datagen and the input pipeline.

  .venv/bin/python benchmarks/scale_sim.py [--pairs=2000000] [--work_dir=/tmp/t2t_scale_sim]
      [--parts=corpus,datagen,pipeline,feed,workers] [--processes=1,2] [--workers=2,4]

* corpus: `--pairs` synthetic pairs whose (source, target) lengths in words are drawn
  from the joint length distribution of the shared WMT14 En-De training sample
  (../shared/data/wmt14/train_sample_opennmt_10k_tok), each word from that sample's
  unigram distribution of its side. Plain text, one file per side, gzipped.
* datagen: `t2t-datagen --problem=translate_parallel_text` on it (16 train shards, the
  default vocabulary sample of 1M pairs, a 32,000-piece target), once per
  `--processes` value, each in a fresh data dir (the first trains the vocabulary, the
  others reuse it): wall time, pairs/s and the peak RSS of the whole process tree
  (sampled every 0.2 s). The time is split into the vocabulary (until its file
  appears) and the shards, and extrapolated to the paper's corpora as
  vocabulary + pairs / (shard pairs/s): the vocabulary's sample is bounded, so its time
  is not scaled.
* pipeline: `make_dataset` over the generated train split at transformer_base's
  4096-token batches per replica, bucketed ("max") and packed (256), timed in a child
  process whose CPU affinity is 1 and then 2 cores (on 2 cores with 1 and then 2
  parallel batching streams, `InputSettings(streams=)`): target tokens/s (non-pad), per
  core, and the ratio to the 62,500 target tokens/s the paper's 8 GPUs consumed (25,000 target
  tokens a step, 0.4 s a step).
* feed: an accelerator host of the paper simulated: each step takes one 4096-token batch
  per replica for 8 replicas from one pipeline (as the trainer's `_next_batches` does),
  then "computes" for a fixed step time (a sleep: Python waits on the accelerator with
  the GIL released, as in the trainer's per-step `float(loss)`), for the paper's 0.4 s a
  step and a 4x faster one (0.1 s), in a child process on 1 and then 2 cores: the share
  of wall time spent waiting in next() (what the trainer's progress line reports as
  "input wait"), and the target tokens a step.
* workers: 2 and then 4 local MultiWorkerMirrored trainer processes on that data
  (a small model, evaluation with dev BLEU every 5 steps), all SIGKILLed at step 8 (a
  preempted cluster), started again and run to step 20: the times, the step resumed from
  and the steps of metrics.jsonl's dev lines (one line per evaluation: the chief writes).

Every figure comes from this run; name the CPU beside them.
"""

import argparse
import collections
import gzip
import json
import os
import shutil
import subprocess
import sys
import threading
import time

import numpy as np

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
WMT_SAMPLE = os.path.join(ROOT, "..", "shared", "data", "wmt14", "train_sample_opennmt_10k_tok")
PAPER_TARGET_TOKENS_PER_S = 25000 / 0.4
VOCAB_FILE = "vocab.translate_parallel_text.model"
PAPER_CORPORA = {"WMT14 En-De (4.5M)": 4_500_000, "WMT14 En-Fr (tfds, 40.8M)": 40_800_000}


def read_sample(sample_dir):
  """(word lists of the English side, of the German side) of the shared WMT sample."""
  sides = []
  for lang in ("en", "de"):
    with gzip.open(os.path.join(sample_dir, f"train.tok.{lang}.gz"), "rt",
                   encoding="utf-8") as f:
      sides.append([line.split() for line in f])
  if len(sides[0]) != len(sides[1]):
    raise SystemExit(f"{sample_dir}: {len(sides[0])} English and {len(sides[1])} German lines")
  return sides


def write_corpus(sample_dir, out_dir, pairs, seed=1, chunk=50_000):
  """Writes out_dir/train.{en,de}.gz (`pairs` lines) and dev/test (1,000 each); returns
  the paths {split: (en, de)} and the mean words per side."""
  en, de = read_sample(sample_dir)
  lengths = np.array([(len(a), len(b)) for a, b in zip(en, de) if a and b])
  vocab = []
  for side in (en, de):
    counts = collections.Counter(w for line in side for w in line)
    words, freq = zip(*counts.most_common())
    vocab.append((np.array(words, dtype=object), np.array(freq, float) / sum(freq)))
  rng = np.random.default_rng(seed)
  os.makedirs(out_dir, exist_ok=True)
  paths = {}
  for split, n in (("train", pairs), ("dev", 1000), ("test", 1000)):
    paths[split] = tuple(os.path.join(out_dir, f"{split}.{lang}.gz") for lang in ("en", "de"))
    files = [gzip.open(p, "wt", encoding="utf-8", compresslevel=1) for p in paths[split]]
    for start in range(0, n, chunk):
      rows = lengths[rng.integers(len(lengths), size=min(chunk, n - start))]
      for side, (words, p) in enumerate(vocab):
        drawn = rng.choice(words, size=int(rows[:, side].sum()), p=p)
        ends = np.cumsum(rows[:, side])
        files[side].write("".join(" ".join(s) + "\n" for s in np.split(drawn, ends[:-1])))
    for f in files:
      f.close()
  return paths, lengths.mean(axis=0)


class PeakRss:
  """The peak summed RSS of a process and its children, sampled every `every` seconds."""

  def __init__(self, pid, every=0.2):
    import psutil  # pylint: disable=import-outside-toplevel
    self.process, self.every, self.peak = psutil.Process(pid), every, 0
    self.thread = threading.Thread(target=self._run, daemon=True)
    self.thread.start()

  def _run(self):
    import psutil  # pylint: disable=import-outside-toplevel
    while True:
      try:
        procs = [self.process] + self.process.children(recursive=True)
        total = sum(p.memory_info().rss for p in procs if p.is_running())
      except psutil.Error:
        return
      self.peak = max(self.peak, total)
      time.sleep(self.every)


def run_datagen(paths, data_dir, processes, shards=16, vocab_size=32000):
  """Runs t2t-datagen; returns {"seconds", "vocab_seconds", "pairs", "peak_rss_gb"}."""
  vocab_file = os.path.join(data_dir, VOCAB_FILE)
  cmd = [os.path.join(os.path.dirname(sys.executable), "t2t-datagen"),
         "--problem=translate_parallel_text", f"--data_dir={data_dir}",
         f"--vocab_size={vocab_size}", f"--num_train_shards={shards}",
         f"--num_concurrent_processes={processes}",
         *(f"--parallel_{split}={','.join(p)}" for split, p in paths.items())]
  start = time.time()
  proc = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  rss = PeakRss(proc.pid)
  vocab_seconds = None
  while proc.poll() is None:
    if vocab_seconds is None and os.path.exists(vocab_file):
      vocab_seconds = time.time() - start
    time.sleep(0.2)
  seconds = time.time() - start
  out = proc.stdout.read()
  if proc.returncode:
    raise SystemExit(f"t2t-datagen failed:\n{out[-3000:]}")
  stats = json.load(open(os.path.join(data_dir, "translate_parallel_text-train.stats.json")))
  return {"seconds": seconds, "vocab_seconds": vocab_seconds or 0.0, "pairs": stats["pairs"],
          "peak_rss_gb": rss.peak / 2**30, "lengths": stats["lengths"]}


# A child process pinned to `cores` cores, reading the train split as the trainer does
# (argv: data_dir, cores, packed_length, streams, then the part's own): `it` its batches.
_CHILD_SETUP = """
import json, os, sys, time
os.sched_setaffinity(0, set(range(int(sys.argv[2]))))
import tensorflow as tf
from t2t_keras import registry
from t2t_keras.data import pipeline
data_dir, cores, packed, streams = sys.argv[1], int(sys.argv[2]), int(sys.argv[3]), int(sys.argv[4])
tf.config.threading.set_intra_op_parallelism_threads(cores)
tf.config.threading.set_inter_op_parallelism_threads(cores)
hp = registry.hparams("transformer_base").replace(batch_size=4096, max_length=256)
it = iter(pipeline.make_dataset(registry.problem("translate_parallel_text"), data_dir, "train",
                                hp, pipeline.InputSettings(shuffle=True, seed=1, repeat=True,
                                                           bucket_mode="max",
                                                           packed_length=packed,
                                                           streams=streams)))
"""

_PIPELINE_CHILD = _CHILD_SETUP + """
batches = int(sys.argv[5])
for _ in range(20):
  next(it)
tokens, start = 0, time.time()
for _ in range(batches):
  b = next(it)
  tokens += int(tf.math.count_nonzero(b["targets"]))
print("RESULT " + json.dumps({"tokens_per_s": tokens / (time.time() - start)}))
"""

_FEED_CHILD = _CHILD_SETUP + """
step_s, steps = float(sys.argv[5]), int(sys.argv[6])
waited = tokens = 0.0
for step in range(steps + 5):
  if step == 5:  # the first steps fill the shuffle buffer
    waited, tokens, start = 0.0, 0.0, time.time()
  t = time.perf_counter()
  batches = [next(it) for _ in range(8)]
  waited += time.perf_counter() - t
  tokens += sum(int(tf.math.count_nonzero(b["targets"])) for b in batches)
  time.sleep(step_s)
print("RESULT " + json.dumps({"input_wait": waited / (time.time() - start),
                              "tokens_per_step": tokens / steps}))
"""


def _run_child(script, *args):
  """The RESULT dict a child script printed (args: _CHILD_SETUP's, then its own)."""
  out = subprocess.run([sys.executable, "-c", script, *map(str, args)], capture_output=True,
                       text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"), check=True)
  return json.loads(out.stdout.split("RESULT ", 1)[1])


def run_feed(data_dir, cores, step_seconds, steps):
  return _run_child(_FEED_CHILD, data_dir, cores, 0, 1, step_seconds, steps)


def run_pipeline(data_dir, cores, packed, batches, streams=1):
  return _run_child(_PIPELINE_CHILD, data_dir, cores, packed, streams, batches)["tokens_per_s"]


def _free_ports(n):
  import socket  # pylint: disable=import-outside-toplevel
  socks = [socket.socket() for _ in range(n)]
  for sock in socks:
    sock.bind(("127.0.0.1", 0))
  ports = [sock.getsockname()[1] for sock in socks]
  for sock in socks:
    sock.close()
  return ports


def run_workers(data_dir, output_dir, n, steps, kill_at):
  """n local MultiWorkerMirrored trainer processes with evaluation on, all SIGKILLed once
  the chief logged step `kill_at` (a preempted cluster), then started again to `steps`.
  Returns {"first_s", "resume_s", "resumed_from", "dev_lines"}."""
  import signal  # pylint: disable=import-outside-toplevel
  hparams = ("hidden_size=64,filter_size=128,num_heads=2,num_encoder_layers=1,"
             "num_decoder_layers=1,batch_size=2048,max_length=64")
  trainer = os.path.join(os.path.dirname(sys.executable), "t2t-trainer")

  def start(train_steps):
    workers = [f"127.0.0.1:{p}" for p in _free_ports(n)]
    logs = [os.path.join(output_dir, f"worker{i}.log") for i in range(n)]
    os.makedirs(output_dir, exist_ok=True)
    procs = [subprocess.Popen(
        [trainer, "--problem=translate_parallel_text", f"--data_dir={data_dir}",
         f"--output_dir={output_dir}/run", "--hparams_set=transformer_tiny",
         f"--hparams={hparams}", f"--train_steps={train_steps}", "--save_every=5",
         "--eval_every=5", "--eval_steps=5", "--eval_bleu_sentences=8", "--log_every=1"],
        stdout=open(logs[i], "a"), stderr=subprocess.STDOUT,
        env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TF_CONFIG=json.dumps(
            {"cluster": {"worker": workers}, "task": {"type": "worker", "index": i}})))
             for i in range(n)]
    return procs, logs

  start_time = time.time()
  procs, logs = start(steps)
  while f"step {kill_at:>7d}" not in open(logs[0]).read():
    if any(p.poll() not in (None, 0) for p in procs) or time.time() - start_time > 1800:
      raise SystemExit(f"{n} workers failed:\n{open(logs[0]).read()[-3000:]}")
    time.sleep(0.2)
  for p in procs:
    p.send_signal(signal.SIGKILL)
    p.wait()
  first = time.time() - start_time
  start_time = time.time()
  procs, logs = start(steps)
  codes = [p.wait(timeout=1800) for p in procs]
  text = open(logs[0]).read()
  if codes != [0] * n:
    raise SystemExit(f"{n} workers exited {codes} after the resume:\n{text[-3000:]}")
  resumed = text.split("resumed from ")[-1].split()[0] if "resumed from" in text else None
  with open(os.path.join(output_dir, "run", "metrics.jsonl")) as f:
    dev_steps = [json.loads(line)["step"] for line in f if "dev_loss" in line]
  return {"first_s": first, "resume_s": time.time() - start_time, "resumed_from": resumed,
          "dev_steps": dev_steps}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--pairs", type=int, default=2_000_000)
  parser.add_argument("--work_dir", default="/tmp/t2t_scale_sim")
  parser.add_argument("--parts", default="corpus,datagen,pipeline,feed,workers")
  parser.add_argument("--processes", default="1,2")
  parser.add_argument("--batches", type=int, default=3000)
  parser.add_argument("--workers", default="2,4", help="local worker processes (part workers)")
  parser.add_argument("--feed_steps", type=int, default=100, help="simulated steps (part feed)")
  parser.add_argument("--sample_dir", default=WMT_SAMPLE)
  args = parser.parse_args()
  parts = set(args.parts.split(","))
  raw = os.path.join(args.work_dir, "raw")
  paths = {split: tuple(os.path.join(raw, f"{split}.{lang}.gz") for lang in ("en", "de"))
           for split in ("train", "dev", "test")}
  print(f"CPU: {os.cpu_count()} cores visible; scale_sim with {args.pairs:,} pairs")
  if "corpus" in parts:
    start = time.time()
    paths, mean = write_corpus(args.sample_dir, raw, args.pairs)
    print(f"corpus: {args.pairs:,} pairs, mean {mean[0]:.1f} English and {mean[1]:.1f} "
          f"German words a line (the WMT sample's), written in {time.time() - start:.0f} s")
  data_dirs, vocab_seconds = {}, 0.0
  for processes in (int(p) for p in args.processes.split(",")):
    data_dirs[processes] = os.path.join(args.work_dir, f"data_p{processes}")
    if "datagen" not in parts:
      continue
    subprocess.run(["rm", "-rf", data_dirs[processes]], check=True)
    first = min(data_dirs)
    if processes != first:  # the vocabulary is timed once: later runs reuse the first's
      os.makedirs(data_dirs[processes])
      shutil.copy(os.path.join(data_dirs[first], VOCAB_FILE), data_dirs[processes])
    r = run_datagen(paths, data_dirs[processes], processes)
    if processes == first:
      vocab_seconds = r["vocab_seconds"]
      shard_rate = r["pairs"] / max(r["seconds"] - vocab_seconds, 1e-9)
      print(f"datagen, {processes} process(es): {r['seconds']:.0f} s for {r['pairs']:,} "
            f"pairs (vocabulary {vocab_seconds:.0f} s, shards {shard_rate:,.0f} pairs/s), "
            f"peak RSS {r['peak_rss_gb']:.2f} GB")
    else:
      shard_rate = r["pairs"] / r["seconds"]
      print(f"datagen, {processes} process(es), the vocabulary reused: shards in "
            f"{r['seconds']:.0f} s ({shard_rate:,.0f} pairs/s), peak RSS "
            f"{r['peak_rss_gb']:.2f} GB")
    for name, n in PAPER_CORPORA.items():
      est = vocab_seconds + n / shard_rate
      print(f"  extrapolated to {name}: {vocab_seconds:.0f} s + {n:,} / {shard_rate:,.0f} "
            f"pairs/s = {est / 60:.0f} min")
  if "workers" in parts:
    for n in (int(w) for w in args.workers.split(",")):
      out = os.path.join(args.work_dir, f"workers{n}")
      subprocess.run(["rm", "-rf", out], check=True)
      r = run_workers(data_dirs[max(data_dirs)], out, n, steps=20, kill_at=8)
      print(f"workers, {n} local processes, evaluation every 5 steps: killed (SIGKILL, all) "
            f"at step 8 after {r['first_s']:.0f} s, resumed from {r['resumed_from']} and "
            f"finished step 20 in {r['resume_s']:.0f} s; metrics.jsonl dev lines at steps "
            f"{r['dev_steps']}")
  if "pipeline" in parts:
    data_dir = data_dirs[max(data_dirs)]
    for packed in (0, 256):
      for cores, streams in ((1, 1), (2, 1), (2, 2)):
        rate = run_pipeline(data_dir, cores, packed, args.batches, streams)
        print(f"RATIO pipeline_{'packed' if packed else 'buckets'}_{cores}core_{streams}stream "
              f"target tokens/s {rate:,.0f} ({rate / cores:,.0f} per core) / paper's 8 GPUs "
              f"{PAPER_TARGET_TOKENS_PER_S:,.0f} = {rate / PAPER_TARGET_TOKENS_PER_S:.2f}x")

  if "feed" in parts:
    data_dir = data_dirs[max(data_dirs)]
    for step_seconds in (0.4, 0.1):
      for cores in (1, 2):
        r = run_feed(data_dir, cores, step_seconds, args.feed_steps)
        print(f"feed: 8 replicas from one pipeline on {cores} core(s), a {step_seconds} s "
              f"step, {args.feed_steps} steps: input wait {100 * r['input_wait']:.2f}% of "
              f"wall time, {r['tokens_per_step']:,.0f} target tokens a step")


if __name__ == "__main__":
  main()
