"""Data generation as one Python function (what `t2t-datagen` runs).

    from t2t_keras.data import datagen
    summary = datagen.generate("translate_ende_numbers", "~/t2t_data")
    print(datagen.format_summary(summary))
"""

import os
import time

from t2t_keras import fileio, registry
from t2t_keras.data.problem import SPLITS
from t2t_keras.errors import InputError
from t2t_keras.usr_dir import import_usr_dir


def make_problem(problem_name, **problem_kwargs):
  """The registered problem, built with extra constructor arguments (None ones dropped)."""
  problem = registry.problem(problem_name)
  kwargs = {k: v for k, v in problem_kwargs.items() if v is not None}
  if kwargs:
    try:
      problem = type(problem)(was_reversed=problem.was_reversed, **kwargs)
    except TypeError as e:
      raise InputError(f"problem {problem_name!r} does not accept {sorted(kwargs)}: {e}") from None
  return problem


def generate(problem_name, data_dir, tmp_dir=None, *, t2t_usr_dir=None, log=print,
             num_workers=1, vocab_sample_pairs=None, vocab_sample_seed=1,
             **problem_kwargs):
  """Generates vocabulary and TFRecords of a problem; returns the summary dict.

  A `_rev` name generates the forward problem's files (the reversed problem
  reads them swapped). Finished files and shards are kept, so running again
  is cheap and an interrupted run goes on where it stopped.
  num_workers: processes writing shards (0: one per CPU core; at most one per
  unfinished shard). vocab_sample_pairs / vocab_sample_seed: the vocabulary's
  training sample (`Text2TextProblem.generate_data`).
  `problem_kwargs` go to the problem's constructor (e.g. `raw_dir=` for
  parallel-text problems, `max_pairs=` to cap each split, `vocab_size=`).
  """
  if t2t_usr_dir:
    import_usr_dir(t2t_usr_dir)
  data_dir = fileio.abspath(data_dir)
  if tmp_dir:
    tmp_dir = fileio.abspath(tmp_dir)
  problem = make_problem(problem_name, **problem_kwargs)
  log = log or (lambda msg: None)
  log(f"generating {problem.data_name} into {data_dir}")
  return problem.generate_data(data_dir, tmp_dir, log=log,
                               num_workers=num_workers or os.cpu_count() or 1,
                               vocab_sample_pairs=vocab_sample_pairs,
                               vocab_sample_seed=vocab_sample_seed, usr_dir=t2t_usr_dir)


def is_generated(problem, data_dir):
  """True when every split is finished in data_dir (its stats file is written last, after
  all of its shards, whatever their number)."""
  return all(fileio.exists(problem.stats_path(data_dir, split)) for split in SPLITS)


def wait_for(problem_name, data_dir, *, log=print, timeout_s=24 * 3600, poll_s=10.0):
  """Waits until another process (the chief's datagen) has finished problem_name's files
  in data_dir; TimeoutError naming what is missing after timeout_s."""
  problem = registry.problem(problem_name)
  deadline, told = time.time() + timeout_s, False
  while not is_generated(problem, data_dir):
    if time.time() > deadline:
      raise TimeoutError(f"{problem.data_name}'s files in {data_dir} were not finished after "
                         f"{timeout_s:.0f} s of waiting for the chief's datagen")
    if not told and log:
      log(f"waiting for the chief to generate {problem.data_name} in {data_dir}")
      told = True
    time.sleep(poll_s)


def format_summary(summary):
  """Human-readable lines for a summary dict."""
  lines = [f"problem {summary['problem']}: data in {summary['data_dir']}",
           f"  vocabulary {os.path.basename(summary['vocab_file'])}: "
           f"{summary['vocab_size']} pieces"
           f"{' (trained now)' if summary['vocab_trained'] else ' (reused)'}"]
  for split, s in summary["splits"].items():
    skipped = ", ".join(f"{n} {why}" for why, n in sorted(s["skipped"].items())) or "none"
    lines.append(f"  {split:5s}: {s['pairs']} pairs{' (reused)' if s['reused'] else ''}; "
                 f"skipped: {skipped}")
  lines.append(f"  time: {summary['seconds']:.1f} s")
  return "\n".join(lines)
