"""t2t-decoder's --engine=ctranslate2 (and =litert): what CTranslate2 can decode, and the
search function of the engine asked for.

    translator = ct2_engine.load("runs/tiny", settings.search, constraint)
    translator.search_ids   # int32 ids [batch, length] -> what translate's searches return

The model is the run's conversion (t2t-exporter --format=ctranslate2, in
run_dir/ctranslate2 unless `model_dir` says otherwise); the search is t2t's beam
search ranked over CTranslate2's hypotheses (`ct2_translate.py`).
"""

import os

from t2t_keras import runs
from t2t_keras.errors import InputError
from t2t_keras.exporting import ct2_convert


def check_supported(run_dir, search_settings, constraint):
  """InputError where CTranslate2 cannot give t2t-decoder's answer: an ensemble, the
  problem's output constraint, sampling, stop_early=false."""
  if runs.is_ensemble(run_dir):
    raise InputError("--engine=ctranslate2 decodes one converted model; decode an ensemble "
                     "with --engine=tensorflow")
  if constraint is not None:
    raise InputError(f"--engine=ctranslate2 cannot apply the problem's output constraint "
                     f"({type(constraint).__name__}); decode with --engine=tensorflow, or "
                     "with --decode_hparams=constrain=false")
  if search_settings.sampling_method != "argmax":
    raise InputError("--engine=ctranslate2 runs beam and greedy search only; sample with "
                     "--engine=tensorflow")
  if not search_settings.stop_early:
    raise InputError("--engine=ctranslate2 cannot run stop_early=false (CTranslate2 stops "
                     "once its hypotheses ended); use --engine=tensorflow")


def load(run_dir, search_settings, constraint, model_dir=None):
  """The `Ct2Translator` over model_dir (default run_dir/ctranslate2) with the search's
  beam, length penalty and length limits, after `check_supported`; InputError where there is no
  converted model."""
  check_supported(run_dir, search_settings, constraint)
  ct2_convert.import_ctranslate2()
  from t2t_keras.exporting import ct2_translate  # pylint: disable=import-outside-toplevel
  model_dir = model_dir or os.path.join(run_dir, "ctranslate2")
  if not os.path.isfile(os.path.join(model_dir, "model.bin")):
    raise InputError(f"no CTranslate2 model in {model_dir}: convert the run first "
                     f"(t2t-exporter --output_dir={run_dir} --format=ctranslate2)")
  return ct2_translate.Ct2Translator(
      model_dir, beam_size=search_settings.beam_size, alpha=search_settings.alpha,
      length_penalty_kind=search_settings.length_penalty_kind, extra_length=search_settings.extra_length,
      max_decode_length=search_settings.max_decode_length)


def load_engine(engine, run_dir, search_settings, constraint, model_dir=None, prefixes=False):
  """(search_ids, a description) of t2t-decoder's --engine: "ctranslate2" (`load`) or
  "litert" (`litert.load_translator`: the search is inside its model); `prefixes`: target
  prefixes will be given (--decode_prefix_file)."""
  if engine == "litert":
    from t2t_keras.exporting import litert  # pylint: disable=import-outside-toplevel
    translator = litert.load_translator(run_dir, search_settings, constraint, model_dir,
                                        prefixes)
    return (translator.search_ids,
            f"LiteRT ({translator.model_dir}, {translator.info['quantization']})")
  translator = load(run_dir, search_settings, constraint, model_dir)
  return (translator.search_ids,
          f"CTranslate2 ({translator.model_dir}, {translator.compute_type})")
