"""How checkpoints are compared on dev: a metric and its tie-break, higher is better.

    score = SACREBLEU.score(sources, outputs, references)  # {"bleu", "chrf", "signature"}

A problem names its own through its `dev_score()` hook (`data/problem.py`; parsing:
EVALB F1, ties to complete match; translate_ende_multi30k_tok: lowercased BLEU on its
tokens, ties to chrF); checkpoint selection (`tuning/selection.py`) ranks
candidates by it.
"""

import dataclasses
from typing import Callable


@dataclasses.dataclass(frozen=True)
class DevScore:
  """A metric and its tie-break (higher is better).

  score(sources, outputs, references) -> {key: value, second_key: value,
  "signature": text}; `name` and `second_name` are what reports call them.
  """
  name: str
  key: str
  second_name: str
  second_key: str
  score: Callable


def _bleu_and_chrf(sources, outputs, references):
  del sources
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  result = bleu.sacrebleu_scores(outputs, references)
  return {"bleu": result["bleu"], "chrf": result["chrf"], "signature": result["bleu_signature"]}


SACREBLEU = DevScore("cased sacreBLEU", "bleu", "chrF", "chrf", _bleu_and_chrf)


def _tokens_bleu_and_chrf(sources, outputs, references):
  del sources
  from sacrebleu.metrics import CHRF  # pylint: disable=import-outside-toplevel
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  score = bleu.multi30k_tokens_bleu(outputs, references)
  chrf = CHRF().corpus_score(list(outputs), [list(references)]).score
  return {"tok_bleu": score.score, "chrf": chrf,
          "signature": "multi-bleu -lc on tokens as they are (sacrebleu tokenize=none)"}


# Outputs and references both Multi30k-tokenized (lowercase Moses tokens, XML-escaped).
MULTI30K_TOKENS = DevScore("lowercased tokenized BLEU", "tok_bleu", "chrF", "chrf",
                           _tokens_bleu_and_chrf)
