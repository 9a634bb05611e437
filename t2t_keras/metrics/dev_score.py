"""How checkpoints are compared on dev: a metric and its tie-break, higher is better.

    score = SACREBLEU.score(sources, outputs, references)  # {"bleu", "chrf", "signature"}

A problem names its own through its `dev_score()` hook (`data/problem.py`; parsing:
EVALB F1, ties to complete match); checkpoint selection (`tuning/selection.py`) ranks
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
