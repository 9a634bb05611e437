"""Multi30k from the raw (cased) gzip files: English to German, French or Czech; and
En->De from the tokenized files of the Multi30k papers (translate_ende_multi30k_tok).

The three targets share one English side (a multi-way corpus): line i of train.en.gz
is the source of line i of train.de.gz, train.fr.gz and train.cs.gz.
"""

from t2t_keras import registry
from t2t_keras.problems.multilingual import MultilingualProblem
from t2t_keras.problems.parallel_text import ParallelTextProblem


def multi30k_files(target_language):
  """{split: (English file, target file)} of Multi30k's train / val / test2016."""
  return {split: (f"{name}.en.gz", f"{name}.{target_language}.gz")
          for split, name in (("train", "train"), ("dev", "val"),
                              ("test", "test_2016_flickr"))}


@registry.register_problem
class TranslateEndeMulti30k(ParallelTextProblem):
  """Multi30k (WMT16 multimodal task 1) En->De, raw cased text, joint 8k BPE.

  Reads train/val/test_2016_flickr .en.gz/.de.gz from --raw_dir, else tmp_dir.
  Splits: train 29,000 / dev (val) 1,014 / test (test2016 flickr) 1,000 pairs.
  """

  vocab_size = 8000
  raw_dir_env = "T2T_MULTI30K_DIR"  # deprecated: read by the binaries only (problem_flags)
  files = multi30k_files("de")


@registry.register_problem
class TranslateEndeMulti30kFolded(TranslateEndeMulti30k):
  """translate_ende_multi30k with each sentence's first letter lowercased on both sides for
  training and the vocabulary, each source's folded before the model reads it and the
  capital restored on the output (`data/casing.py`'s rule): sentence-initial "Ein" is
  learned as the "ein" it is (docs/data.md, "Case folding")."""

  fold_first_letter = True


@registry.register_problem
class TranslateEnfrMulti30k(TranslateEndeMulti30k):
  """Multi30k En->Fr (Elliott et al., 2017): the same English side and splits, joint 8k BPE."""

  files = multi30k_files("fr")


@registry.register_problem
class TranslateEncsMulti30k(TranslateEndeMulti30k):
  """Multi30k En->Cs (Barrault et al., 2018): the same English side and splits, joint 8k BPE."""

  files = multi30k_files("cs")


@registry.register_problem
class TranslateEnMulti30k(MultilingualProblem):
  """Multi30k English into German, French and Czech with one model: each source starts
  with its target's tag (<2de>, <2fr>, <2cs>); one shared BPE vocabulary over the four
  languages, 16k pieces, chosen on val over 8k (docs/recipes.md; recipes/
  multi30k_multilingual.sh passes --vocab_size=8000, a bilingual model's size, so that a
  step costs the same in every model it compares); dev and test per language.
  Multi30k is multi-way (29,000 English captions, each in all three languages), so every
  language_temperature mixes them alike: 87,000 train pairs."""

  vocab_size = 16000
  raw_dir_env = "T2T_MULTI30K_DIR"
  language_files = {x: multi30k_files(x) for x in ("cs", "de", "fr")}


def multi30k_tok_files(target_language):
  """{split: (English file, target file)} of Multi30k's `tok/` files (lowercased,
  punctuation-normalised, Moses-tokenized with XML escaping: task1-tokenize.sh)."""
  return {split: (f"tok/{name}.lc.norm.tok.en.gz",
                   f"tok/{name}.lc.norm.tok.{target_language}.gz")
          for split, name in (("train", "train"), ("dev", "val"),
                              ("test", "test_2016_flickr"))}


@registry.register_problem
class TranslateEndeMulti30kTok(ParallelTextProblem):
  """Multi30k En->De in the text-only anchor's setting (Wu et al. 2021; docs/recipes.md):
  lowercased, punctuation-normalised, Moses-tokenized text, a joint BPE of about 10k types.

  Reads tok/{train,val,test_2016_flickr}.lc.norm.tok.{en,de}.gz under --raw_dir (the
  directory of train.en.gz); the same 29,000 / 1,014 / 1,000 pairs. The BPE is the
  project's sentencepiece (model_type bpe) with 10,000 pieces, specials and characters
  included, where the anchor learns 10k merges with subword-nmt (9,708 types; the two
  counted side by side in docs/data.md). Inputs and outputs are tokenized text (the
  default postprocess: sentencepiece's decoding gives back the tokens): a decoded line is
  scored against the tok/ reference as it is (`t2t-bleu --tokenized`,
  `metrics.bleu.multi30k_tokens_bleu`), and checkpoints are chosen on that figure.
  """

  vocab_size = 10000
  files = multi30k_tok_files("de")

  @staticmethod
  def dev_score():
    """Lowercased BLEU on the tokens as they are (the anchor's metric), ties to chrF."""
    from t2t_keras.metrics import dev_score  # pylint: disable=import-outside-toplevel
    return dev_score.MULTI30K_TOKENS
