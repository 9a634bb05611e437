"""Algorithmic problems in tensor2tensor's style: random symbol sequences.

  algorithmic_copy     "c a f f b" -> "c a f f b"
  algorithmic_reverse  "c a f f b" -> "b f f a c"

Symbols are the first `num_symbols` lowercase letters separated by spaces, so
each symbol is one subword piece. Sequence lengths are uniform in
[1, max_length]. Deterministic from a seed; splits are disjoint (a sequence
belongs to one split by a hash of (seed, sequence)) and have no repeats.
"""

import random
import string
import zlib

from t2t_keras.errors import InputError
from t2t_keras import registry
from t2t_keras.data.problem import Text2TextProblem


class AlgorithmicProblem(Text2TextProblem):
  """Random symbol sequences in, a function of them out."""

  vocab_size = 64

  def __init__(self, was_reversed=False, *, num_symbols=10, max_length=20,
               num_train=20000, num_dev=500, num_test=500, seed=1234, **kwargs):
    super().__init__(was_reversed, **kwargs)
    if not 2 <= num_symbols <= 26:
      raise InputError(f"num_symbols must be in [2, 26], got {num_symbols}")
    self.symbols = string.ascii_lowercase[:num_symbols]
    self.max_length = max_length
    self.sizes = {"train": num_train, "dev": num_dev, "test": num_test}
    self.seed = seed

  def transform(self, symbols):
    raise NotImplementedError

  def _split_of(self, text):
    h = zlib.crc32(f"{self.seed}:{text}".encode()) % 100
    return "test" if h < 2 else "dev" if h < 4 else "train"

  def generate_forward_samples(self, split, tmp_dir=None):
    rng = random.Random(f"{self.data_name}:{self.seed}:{split}")
    seen = set()
    tries = 0
    while len(seen) < self.sizes[split]:
      tries += 1
      if tries > 100 * self.sizes[split] + 1000:
        raise InputError(f"cannot draw {self.sizes[split]} distinct {split} sequences")
      length = rng.randint(1, self.max_length)
      seq = [rng.choice(self.symbols) for _ in range(length)]
      text = " ".join(seq)
      if text in seen or self._split_of(text) != split:
        continue
      seen.add(text)
      yield {"inputs": text, "targets": " ".join(self.transform(seq))}


@registry.register_problem
class AlgorithmicCopy(AlgorithmicProblem):
  """Copy the input sequence."""

  def transform(self, symbols):
    return list(symbols)


@registry.register_problem
class AlgorithmicReverse(AlgorithmicProblem):
  """Reverse the input sequence."""

  def transform(self, symbols):
    return list(reversed(symbols))
