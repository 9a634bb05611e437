"""Decode settings: tensor2tensor's flat --decode_hparams string, grouped by concern.

    settings = parse_decode_hparams("beam_size=4,alpha=0.6")   # a frozen DecodeSettings
    settings.search.beam_size        # 4: what the search gets (`search.from_settings`)
    settings.batching.batch_size     # 32: how `translate.translate_ids` cuts the inputs
    settings.output.return_beams     # False: what `files` writes
    settings.evaluation.bleu_lang    # "de": the Moses-tokenized BLEU variants
    settings.replace(batch_size=1)   # flat t2t names, routed to their group
    settings.values()                # the flat dict (export_info.json's "decode_hparams")

Users keep t2t's flat key names (GROUPS routes each to one group); every key, its default
and meaning:

  search
    beam_size        4 (the paper); 1 is greedy search.
    alpha            0.6, the length penalty's exponent: scores are log prob / lp(len),
                     len the output's ids, EOS included.
    length_penalty_kind  "gnmt": lp = ((5 + len) / 6) ** alpha (GNMT, t2t, the paper);
                     "length": lp = len ** alpha (fairseq's --lenpen, CTranslate2's
                     length_penalty; alpha 1 is the mean log prob per id).
    extra_length     50: maximum output length = input length + extra_length.
    max_decode_length  0 = no cap beyond extra_length; else a hard cap.
    jit              compile the search with XLA (faster on CPU; docs/decoding.md).
    search_shards    search the batch as N slices at once (0: auto, 2 on a CPU
                     with 2+ cores, 1 with a GPU; `decoding/sharding.py`).
    constrain        apply the problem's output constraint where it has one
                     (`spec.DecodingSpec.constraint`; parsing with words as leaves: the
                     leaves copy the input).
    stop_early       t2t's early termination of beam search.
    sampling_method  "argmax" (beam or greedy search) or "random": sample each token
                     (`decoding/sampling.py`); beam_size samples per sentence, best first.
    sampling_temp    temperature of the samples (0: argmax).
    sampling_keep_top_k  sample among the k most probable tokens (-1 or 0: all).
    sampling_keep_top_p  nucleus sampling: among the most probable tokens whose
                     probabilities sum to p (1.0: all).
    sampling_seed    the samples are a function of this seed and the source sentence.
  batching
    batch_size       sentences per batch.
    length_bucket    inputs are padded to a multiple of this (few XLA programs).
    max_input_size   ids an input keeps, EOS included (t2t's name and cut: the first
                     max_input_size - 1 pieces, then EOS); a cut line is reported. 0: the
                     run's own limit, which `spec.DecodingSpec.for_run` resolves from the
                     training hparams (max_length, capped by learned positions), as the
                     run's SavedModel and CTranslate2 model cut their inputs.
  output
    return_beams     files get every beam: "hyp1<TAB>score1<TAB>hyp2<TAB>score2..."
    return_alignment  files also get <output>.align: Pharaoh "i-j" word pairs of each
                     best output (`decoding/alignment.py`).
    alignment_layer  the decoder layer whose attention aligns (-1: the last).
    num_samples      decode only the first N inputs (-1: all).
    max_attention_plots  with an attention plot dir, plot at most N sentences (0: all).
  evaluation
    bleu_lang        target language for the Moses-tokenized BLEU variants.
"""

import dataclasses

from t2t_keras.hparams_lib import HParams, HParamsError

# Every key with its default, in the order the flat values (and export_info.json) list them.
DEFAULTS = HParams(beam_size=4, alpha=0.6, length_penalty_kind="gnmt", extra_length=50,
                   max_decode_length=0, batch_size=32, length_bucket=8, max_input_size=0,
                   jit=True, search_shards=0, constrain=True, stop_early=True,
                   sampling_method="argmax", sampling_temp=1.0, sampling_keep_top_k=-1, sampling_keep_top_p=1.0, sampling_seed=1,
                   return_beams=False, return_alignment=False, alignment_layer=-1,
                   num_samples=-1, max_attention_plots=0, bleu_lang="de")

GROUPS = {
    "search": ("beam_size", "alpha", "length_penalty_kind", "extra_length", "max_decode_length", "jit",
               "search_shards", "constrain", "stop_early", "sampling_method", "sampling_temp",
               "sampling_keep_top_k", "sampling_keep_top_p", "sampling_seed"),
    "batching": ("batch_size", "length_bucket", "max_input_size"),
    "output": ("return_beams", "return_alignment", "alignment_layer", "num_samples",
               "max_attention_plots"),
    "evaluation": ("bleu_lang",),
}

