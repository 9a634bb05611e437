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
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.metrics import bleu

t2t_keras.bin.define_flag("string", "translation", None, "File of translations, one per line.")
t2t_keras.bin.define_flag("string", "reference", None, "File of references, one per line.")
t2t_keras.bin.define_flag("string", "lang", "de", "Target language for Moses tokenization.")
t2t_keras.bin.define_flag("string", "tokenized_reference", None,
                          "Optional: the reference already lowercased and Moses-tokenized "
                          "(Multi30k's tok/*.lc.norm.tok.* files).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.translation or not FLAGS.reference:
    raise app.UsageError("--translation and --reference are required")
  report = bleu.bleu_report(bleu.read_lines(FLAGS.translation),
                            bleu.read_lines(FLAGS.reference), lang=FLAGS.lang)
  print(bleu.format_report(report))
  if FLAGS.tokenized_reference:
    score = bleu.multi30k_tok_bleu_vs_tokenized(bleu.read_lines(FLAGS.translation),
                                                bleu.read_lines(FLAGS.tokenized_reference),
                                                lang=FLAGS.lang)
    print(f"lowercased tokenized BLEU against {FLAGS.tokenized_reference}: {score:.2f}")


def run():
  t2t_keras.bin.app_run(main)


if __name__ == "__main__":
  run()
