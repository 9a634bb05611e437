"""What the case-folding tests share (test_folded_decoding.py, test_folded_exports.py): a
vocabulary with no capital letter in it, the sources and their restored echoes, and the
echoing search. A path that skipped the fold would give " ⁇ " where a capital was."""

import numpy as np

from t2t_keras.data import vocabulary

FOLDED = "translate_ende_multi30k_folded"
SOURCES = ["One hundred and five", "nine", "Über fünf", "7 neun", "  Twenty-three"]
# The echo's outputs (each source's fold, detokenized) with the capital restored.
EXPECTED = ["One hundred and five", "nine", "Über fünf", "7 neun", "Twenty-three"]


def lowercase_vocab(directory):
  """A sentencepiece vocabulary of lowercase pieces only, trained in `directory`."""
  corpus = ["one hundred and five", "twenty-three", "nine", "über fünf", "7 neun"] * 20
  return vocabulary.train_sentencepiece(corpus, str(directory / "vocab.model"), 40,
                                        num_threads=1)


def echo(batch):
  """A search whose one hypothesis is its source (ids [rows, 1, width], EOS included)."""
  ids = np.asarray(batch, np.int32)
  return ids[:, None, :], np.zeros([len(ids), 1], np.float32)
