"""t2t-bleu: BLEU of a translation file against a reference file.

    t2t-bleu --translation=newstest2014.de.decoded --reference=newstest2014.de [--lang=de]

Prints sacreBLEU (cased, 13a) and chrF with their signatures, the paper's
tokenized BLEU with compound splitting (clearly labelled), and the lowercased
tokenized BLEU of the Multi30k papers. Both files hold detokenized text, one
sentence per line (plain or .gz).

    t2t-bleu --translation=test2016.de.decoded --reference=test_2016_flickr.de.gz \\
        --tokenized_reference=tok/test_2016_flickr.lc.norm.tok.de.gz

adds the lowercased tokenized BLEU against Multi30k's own tokenized reference
file (the hypotheses are lowercased, punctuation-normalised and Moses-tokenized
with XML escaping, as that file was made).

    t2t-bleu --tokenized --translation=test2016.tok.de \
        --reference=tok/test_2016_flickr.lc.norm.tok.de.gz

scores a translation that is already Multi30k-tokenized (translate_ende_multi30k_tok's
outputs) against that tokenized reference, tokens as they are: lowercased BLEU on
whitespace-split tokens (multi-bleu.perl -lc), the anchor's metric (docs/recipes.md).
Nothing else is printed: the detokenized figures need detokenized text.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.errors import InputError
from t2t_keras.metrics import bleu

t2t_keras.bin.define_flag("string", "translation", None, "File of translations, one per line.")
t2t_keras.bin.define_flag("string", "reference", None, "File of references, one per line.")
t2t_keras.bin.define_flag("string", "lang", "de", "Target language for Moses tokenization.")
t2t_keras.bin.define_flag("string", "tokenized_reference", None,
                          "Optional: the reference already lowercased and Moses-tokenized "
                          "(Multi30k's tok/*.lc.norm.tok.* files).")
t2t_keras.bin.define_flag("bool", "tokenized", False,
                          "The translation and the reference are both already Multi30k-"
                          "tokenized (lowercase Moses tokens, XML-escaped): print only the "
                          "lowercased BLEU on their tokens as they are (multi-bleu -lc).")
NAME = "t2t-bleu"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.translation or not FLAGS.reference:
    raise app.UsageError("--translation and --reference are required")
  hyps = bleu.read_lines(FLAGS.translation)
  refs = bleu.read_lines(FLAGS.reference)
  _check_counts(FLAGS.translation, hyps, FLAGS.reference, refs)
  if FLAGS.tokenized:
    if FLAGS.tokenized_reference:
      raise InputError("--tokenized scores --translation against --reference, both already "
                       "tokenized; --tokenized_reference is for detokenized translations")
    score = bleu.multi30k_tokens_bleu(hyps, refs)
    print(f"lowercased tokenized BLEU on tokens as they are (multi-bleu -lc) against "
          f"{FLAGS.reference}: {score.score:.2f}\n  {score}")
    return
  report = bleu.bleu_report(hyps, refs, lang=FLAGS.lang)
  print(bleu.format_report(report))
  if FLAGS.tokenized_reference:
    tokenized = bleu.read_lines(FLAGS.tokenized_reference)
    _check_counts(FLAGS.translation, hyps, FLAGS.tokenized_reference, tokenized)
    score = bleu.multi30k_tok_bleu_vs_tokenized(hyps, tokenized, lang=FLAGS.lang)
    print(f"lowercased tokenized BLEU against {FLAGS.tokenized_reference}: {score:.2f}")


def _check_counts(hyp_path, hyps, ref_path, refs):
  if len(hyps) != len(refs):
    raise InputError(f"{hyp_path} has {len(hyps)} lines but {ref_path} has {len(refs)}: "
                     "one translation per reference line is needed")


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
