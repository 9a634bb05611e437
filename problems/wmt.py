"""WMT14 English-German and English-French, as in "Attention Is All You Need".

Raw text comes from the `tensorflow_datasets` builder `wmt14_translate`
(configs "de-en" and "fr-en"), downloaded and prepared under
`<tmp_dir>/tfds` (downloads in `<tmp_dir>/tfds/downloads`). Splits:

  train  tfds "train" (en-de: europarl v7, commoncrawl, news commentary v9; ~4.5M pairs)
  dev    tfds "validation" (newstest2013)
  test   tfds "test" (newstest2014, full 3,003-line set)

Vocabulary: one joint BPE model, 37000 pieces for en-de and 32000 for en-fr
(section 5.1 of the paper), trained on a 2M-sentence sample of train.

Every problem here also reads a data_dir written by tensor2tensor's t2t-datagen
under its name (`t2t_keras.data.t2t_data_dir`); translate_ende_wmt8k,
translate_enfr_wmt8k and translate_encs_wmt32k are tensor2tensor's names whose
vocabulary is t2t's SubwordTextEncoder (`T2tVocabularyWmt14Problem`).
"""

import os

from t2t_keras import registry
from t2t_keras.data.problem import Text2TextProblem
from t2t_keras.errors import InputError

_TFDS_SPLITS = {"train": "train", "dev": "validation", "test": "test"}


class Wmt14Problem(Text2TextProblem):
  """English -> `target_language` from tfds `wmt14_translate/<target>-en`."""

  target_language = None
  num_shards = {"train": 100, "dev": 1, "test": 1}
  vocab_character_coverage = 0.9999
  vocab_input_sentence_size = 2_000_000

  @property
  def tfds_name(self):
    return f"wmt14_translate/{self.target_language}-en"

  def tfds_builder(self, tmp_dir):
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
    if not tmp_dir:
      raise InputError(f"{self.data_name} needs --tmp_dir (tfds download and prepare area)")
    return tfds.builder(self.tfds_name, data_dir=os.path.join(tmp_dir, "tfds"))

  def check_inputs(self, tmp_dir):
    if not tmp_dir:
      raise InputError(f"{self.data_name} needs --tmp_dir (tfds download and prepare area)")

  def count_forward_samples(self, split, tmp_dir=None, limit=None):
    """The split's size from the prepared tfds dataset's info (no pass over it), else
    (info without split sizes, as under tfds' mock) a pass of at most `limit`."""
    builder = self.tfds_builder(tmp_dir)
    builder.download_and_prepare(download_dir=os.path.join(tmp_dir, "tfds", "downloads"))
    try:
      return builder.info.splits[_TFDS_SPLITS[split]].num_examples
    except KeyError:
      return super().count_forward_samples(split, tmp_dir, limit)

  def generate_forward_samples(self, split, tmp_dir=None):
    import tensorflow_datasets as tfds  # pylint: disable=import-outside-toplevel
    builder = self.tfds_builder(tmp_dir)
    builder.download_and_prepare(download_dir=os.path.join(tmp_dir, "tfds", "downloads"))
    ds = builder.as_dataset(split=_TFDS_SPLITS[split], shuffle_files=False)
    for ex in tfds.as_numpy(ds):
      yield {"inputs": ex["en"].decode("utf-8"),
             "targets": ex[self.target_language].decode("utf-8")}


@registry.register_problem
class TranslateEndeWmt32k(Wmt14Problem):
  """WMT14 English -> German, 37000-piece joint BPE (the paper's setup)."""

  target_language = "de"
  vocab_size = 37000


@registry.register_problem
class TranslateEnfrWmt32k(Wmt14Problem):
  """WMT14 English -> French, 32000-piece joint BPE (the paper's setup)."""

  target_language = "fr"
  vocab_size = 32000


class T2tVocabularyWmt14Problem(Wmt14Problem):
  """A tensor2tensor WMT problem whose vocabulary is t2t's SubwordTextEncoder.

  Reads the data_dir tensor2tensor's t2t-datagen wrote (its shards and
  `vocab.<name>.<size>.subwords`: `t2t_keras.data.t2t_data_dir`), so t2t users train,
  evaluate and fine-tune on their data as it is. t2t-datagen here writes shards from
  tfds' WMT14 with that vocabulary when it is in data_dir (tensor2tensor's own datagen
  downloaded other WMT releases); it does not build t2t's vocabularies.
  """

  def _train_vocabulary(self, vocab_path, tmp_dir, limit, seed, log):
    raise InputError(f"{self.data_name} uses tensor2tensor's SubwordTextEncoder vocabulary, "
                     "which t2t-keras does not build: put t2t's "
                     f"vocab.{self.data_name}.<size>.subwords into --data_dir (where t2t-datagen "
                     "wrote it) and run again")


@registry.register_problem
class TranslateEndeWmt8k(T2tVocabularyWmt14Problem):
  """tensor2tensor's English -> German with its 8k subword vocabulary."""

  target_language = "de"


@registry.register_problem
class TranslateEnfrWmt8k(T2tVocabularyWmt14Problem):
  """tensor2tensor's English -> French with its 8k subword vocabulary."""

  target_language = "fr"


@registry.register_problem
class TranslateEncsWmt32k(T2tVocabularyWmt14Problem):
  """tensor2tensor's English -> Czech with its 32k subword vocabulary."""

  target_language = "cs"
