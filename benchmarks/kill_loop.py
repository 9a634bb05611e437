"""Every writer SIGKILLed at random times, then run again until it completes; the result
compared with an uninterrupted run's. Hours in the background; resumes where it stopped.

    python benchmarks/kill_loop.py --work_dir=/tmp/kill_loop --kills_per_writer=10 --seed=1
    python benchmarks/kill_loop.py --work_dir=/tmp/kill_loop --writers=trainer,datagen
    python benchmarks/kill_loop.py --work_dir=/tmp/kl --short        # a few cheap kills
    python benchmarks/kill_loop.py --work_dir=/tmp/kl --repro=trainer:7.31,2.10

Each writer of benchmarks/kill_writers.py (t2t-trainer, t2t-datagen with two worker
processes, t2t-exporter in each format, t2t-avg-all, t2t-import of each kind, t2t-sweep)
runs as `python -m t2t_keras.bin.<module>` at its tests' tiny size. Once per writer, an
uninterrupted reference run measures the run's duration D. Then round after round, one
kill cycle of each writer (a loop stopped early has killed every writer alike): a fresh
output directory; the command SIGKILLed at a time drawn uniformly from [0, D); reruns of
the same command, each killed again with probability --rekill_p (at most --max_rekills
times); then a final uninterrupted rerun (a second one if it fails: the failure is
reported). The seed, the writer and the cycle's number draw the kill times, so a cycle is
the same after a restart; every kill time is printed, and --repro runs one cycle with
given kill times. The verdict of a cycle:
  recovered    the final rerun exited 0 (or refused with "already written" where the
               killed run had finished its output: an exporter's or importer's directory)
  mismatches   the output against the reference's (kill_writers.py: the trainer's final
               weights and losses, datagen's bytes, an export's translations, ...), and
               any file under a final name that does not read back
  leftovers    temporary files and directories in the output (kill_writers.TEMPORARY's
               names) after each kill, and stale ones after the completing rerun;
               "tripped": a rerun failed or the output mismatched while an earlier run's
               leftovers were there. What the runs left in their own TMPDIR (a directory
               of the cycle: TensorFlow's autograph files, Python's temporary
               directories) is counted apart ("tmpdir left")
  orphans      the killed process's descendants that outlived it by more than
               ORPHAN_GRACE_S (they would write beside the rerun, which starts once they
               are gone)
Results go to WORK_DIR/results.jsonl, a line per cycle, read back on restart (done cycles
are skipped); the totals per writer are printed at the end. A cycle's directory is
removed when its verdict is clean (kept with --keep or when anything went wrong).
--short kills each of a few cheap writers (SHORT_WRITERS) once at fixed fractions of D,
without rekills (tests/benchmarks/test_kill_loop.py runs it).
"""

import argparse
import collections
import ctypes
import json
import os
import random
import re
import shutil
import signal
import subprocess
import sys
import time

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable-next=wrong-import-position
import kill_writers  # noqa: E402

SHORT_WRITERS = ("avg-all", "exporter-savedmodel", "datagen")
ORPHAN_WAIT_S = 120.0  # how long the killed process's descendants are awaited
# A descendant alive this long after the kill is an orphan: time for a trial's trainer to
# save on its SIGTERM, or a spawned worker to import its parent's module and see it gone.
ORPHAN_GRACE_S = 10.0
RERUN_TIMEOUT_FACTOR, RERUN_TIMEOUT_MIN_S = 10.0, 300.0
RESULTS_FILE = "results.jsonl"


def child_env(tmp_dir):
  """The binaries' environment: quiet TensorFlow, one thread per pool, no XLA cache (the
  same start-up cost in every run), TMPDIR in the cycle's directory (its leftovers counted)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", T2T_XLA_CACHE="", TMPDIR=tmp_dir,
             PYTHONUNBUFFERED="1")
  env.setdefault("TF_NUM_INTRAOP_THREADS", "1")
  env.setdefault("TF_NUM_INTEROP_THREADS", "1")
  env.pop("TF_CONFIG", None)
  return env


def _die_with_parent():
  """In the binary's process before exec: SIGKILL when the loop dies (Linux), so that a
  stopped loop leaves no writer running."""
  if sys.platform.startswith("linux"):
    ctypes.CDLL(None).prctl(1, signal.SIGKILL)  # PR_SET_PDEATHSIG


# Processes: the killed binary's descendants, read from /proc.

def _parents():
  """{pid: parent pid} of every live (not zombie) process."""
  out = {}
  for name in os.listdir("/proc"):
    if name.isdigit():
      try:
        with open(f"/proc/{name}/stat", encoding="utf-8") as f:
          fields = f.read().rsplit(")", 1)[1].split()
      except OSError:
        continue
      if fields[0] != "Z":
        out[int(name)] = int(fields[1])
  return out


def descendants(pid):
  """The pids of pid's live descendants."""
  children = collections.defaultdict(list)
  for child, parent in _parents().items():
    children[parent].append(child)
  found, todo = [], [pid]
  while todo:
    for child in children[todo.pop()]:
      found.append(child)
      todo.append(child)
  return found


