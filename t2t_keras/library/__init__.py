"""t2t-keras from Python: load a model and translate, score or look at its attention; train.

    import t2t_keras
    translator = t2t_keras.load("runs/tiny")       # a run, "a,b" runs, an export, or a
                                                   # t2t / Marian / Hugging Face directory
    translator.translate("one hundred and five").text
    t2t_keras.train(output_dir="runs/tiny", train_steps=500, generate_data=True)

Plain Python values in and out (`results.py`'s dataclasses); what a binary refuses in one
line raises `t2t_keras.InputError` with that line (a missing file: FileNotFoundError).
docs/library.md is the page.
"""

import dataclasses
import sys

from t2t_keras.errors import InputError
from t2t_keras.library.results import Attention, Candidate, TrainingResult, Translation

__all__ = ["load", "train", "Translation", "Candidate", "Attention", "TrainingResult"]


def _stderr(message):
  print(message, file=sys.stderr, flush=True)


def load(path, *, checkpoint_path=None, decode_hparams="", t2t_usr_dir=None, log=_stderr):
  """A `Translator` of the model at `path`.

  path: a run directory (what t2t-trainer, t2t-avg-all or t2t-import wrote), runs
  separated by commas (an ensemble: the mean of their probabilities), a SavedModel export
  (t2t-exporter's directory; its search is fixed), or a model from elsewhere that
  t2t-import reads (a tensor2tensor output_dir, a Marian / OPUS-MT release, a Hugging
  Face directory), imported into a temporary run first, which `log` says (removed once
  loaded).
  checkpoint_path: a run's checkpoint (default its newest readable); decode_hparams:
  t2t's "beam_size=4,alpha=0.6" over the problem's defaults, what every call starts from;
  t2t_usr_dir: a directory of modules registering the run's problem.
  """
  from t2t_keras import tf_startup  # pylint: disable=import-outside-toplevel
  tf_startup.import_tensorflow_quietly()
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.settings import parse_decode_hparams  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.spec import DecodingSpec  # pylint: disable=import-outside-toplevel
  from t2t_keras.library import sources  # pylint: disable=import-outside-toplevel
  from t2t_keras.library.translator import Translator  # pylint: disable=import-outside-toplevel
  parse_decode_hparams(decode_hparams)  # refused before anything loads or imports
  if t2t_usr_dir:
    from t2t_keras.usr_dir import import_usr_dir  # pylint: disable=import-outside-toplevel
    import_usr_dir(t2t_usr_dir)
  kind, where = sources.resolve(path, log)
  if kind == "export":
    if checkpoint_path or decode_hparams:
      raise InputError("an export has no checkpoints to choose and its search is fixed; "
                       "load its run for checkpoint_path or decode_hparams")
    from t2t_keras.library.exported import ExportedTranslator  # pylint: disable=import-outside-toplevel
    return ExportedTranslator(where)
  try:
    # The decoding resolved from the run's files first: overrides the problem refuses fail
    # before the model loads (an ensemble's first run gives the problem and hparams).
    hparams, info = runs.load_run_info(runs.split_runs(where)[0])
    spec = DecodingSpec.for_run(info["problem"], decode_hparams, hparams)
    run = runs.load(where, checkpoint_path)
  finally:
    if kind == "imported":  # the run is in memory now
      sources.remove_temporary(where)
  return Translator(run, spec, str(path))


def train(*, output_dir, problem="translate_ende_numbers", hparams_set=None,
          hparams="", data_dir="t2t_data", train_steps=None, generate_data=False,
          tmp_dir="t2t_tmp", problem_kwargs=None, t2t_usr_dir=None, log=None, **settings):
  """What t2t-trainer runs, with its flags' names and defaults; returns a `TrainingResult`.

  Rerun with the same output_dir, it resumes. settings: the trainer's other settings
  (`training/config.py`'s TrainerConfig fields: seed, save_every, eval_every,
  eval_steps, keep_checkpoints, warm_start_from, use_xla, ...); problem_kwargs: a
  problem's constructor arguments (translate_parallel_text's files, raw_dir, vocab_size).
  hparams_set: default transformer_tiny, or with warm_start_from a run and no set given,
  that run's hparams (as t2t-trainer);
  log: where the progress lines go (default: printed, as t2t-trainer prints them).
  """
  from t2t_keras import tf_startup  # pylint: disable=import-outside-toplevel
  tf_startup.import_tensorflow_quietly()
  from t2t_keras.training import trainer  # pylint: disable=import-outside-toplevel
  from t2t_keras.training.config import TrainerConfig  # pylint: disable=import-outside-toplevel
  if t2t_usr_dir:
    from t2t_keras.usr_dir import import_usr_dir  # pylint: disable=import-outside-toplevel
    import_usr_dir(t2t_usr_dir)
  known = {f.name for f in dataclasses.fields(TrainerConfig)} - {"hparams_set"}
  unknown = sorted(set(settings) - known)
  if unknown:
    raise InputError(f"unknown training setting {unknown[0]!r}; the settings are "
                     f"{', '.join(sorted(known))}")
  if hparams_set is None and not settings.get("warm_start_from"):
    hparams_set = "transformer_tiny"
  summary = trainer.train(problem, hparams_set, data_dir, output_dir, hparams=hparams,
                          train_steps=train_steps, generate_data=generate_data,
                          tmp_dir=tmp_dir, problem_kwargs=problem_kwargs,
                          **({"log": log} if log else {}), **settings)
  fixed = ("step", "start_step", "loss", "seconds", "interrupted", "checkpoint",
           "curves_png", "early_stopped", "best_checkpoint")
  dev = {k: v for k, v in summary.items() if k not in fixed}
  return TrainingResult(str(output_dir), int(summary["step"]), int(summary["start_step"]),
                        float(summary["loss"]), float(summary["seconds"]),
                        bool(summary["interrupted"]), summary["checkpoint"], dev,
                        summary.get("best_checkpoint"))
