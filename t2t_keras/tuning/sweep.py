"""t2t-sweep's engine: train a list of hparams rows for one step budget each, then a table.

    rows = [parse_row("transformer_table3_cpu seed=2"), parse_row("transformer_table3_cpu_a1")]
    run_sweep(rows, problem="translate_ende_multi30k", data_dir="data", output_dir="sweep",
              train_steps=1200, raw_dir="../shared/data/multi30k")
    # sweep/<row id>/            each row's run directory (a t2t-trainer output_dir)
    # sweep/<row id>/sweep_result.json, sweep/results.csv, sweep/results.md

A row is an hparams set, optional t2t-style overrides and an optional seed
("SET [key=value,...] [seed=N]"). Rows run one after another, each in its own
processes (`trial`: training, then dev perplexity and beam-search
BLEU), so memory stays flat and a crash stays in its row. Re-running skips rows
with a result for the same step budget and resumes an interrupted row from its
newest checkpoint (the trainer's resume); SIGTERM / Ctrl-C are passed to the
running trainer, which saves before the sweep exits.
"""

import dataclasses
import json
import os
import re
import signal
import subprocess

from t2t_keras import fileio
from t2t_keras.errors import InputError
from t2t_keras.tuning import sweep_report, trial

RESULT_FILE = "sweep_result.json"


@dataclasses.dataclass(frozen=True)
class Row:
  """One sweep row: an hparams set, overrides ("a=1,b=2") and a seed."""
  hparams_set: str
  overrides: str = ""
  seed: int = 1

  @property
  def id(self):
    """A directory name: the set, then the overrides and seed other than the default."""
    parts = [self.hparams_set]
    if self.overrides:
      parts.append(re.sub(r"[^A-Za-z0-9_.=-]+", "_", self.overrides.replace(",", "_")))
    if self.seed != 1:
      parts.append(f"seed{self.seed}")
    return "-".join(parts)


def parse_row(spec):
  """"SET [key=value,...] [seed=N]" (overrides comma- or space-separated) -> Row."""
  words = spec.replace(",", " ").split()
  if not words or "=" in words[0]:
    raise InputError(f"sweep row {spec!r}: expected 'HPARAMS_SET [key=value,...]'")
  seed, overrides = 1, []
  for word in words[1:]:
    key, sep, value = word.partition("=")
    if not sep or not key:
      raise InputError(f"sweep row {spec!r}: {word!r} is not key=value")
    if key == "seed":
      try:
        seed = int(value)
      except ValueError:
        raise InputError(f"sweep row {spec!r}: seed={value!r} is not an integer") from None
    else:
      overrides.append(word)
  return Row(words[0], ",".join(overrides), seed)


def read_rows_file(path):
  """Rows of a file: one spec per line; blank lines and '#' comments skipped."""
  rows = []
  with fileio.open(path, "r") as f:
    for number, line in enumerate(f, 1):
      line = line.split("#", 1)[0].strip()
      if line:
        try:
          rows.append(parse_row(line))
        except InputError as e:
          raise InputError(f"{path}, line {number}: {e}") from None
  return rows


def check_rows(rows, hparams=""):
  """Refuses unknown sets, bad overrides and repeated rows before anything runs."""
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  if not rows:
    raise InputError("no sweep rows given (--row or --rows_file)")
  seen = set()
  for row in rows:
    if row.id in seen:
      raise InputError(f"sweep row {row.id!r} is listed twice")
    seen.add(row.id)
    registry.hparams(row.hparams_set).override(hparams).override(row.overrides)


class _Forward:
  """Passes SIGTERM / SIGINT to the running child (its own session) while active."""

  def __init__(self):
    self.child, self.received = None, None

  def __enter__(self):
    self._old = {s: signal.signal(s, self._handle) for s in (signal.SIGTERM, signal.SIGINT)}
    return self

  def _handle(self, signum, frame):
    del frame
    self.received = signum
    if self.child is not None and self.child.poll() is None:
      self.child.send_signal(signum)

  def __exit__(self, *exc):
    for s, old in self._old.items():
      signal.signal(s, old)

  def run(self, cmd, log):
    self.child = subprocess.Popen(cmd, stdout=subprocess.PIPE, stderr=subprocess.STDOUT,
                                  text=True, start_new_session=True)
    lines = []
    for line in self.child.stdout:
      lines.append(line)
      log("    " + line.rstrip("\n"))
    rc = self.child.wait()
    self.child = None
    return rc, "".join(lines)


# t2t-trainer's flags a sweep may pass to every row's training: flag -> (keyword of
# `training.trainer.train`, type).
TRAINER_FLAGS = {
    "model": ("model_name", str), "use_xla": ("use_xla", bool),
    "save_every": ("save_every", int), "save_every_minutes": ("save_every_minutes", float),
    "keep_checkpoints": ("keep_checkpoints", int), "eval_every": ("eval_every", int),
    "eval_steps": ("eval_steps", int), "eval_bleu_sentences": ("eval_bleu_sentences", int),
    "log_every": ("log_every", int),
}


def parse_trainer_flags(specs):
  """["--save_every=400", ...] -> {"save_every": 400, ...}, keywords of `trainer.train`."""
  kwargs = {}
  for spec in specs:
    name, sep, value = spec.lstrip("-").partition("=")
    if name not in TRAINER_FLAGS:
      raise InputError(f"trainer flag {spec!r}: a sweep passes only "
                       f"{', '.join('--' + n for n in TRAINER_FLAGS)}")
    keyword, kind = TRAINER_FLAGS[name]
    try:
      if kind is bool:
        if value.lower() not in ("true", "false", "1", "0", ""):
          raise ValueError(value)
        kwargs[keyword] = value.lower() in ("true", "1", "")
      else:
        kwargs[keyword] = kind(value if sep else "")
    except ValueError:
      raise InputError(f"trainer flag {spec!r}: expected --{name}=<{kind.__name__}>") from None
  return kwargs