def await_gone(pids, timeout):
  """(seconds until every pid ended, [pids still alive at the timeout])."""
  start = time.monotonic()
  while True:
    alive = [p for p in pids if p in _parents()]
    if not alive or time.monotonic() - start > timeout:
      return time.monotonic() - start, alive
    time.sleep(0.1)


# Leftovers: temporary names in the output, anything in the run's TMPDIR.

def leftovers(out):
  """Relative paths of the temporary files and directories under `out`."""
  found = []
  for root, dirs, names in os.walk(out):
    for name in sorted(dirs + names):
      if kill_writers.is_temporary(name):
        found.append(os.path.relpath(os.path.join(root, name), out))
    dirs[:] = [d for d in dirs if not kill_writers.is_temporary(d)]
  return found


def tmpdir_files(tmp_dir):
  """What the runs left in their TMPDIR (TensorFlow's autograph files, Python's temporary
  directories, multiprocessing's): outside the output, so no later command reads them."""
  return sorted(os.listdir(tmp_dir)) if os.path.isdir(tmp_dir) else []


# One run of a writer's command, killed at `kill_at` seconds or not.

def attempt(argv, env, log_path, kill_at=None, timeout=None):
  """Runs argv; SIGKILLs it at kill_at seconds (None: waits up to timeout, then kills it).
  Returns {"kill_at", "landed" (it was still running), "rc", "seconds", "orphans",
  "linger_s", "log" (its output's last lines)}."""
  start = time.monotonic()
  with open(log_path, "w", encoding="utf-8") as log:
    proc = subprocess.Popen(argv, env=env, stdout=log, stderr=subprocess.STDOUT,
                            stdin=subprocess.DEVNULL, start_new_session=True,
                            preexec_fn=_die_with_parent)
    record = {"kill_at": kill_at, "landed": False, "orphans": 0, "linger_s": 0.0}
    try:
      proc.wait(timeout=kill_at if kill_at is not None else timeout)
    except subprocess.TimeoutExpired:
      family = descendants(proc.pid)
      proc.kill()
      proc.wait()
      record.update(landed=kill_at is not None, timed_out=kill_at is None)
      linger, orphans = await_gone(family, ORPHAN_GRACE_S)
      more, survivors = await_gone(orphans, ORPHAN_WAIT_S)
      record.update(linger_s=round(linger + more, 2), orphans=len(orphans))
      for pid in survivors:  # still alive after ORPHAN_WAIT_S: stopped here
        os.kill(pid, signal.SIGKILL)
  record.update(rc=proc.returncode, seconds=round(time.monotonic() - start, 2))
  with open(log_path, encoding="utf-8", errors="replace") as f:
    record["log"] = "".join(f.readlines()[-8:])
  return record


def command(writer, inputs_dir, out):
  return [sys.executable, "-m", writer.module, *writer.args(inputs_dir, out)]


# The helpers run in a child process (TensorFlow's memory out of the loop) or in this one.

class Helpers:
  """kill_writers' prepare and verdict, each in a child process (isolate) or in this one."""

  def __init__(self, isolate):
    self.isolate = isolate

  def _child(self, *args):
    proc = subprocess.run([sys.executable, kill_writers.__file__, *args], check=False,
                          capture_output=True, text=True, env=child_env(
                              os.environ.get("TMPDIR", "/tmp")))
    if proc.returncode:
      raise RuntimeError(f"kill_writers.py {' '.join(args)} failed:\n{proc.stderr[-3000:]}")
    return proc.stdout

  def prepare(self, kind, directory):
    if self.isolate:
      self._child("prepare", kind, directory)
    else:
      kill_writers.prepare(kind, directory)

  def verdict(self, writer_name, ref, out):
    if self.isolate:
      return json.loads(self._child("compare", writer_name, ref, out).splitlines()[-1])
    return kill_writers.verdict(writer_name, ref, out)


def inputs(work_dir, kind, helpers):
  """WORK_DIR/inputs/<kind>, written once (a marker file when whole)."""
  directory = os.path.join(work_dir, "inputs", kind)
  if not os.path.exists(os.path.join(directory, ".prepared")):
    shutil.rmtree(directory, ignore_errors=True)
    helpers.prepare(kind, directory)
    open(os.path.join(directory, ".prepared"), "w", encoding="utf-8").close()
  return directory