SAMPLING_METHODS = ("argmax", "random")
LENGTH_PENALTY_KINDS = ("gnmt", "length")
INT32_LIMIT = 2 ** 31
LOWER_BOUNDS = {"beam_size": 1, "alpha": 0.0, "extra_length": 0, "max_decode_length": 0,
                "batch_size": 1, "length_bucket": 1, "max_input_size": 0, "num_samples": -1,
                "max_attention_plots": 0, "search_shards": 0, "sampling_temp": 0.0,
                "sampling_keep_top_k": -1}


@dataclasses.dataclass(frozen=True)
class DecodeSettings:
  """How to decode, grouped by concern; each group a frozen HParams of GROUPS' keys.

  search: what `search.from_settings` builds the search from (and `spec` the constraint);
  batching: how inputs are cut into padded batches; output: what the files get;
  evaluation: how BLEU is reported. Checked when made (`check`).
  """
  search: HParams
  batching: HParams
  output: HParams
  evaluation: HParams

  def __post_init__(self):
    for group, keys in GROUPS.items():
      if sorted(getattr(self, group).values()) != sorted(keys):
        raise HParamsError(f"decode settings' {group} group must hold exactly "
                           f"{', '.join(keys)}")
    check(self.values())

  @classmethod
  def from_flat(cls, flat):
    """A DecodeSettings of a flat HParams (or dict) holding every key of DEFAULTS."""
    flat = flat.values() if isinstance(flat, HParams) else flat
    return cls(**{group: HParams(**{k: flat[k] for k in keys})
                  for group, keys in GROUPS.items()})

  def values(self):
    """The flat {key: value} dict, keys in DEFAULTS' order."""
    merged = {}
    for group in GROUPS:
      merged.update(getattr(self, group).values())
    return {key: merged[key] for key in DEFAULTS.values()}

  def flat(self):
    """The settings as one flat HParams (t2t's decode hparams)."""
    return HParams(**self.values())

  def override(self, text):
    """New settings with "beam_size=4,alpha=0.6" applied; unknown keys raise HParamsError."""
    return DecodeSettings.from_flat(self.flat().override(text))

  def replace(self, **changes):
    """New settings with flat `changes` (e.g. batch_size=1) routed to their groups."""
    return DecodeSettings.from_flat(self.flat().replace(**changes))


def describe_search(search):
  """"beam 4, alpha 0.6" of a `DecodeSettings.search`, with ", length ** alpha" where its
  length_penalty_kind is "length" (the logs' and reports' words)."""
  kind = ", length ** alpha" if search.length_penalty_kind == "length" else ""
  return f"beam {search.beam_size}, alpha {search.alpha}{kind}"


def parse_decode_hparams(overrides="", defaults=""):
  """DecodeSettings of t2t-style "beam_size=4,alpha=0.6" overrides.

  `defaults` (a problem's `decode_defaults`, e.g. parsing's beam 21) apply first, then
  `overrides`; an unknown key raises HParamsError listing the known ones, a value out of
  range (`check`) one naming the key.
  """
  return DecodeSettings.from_flat(DEFAULTS.override(defaults).override(overrides))


def check(values):
  """Raises HParamsError for a flat {key: value} dict's value out of range: LOWER_BOUNDS,
  an integer beyond int32, max_input_size not 1, sampling_method one of SAMPLING_METHODS,
  length_penalty_kind one of LENGTH_PENALTY_KINDS,
  sampling_keep_top_p in (0, 1]."""
  for key, low in LOWER_BOUNDS.items():
    if values[key] < low:
      raise HParamsError(f"decode hparam {key}={values[key]!r}: must be >= {low}")
  for key, value in values.items():  # lengths, sizes and seeds become int32 tensors
    if type(value) is int and not -INT32_LIMIT <= value < INT32_LIMIT:
      shown = value if abs(value) < 10 ** 20 else f"<{len(str(abs(value)))} digits>"
      raise HParamsError(f"decode hparam {key}={shown}: must be below 2**31 in size "
                         "(TensorFlow's int32)")
  if values["max_input_size"] == 1:
    raise HParamsError("decode hparam max_input_size=1: must be 0 (the run's limit) or >= 2 "
                       "(a token and EOS)")
  if values["sampling_method"] not in SAMPLING_METHODS:
    raise HParamsError(f"decode hparam sampling_method={values['sampling_method']!r}: must be "
                       f"one of {', '.join(SAMPLING_METHODS)}")
  if values["length_penalty_kind"] not in LENGTH_PENALTY_KINDS:
    raise HParamsError(f"decode hparam length_penalty_kind={values['length_penalty_kind']!r}: "
                       f"must be one of {', '.join(LENGTH_PENALTY_KINDS)}")
  if not 0.0 < values["sampling_keep_top_p"] <= 1.0:
    raise HParamsError(f"decode hparam sampling_keep_top_p={values['sampling_keep_top_p']!r}: "
                       "must be in (0, 1]")
