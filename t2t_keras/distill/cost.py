"""What a model costs at inference, for the teacher / student table: parameters and
multiply-adds per output token (models/params.py, models/decode_cost.py).

    model_cost("runs/student")                               # a run: its hparams and vocabulary
    model_cost("transformer_multi30k_student", vocab_size=8000)
"""

from t2t_keras import fileio, registry, runs
from t2t_keras.errors import InputError


def model_cost(run_or_set, source_length=16, target_length=16, vocab_size=None):
  """{"model", "vocab_size", "parameters", "self_attention", "cross_attention", "ffn",
  "output", "macs_per_token"} of a run directory (its hparams.json and run.json) or of an
  hparams set name with `vocab_size`; per output token of one hypothesis, an output of
  target_length pieces from a source of source_length (EOS included in both)."""
  from t2t_keras.models.decode_cost import decode_cost_parts  # pylint: disable=import-outside-toplevel
  from t2t_keras.models.params import analytic_param_count  # pylint: disable=import-outside-toplevel
  if fileio.exists(fileio.join(str(run_or_set), runs.RUN_FILE)):
    hparams, info = runs.load_run_info(run_or_set)
    vocab_size = vocab_size or info["vocab_size"]
  else:
    hparams = registry.hparams(run_or_set)
    if not vocab_size:
      raise InputError(f"{run_or_set} is an hparams set, not a run: give its vocabulary size")
  parts = decode_cost_parts(hparams, vocab_size, source_length, target_length)
  total = parts.pop("total")
  return {"model": str(run_or_set), "vocab_size": int(vocab_size),
          "parameters": analytic_param_count(hparams, vocab_size), **parts,
          "macs_per_token": total}
