"""parsing_english_ptb8k: English constituency parsing as translation (the paper's section 6.3).

Inputs are a sentence's words (space-separated treebank tokens); targets are its
cleaned tree linearized as Vinyals & Kaiser et al. (2014) did, with every
part-of-speech tag normalized to XX (`t2t_keras.data.trees`):

    Pierre Vinken , 61 years old , will join ...
    (S (NP (NP XX XX )NP XX (ADJP (NP XX XX )NP XX )ADJP XX )NP (VP XX (VP XX ...

The trees are read from `--raw_dir` (else $T2T_PTB_DIR, else
../shared/data/ptb_sample), in either layout:
  * the full LDC WSJ treebank, `parsed/mrg/wsj/SS/wsj_SSNN.mrg`: the standard
    splits, train sections 02-21, dev 22, test 23;
  * a flat directory of `wsj_NNNN.mrg` files, as the 3,669-tree sample
    (wsj_0001-0179): train wsj_0001-0159, dev wsj_0160-0179. The sample's own
    test files (wsj_0180-0199) are held out for independent evaluation, so its
    "test" split repeats dev: choose everything on dev.
"""

import glob
import os
import re

from t2t_keras import registry
from t2t_keras.data import trees
from t2t_keras.data.problem import Text2TextProblem

DEFAULT_RAW_DIR = os.path.join("..", "shared", "data", "ptb_sample")
LDC_SECTIONS = {"train": range(2, 22), "dev": [22], "test": [23]}
SAMPLE_LAST_TRAIN_FILE = 159
_SAMPLE_FILE = re.compile(r"wsj_(\d{4})\.mrg$")


@registry.register_problem
class ParsingEnglishPtb8k(Text2TextProblem):
  """Penn Treebank WSJ constituency parsing; one 8k-piece vocabulary for words and trees."""

  vocab_size = 8000
  raw_dir_env = "T2T_PTB_DIR"

  def __init__(self, was_reversed=False, *, raw_dir=None, **kwargs):
    super().__init__(was_reversed, **kwargs)
    self.raw_dir = raw_dir

  def resolve_raw_dir(self, tmp_dir=None):
    del tmp_dir
    return self.raw_dir or os.environ.get(self.raw_dir_env) or DEFAULT_RAW_DIR

  def split_files(self, split, tmp_dir=None):
    """The `.mrg` files of `split`, sorted, in whichever layout the raw directory has."""
    root = self.resolve_raw_dir(tmp_dir)
    ldc = os.path.join(root, "parsed", "mrg", "wsj")
    if os.path.isdir(ldc):
      return sorted(p for s in LDC_SECTIONS[split]
                    for p in glob.glob(os.path.join(ldc, f"{s:02d}", "wsj_*.mrg")))
    files = []
    for path in sorted(glob.glob(os.path.join(root, "wsj_*.mrg"))):
      match = _SAMPLE_FILE.search(os.path.basename(path))
      if match:
        is_train = int(match.group(1)) <= SAMPLE_LAST_TRAIN_FILE
        if is_train == (split == "train"):
          files.append(path)
    return files

  def describe_source(self, split, tmp_dir):
    return f" (the {split} files of {self.resolve_raw_dir(tmp_dir)})"

  def check_inputs(self, tmp_dir):
    root = self.resolve_raw_dir(tmp_dir)
    empty = [s for s in ("train", "dev", "test") if not self.split_files(s, tmp_dir)]
    if empty:
      raise FileNotFoundError(
          f"{self.data_name}: no .mrg files for {', '.join(empty)} in {root}: expected "
          "parsed/mrg/wsj/SS/wsj_SSNN.mrg (LDC) or wsj_NNNN.mrg files (the sample); set "
          f"--raw_dir or ${self.raw_dir_env}")

  def generate_forward_samples(self, split, tmp_dir=None):
    for path in self.split_files(split, tmp_dir):
      for tree in trees.read_mrg(path):
        cleaned = trees.clean(tree)
        if cleaned is None:
          continue
        words, target = trees.linearize(cleaned)
        yield {"inputs": " ".join(words), "targets": target}
