"""translate_ende_numbers: numbers in English words -> the same number in German words.

The embedded default problem: generated in-process (no download, no tmp_dir),
deterministic from a seed, learnable by `transformer_tiny` in minutes on a CPU.
Both sides come from the `num2words` library (no hand-written grammar):

    123456 -> "one hundred and twenty-three thousand, four hundred and fifty-six"
           -> "einhundertdreiundzwanzigtausendvierhundertsechsundfünfzig"

Numbers run from 0 to 999,999; the digit count is drawn uniformly (1 to 6) so
small numbers are as common as large ones. Splits are disjoint by
construction: every number >= 100 belongs to exactly one split by a hash of
(seed, number) (1% test, 1% dev, 98% train); numbers below 100, the atoms of
the language, belong to train. No number repeats within a split.

The vocabulary is small (128 BPE pieces) on purpose: it splits German
compounds into morphemes ("ein", "hundert", "drei", "und", ...), so the task is
compositional rather than a lookup of memorized chunks.
"""

import random
import zlib

from num2words import num2words

from t2t_keras import registry
from t2t_keras.data.problem import Text2TextProblem

MAX_NUMBER = 999_999


def number_split(n, seed):
  """The split a number belongs to: "train", "dev" or "test"."""
  if n < 100:
    return "train"
  h = zlib.crc32(f"{seed}:{n}".encode()) % 100
  return "test" if h == 0 else "dev" if h == 1 else "train"


def sample_numbers(split, count, seed, max_digits=6):
  """`count` distinct numbers of `split`, in a deterministic random order."""
  rng = random.Random(f"translate_ende_numbers:{seed}:{split}")
  seen, out = set(), []
  capacity = 10 ** max_digits
  if count > capacity // 200 and split != "train":
    raise ValueError(f"cannot draw {count} distinct {split} numbers below {capacity}")
  while len(out) < count:
    digits = rng.randint(1, max_digits)
    low = 0 if digits == 1 else 10 ** (digits - 1)
    n = rng.randrange(low, 10 ** digits)
    if n in seen or number_split(n, seed) != split:
      continue
    seen.add(n)
    out.append(n)
  return out


@registry.register_problem
class TranslateEndeNumbers(Text2TextProblem):
  """English number words -> German number words (num2words)."""

  vocab_size = 128

  def __init__(self, was_reversed=False, *, num_train=40000, num_dev=500, num_test=500,
               seed=1234, **kwargs):
    super().__init__(was_reversed, **kwargs)
    self.sizes = {"train": num_train, "dev": num_dev, "test": num_test}
    self.seed = seed
    self._pairs = {}  # split -> list of (en, de); num2words is the slow part of datagen.

  def generate_forward_samples(self, split, tmp_dir=None):
    if split not in self._pairs:
      self._pairs[split] = [(num2words(n, lang="en"), num2words(n, lang="de"))
                            for n in sample_numbers(split, self.sizes[split], self.seed)]
    for en, de in self._pairs[split]:
      yield {"inputs": en, "targets": de}
