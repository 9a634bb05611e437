"""Data generation as one Python function (what `t2t-datagen` runs).

    from t2t_keras.data import datagen
    summary = datagen.generate("translate_ende_numbers", "~/t2t_data")
    print(datagen.format_summary(summary))
"""

import os

from t2t_keras import registry
from t2t_keras.usr_dir import import_usr_dir


def make_problem(problem_name, **problem_kwargs):
  """The registered problem, built with extra constructor arguments (None ones dropped)."""
  problem = registry.problem(problem_name)
  kwargs = {k: v for k, v in problem_kwargs.items() if v is not None}
  if kwargs:
    try:
      problem = type(problem)(was_reversed=problem.was_reversed, **kwargs)
    except TypeError as e:
      raise TypeError(f"problem {problem_name!r} does not accept {sorted(kwargs)}: {e}") from None
  return problem


def generate(problem_name, data_dir, tmp_dir=None, *, t2t_usr_dir=None, log=print,
             **problem_kwargs):
  """Generates vocabulary and TFRecords of a problem; returns the summary dict.

  A `_rev` name generates the forward problem's files (the reversed problem
  reads them swapped). Finished files are kept, so running twice is cheap.
  `problem_kwargs` go to the problem's constructor (e.g. `raw_dir=` for
  parallel-text problems, `max_pairs=` to cap each split, `vocab_size=`).
  """
  if t2t_usr_dir:
    import_usr_dir(t2t_usr_dir)
  data_dir = os.path.abspath(os.path.expanduser(data_dir))
  if tmp_dir:
    tmp_dir = os.path.abspath(os.path.expanduser(tmp_dir))
  problem = make_problem(problem_name, **problem_kwargs)
  log = log or (lambda msg: None)
  log(f"generating {problem.data_name} into {data_dir}")
  return problem.generate_data(data_dir, tmp_dir, log=log)


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
