"""A SavedModel export loaded by `t2t_keras.load`: its signatures behind `Translator`'s calls.

    translator = t2t_keras.load("runs/tiny/export")     # t2t-exporter's directory
    translator.translate(["one", "two"], n_best=2)

The search was fixed when the model was exported (export_info.json's decode hparams): a
call may ask for those values or leave them out. Scoring and attention need the run
(export_info.json names its checkpoint).
"""

import json
import os

from t2t_keras.decoding.search_common import NO_HYPOTHESIS
from t2t_keras.errors import InputError
from t2t_keras.library.results import Candidate, Translation
from t2t_keras.library.arguments import check_n_best, per_line, texts


class ExportedTranslator:
  """`Translator`'s calls over a SavedModel export (serving_default, nbest, prefix,
  constrained, target_language signatures); settings: the decode hparams it was
  exported with."""

  def __init__(self, path):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    from t2t_keras.exporting import translate_saved_model  # pylint: disable=import-outside-toplevel
    self.path = translate_saved_model.resolve(path)
    with tf.io.gfile.GFile(os.path.join(self.path, "assets", "export_info.json")) as f:
      self._info = json.load(f)
    self._model = tf.saved_model.load(self.path)
    self._tf = tf

  @property
  def settings(self):
    """The decode hparams baked into the export, flat; a key added after it was exported
    (e.g. length_penalty_kind) reads as its default, the search the export runs."""
    from t2t_keras.decoding.settings import DEFAULTS  # pylint: disable=import-outside-toplevel
    return {**DEFAULTS.values(), **self._info["decode_hparams"]}

  @property
  def problem(self):
    return self._info.get("problem")

  @property
  def checkpoint_path(self):
    return self._info.get("checkpoint_path")

  def translate(self, lines, *, beam_size=None, alpha=None, n_best=1, target_prefix=None,
                terms=None, source_language=None, target_language=None, decode_hparams=""):
    """As `Translator.translate`, through the export's signatures; InputError for a search
    setting other than the export's, for source_language (each line carries its own
    token) and for n_best > 1 with a prefix, terms or a target language."""
    single = isinstance(lines, str)
    batch = texts([lines] if single else lines, "lines")
    self._check_search(beam_size, alpha, decode_hparams, n_best)
    prefixes = per_line(target_prefix, batch, single, "target_prefix", str)
    phrases = per_line(terms, batch, single, "terms", list)
    if source_language is not None:
      raise InputError("an export reads each line's own source-language token; start the "
                       "lines with it, or load the run to give source_language")
    given = [name for name, v in (("target_prefix", prefixes), ("terms", phrases),
                                  ("target_language", target_language)) if v is not None]
    if len(given) + (n_best > 1) > 1:
      raise InputError(f"an export's signatures take one of n_best > 1, target_prefix, terms "
                       f"and target_language at a time; got {', '.join(given)}"
                       f"{', n_best' if n_best > 1 else ''}: load the run to combine them")
    if not batch:
      return []
    try:
      out = self._run_signature(batch, n_best, prefixes, phrases, target_language)
    except self._tf.errors.InvalidArgumentError as e:  # e.g. a language it does not know
      raise InputError(f"the export refused the call: {e.message.strip().splitlines()[0]}"
                       ) from None
    decoded = [t.decode("utf-8") if isinstance(t, bytes) else [x.decode("utf-8") for x in t]
             for t in out["outputs"].numpy().tolist()]
    scores, truncated = out["scores"].numpy().tolist(), out["truncated"].numpy().tolist()
    met = out["met"].numpy().tolist() if "met" in out else [None] * len(batch)
    results = []
    for line, text, score, cut, held in zip(batch, decoded, scores, truncated, met):
      kept = (tuple(Candidate(t, float(s)) for t, s in zip(text, score)
                    if s > NO_HYPOTHESIS)[:n_best]  # beam slots that found none: left out
              if isinstance(text, list) else ())
      kept = kept or (Candidate(_first(text), float(_first(score))),)
      if not line.strip():  # a blank line: "" once, no search (as t2t-decoder answers it)
        kept = kept[:1]
      results.append(Translation(kept[0].text, kept[0].score, kept, truncated=bool(cut),
                                 terms_met=None if held is None else bool(held)))
    return results[0] if single else results

  def _check_search(self, beam_size, alpha, decode_hparams, n_best):
    from t2t_keras.decoding.settings import DecodeSettings  # pylint: disable=import-outside-toplevel
    exported = DecodeSettings.from_flat(self.settings)
    asked = exported.override(decode_hparams)
    asked = asked.replace(**{k: v for k, v in (("beam_size", beam_size), ("alpha", alpha))
                             if v is not None})
    differ = {k: v for k, v in asked.values().items() if exported.values()[k] != v}
    if differ:
      shown = ", ".join(f"{k}={exported.values()[k]!r}" for k in differ)
      raise InputError(f"this export decodes with {shown} (fixed when it was exported); "
                       f"load its run (the directory of {self.checkpoint_path}) to decode "
                       "otherwise")
    check_n_best(n_best, exported.search.beam_size)

  def _run_signature(self, batch, n_best, prefixes, phrases, target_language):
    tf, signatures = self._tf, self._model.signatures
    inputs = tf.constant(batch, tf.string)

    def signature(name):
      if name not in signatures:
        raise InputError(f"this export has no {name!r} signature (it has "
                         f"{', '.join(sorted(signatures))})")
      return signatures[name]
    if prefixes is not None:
      return signature("prefix")(inputs=inputs, prefix=tf.constant(prefixes, tf.string))
    if phrases is not None:
      width = max([1] + [len(p) for p in phrases])
      rows = [p + [""] * (width - len(p)) for p in phrases]
      return signature("constrained")(inputs=inputs,
                                      constraints=tf.constant(rows, tf.string))
    if target_language is not None:
      return signature("target_language")(
          inputs=inputs, target_language=tf.constant([target_language] * len(batch)))
    return signature("nbest" if n_best > 1 else "serving_default")(inputs=inputs)

  def score(self, sources, targets, **unused):
    raise InputError(f"an export cannot score pairs (it has no scoring signature); "
                     f"load its run (the directory of {self.checkpoint_path}) to score")

  def attention(self, source, target):
    raise InputError(f"attention with every head needs the run; load it (the directory "
                     f"of {self.checkpoint_path})")

  def __repr__(self):
    return f"ExportedTranslator({self.path!r}, problem={self.problem!r})"


def _first(value):
  return value[0] if isinstance(value, list) else value
