"""translate_ende_multi30k: Multi30k En-De from the raw (cased) gzip files."""

from t2t_keras import registry
from t2t_keras.problems.parallel_text import ParallelTextProblem


@registry.register_problem
class TranslateEndeMulti30k(ParallelTextProblem):
  """Multi30k (WMT16 multimodal task 1) En->De, raw cased text, joint 8k BPE.

  Reads train/val/test_2016_flickr .en.gz/.de.gz from --raw_dir, else tmp_dir.
  Splits: train 29,000 / dev (val) 1,014 / test (test2016 flickr) 1,000 pairs.
  """

  vocab_size = 8000
  raw_dir_env = "T2T_MULTI30K_DIR"  # deprecated: read by the binaries only (problem_flags)
  files = {
      "train": ("train.en.gz", "train.de.gz"),
      "dev": ("val.en.gz", "val.de.gz"),
      "test": ("test_2016_flickr.en.gz", "test_2016_flickr.de.gz"),
  }
