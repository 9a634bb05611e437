"""translate_ende_numbers: numbers in English words -> the same number in German words.

The embedded default problem: generated in-process (no download, no tmp_dir),
deterministic from a seed, learnable by `transformer_tiny` in minutes on a CPU.
Both sides come from the `num2words` library (no hand-written grammar):

    123456 -> "one hundred and twenty-three thousand, four hundred and fifty-six"
           -> "einhundertdreiundzwanzigtausendvierhundertsechsundfünfzig"

Numbers run from 0 to 999,999. Every number below 1,000 (the atoms of the
language: "siebzehn", "einundzwanzig", "dreihundert") belongs to train, and
train draws them often, with repeats: the number of digits is drawn with
weights `TRAIN_DIGIT_WEIGHTS` (2% one digit, 8% two, 15% three, 25% each for
four to six), so each of 0-99 appears about 35-80 times in 40,000 pairs and
each of 100-999 about 7 times. (Drawn uniformly over digit counts and without
repeats, as before, each two-digit number appeared once and the model got 37%
of them right.) Every number >= 1,000 belongs to exactly one split by a hash
of (seed, number) (1% test, 1% dev, 98% train) and appears at most once, so
dev and test (four to six digits) are disjoint from train.

The vocabulary is small (128 BPE pieces) on purpose: it splits German
compounds into morphemes ("ein", "hundert", "drei", "und", ...), so the task is
compositional rather than a lookup of memorized chunks.
"""

import random
import zlib

from num2words import num2words

from t2t_keras.errors import InputError
from t2t_keras import registry
from t2t_keras.data.problem import Text2TextProblem

MAX_NUMBER = 999_999
SMALL = 1000  # numbers below this are all train and may repeat there
TRAIN_DIGIT_WEIGHTS = {1: 1, 2: 5, 3: 10, 4: 20, 5: 32, 6: 32}


def number_split(n, seed):
  """The split a number belongs to: "train", "dev" or "test"."""
  if n < SMALL:
    return "train"
  h = zlib.crc32(f"{seed}:{n}".encode()) % 100
  return "test" if h == 0 else "dev" if h == 1 else "train"


def sample_numbers(split, count, seed, max_digits=6):
  """`count` numbers of `split`, in a deterministic random order.

  train: every number below SMALL once (when count >= SMALL), the rest with
  digit counts drawn by TRAIN_DIGIT_WEIGHTS, where numbers below SMALL may
  repeat and larger ones do not. dev/test: digit counts uniform over those the
  split can hold (4 to max_digits), no repeats.
  """
  rng = random.Random(f"translate_ende_numbers:{seed}:{split}")
  if split == "train" and count >= SMALL:
    # Every number below SMALL once, the rest drawn by weight, all shuffled.
    out = list(range(SMALL)) + sample_numbers_weighted(rng, count - SMALL, seed, max_digits)
    rng.shuffle(out)
    return out
  if split == "train":
    return sample_numbers_weighted(rng, count, seed, max_digits)
  digits = list(range(len(str(SMALL)), max_digits + 1))
  if not digits or count > 10 ** max_digits // 200:
    raise InputError(f"cannot draw {count} distinct {split} numbers below {10 ** max_digits}")
  seen, out = set(), []
  while len(out) < count:
    d = rng.choice(digits)
    n = rng.randrange(10 ** (d - 1), 10 ** d)
    if number_split(n, seed) == split and n not in seen:
      seen.add(n)
      out.append(n)
  return out


def sample_numbers_weighted(rng, count, seed, max_digits=6):
  """`count` train numbers, digit counts drawn by TRAIN_DIGIT_WEIGHTS; only those below
  SMALL may repeat."""
  digits = list(range(1, max_digits + 1))
  weights = [TRAIN_DIGIT_WEIGHTS.get(d, 1) for d in digits]
  seen, out = set(), []
  while len(out) < count:
    d = rng.choices(digits, weights)[0]
    n = rng.randrange(0 if d == 1 else 10 ** (d - 1), 10 ** d)
    if number_split(n, seed) != "train" or (n >= SMALL and n in seen):
      continue
    seen.add(n)
    out.append(n)
  return out


def independent_sample(per_range, seed=1234, sample_seed=0, num_train=40000):
  """{range name: numbers} for checking what the model learned, per range.

  Ranges: "0-99", "100-9,999", "10,000-99,999"; `per_range` distinct numbers
  each, drawn with `sample_seed` (not the problem's split order). Numbers
  >= 1,000 are drawn from those in no split's data (not train's `num_train`
  draws, not dev or test), so they are unseen; numbers below 1,000 are all in
  train by design (the atoms of the language), so those are checked as
  learned, not as held out.
  """
  train = set(sample_numbers("train", num_train, seed))
  rng = random.Random(f"translate_ende_numbers:independent:{sample_seed}")
  ranges = {"0-99": (0, 100), "100-9,999": (100, 10_000), "10,000-99,999": (10_000, 100_000)}
  out = {}
  for name, (low, high) in ranges.items():
    if high - low < per_range:
      raise InputError(f"range {name} has fewer than {per_range} numbers")
    pool = [n for n in range(low, high)
            if n < SMALL or (n not in train and number_split(n, seed) == "train")]
    out[name] = sorted(rng.sample(pool, per_range))
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
    # split -> (its numbers, the (en, de) pairs worded so far): num2words is the slow part
    # of datagen, so each number is worded once, and only as far as a pass reads
    # (t2t-datagen --max_pairs stops early).
    self._pairs = {}

  def generate_forward_samples(self, split, tmp_dir=None):
    if split not in self._pairs:
      self._pairs[split] = (sample_numbers(split, self.sizes[split], self.seed), [])
    numbers, pairs = self._pairs[split]
    for i, n in enumerate(numbers):
      if i == len(pairs):
        pairs.append((num2words(n, lang="en"), num2words(n, lang="de")))
      en, de = pairs[i]
      yield {"inputs": en, "targets": de}
