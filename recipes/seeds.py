"""Runs a recipe once per seed and prints every result's min / median / max over the seeds.

    python recipes/seeds.py --seeds=1,2,3,4,5 --output_dir=t2t_train/main_seeds -- ./run_main.sh
    python recipes/seeds.py --seeds=1,2 --output_dir=t2t_train/m30k_seeds -- recipes/multi30k.sh 60

Each run gets the environment variables T2T_SEED (the seed) and T2T_RUN
(OUTPUT_DIR/seed<N> as an absolute path, its run directory), which `run_main.sh` and the recipes
read; its output goes to OUTPUT_DIR/seed<N>.log and its `RESULT name value` lines
are collected (`recipes/numbers_ranges.py` prints them). A seed whose command
exits non-zero is marked failed and the others still run. OUTPUT_DIR/seeds.md
gets the per-seed table and the spread, rewritten after every seed; a seed that
finished before (its OUTPUT_DIR/seed<N>.json exists) is not run again.

Exits 1 when any seed failed, naming them in one line.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import time


def parse_results(lines):
  """{name: value} from the `RESULT name value` lines of a run's output (last one wins)."""
  results = {}
  for line in lines:
    words = line.split()
    if len(words) == 3 and words[0] == "RESULT":
      try:
        results[words[1]] = float(words[2])
      except ValueError:
        pass
  return results


def spread(values):
  """(min, median, max) of a non-empty list."""
  return min(values), statistics.median(values), max(values)


def table(runs):
  """Markdown: a row per seed, then min / median / max per result over the seeds that finished.

  runs: [{"seed": int, "returncode": int, "minutes": float, "results": {name: value}}].
  """
  names = []
  for run in runs:
    names += [n for n in run["results"] if n not in names]
  lines = ["| seed | exit | minutes | " + " | ".join(names) + " |",
           "|---" * (len(names) + 3) + "|"]
  for run in runs:
    cells = [f"{run['results'][n]:.4g}" if n in run["results"] else "-" for n in names]
    lines.append(f"| {run['seed']} | {run['returncode']} | {run['minutes']:.1f} | "
                 + " | ".join(cells) + " |")
  lines += ["", f"Over {len(runs)} seed(s): min / median / max", ""]
  for n in names:
    values = [run["results"][n] for run in runs if n in run["results"]]
    lo, mid, hi = spread(values)
    lines.append(f"- {n}: {lo:.4g} / {mid:.4g} / {hi:.4g} ({len(values)} seeds)")
  return "\n".join(lines) + "\n"


def run_seed(seed, output_dir, command):
  """Runs `command` with T2T_SEED and T2T_RUN set; returns its record (cached in seed<N>.json)."""
  record_path = os.path.join(output_dir, f"seed{seed}.json")
  if os.path.exists(record_path):
    with open(record_path) as f:
      return json.load(f)
  # Absolute: recipes cd to the repository before they read it.
  run_dir = os.path.abspath(os.path.join(output_dir, f"seed{seed}"))
  env = dict(os.environ, T2T_SEED=str(seed), T2T_RUN=run_dir)
  log_path = os.path.join(output_dir, f"seed{seed}.log")
  lines = []
  start = time.time()
  with open(log_path, "w", encoding="utf-8") as log, subprocess.Popen(
      command, env=env, stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True) as proc:
    for line in proc.stdout:
      log.write(line)
      log.flush()
      lines.append(line)
  record = {"seed": seed, "returncode": proc.returncode, "results": parse_results(lines),
            "minutes": (time.time() - start) / 60, "command": command}
  if proc.returncode == 0:  # a failed seed runs again next time
    with open(record_path + ".tmp", "w") as f:
      json.dump(record, f, indent=1)
    os.replace(record_path + ".tmp", record_path)
  return record


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--seeds", required=True, help="comma-separated integers, e.g. 1,2,3")
  parser.add_argument("--output_dir", required=True)
  parser.add_argument("command", nargs=argparse.REMAINDER, help="-- COMMAND [ARGS...]")
  args = parser.parse_args(argv)
  command = args.command[1:] if args.command[:1] == ["--"] else args.command
  if not command:
    parser.error("give the command after --, e.g. -- ./run_main.sh")
  try:
    seeds = [int(s) for s in args.seeds.split(",")]
  except ValueError:
    parser.error(f"--seeds={args.seeds!r}: expected comma-separated integers, e.g. 1,2,3")
  os.makedirs(args.output_dir, exist_ok=True)
  runs = []
  for seed in seeds:
    print(f"seed {seed}: {' '.join(command)} (log: {args.output_dir}/seed{seed}.log)", flush=True)
    runs.append(run_seed(seed, args.output_dir, command))
    print(f"seed {seed}: exit {runs[-1]['returncode']}, " + ", ".join(
        f"{k} {v:.4g}" for k, v in runs[-1]["results"].items()), flush=True)
    with open(os.path.join(args.output_dir, "seeds.md"), "w") as f:
      f.write(f"`{' '.join(command)}`\n\n" + table(runs))
  print(table(runs))
  failed = [str(r["seed"]) for r in runs if r["returncode"] != 0]
  if failed:
    print(f"FAILED: seed(s) {', '.join(failed)} of {len(runs)} exited non-zero "
          f"(logs in {args.output_dir})")
    return 1
  return 0


if __name__ == "__main__":
  sys.exit(main())
