"""A tensor2tensor training directory's settings -> t2t-keras HParams.

    settings = read_t2t_dir("t2t_train/ende")          # hparams.json, flags.txt
    hparams = to_hparams(settings.hparams, target_space_id=8)

tensor2tensor's `t2t-trainer` writes `hparams.json` (every hparam of the run) and
`flags.txt` (its command line, "--name=value" per line) into its output_dir.
`to_hparams` keeps what shapes the `transformer` model and refuses, in one line
naming the hparam and its value, every setting the model here does not compute.
What each mapping rests on is in docs/migrating.md.
"""

import json
import os
from typing import NamedTuple

from t2t_keras import fileio, registry
from t2t_keras.errors import InputError

HPARAMS_FILE = "hparams.json"
FLAGS_FILE = "flags.txt"
NUM_TARGET_SPACES = 32  # t2t's target_space_embedding table: [32, hidden_size]

# tensor2tensor up to 1.5.1 fed each translation problem its target language's
# problem.SpaceID (data_generators/translate_*.py; DE_TOK 8, FR_TOK 6, CS_TOK 21,
# DE_BPE_TOK 9); from 1.5.2 on these problems are Text2TextProblems with no space
# id of their own, so 0 (GENERIC) is fed.
TARGET_SPACES_TO_1_5_1 = {
    "translate_ende_wmt8k": 8, "translate_ende_wmt32k": 8, "translate_ende_wmt32k_packed": 8,
    "translate_ende_wmt_bpe32k": 9, "translate_enfr_wmt8k": 6, "translate_enfr_wmt32k": 6,
    "translate_enfr_wmt32k_packed": 6, "translate_enfr_wmt_small8k": 6,
    "translate_enfr_wmt_small32k": 6, "translate_encs_wmt32k": 21,
}

# Settings the model here computes differently or not at all: (hparam, allowed values).
_REQUIRED = (
    ("norm_type", ("layer",)),
    ("self_attention_type", ("dot_product",)),
    ("max_relative_position", (0,)),
    ("multiply_embedding_mode", ("sqrt_depth",)),
    ("proximity_bias", (False,)),
    ("symbol_modality_skip_top", (False,)),
    ("factored_logits", (False,)),
    ("prepend_mode", ("none",)),
    ("pos", ("timing",)),
    ("encoder_self_attention_type", ("dot_product",)),  # later t2t versions
    ("decoder_self_attention_type", ("dot_product",)),
    ("unidirectional_encoder", (False,)),
    ("add_relative_to_values", (False,)),
)
_FFN_LAYERS = ("dense_relu_dense", "conv_relu_conv")
_NORM_SEQUENCES = {("n", "da"): "pre", ("none", "dan"): "post", ("", "dan"): "post"}


class T2tSettings(NamedTuple):
  """What a t2t output_dir says about its run: hparams.json and flags.txt as dicts."""
  hparams: dict
  flags: dict


def read_flags(text):
  """flags.txt ("--name=value" lines; "--flagfile" style) -> {name: value string}."""
  flags = {}
  for line in text.splitlines():
    line = line.strip()
    if line.startswith("--") and "=" in line:
      name, value = line[2:].split("=", 1)
      flags[name] = value
  return flags


def read_t2t_dir(t2t_dir):
  """`T2tSettings` of a tensor2tensor output_dir; InputError without its hparams.json."""
  path = os.path.join(t2t_dir, HPARAMS_FILE)
  if not fileio.exists(path):
    raise InputError(f"--t2t_dir={t2t_dir}: no {HPARAMS_FILE} there (t2t-trainer writes it "
                     "into its --output_dir beside the checkpoints)")
  try:
    hparams = json.loads(fileio.read_text(path))
  except ValueError as e:
    raise InputError(f"{path}: not JSON ({e})") from None
  if not isinstance(hparams, dict):
    raise InputError(f"{path}: expected a JSON object of hparams")
  flags_path = os.path.join(t2t_dir, FLAGS_FILE)
  flags = read_flags(fileio.read_text(flags_path)) if fileio.exists(flags_path) else {}
  return T2tSettings(hparams, flags)


def resolve_problem(settings, given=None):
  """The problem name: --problem if given (it must agree with flags.txt), else flags.txt's."""
  recorded = settings.flags.get("problem") or settings.flags.get("problems")
  if given and recorded and given != recorded:
    raise InputError(f"--problem={given} contradicts the checkpoint's {FLAGS_FILE}, which "
                     f"trained it with --problem={recorded}")
  name = given or recorded
  if not name:
    raise InputError(f"no --problem given and no {FLAGS_FILE} naming it: give --problem "
                     "(the t2t problem the checkpoint was trained on)")
  return name


