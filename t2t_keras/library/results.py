"""What the library returns: plain frozen dataclasses of Python types (and one NumPy array).

    Translation(text="einhundertfünf", score=-0.12, n_best=(Candidate(...),), ...)
"""

import dataclasses
from typing import Optional, Tuple

import numpy as np


@dataclasses.dataclass(frozen=True)
class Candidate:
  """One output of the search: its text and score (the model's log-probability of the
  whole output, target prefix and EOS included, over the length penalty; t2t-decoder's
  score)."""
  text: str
  score: float


@dataclasses.dataclass(frozen=True)
class Translation:
  """The translation of one line.

  text, score: the best candidate's. n_best: the best `n_best` candidates, best first
  (the first is text and score). truncated: the line was longer than the model's input
  limit and was cut to it (settings' max_input_size). terms_met: with terms, whether
  `text` holds them all (the best output is returned either way); else None.
  """
  text: str
  score: float
  n_best: Tuple[Candidate, ...]
  truncated: bool = False
  terms_met: Optional[bool] = None


@dataclasses.dataclass(frozen=True)
class Attention:
  """Teacher-forced encoder-decoder attention of one pair (`Translator.attention`).

  source_pieces: the source's subword pieces, EOS included ([S]); target_pieces: the
  target's, EOS included ([T]); weights: float32 [layers, heads, T, S], row t the
  attention that predicted target piece t.
  """
  source_pieces: Tuple[str, ...]
  target_pieces: Tuple[str, ...]
  weights: np.ndarray


@dataclasses.dataclass(frozen=True)
class TrainingResult:
  """What `t2t_keras.train` returns: the run directory, the step reached and the step it
  started from (a resumed run's), the last training loss, seconds, whether a signal
  stopped it early, the newest checkpoint, the last dev metrics (name -> value) and, with
  early stopping, the best checkpoint (output_dir/best/)."""
  output_dir: str
  step: int
  start_step: int
  loss: float
  seconds: float
  interrupted: bool
  checkpoint: Optional[str]
  dev: dict
  best_checkpoint: Optional[str] = None
