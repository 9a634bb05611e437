"""benchmarks/peer_compare.py's rounds: each part run side by side, every run's figures kept.

`Comparison` runs our datagen and the matmul peak first (not timed), then each round of
a part: the peer, ours, then CTranslate2, each in its own child (peer_sides), keeping
every run's figures and writing the JSON after each child; its summary is
peer_report's. What is measured and how: peer_compare.py's docstring.
"""

import json
import os
import queue
import re
import shutil
import signal
import sys
import time

import bench_sizes
import peer_report
from peer_sides import (CT2_BUILD_CODE, CT2_TYPES, PEAK_CODE, PROBLEM, SCRIPTS, SIZED_PEER,
                        Child, child_env, is_trainer_start, ours_overrides,
                        parse_peer_multi30k_done, parse_peer_step, parse_step_bench,
                        parse_trainer_progress, peer_argv, window_median)
from step_bench import data_ready  # (no TensorFlow at import)

HERE = os.path.dirname(os.path.abspath(__file__))


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

  def summary(self, parts, with_ct2):
    """The summary lines (peer_report.summary), kept in the report with the ratios (and,
    with the train part, the MFU figures)."""
    lines, ratios, mfu = peer_report.summary(self.runs, self.args, self.size, self.peak_gflops,
                                             parts, with_ct2)
    if mfu is not None:
      self.report["mfu"] = mfu
    self.report["ratios"] = ratios
    self.report["summary"] = lines
    return lines