def reference(work_dir, writer, inputs_dir, log):
  """The uninterrupted run of WORK_DIR/<writer>/reference (once): {"duration_s", "rc",
  "leftovers", "log"}."""
  directory = os.path.join(work_dir, writer.name, "reference")
  path = directory + ".json"
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return json.load(f)
  shutil.rmtree(directory, ignore_errors=True)
  out, tmp = os.path.join(directory, "out"), os.path.join(directory, "tmp")
  os.makedirs(out)
  os.makedirs(tmp)
  run = attempt(command(writer, inputs_dir, out), child_env(tmp),
                os.path.join(directory, "run.log"), timeout=1800)
  result = {"duration_s": run["seconds"], "rc": run["rc"], "leftovers": leftovers(out),
            "tmpdir": tmpdir_files(tmp), "log": run["log"]}
  log(f"{writer.name}: reference run {run['seconds']:.1f} s, exit {run['rc']}"
      + (f"; leftovers {result['leftovers']}" if result["leftovers"] else ""))
  if run["rc"] == 0:
    with open(path, "w", encoding="utf-8") as f:
      json.dump(result, f)
  return result


def kill_times(seed, writer_name, index, duration, settings):
  """The cycle's kill times (seconds into each run): the first, then one per rekill."""
  if settings.short:
    return [duration * (index + 0.5) / settings.kills_per_writer]
  rng = random.Random(f"{seed}-{writer_name}-{index}")
  times = [rng.uniform(0, duration)]
  while len(times) <= settings.max_rekills and rng.random() < settings.rekill_p:
    times.append(rng.uniform(0, duration))
  return [round(t, 3) for t in times]


def _refused_as_written(writer, run):
  """True for a rerun that refused because the output it would write exists."""
  return bool(run["rc"] and writer.refusal and re.search(writer.refusal, run["log"]))


def final_runs(writer, argv, env, paths, timeout):
  """Uninterrupted reruns until one completes (two at most): [run records]."""
  out, tmp, cycle_dir, n = paths
  runs = []
  for k in range(2):
    before = leftovers(out)
    run = attempt(argv, env, os.path.join(cycle_dir, f"run-{n + k}.log"), timeout=timeout)
    run.update(leftovers_before=before, leftovers_after=leftovers(out),
               tmpdir_after=tmpdir_files(tmp), refused_as_written=_refused_as_written(writer, run))
    runs.append(run)
    if run["rc"] == 0 or run["refused_as_written"]:
      break
  return runs


def cycle(work_dir, writer, inputs_dir, ref, times, helpers):
  """One kill cycle in WORK_DIR/<writer>/cycle-<...>: the killed runs, the final reruns and
  the verdict; returns its result record."""
  cycle_dir = os.path.join(work_dir, writer.name, "cycle-" + "_".join(f"{t:.3f}" for t in times))
  shutil.rmtree(cycle_dir, ignore_errors=True)
  out, tmp = os.path.join(cycle_dir, "out"), os.path.join(cycle_dir, "tmp")
  os.makedirs(out)
  os.makedirs(tmp)
  argv, env = command(writer, inputs_dir, out), child_env(tmp)
  start, killed = time.monotonic(), []
  for n, kill_at in enumerate(times):
    before = leftovers(out)
    run = attempt(argv, env, os.path.join(cycle_dir, f"run-{n}.log"), kill_at=kill_at)
    run.update(leftovers_before=before, leftovers_after=leftovers(out),
               tmpdir_after=tmpdir_files(tmp), refused_as_written=_refused_as_written(writer, run))
    killed.append(run)
  timeout = max(RERUN_TIMEOUT_MIN_S, RERUN_TIMEOUT_FACTOR * ref["duration_s"])
  final = final_runs(writer, argv, env, (out, tmp, cycle_dir, len(times)), timeout)
  ref_out = writer.output(os.path.join(work_dir, writer.name, "reference", "out"))
  found = helpers.verdict(writer.name, ref_out, writer.output(out))
  return summarize(writer, times, killed, final, found, cycle_dir, time.monotonic() - start)


