"""t2t-evalb: EVALB bracketing F1 of a file of parses against gold trees (t2t-bleu's sibling).

    t2t-evalb --gold_file=dev.gold.trees --test_file=dev.parsed.trees [--cutoff_len=40]
    t2t-evalb --gold_file=dev.gold.trees --right_branching    # the baseline, for scale

One bracketed tree per line in each file, in the same order. Prints EVALB's
summary (COLLINS.prm: recall, precision, F1, complete match, crossing, tagging
accuracy) for all sentences and for those of at most --cutoff_len words;
--per_sentence adds EVALB's per-sentence lines, --by_length F1 per length
bucket, --unlabeled scores unlabeled brackets (EVALB's LABELED 0). The rules are in
t2t_keras/metrics/evalb.py.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.metrics import bleu, evalb

_define = t2t_keras.bin.define_flag
_define("string", "gold_file", None, "Gold trees, one per line (plain or .gz).")
_define("string", "test_file", None, "Parsed trees, one per line, in the gold file's order.")
_define("integer", "cutoff_len", 40, "Also report sentences of at most this many words.",
        lower_bound=1)
_define("bool", "per_sentence", False, "Print one line per sentence too.")
_define("bool", "by_length", False, "Also print F1 by sentence length (1-10, ..., 41+ words).")
_define("bool", "unlabeled", False, "Unlabeled brackets (COLLINS.prm with LABELED 0).")
_define("bool", "right_branching", False,
        "Score the right-branching baseline over the gold words instead of --test_file.")
NAME = "t2t-evalb"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.gold_file or not (FLAGS.test_file or FLAGS.right_branching):
    raise app.UsageError("--gold_file and --test_file (or --right_branching) are required")
  params = evalb.Params(cutoff_len=FLAGS.cutoff_len, labeled=not FLAGS.unlabeled)
  gold = bleu.read_lines(FLAGS.gold_file)
  if FLAGS.right_branching:
    import dataclasses  # pylint: disable=import-outside-toplevel
    from t2t_keras.data import trees  # pylint: disable=import-outside-toplevel
    words_only = dataclasses.replace(params, delete_labels=("-NONE-",))  # punctuation kept
    test = [trees.right_branching([w for w, _ in evalb.read_tree(line, words_only).terminals])
            for line in gold]
  else:
    test = bleu.read_lines(FLAGS.test_file)
  result = evalb.evalb(gold, test, params)
  if FLAGS.per_sentence:
    print("  ID  Len.  Stat. Recal  Prec.  Matched  Gold  Test  Cross  Words  Tags")
    for i, r in enumerate(result["sentences"], start=1):
      recall = 100.0 * r.matched / r.gold if r.gold else 0.0
      precision = 100.0 * r.matched / r.test if r.test else 0.0
      print(f"{i:4d}  {r.length:3d}    {r.status}  {recall:6.2f} {precision:6.2f}   "
            f"{r.matched:3d}    {r.gold:3d}  {r.test:3d}    {r.crossing:3d}   {r.words:4d}  "
            f"{r.correct_tags:4d}" + (f"  ({r.error})" if r.error else ""))
  print(evalb.format_report(result), end="")
  if FLAGS.by_length:
    print(evalb.format_by_length(result), end="")
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
