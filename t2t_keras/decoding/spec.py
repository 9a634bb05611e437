"""How a run decodes, resolved once: the problem's defaults, the user's overrides, the output
constraint, the input limit and the search.

    spec = DecodingSpec.for_run(info["problem"], "beam_size=4,alpha=0.6", train_hparams)
    spec.settings                   # DecodeSettings: problem defaults, then the overrides
    spec.input_limit                # ids an input keeps, EOS included (settings'
                                    # max_input_size, resolved from the run)
    spec.search_fn(model, vocab)    # the compiled search, constraint included
    spec.search_fn(model, vocab, takes="prefix")   # what it takes: decoding/builder.py
    spec.hooks.postprocess(source, output)    # and preprocess(source), restore(...)

t2t-decoder, the library, training's dev BLEU, the exporter, the CTranslate2 and LiteRT
converters, checkpoint selection and trials each build the decoding of a run here, from the
run's training hparams, so a problem's defaults, its constraint and the input limit apply
alike in all of them; a spec is the only caller of `decoding/builder.py`, where every search
is built.
"""

import dataclasses

from t2t_keras.data import problem as problem_lib
from t2t_keras.decoding import builder
from t2t_keras.decoding.search_common import position_cap
from t2t_keras.decoding.settings import DecodeSettings, parse_decode_hparams
from t2t_keras.errors import InputError


def input_limit(train_hparams, max_input_length=None):
  """The ids an input keeps, EOS included: `max_input_length` when given, else the training
  max_length (longer pairs never trained; 256 when unset), capped by learned positions;
  InputError below 2."""
  if max_input_length is None:
    max_input_length = train_hparams.get("max_length", 0) or 256
    cap = position_cap(train_hparams)
    if cap:
      max_input_length = min(max_input_length, cap)
  if max_input_length < 2:
    raise InputError(f"max_input_length must be >= 2 (a token and EOS), got {max_input_length}")
  return max_input_length


@dataclasses.dataclass(frozen=True)
class DecodingSpec:
  """The decoding of a run of `problem` (a registry name, or None).

  settings: the `DecodeSettings` (`settings.parse_decode_hparams`), their max_input_size
  resolved from the run; defaults: the problem's `decode_defaults` they start from.
  """
  problem: object
  settings: DecodeSettings
  defaults: str = ""

  @classmethod
  def for_run(cls, problem, overrides="", train_hparams=None, max_input_length=None):
    """overrides: "beam_size=4,..." applied over the problem's defaults, or a
    `DecodeSettings` taken as it is. train_hparams: the run's, for the input limit
    (`input_limit`): `max_input_length` (the exporter's flag), else the settings'
    max_input_size where not 0, else the training max_length; without train_hparams
    only a given limit applies."""
    defaults = problem_lib.hooks(problem).decode_defaults
    settings = (overrides if isinstance(overrides, DecodeSettings)
                else parse_decode_hparams(overrides, defaults))
    given = max_input_length or settings.batching.max_input_size or None
    limit = input_limit(train_hparams, given) if train_hparams is not None or given else None
    if limit and limit != settings.batching.max_input_size:
      settings = settings.replace(max_input_size=limit)
    return cls(problem, settings, defaults)

  @property
  def input_limit(self):
    """The ids an input keeps, EOS included; None: no limit (no run hparams were given)."""
    return self.settings.batching.max_input_size or None

  def limits(self, train_hparams):
    """The lengths every engine holds to, computed here once (export_info.json's "limits";
    the CTranslate2 and LiteRT models' info files): max_input_length (ids an input
    keeps, EOS included), extra_length and max_decode_length (0: none) of the output
    limit (`search_common.output_limit`), and max_positions (the run's learned positions,
    `search_common.position_cap`; 0: none)."""
    s = self.settings.search
    return {"max_input_length": int(self.input_limit or 0), "extra_length": int(s.extra_length),
            "max_decode_length": int(s.max_decode_length or 0),
            "max_positions": int(position_cap(train_hparams) or 0)}

  @property
  def hooks(self):
    """The problem's hooks (`data/problem.py`; the defaults for an unknown problem)."""
    return problem_lib.hooks(self.problem)

  @property
  def fold_first_letter(self):
    """Whether the run's problem folds the first letter (`data/casing.py`): what every
    engine's info file records (export_info.json, t2t_decoding.json, litert_info.json),
    so that their clients fold and restore without the problem."""
    return bool(self.hooks.fold_first_letter)

  def constraint(self, vocab):
    """The problem's output constraint for `vocab`, or None (none, or constrain=false)."""
    return self.hooks.decode_constraint(vocab) if self.settings.search.constrain else None

  def search_fn(self, model, vocab, takes="ids", phrase_shape=None):
    """The compiled search (`builder.compile_search`: sharded, jit as the settings say) of
    the inputs `takes` names, with this spec's output constraint; `phrase_shape` (C, T)
    for takes="phrases"."""
    return builder.compile_search(model, self.settings.search, self.constraint(vocab), takes,
                                phrase_shape)

  def searcher(self, model, vocab, takes="ids"):
    """The same search as a Python callable, not compiled (`builder.make_searcher`; LiteRT's
    signatures are its own tf.functions)."""
    return builder.make_searcher(model, self.settings.search, self.constraint(vocab), takes)
