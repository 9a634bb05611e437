"""parsing_english_ptb8k: English constituency parsing as translation (the paper's section 6.3).

Inputs are a sentence's words (space-separated treebank tokens); targets are its
cleaned tree linearized as Vinyals & Kaiser et al. (2014) did, with every
part-of-speech tag normalized to XX (`t2t_keras.data.trees`):

    Pierre Vinken , 61 years old , will join ...
    (S (NP (NP XX XX )NP XX (ADJP (NP XX XX )NP XX )ADJP XX )NP (VP XX (VP XX ...

The trees are read from `--raw_dir` (else --tmp_dir; recipes/ptb_parsing.sh passes the
sample's directory), in either layout:
  * the full LDC WSJ treebank, `parsed/mrg/wsj/SS/wsj_SSNN.mrg`: the standard
    splits, train sections 02-21, dev 22, test 23;
  * a flat directory of `wsj_NNNN.mrg` files, as the 3,669-tree sample
    (wsj_0001-0179): train wsj_0001-0159, dev wsj_0160-0179. The sample's own
    test files (wsj_0180-0199) are held out for independent evaluation, so its
    "test" split repeats dev: choose everything on dev.

`parsing_english_ptb8k_words` writes each leaf as its word instead of XX
("(S (NP Pierre Vinken )NP , ..."), so the decoder copies the sentence rather
than counting it, and parses far better (docs/parsing.md).

Besides the TFRecords, datagen writes each evaluation split as text for EVALB:
`<data_dir>/parsing_english_ptb8k.<split>.words` (the sentences, one per line)
and `.trees` (the cleaned gold trees, one per line). Model outputs become trees
with `postprocess` (t2t-decoder does this for this problem) or, inside an
exported SavedModel, with `serving_postprocess` (TensorFlow ops).
"""

import glob
import math
import os
import re

from t2t_keras import fileio, registry
from t2t_keras.errors import InputError
from t2t_keras.data import trees
from t2t_keras.data.problem import Text2TextProblem

LDC_SECTIONS = {"train": range(2, 22), "dev": [22], "test": [23]}
SAMPLE_LAST_TRAIN_FILE = 159
_SAMPLE_FILE = re.compile(r"wsj_(\d{4})\.mrg$")


@registry.register_problem
class ParsingEnglishPtb8k(Text2TextProblem):
  """Penn Treebank WSJ constituency parsing; one 8k-piece vocabulary for words and trees."""

  vocab_size = 8000
  raw_dir_env = "T2T_PTB_DIR"  # deprecated: read by the binaries only, where --raw_dir is not given
  # The paper's decoding for parsing: output length input + 300, beam 21, alpha 0.3
  # (t2t-decoder and t2t-exporter apply them before --decode_hparams).
  decode_defaults = "extra_length=300,beam_size=21,alpha=0.3"
  # Targets' leaves: "XX" (Vinyals et al.'s normalized POS tags, the paper's), or the words.
  words_as_leaves = False

  def __init__(self, was_reversed=False, *, raw_dir=None, **kwargs):
    super().__init__(was_reversed, **kwargs)
    self.raw_dir = raw_dir

  def resolve_raw_dir(self, tmp_dir=None):
    """--raw_dir (the `raw_dir` argument), else tmp_dir; InputError when neither is given."""
    root = self.raw_dir or tmp_dir
    if not root:
      raise InputError(f"{self.data_name} reads the Penn Treebank's .mrg files: set --raw_dir "
                       "to the treebank or the sample's directory")
    return root

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
          "--raw_dir")

  def eval_files(self, data_dir, split):
    """(sentences file, gold trees file) of an evaluation split, as datagen writes them."""
    prefix = os.path.join(data_dir, f"{self.data_name}.{split}")
    return prefix + ".words", prefix + ".trees"

  def generate_data(self, data_dir, tmp_dir=None, log=None, **kwargs):
    summary = super().generate_data(data_dir, tmp_dir, log, **kwargs)
    for split in ("dev", "test"):
      words_path, trees_path = self.eval_files(data_dir, split)
      if os.path.exists(words_path) and os.path.exists(trees_path):
        continue
      sentences, gold = [], []
      for path in self.split_files(split, tmp_dir):
        for tree in trees.read_mrg(path):
          cleaned = trees.clean(tree)
          if cleaned is not None:
            sentences.append(" ".join(cleaned.leaves()))
            gold.append(trees.tree_string(cleaned))
      for path, lines in ((words_path, sentences), (trees_path, gold)):
        fileio.write_atomic(path, "".join(line + "\n" for line in lines))
      (log or (lambda m: None))(f"wrote {words_path} and {trees_path} ({len(gold)} trees)")
    return summary

  @staticmethod
  def postprocess(source, output):
    """A model output (linearized tree) -> a well-formed tree over the source's words."""
    return trees.delinearize(output.split(), source.split())

  @classmethod
  def dev_score(cls):  # pylint: disable=arguments-differ
    """How t2t-avg-all's selection compares checkpoint averages on dev: EVALB F1 (all
    sentences, COLLINS.prm) of the trees `postprocess` builds, ties to complete match."""
    from t2t_keras.metrics.dev_score import DevScore  # pylint: disable=import-outside-toplevel

    def scores(sources, outputs, references):
      return _evalb_scores([cls.postprocess(s, o) for s, o in zip(sources, outputs)],
                           references)

    return DevScore("EVALB F1", "f1", "complete match", "complete_match", scores)

  @staticmethod
  def serving_postprocess():
    """`postprocess` as a TensorFlow module: (outputs [n], sources [n]) -> trees [n]."""
    from t2t_keras.exporting.tree_ops import TreeBuilder  # pylint: disable=import-outside-toplevel
    return TreeBuilder()

  def generate_forward_samples(self, split, tmp_dir=None):
    for path in self.split_files(split, tmp_dir):
      for tree in trees.read_mrg(path):
        cleaned = trees.clean(tree)
        if cleaned is None:
          continue
        words, target = trees.linearize(cleaned, self.words_as_leaves)
        yield {"inputs": " ".join(words), "targets": target}


@registry.register_problem
class ParsingEnglishPtb8kWords(ParsingEnglishPtb8k):
  """As parsing_english_ptb8k, with the words as the target's leaves instead of XX.

  "(S (NP Savin Corp. )NP (VP reported ..." rather than "(S (NP XX XX )NP (VP XX ...":
  each leaf repeats the next input word, so the decoder knows where in the sentence it
  is; with XX it has to count. Postprocessing is the same: each leaf takes the next
  input word (or two when it spells the second, none when it repeats the previous:
  `trees._words_taken`).
  """

  words_as_leaves = True

  @staticmethod
  def decode_constraint(vocab):
    """The searches' constraint (decode hparam constrain, on by default): the output's
    leaves are the input's pieces, in order, between brackets ("▁(" or "▁)" and a
    label); `t2t_keras.decoding.output_constraint.LeafCopyConstraint`."""
    from t2t_keras.decoding.output_constraint import LeafCopyConstraint  # pylint: disable=import-outside-toplevel
    return LeafCopyConstraint.from_vocab(vocab)


def _evalb_scores(parsed, references):
  """Trees and gold tree lines -> {"f1", "complete_match", "signature"} (all sentences)."""
  from t2t_keras.metrics import evalb  # pylint: disable=import-outside-toplevel
  summary = evalb.evalb(references, parsed)["all"]
  f1 = summary["f1"]
  return {"f1": 0.0 if math.isnan(f1) else f1, "complete_match": summary["complete_match"],
          "signature": "EVALB (COLLINS.prm, labeled), all sentences"}
