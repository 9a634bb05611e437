"""Terminology constraints on Multi30k, the usual test (Dinu et al., 2019, in small).

    python recipes/multi30k_terms.py t2t_train/multi30k/selected [--splits val,test_2016_flickr]

1. A dictionary from the training pairs by co-occurrence: for an English word e and a
   German word g (lowercased words, punctuation stripped, both seen at least `--min_count`
   times, neither among its side's `--stop_words` most frequent), Dice = 2 c(e, g) / (c(e)
   + c(g)) over sentence pairs; g is a translation of e where Dice >= `--min_dice` and g
   is e's best or second best.
2. Terms per sentence: reference words (as they appear in the reference) that the
   unconstrained output lacks and that the dictionary pairs with a word of the source,
   at most `--max_terms` (best Dice first); sentences with none keep no constraint.
3. Decoded with the run's selected decoding, with and without the terms as constraints
   (`translate_lines(constraints=...)`): the share of constrained sentences whose output
   holds every term (the search guarantees it where met; unmet sentences are counted),
   sacreBLEU over the split and over the constrained sentences alone, with and without,
   and the seconds of each pass (the same beam).
Choices (min_count, min_dice, max_terms) are fixed before looking at test2016; RESULT
lines as the other recipes'.
"""

import argparse
import collections
import os
import re
import sys
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from t2t_keras import tf_startup  # noqa: E402

tf_startup.import_tensorflow_quietly()

from t2t_keras import runs  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.decoding import translate  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.decoding.spec import DecodingSpec  # noqa: E402  pylint: disable=wrong-import-position
from t2t_keras.metrics import bleu  # noqa: E402  pylint: disable=wrong-import-position

_WORD = re.compile(r"\w+", re.UNICODE)


def words(text):
  """Lowercased word set of a line (punctuation dropped)."""
  return set(w.lower() for w in _WORD.findall(text))


def dictionary(sources, targets, min_count=5, min_dice=0.3, stop_words=30):
  """{english word: [(german word, dice), ...] best first, at most 2} by co-occurrence;
  the `stop_words` most frequent words of each side are left out (articles, prepositions),
  ties broken by the word."""
  source_count, target_count, pair_count = (collections.Counter() for _ in range(3))
  for s, t in zip(sources, targets):
    s_words, t_words = words(s), words(t)
    source_count.update(s_words)
    target_count.update(t_words)
    pair_count.update((e, g) for e in s_words for g in t_words)
  stop = ({w for w, _ in source_count.most_common(stop_words)} |
          {w for w, _ in target_count.most_common(stop_words)})
  table = collections.defaultdict(list)
  for (e, g), c in pair_count.items():
    if e in stop or g in stop:
      continue
    if source_count[e] >= min_count and target_count[g] >= min_count:
      dice = 2.0 * c / (source_count[e] + target_count[g])
      if dice >= min_dice:
        table[e].append((g, dice))
  return {e: sorted(pairs, key=lambda p: (-p[1], p[0]))[:2] for e, pairs in table.items()}


def terms_for(source, reference, output, table, max_terms=2):
  """Reference words (their own spelling) missing from output that the dictionary pairs
  with a source word, best Dice first, at most max_terms."""
  missing = {w.lower(): w for w in _WORD.findall(reference)}
  present = words(output)
  found = {}
  for e in words(source):
    for g, dice in table.get(e, []):
      if g in missing and g not in present and dice > found.get(g, 0.0):
        found[g] = dice
  best = sorted(found.items(), key=lambda p: (-p[1], p[0]))[:max_terms]
  return [missing[g] for g, _ in best]


def evaluate(model, vocab, settings, sources, refs, table, max_terms):
  """Figures of one split: {constrained, held, unmet, bleu_free, bleu_terms,
  bleu_free_constrained, bleu_terms_constrained, seconds_free, seconds_terms}."""
  start = time.time()
  free = [h[0].text for h in translate.translate_lines(model, vocab, sources, settings)]
  seconds_free = time.time() - start
  terms = [terms_for(s, r, o, table, max_terms) for s, r, o in zip(sources, refs, free)]
  start = time.time()
  steered = translate.translate_lines(model, vocab, sources, settings, constraints=terms)
  seconds_terms = time.time() - start
  outputs = [h[0].text for h in steered]
  rows = [i for i, t in enumerate(terms) if t]
  held = sum(all(w in outputs[i] for w in terms[i]) for i in rows)
  pick = lambda xs: [xs[i] for i in rows]  # noqa: E731
  return {"constrained": len(rows), "held": held, "unmet": len(steered.unmet),
          "bleu_free": bleu.sacrebleu_scores(free, refs)["bleu"],
          "bleu_terms": bleu.sacrebleu_scores(outputs, refs)["bleu"],
          "bleu_free_constrained": bleu.sacrebleu_scores(pick(free), pick(refs))["bleu"],
          "bleu_terms_constrained": bleu.sacrebleu_scores(pick(outputs), pick(refs))["bleu"],
          "seconds_free": seconds_free, "seconds_terms": seconds_terms}


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("run_dir", help="a run, e.g. t2t_train/multi30k/selected")
  parser.add_argument("--raw_dir", default="../shared/data/multi30k")
  parser.add_argument("--splits", default="val,test_2016_flickr")
  parser.add_argument("--decode_hparams", default="")
  parser.add_argument("--min_count", type=int, default=5)
  parser.add_argument("--min_dice", type=float, default=0.3)
  parser.add_argument("--max_terms", type=int, default=2)
  parser.add_argument("--stop_words", type=int, default=30)
  args = parser.parse_args()
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from multi30k_prefixes import decode_hparams  # pylint: disable=import-outside-toplevel
  model, vocab, _, info, ckpt = runs.load(args.run_dir)
  hparams = decode_hparams(args.run_dir, args.decode_hparams)
  settings = DecodingSpec.for_run(info["problem"], hparams).settings
  read = lambda split, lang: bleu.read_lines(  # noqa: E731
      os.path.join(args.raw_dir, f"{split}.{lang}.gz"))
  table = dictionary(read("train", "en"), read("train", "de"), args.min_count, args.min_dice,
                     args.stop_words)
  print(f"{ckpt}, decode hparams {hparams!r}; dictionary: {len(table)} English words")
  for split in args.splits.split(","):
    f = evaluate(model, vocab, settings, read(split, "en"), read(split, "de"), table,
                 args.max_terms)
    print(f"{split}: {f['constrained']} sentences constrained, {f['held']} hold every term, "
          f"{f['unmet']} unmet; sacreBLEU {f['bleu_free']:.2f} -> {f['bleu_terms']:.2f} "
          f"(constrained sentences {f['bleu_free_constrained']:.2f} -> "
          f"{f['bleu_terms_constrained']:.2f}); {f['seconds_free']:.1f} s -> "
          f"{f['seconds_terms']:.1f} s", flush=True)
    for name, value in f.items():
      print(f"RESULT {split}_{name} {value:.2f}")


if __name__ == "__main__":
  main()
