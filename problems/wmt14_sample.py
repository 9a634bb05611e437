"""translate_ende_wmt14_sample: the WMT14 pipeline at smoke scale, from local files.

Train is OpenNMT's 10k-pair WMT En-De training sample, dev is newstest2013 and
test is the full newstest2014 (3,003 lines), the paper's test set. The files
are looked up in --raw_dir, else tmp_dir:

    train_sample_opennmt_10k_tok/train.tok.{en,de}.gz   Moses-tokenized, XML-escaped
    newstest2013.{en,de}.gz, newstest2014-deen.{en,de}.gz   raw text

The training sample is Moses-tokenized ("Parliament &apos;s prerogative ,")
while the dev and test sets are raw ("Parliament's prerogative,"). The
subword vocabulary and the model work on raw text, so training lines are
detokenized with sacremoses' Moses detokenizer (which also unescapes the XML
entities) before the vocabulary is trained. Otherwise the model would learn
to write " ," and "&quot;" and every raw test sentence would look unlike its
training data. The round trip is not perfect (Moses cannot know whether a
`"` opened or closed a quote), which is fine for a smoke run.

This proves the plumbing of the WMT14 recipe (datagen -> train -> beam search
-> tokenized BLEU on newstest2014) on a CPU; 10k pairs cannot give a
meaningful score. The real recipe uses `translate_ende_wmt32k` (tfds).
"""

import functools

from t2t_keras import registry
from t2t_keras.problems.parallel_text import ParallelTextProblem


@functools.lru_cache(maxsize=None)
def _detokenizer(lang):
  from sacremoses import MosesDetokenizer  # pylint: disable=import-outside-toplevel
  return MosesDetokenizer(lang=lang)


def moses_detokenize(line, lang):
  """Moses-tokenized, XML-escaped `line` -> raw text in language `lang`."""
  return _detokenizer(lang).detokenize(line.split(), unescape=True)


@registry.register_problem
class TranslateEndeWmt14Sample(ParallelTextProblem):
  """WMT En->De smoke scale: 10k Moses-tokenized train pairs (detokenized), newstest2013/2014."""

  vocab_size = 8000
  raw_dir_env = "T2T_WMT14_DIR"  # deprecated: read by the binaries only (problem_flags)
  tokenized_splits = ("train",)
  files = {
      "train": ("train_sample_opennmt_10k_tok/train.tok.en.gz",
                "train_sample_opennmt_10k_tok/train.tok.de.gz"),
      "dev": ("newstest2013.en.gz", "newstest2013.de.gz"),
      "test": ("newstest2014-deen.en.gz", "newstest2014-deen.de.gz"),
  }

  def generate_forward_samples(self, split, tmp_dir=None):
    for sample in super().generate_forward_samples(split, tmp_dir):
      if split in self.tokenized_splits:
        sample = {"inputs": moses_detokenize(sample["inputs"], "en"),
                  "targets": moses_detokenize(sample["targets"], "de")}
      yield sample
