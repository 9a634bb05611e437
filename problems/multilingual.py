"""One source language into several target languages: one model, one shared vocabulary.

A `MultilingualProblem` mixes bilingual corpora (one `files` dict per target language,
as `ParallelTextProblem` reads them) into one problem whose sources start with the
target language's tag (`data/languages.py`: "<2de> A man ..."). Its shared sentencepiece
vocabulary is trained on every distinct sentence of train (a source shared by several
targets, as in a multi-way corpus, counts once) with the tags as whole pieces.

    @registry.register_problem
    class TranslateEnMultiMyCorpus(MultilingualProblem):
      vocab_size = 16000
      language_files = {"de": {"train": ("train.en", "train.de"), "dev": ..., "test": ...},
                        "fr": {...}}

Constructor arguments (datagen flags --target_languages, --language_temperature):
  target_languages   a subset of the problem's languages ("de,fr"); a language it has no
                     files for is one InputError listing the ones it has.
  language_temperature  how train mixes the languages (Arivazhagan et al., 2019): language
                     l's share of train is proportional to n_l ** (1 / T), n_l its pairs.
                     T = 1: as the corpora come (proportional); larger T: flatter, T -> inf:
                     uniform. A language's share is raised by repeating its pairs (whole
                     copies, then a seeded sample of the rest), never by dropping another
                     language's: the largest corpus is written once. The datagen summary
                     gives each language's pairs and copies.

Train is written in a seeded shuffled order (a short shuffle buffer still sees every
language); dev and test interleave the languages pair by pair, so the first dev batches
hold them all, and the evaluator (training/evaluation.py) reports each language's loss
and BLEU.
"""

import math
import random

from t2t_keras.data import languages as languages_lib
from t2t_keras.data.problem import Text2TextProblem
from t2t_keras.errors import InputError
from t2t_keras.metrics.dev_score import DevScore
from t2t_keras.problems.parallel_text import ParallelTextProblem, read_parallel