def run_sweep(rows, *, problem, data_dir, output_dir, train_steps, hparams="", raw_dir=None,
              decode_overrides="beam_size=4,alpha=0.6", trainer_flags=(), log=print):
  """Trains and evaluates every row not already done; returns their result dicts.

  Args:
    rows: `Row`s.
    problem: a registered problem with data in data_dir.
    output_dir: one run directory per row, and the tables.
    train_steps: every row's step budget.
    hparams: overrides applied to every row before its own.
    raw_dir: the problem's raw files, for raw dev references (downloaded problems).
    decode_overrides: the dev BLEU's decoding (the paper's Table 3: beam 4, alpha 0.6).
    trainer_flags: more t2t-trainer flags for every row (e.g. "--save_every=400";
      `TRAINER_FLAGS` lists them).
  Raises:
    InputError for bad rows; RuntimeError naming the row when a child fails.
  """
  check_rows(rows, hparams)
  extra = parse_trainer_flags(trainer_flags)
  fileio.makedirs(output_dir)
  results = {}
  with _Forward() as forward:
    for i, row in enumerate(rows):
      run_dir = os.path.join(output_dir, row.id)
      result_path = os.path.join(run_dir, RESULT_FILE)
      done = _read_result(result_path)
      if done is not None and done.get("steps") == train_steps:
        log(f"[{i + 1}/{len(rows)}] {row.id}: done earlier (step {train_steps}), skipped")
        results[row.id] = done
        continue
      log(f"[{i + 1}/{len(rows)}] {row.id}: training to step {train_steps}")
      train_kwargs = {**dict(
          problem_name=problem, hparams_set=row.hparams_set,
          hparams=",".join(o for o in (hparams, row.overrides) if o), data_dir=data_dir,
          output_dir=run_dir, train_steps=train_steps, seed=row.seed, eval_every=0,
          eval_bleu_sentences=0, log_every=100, save_every_minutes=10,
          save_every=train_steps), **extra}
      if _run_trial(forward, row, "train", train_kwargs, log) is None:
        break
      log(f"[{i + 1}/{len(rows)}] {row.id}: dev perplexity and BLEU")
      result = _run_trial(forward, row, "evaluate", dict(
          run_dir=run_dir, data_dir=data_dir, raw_dir=raw_dir,
          decode_overrides=decode_overrides), lambda line: None)
      if result is None:
        break
      result.update(row=row.id, hparams_set=row.hparams_set, overrides=row.overrides,
                    seed=row.seed, steps=train_steps, minutes=training_minutes(run_dir))
      _write_json(result_path, result)
      results[row.id] = result
      log(f"[{i + 1}/{len(rows)}] {row.id}: dev perplexity {result['dev_perplexity']:.2f}, "
          f"BLEU {result['dev_bleu']:.2f}, {result['minutes']:.1f} min")
      _write_tables(output_dir, rows, results)
  _write_tables(output_dir, rows, results)
  return list(results.values())


def _run_trial(forward, row, job, kwargs, log):
  """A `trial` job in a child process: its result dict, or None when a signal stopped it.

  Raises InputError for the child's user error (one line), RuntimeError otherwise.
  """
  rc, out = forward.run(trial.command(job, kwargs), log)
  if forward.received is not None:
    log(f"sweep stopped by signal {forward.received} in row {row.id}; re-run to resume")
    return None
  lines = out.splitlines()
  errors = [l[len(trial.ERROR_TAG):] for l in lines if l.startswith(trial.ERROR_TAG)]
  if errors:  # bad input (missing data, ...): one line, as the child said it
    raise InputError(f"sweep row {row.id}: {job}: {errors[-1]}")
  tagged = [l[len(trial.RESULT_TAG):] for l in lines if l.startswith(trial.RESULT_TAG)]
  if rc != 0 or not tagged:
    raise RuntimeError(f"sweep row {row.id}: {job} exited with {rc}; its last lines:\n"
                       f"{''.join(out.splitlines(True)[-5:])}")
  return json.loads(tagged[-1])


def training_minutes(run_dir):
  """Minutes of training from the progress records' clock times (metrics.jsonl).

  Consecutive records' gaps are summed; a gap over 5x the median gap is a pause
  between sittings (a resumed run) and counts as one median gap. The start-up
  before the first record is not counted.
  """
  from t2t_keras.training import curves  # pylint: disable=import-outside-toplevel
  path = os.path.join(run_dir, curves.HISTORY_FILE)
  if not fileio.exists(path):
    return 0.0
  times = [r["time"] for r in curves.read(path) if "time" in r]
  gaps = [b - a for a, b in zip(times, times[1:]) if b > a]
  if not gaps:
    return 0.0
  median = sorted(gaps)[len(gaps) // 2]
  return sum(g if g <= 5 * median else median for g in gaps) / 60.0


def _write_tables(output_dir, rows, results):
  ordered = [results[r.id] for r in rows if r.id in results]
  pending = [r.id for r in rows if r.id not in results]
  sweep_report.write_tables(output_dir, ordered, pending)


def _read_result(path):
  return json.loads(fileio.read_text(path)) if fileio.exists(path) else None


def _write_json(path, obj):
  fileio.write_atomic(path, json.dumps(obj, indent=1))
