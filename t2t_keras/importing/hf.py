"""t2t-import --from=hf: a model directory as the Hugging Face hub serves it -> a run.

    import_run("opus-mt-en-de", "runs/opus-en-de")

config.json's `model_type` names the family; each family's module reads its own
config, vocabulary and weights (`hf_marian` for OPUS-MT's "marian", `hf_m2m100` for
M2M-100's "m2m_100").
"""

import os

from t2t_keras import fileio, runs
from t2t_keras.errors import InputError
from t2t_keras.importing import hf_files, hf_m2m100, hf_marian

FAMILIES = {"marian": hf_marian, "m2m_100": hf_m2m100}
# Families refused with their own reason (config.json's model_type -> why).
REFUSED = {"nllb-moe": "NLLB-MoE's feed-forward layers are mixtures of experts, which "
                       "t2t-keras does not have; the dense NLLB-200 models "
                       "(model_type m2m_100, e.g. facebook/nllb-200-distilled-600M) are "
                       "supported"}


def import_run(hf_dir, output_dir, *, problem="translate_parallel_text", overrides=None,
               log=print):
  """Writes output_dir as a run of the model in hf_dir; returns the checkpoint prefix.
  InputError (one line) for an unknown family, or what the family's import refuses."""
  if fileio.exists(os.path.join(output_dir, runs.RUN_FILE)):
    raise InputError(f"--output_dir={output_dir} already holds a run ({runs.RUN_FILE}); "
                     "give a new directory")
  config = hf_files.read_json(hf_dir, "config.json")
  family = config.get("model_type")
  if family in REFUSED:
    raise InputError(f"{os.path.join(hf_dir, 'config.json')}: model_type {family!r} is not "
                     f"supported: {REFUSED[family]}")
  if family not in FAMILIES:
    raise InputError(f"{os.path.join(hf_dir, 'config.json')}: model_type {family!r} is not "
                     f"supported (supported: {', '.join(sorted(FAMILIES))})")
  return FAMILIES[family].import_run(hf_dir, output_dir, config, problem=problem,
                                     overrides=overrides, log=log)