class MultilingualProblem(Text2TextProblem):
  """Base of one-to-many problems (see the module doc). Subclasses set `language_files =
  {language: {split: (source file, target file)}}` and `vocab_size`."""

  language_files = None
  raw_dir_env = None
  shuffle_seed = 1

  def __init__(self, was_reversed=False, *, raw_dir=None, target_languages=None,
               language_temperature=1.0, **kwargs):
    super().__init__(was_reversed, **kwargs)
    if was_reversed:
      raise InputError(f"{self.data_name}: a multilingual problem has no reverse "
                       "(many sources into one target would need no tag)")
    if self.fold_first_letter:
      raise InputError(f"{self.data_name}: fold_first_letter is for problems of one target "
                       "language (a multilingual source starts with its tag, not a letter)")
    known = tuple(sorted(self.language_files))
    if isinstance(target_languages, str):
      target_languages = [x.strip() for x in target_languages.split(",") if x.strip()]
    chosen = tuple(target_languages or known)
    for language in chosen:
      if language not in known:
        raise InputError(f"{self.data_name} has no pair into {language!r}; it has "
                         f"{', '.join(known)}")
    self.languages = tuple(sorted(set(chosen)))
    self.language_temperature = float(language_temperature)
    if not self.language_temperature > 0:
      raise InputError(f"language_temperature must be > 0, got {language_temperature}")
    self.vocab_user_symbols = tuple(languages_lib.tag(x) for x in self.languages)
    self._pairs = {x: ParallelTextProblem(raw_dir=raw_dir, files=self.language_files[x])
                   for x in self.languages}

  @staticmethod
  def dev_score():
    """Checkpoints compare on the mean over target languages of cased sacreBLEU."""
    return MEAN_SACREBLEU

  def split_files(self, language, split, tmp_dir):
    """(source path, target path) of `language`'s `split`."""
    return self._pairs[language].split_files(split, tmp_dir)

  def describe_source(self, split, tmp_dir):
    return " (read from " + "; ".join(
        ", ".join(self.split_files(x, split, tmp_dir)) for x in self.languages) + ")"

  def check_inputs(self, tmp_dir):
    for language in self.languages:
      self._pairs[language].check_inputs(tmp_dir)

  vocabulary_text = "every distinct sentence (sources untagged)"

  def vocabulary_sentences(self, pairs):
    """Every distinct sentence of `pairs`, sources without their tags."""
    seen = set()
    for source, target in pairs:
      for text in (source.split(" ", 1)[1] if " " in source else "", target):
        if text and text not in seen:
          seen.add(text)
          yield text

  def language_copies(self, counts):
    """{language: copies (a float >= 1)} of each corpus in train (the module doc)."""
    total = sum(counts.values())
    if not total:
      return {x: 1.0 for x in counts}
    weights = {x: (n / total) ** (1.0 / self.language_temperature) for x, n in counts.items()}
    norm = sum(weights.values())
    ratio = {x: (weights[x] / norm) / (n / total) for x, n in counts.items() if n}
    lowest = min(ratio.values())
    return {x: ratio.get(x, 0.0) / lowest for x in counts}

  def _language_pairs(self, language, split, tmp_dir):
    source, target = self.split_files(language, split, tmp_dir)
    prefix = languages_lib.tag(language) + " "
    for src, tgt in read_parallel(source, target):
      yield {"inputs": prefix + src if src.strip() else src, "targets": tgt}

  def generate_forward_samples(self, split, tmp_dir=None):
    if split != "train":
      streams = [self._language_pairs(x, split, tmp_dir) for x in self.languages]
      for row in _interleave(streams):
        yield row
      return
    pairs = {x: list(self._language_pairs(x, "train", tmp_dir)) for x in self.languages}
    copies = self.language_copies({x: len(p) for x, p in pairs.items()})
    rng = random.Random(self.shuffle_seed)
    mixed = []
    for language in self.languages:
      mixed.extend(_repeat(pairs[language], copies[language], rng))
    rng.shuffle(mixed)
    yield from mixed

  def generate_data(self, data_dir, tmp_dir=None, log=None, **kwargs):
    """Text2TextProblem's, and the summary's "languages": `train_mix`, also logged."""
    summary = super().generate_data(data_dir, tmp_dir, log, **kwargs)
    summary["languages"] = self.train_mix(tmp_dir)
    for language, mix in summary["languages"].items():
      (log or (lambda msg: None))(
          f"train into {language}: {mix['pairs']:,} pairs x {mix['copies']} = "
          f"{mix['written']:,} (language_temperature {self.language_temperature:g})")
    return summary

  def train_mix(self, tmp_dir=None):
    """{language: {"pairs", "copies", "written"}}: how train mixes the languages."""
    out = {}
    counts = {x: self._pairs[x].count_forward_samples("train", tmp_dir)
              for x in self.languages}
    for language, copies in self.language_copies(counts).items():
      n = counts[language]
      out[language] = {"pairs": n, "copies": round(copies, 4),
                       "written": int(n * math.floor(copies) + round(n * (copies % 1)))}
    return out


def _interleave(streams):
  """Pair 1 of every stream, then pair 2, ...; a shorter stream simply ends."""
  live = list(streams)
  while live:
    still = []
    for stream in live:
      row = next(stream, None)
      if row is not None:
        yield row
        still.append(stream)
    live = still


def _repeat(pairs, copies, rng):
  """`pairs` floor(copies) times, then a seeded sample of round(len * fraction) of them."""
  whole = math.floor(copies)
  rest = round(len(pairs) * (copies - whole))
  out = pairs * whole
  out.extend(rng.sample(pairs, rest) if rest else [])
  return out



def _mean_bleu_and_chrf(sources, outputs, references):
  """The mean over target languages (known by each source's tag) of cased sacreBLEU and
  chrF; the signature lists each language's BLEU. Untagged sources: one group."""
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  groups = {}
  for i, source in enumerate(sources):
    groups.setdefault(languages_lib.language_of_line(source) or "", []).append(i)
  scores = {x: bleu.sacrebleu_scores([outputs[i] for i in rows], [references[i] for i in rows])
            for x, rows in sorted(groups.items())}
  per_language = ", ".join(f"{x or 'untagged'} {s['bleu']:.2f}" for x, s in scores.items())
  signature = next(iter(scores.values()))["bleu_signature"]
  return {"bleu": sum(s["bleu"] for s in scores.values()) / len(scores),
          "chrf": sum(s["chrf"] for s in scores.values()) / len(scores),
          "signature": f"mean of {len(scores)} languages ({per_language}); {signature}"}


MEAN_SACREBLEU = DevScore("cased sacreBLEU (mean over target languages)", "bleu",
                          "chrF (mean)", "chrf", _mean_bleu_and_chrf)