def summarize(writer, times, killed, final, found, cycle_dir, seconds):
  """The cycle's result record from its runs and the output's verdict."""
  completed = final[-1]["rc"] == 0 or final[-1]["refused_as_written"]
  failed = [r for r in killed if not r["landed"] and r["rc"] and not r["refused_as_written"]]
  failed += [r for r in final if r["rc"] and not r["refused_as_written"]]
  bad_output = bool(found["mismatches"] or found["damaged"])
  tripped = any(r["leftovers_before"] for r in failed) or (
      bad_output and any(r["leftovers_after"] for r in killed))
  return {
      "writer": writer.name, "kill_times": times, "cycle_dir": cycle_dir,
      "landed": sum(r["landed"] for r in killed), "completed": completed,
      "mismatches": found["mismatches"], "damaged": found["damaged"],
      "failed_runs": [{"rc": r["rc"], "log": r["log"]} for r in failed],
      "leftovers_after_kill": [r["leftovers_after"] for r in killed],
      "stale_after_rerun": final[-1]["leftovers_after"],
      "tmpdir_after_rerun": final[-1]["tmpdir_after"], "tripped": tripped,
      "already_written": final[-1]["refused_as_written"],
      "orphans": sum(r["orphans"] for r in killed),
      "linger_s": max([r["linger_s"] for r in killed] or [0.0]),
      "run_seconds": [r["seconds"] for r in killed + final], "cycle_s": round(seconds, 1)}


def is_clean(record):
  return (record["completed"] and not record["mismatches"] and not record["damaged"]
          and not record["failed_runs"] and not record["stale_after_rerun"]
          and not record["orphans"])


def read_results(path):
  """{(writer, seed, index, short): record} of the results file (a line cut short is
  skipped)."""
  done = {}
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      for line in f:
        try:
          record = json.loads(line)
        except ValueError:
          continue
        done[(record["writer"], record["seed"], record["index"], record["short"])] = record
  return done


def describe(record):
  """One line of a cycle's result, with its kill times."""
  kills = ", ".join(f"{t:.2f} s" for t in record["kill_times"])
  left = [len(x) for x in record["leftovers_after_kill"]]
  parts = [f"{record['writer']} #{record['index']}: killed at {kills} "
           f"({record['landed']} landed); "
           + ("recovered" if record["completed"] else "NOT RECOVERED"),
           f"leftovers after each kill {left}, stale after the rerun "
           f"{len(record['stale_after_rerun'])}, in TMPDIR "
           f"{len(record['tmpdir_after_rerun'])}"]
  if record["stale_after_rerun"]:
    parts.append(f"stale: {record['stale_after_rerun'][:4]}")
  for key in ("mismatches", "damaged", "failed_runs"):
    if record[key]:
      parts.append(f"{key.upper()}: {record[key][:3]}")
  if record["orphans"]:
    parts.append(f"ORPHANS {record['orphans']} (alive {record['linger_s']} s after the kill)")
  if record["tripped"]:
    parts.append("TRIPPED by leftovers")
  return "; ".join(parts) + f"  [{record['cycle_s']:.0f} s]"


def totals(records):
  """{writer: counts} over the records, and "all"."""
  table = collections.OrderedDict()
  for r in records:
    for name in (r["writer"], "all"):
      t = table.setdefault(name, collections.Counter())
      t["kills"] += len(r["kill_times"])
      t["cycles"] += 1
      t["landed"] += r["landed"]
      t["recovered"] += r["completed"]
      t["already_written"] += r["already_written"]
      t["mismatches"] += bool(r["mismatches"] or r["damaged"])
      t["refused"] += len(r["failed_runs"])
      t["leftovers_after_kill"] += sum(map(len, r["leftovers_after_kill"]))
      t["stale_after_rerun"] += len(r["stale_after_rerun"])
      t["tmpdir_left"] += len(r["tmpdir_after_rerun"])
      t["tripped"] += r["tripped"]
      t["orphans"] += r["orphans"]
      t["cycle_s"] += r["cycle_s"]
  if "all" in table:
    table.move_to_end("all")
  return {name: dict(t) for name, t in table.items()}


def format_totals(table):
  columns = ["cycles", "kills", "landed", "recovered", "already_written", "mismatches", "refused",
             "leftovers_after_kill", "stale_after_rerun", "tripped", "orphans", "tmpdir_left"]
  lines = ["writer".ljust(22) + " ".join(c.replace("_", " ").rjust(len(c)) for c in columns)
           + "  s/cycle"]
  for name, t in table.items():
    lines.append(name.ljust(22) + " ".join(str(t.get(c, 0)).rjust(len(c)) for c in columns)
                 + f"  {t['cycle_s'] / max(t['cycles'], 1):7.1f}")
  return "\n".join(lines)


