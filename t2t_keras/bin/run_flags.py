"""t2t's flags that locate a training run, for the binaries that read one (decoder, exporter).

t2t needed --problem, --model, --hparams_set, --hparams and --data_dir to
rebuild a model; here the trainer's output_dir records all of them, so these
flags are optional. Given, each must agree with the run (`check`), so that a
t2t script runs unchanged and a wrong flag is an error, not a silent switch.
"""

from absl import flags

import t2t_keras.bin
from t2t_keras.errors import InputError

FLAGS = flags.FLAGS

_define = t2t_keras.bin.define_flag
_define("string", "output_dir", None, "The trainer's output_dir (hparams, vocab, checkpoints); "
        "several, comma-separated, decode as one ensemble.")
_define("string", "problem", None, "The run's problem (optional: must match run.json).")
_define("string", "model", None, "The run's model (optional: must match run.json).")
_define("string", "hparams_set", None, "The run's hparams set (optional: must match run.json).")
_define("string", "hparams", None, "The run's hparams overrides (optional: must match hparams.json).")
_define("string", "data_dir", None, "The problem's data directory (--decode_split reads it).")
_define("string", "t2t_usr_dir", None, "A directory of modules registering more problems/hparams.")


def _given(name):
  return FLAGS[name].value if FLAGS[name].present else None


RUN_NAMES = ("problem", "model", "hparams_set", "hparams")


def given_names():
  """The run-locating flags given on the command line, as "--name" (--data_dir aside)."""
  return [f"--{name}" for name in RUN_NAMES if _given(name) is not None]


def check(output_dir):
  """InputError if --problem, --model, --hparams_set or --hparams contradict the run (each
  run of an ensemble's comma-separated list); none given, nothing is read."""
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  if not given_names():
    return
  for directory in runs.split_runs(output_dir):
    runs.check_run_matches(directory, problem=_given("problem"), model=_given("model"),
                           hparams_set=_given("hparams_set"), hparams=_given("hparams"))


def check_model_dir(output_dir, engine="tensorflow"):
  """For a binary that loads as `t2t_keras.load` does (t2t-decoder): a run's records
  against the flags given; an export, or a model to import with t2t's run flags or another
  engine, refused in one line before anything loads or is imported."""
  from t2t_keras.library import sources  # pylint: disable=import-outside-toplevel
  kind = sources.kind(output_dir)
  if kind == "run":
    check(output_dir)
  elif kind == "export":
    raise InputError(f"--output_dir={output_dir} is a SavedModel export, whose search is "
                     "fixed when it is exported: t2t-decoder decodes its run (t2t-serve or "
                     "t2t_keras.load translate with the export)")
  elif engine != "tensorflow":
    raise InputError(f"--engine={engine} reads a converted model in a run; t2t-import "
                     f"{output_dir} into a run and convert that (t2t-exporter), or use "
                     "--engine=tensorflow")
  elif given_names():
    raise InputError(f"{', '.join(given_names())} name a run's records, and {output_dir} is "
                     "a model to import, not a run: leave them out, or t2t-import it into a "
                     "run first")


def import_usr_dir():
  if FLAGS.t2t_usr_dir:
    from t2t_keras.usr_dir import import_usr_dir as load  # pylint: disable=import-outside-toplevel
    load(FLAGS.t2t_usr_dir)