def target_space_id(problem, given=None, trained_rows=None):
  """The target space id to feed: --target_space_id (`given`), else the one row of the
  checkpoint's target_space_embedding that its optimizer state shows was trained
  (`trained_rows`: rows with non-zero Adam moments; None without optimizer state).

  t2t's own choice changed between versions (TARGET_SPACES_TO_1_5_1), and a
  checkpoint does not say which version wrote it, so nothing is guessed: InputError
  asks for --target_space_id when the checkpoint cannot tell.
  """
  if given is not None:
    if not 0 <= given < NUM_TARGET_SPACES:
      raise InputError(f"--target_space_id={given}: expected 0 to {NUM_TARGET_SPACES - 1}")
    return given
  if trained_rows is not None and len(trained_rows) == 1:
    return int(trained_rows[0])
  why = ("it has no optimizer state for target_space_embedding" if trained_rows is None else
         f"its optimizer state shows rows {list(trained_rows)} of target_space_embedding trained")
  hint = (f" (tensor2tensor up to 1.5.1 fed {TARGET_SPACES_TO_1_5_1[problem]} for {problem}, "
          "1.5.2 and later 0)" if problem in TARGET_SPACES_TO_1_5_1 else
          " (t2t's problem.SpaceID of the target; 0 for problems of t2t 1.5.2 and later)")
  raise InputError(f"cannot tell which target space id the checkpoint was trained with: "
                   f"{why}; give --target_space_id{hint}")


def _refuse_unsupported(hp):
  for key, allowed in _REQUIRED:
    if key in hp and hp[key] not in allowed:
      raise InputError(f"unsupported t2t hparam {key}={hp[key]!r}: t2t-keras imports "
                       f"{key}={allowed[0]!r} only")
  ffn = hp.get("ffn_layer", "dense_relu_dense")
  if ffn not in _FFN_LAYERS:
    raise InputError(f"unsupported t2t hparam ffn_layer={ffn!r}: t2t-keras imports "
                     f"{' / '.join(_FFN_LAYERS)} (position-wise) only")
  if ffn == "conv_relu_conv" and hp.get("conv_first_kernel", 1) != 1:
    raise InputError(f"unsupported t2t hparam conv_first_kernel={hp['conv_first_kernel']!r} "
                     "with ffn_layer='conv_relu_conv': t2t-keras' feed-forward is "
                     "position-wise (kernel width 1)")
  sequences = (hp.get("layer_preprocess_sequence", ""), hp.get("layer_postprocess_sequence", ""))
  if sequences not in _NORM_SEQUENCES:
    raise InputError(f"unsupported t2t hparams layer_preprocess_sequence={sequences[0]!r}, "
                     f"layer_postprocess_sequence={sequences[1]!r}: t2t-keras imports "
                     "'n' / 'da' (pre-norm) and 'none' / 'dan' (post-norm)")


def _per_head(hp, key):
  """t2t's total attention channels (0: hidden_size) -> channels per head (0: default)."""
  total = int(hp.get(key) or 0)
  if not total:
    return 0
  if total % hp["num_heads"]:
    raise InputError(f"unsupported t2t hparam {key}={total}: not divisible by "
                     f"num_heads={hp['num_heads']}")
  return total // hp["num_heads"]


def to_hparams(hp, target_space_id):
  """t2t hparams (hparams.json's dict) -> t2t-keras HParams of the same model.

  The model's shape, norms, dropouts, label smoothing and Adam settings come from
  t2t; batching and the learning-rate schedule keep transformer_base's values
  (the schedules differ: fine-tuning chooses its own). InputError (one line) for
  a setting the model here does not compute.
  """
  for key in ("hidden_size", "filter_size", "num_heads", "num_hidden_layers"):
    if key not in hp:
      raise InputError(f"t2t hparams have no {key}: is this a transformer's hparams.json?")
  _refuse_unsupported(hp)
  pre_post = (hp.get("layer_preprocess_sequence", ""), hp.get("layer_postprocess_sequence", ""))
  ours = registry.hparams("transformer_base").values()
  ours.update(
      num_encoder_layers=int(hp.get("num_encoder_layers") or hp["num_hidden_layers"]),
      num_decoder_layers=int(hp.get("num_decoder_layers") or hp["num_hidden_layers"]),
      hidden_size=int(hp["hidden_size"]), filter_size=int(hp["filter_size"]),
      num_heads=int(hp["num_heads"]),
      attention_key_channels=_per_head(hp, "attention_key_channels"),
      attention_value_channels=_per_head(hp, "attention_value_channels"),
      norm_type=_NORM_SEQUENCES[pre_post], norm_epsilon=float(hp.get("norm_epsilon", 1e-6)),
      layer_prepostprocess_dropout=float(hp.get("layer_prepostprocess_dropout", 0.1)),
      attention_dropout=float(hp.get("attention_dropout", 0.0)),
      relu_dropout=float(hp.get("relu_dropout", 0.0)),
      label_smoothing=float(hp.get("label_smoothing", 0.1)),
      optimizer_adam_beta1=float(hp.get("optimizer_adam_beta1", 0.9)),
      optimizer_adam_beta2=float(hp.get("optimizer_adam_beta2", 0.98)),
      optimizer_adam_epsilon=float(hp.get("optimizer_adam_epsilon", 1e-9)),
      max_length=int(hp.get("max_length") or ours["max_length"]),
      pos="timing_t2t", zero_pad_embedding=True,
      shared_embedding_and_softmax_weights=bool(
          hp.get("shared_embedding_and_softmax_weights", False)),
      shared_source_target_embedding=bool(hp.get("shared_embedding", False)),
      num_target_spaces=NUM_TARGET_SPACES if hp.get("use_target_space_embedding", True) else 0,
      target_space_id=int(target_space_id))
  from t2t_keras.hparams_lib import HParams  # pylint: disable=import-outside-toplevel
  return HParams(**ours)