def ready_writers(settings, helpers, log):
  """{writer: (inputs directory, reference record)} of settings.writers whose reference
  run succeeded (the others are logged and left out)."""
  ready = {}
  for name in settings.writers:
    writer = kill_writers.WRITERS[name]
    inputs_dir = inputs(settings.work_dir, writer.inputs, helpers)
    ref = reference(settings.work_dir, writer, inputs_dir, log)
    if ref["rc"] == 0:
      ready[writer] = inputs_dir, ref
    else:
      log(f"{name}: the reference run failed (exit {ref['rc']}), left out:\n{ref['log']}")
  return ready


def run_cycle(settings, writer, index, prepared, helpers, log):
  """Cycle `index` of `writer`, recorded in results.jsonl; its record."""
  inputs_dir, ref = prepared
  times = kill_times(settings.seed, writer.name, index, ref["duration_s"], settings)
  log(f"{writer.name} #{index}: kill times {times} (reference {ref['duration_s']:.1f} s)")
  record = cycle(settings.work_dir, writer, inputs_dir, ref, times, helpers)
  record.update(seed=settings.seed, index=index, short=settings.short)
  with open(os.path.join(settings.work_dir, RESULTS_FILE), "a", encoding="utf-8") as f:
    f.write(json.dumps(record) + "\n")
  log(describe(record))
  if is_clean(record) and not settings.keep:
    shutil.rmtree(record["cycle_dir"], ignore_errors=True)
  return record


def run_loop(settings, isolate=True, log=print):
  """The writers' references, then round after round one cycle of each writer (a run
  stopped early has killed every writer alike); cycles in results.jsonl are read back,
  not run. Returns totals() of this seed's records (earlier sessions' included)."""
  os.makedirs(settings.work_dir, exist_ok=True)
  done = read_results(os.path.join(settings.work_dir, RESULTS_FILE))
  helpers = Helpers(isolate)
  ready, records = ready_writers(settings, helpers, log), []
  for index in range(settings.kills_per_writer):
    for writer, prepared in ready.items():
      key = (writer.name, settings.seed, index, settings.short)
      records.append(done[key] if key in done
                     else run_cycle(settings, writer, index, prepared, helpers, log))
  table = totals(sorted(records, key=lambda r: settings.writers.index(r["writer"])))
  log(format_totals(table))
  return table


def repro(settings, spec, log=print):
  """--repro=WRITER:T1,T2,...: one cycle with those kill times; its record."""
  name, _, times = spec.partition(":")
  writer, helpers = kill_writers.WRITERS[name], Helpers(True)
  inputs_dir = inputs(settings.work_dir, writer.inputs, helpers)
  ref = reference(settings.work_dir, writer, inputs_dir, log)
  record = cycle(settings.work_dir, writer, inputs_dir, ref,
                 [float(t) for t in times.split(",")], helpers)
  log(describe(dict(record, index="repro")))
  return record


def parse_args(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
  parser.add_argument("--work_dir", required=True, help="Inputs, runs and results.jsonl.")
  parser.add_argument("--writers", default=None,
                      help=f"Comma-separated, of: {', '.join(kill_writers.WRITERS)} "
                           "(default all; --short: " + ",".join(SHORT_WRITERS) + ").")
  parser.add_argument("--kills_per_writer", type=int, default=10)
  parser.add_argument("--seed", type=int, default=1)
  parser.add_argument("--rekill_p", type=float, default=0.3,
                      help="Probability that a rerun is killed again.")
  parser.add_argument("--max_rekills", type=int, default=2)
  parser.add_argument("--short", action="store_true",
                      help="Kills at fixed fractions of the run, no rekills; "
                           "--kills_per_writer defaults to 1.")
  parser.add_argument("--keep", action="store_true", help="Keep clean cycles' directories.")
  parser.add_argument("--repro", default=None, help="WRITER:T1,T2,...: one cycle.")
  args = parser.parse_args(argv)
  if args.short and "--kills_per_writer" not in " ".join(argv or sys.argv):
    args.kills_per_writer = 1
  args.writers = (args.writers.split(",") if args.writers
                  else list(SHORT_WRITERS if args.short else kill_writers.WRITERS))
  unknown = [w for w in args.writers if w not in kill_writers.WRITERS]
  if unknown:
    parser.error(f"unknown writers {unknown}; known: {', '.join(kill_writers.WRITERS)}")
  return args


def main():
  settings = parse_args()
  if settings.repro:
    record = repro(settings, settings.repro)
    return 0 if is_clean(record) else 1
  table = run_loop(settings)
  all_ = table.get("all", {})
  return 0 if all_.get("mismatches", 0) == 0 and all_.get("recovered") == all_.get("cycles") \
      else 1


if __name__ == "__main__":
  sys.exit(main())
