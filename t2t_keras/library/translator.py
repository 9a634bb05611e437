"""A loaded model as `t2t_keras.load` returns it: translate, score and attention from Python.

    translator = t2t_keras.load("runs/tiny")
    translator.translate("one hundred and five")            # Translation(text=..., ...)
    translator.translate(lines, beam_size=8, alpha=1.0, n_best=3)
    translator.score(["one"], ["eins"])                      # [log p(target | source)]
    translator.attention("one", "eins").weights              # [layers, heads, T, S]

Every call goes through the decoder's own corridor (`decoding/spec.py`'s settings,
`decoding/files.frame_for_model`'s languages, the problem's preprocess (a folding
problem's case fold), `decoding/translate.translate_lines`, the problem's postprocess),
so a line translates here as t2t-decoder writes it.
"""

import collections
import dataclasses

from t2t_keras.decoding import files, scoring, translate
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID
from t2t_keras.library.arguments import check_n_best, per_line, texts
from t2t_keras.library.results import Attention, Candidate, Translation


MAX_SEARCHES = 8  # traced searches kept (each with its XLA programs) for the settings used


class Translator:
  """A run (or an ensemble of runs) loaded for translation; made by `t2t_keras.load`.

  settings: the decode hparams every call starts from (a dict of t2t's flat keys: the
  problem's defaults, then `load`'s decode_hparams, the input limit resolved from the
  run); a call's keywords apply over them for that call only.
  """

  def __init__(self, run, spec, path):
    self._run, self._spec, self.path = run, spec, path
    self._searches = collections.OrderedDict()  # (search settings, prefixes?) -> search

  @property
  def settings(self):
    return self._spec.settings.values()

  @property
  def run(self):
    """The loaded `runs.Run` (model, vocab, hparams, info, checkpoint_path), as t2t-decoder
    decodes files and splits with it."""
    return self._run

  @property
  def decoding(self):
    """The `DecodingSpec` every call starts from: the settings, the problem's hooks (its
    case fold, output post-processing), its output constraint and the search builder."""
    return self._spec

  @property
  def problem(self):
    return self._run.info.get("problem")

  @property
  def checkpoint_path(self):
    return self._run.checkpoint_path

  def translate(self, lines, *, beam_size=None, alpha=None, n_best=1, target_prefix=None,
                terms=None, source_language=None, target_language=None, decode_hparams=""):
    """Translations of `lines` (a str: one `Translation`; a list of str: a list of them).

    beam_size, alpha: the search's (None: settings'); decode_hparams: any other t2t decode
    hparam for this call ("extra_length=20,sampling_method=random"). n_best: candidates
    kept per line (at most beam_size). target_prefix: text each output starts with (a
    str for one line, a list with one per line, "" for none). terms: target phrases each
    output must hold (a list of str for one line, a list of such lists for several).
    target_language / source_language: a multilingual model's output language for every
    line (else each line starts with its tag, e.g. "<2fr> ..."), a language-token
    model's (M2M-100's, NLLB's) languages. InputError (one line) for anything refused.
    """
    single = isinstance(lines, str)
    batch = texts([lines] if single else lines, "lines")
    prefixes = per_line(target_prefix, batch, single, "target_prefix", str)
    phrases = per_line(terms, batch, single, "terms", list)
    settings = self._call_settings(beam_size, alpha, decode_hparams)
    check_n_best(n_best, settings.search.beam_size)
    sources, prefixes = files.frame_for_model(self._run.vocab, batch, prefixes, phrases,
                                              target_language, source_language, "lines")
    hooks = self._spec.hooks
    nbest = translate.translate_lines(self._run.model, self._run.vocab,
                                      [hooks.preprocess(s) for s in sources], settings,
                                      self._search_fn(settings, prefixes, phrases),
                                      prefixes=prefixes, constraints=phrases)
    out = []
    for i, (source, hyps) in enumerate(zip(sources, nbest)):
      kept = tuple(Candidate(hooks.postprocess(source, h.text), h.score)
                   for h in hyps[:n_best])
      out.append(Translation(kept[0].text, kept[0].score, kept,
                             truncated=i in nbest.truncated,
                             terms_met=None if phrases is None else i not in nbest.unmet))
    return out[0] if single else out

  @property
  def target_languages(self):
    """The languages a multilingual model writes (its <2xx> tags) or a language-token
    model's (M2M-100's) codes, sorted; () for a model of one target language."""
    from t2t_keras.data import languages  # pylint: disable=import-outside-toplevel
    vocab = self._run.vocab
    return languages.languages_of(vocab) or tuple(sorted(languages.language_tokens(vocab)))

  def score(self, sources, targets, *, per_piece=False, source_language=None,
            target_language=None):
    """log p(target | source) of each pair (natural log, summed over the target's pieces
    and EOS; t2t-decoder --score_file's numbers); per_piece: that sum over the number of
    pieces scored (EOS included), the length-normalised score. A multilingual model's
    sources are tagged as translate tags them; a language-token model's targets are scored
    after the target language's token, the decoder's forced first token, whose probability
    is included (as in translate's scores) and counted."""
    sources, targets = self._folded(texts(sources, "sources"), texts(targets, "targets"))
    source_ids, target_ids = scoring.encode_pairs(self._run.vocab, sources, targets,
                                                  source_language, target_language)
    return scoring.score_ids(self._run.model, source_ids, target_ids,
                             self._spec.settings.batching.batch_size, per_piece)

  def _folded(self, sources, targets):
    """The pairs as the model trained on them: the problem's preprocess (the first-letter
    case fold, `data/casing.py`) on both sides, as datagen applied it."""
    fold = self._spec.hooks.preprocess
    return [fold(x) for x in sources], [fold(x) for x in targets]

  def attention(self, source, target, *, source_language=None, target_language=None):
    """The encoder-decoder `Attention` of one pair (source text, its translation), the pair
    framed as `score` frames it and the source cut to the input limit as `translate`
    cuts it."""
    from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
    from t2t_keras.decoding import attention_maps  # pylint: disable=import-outside-toplevel
    (source,), (target,) = self._folded(texts([source], "source"), texts([target], "target"))
    vocab = self._run.vocab
    (source,), (target,) = scoring.frame_pairs(vocab, [source], [target], source_language,
                                               target_language, "source")
    (source_ids,), _ = translate.cut_sources(translate.encode_sources(vocab, [source]),
                                             self._spec.settings.batching.max_input_size)
    target_ids = vocabulary.target_side(vocab).encode(target)
    weights = attention_maps.attention_weights(self._run.model, source_ids, target_ids)
    source_side = vocabulary.source_side(vocab)
    return Attention(tuple(source_side.id_to_piece(i) for i in source_ids),
                     tuple(vocab.id_to_piece(i) for i in target_ids + [EOS_ID]),
                     weights)

  def _call_settings(self, beam_size, alpha, decode_hparams):
    """The spec's `DecodeSettings` with this call's keywords over them."""
    settings = self._spec.settings.override(decode_hparams)
    changes = {k: v for k, v in (("beam_size", beam_size), ("alpha", alpha)) if v is not None}
    return settings.replace(**changes) if changes else settings

  def _search_fn(self, settings, prefixes, phrases):
    """The traced search for these settings (kept for the next calls with the same, the
    last MAX_SEARCHES of them), or None where translate_lines builds its own (terms: shaped
    by each call's phrases)."""
    spec = dataclasses.replace(self._spec, settings=settings)  # this call's constrain
    if phrases is not None:
      if spec.constraint(self._run.vocab) is not None:
        raise InputError(f"terms cannot be combined with {self.problem}'s output constraint "
                         "yet; pass decode_hparams=\"constrain=false\" to decode without it")
      return None
    key = (tuple(settings.search.values().items()), prefixes is not None)
    if key not in self._searches:  # the constraint is built with the search, once
      if len(self._searches) >= MAX_SEARCHES:
        self._searches.popitem(last=False)
      self._searches[key] = spec.search_fn(self._run.model, self._run.vocab,
                                           "ids" if prefixes is None else "prefix")
    self._searches.move_to_end(key)
    return self._searches[key]

  def __repr__(self):
    return (f"Translator({self.path!r}, problem={self.problem!r}, "
            f"checkpoint={self.checkpoint_path!r})")

