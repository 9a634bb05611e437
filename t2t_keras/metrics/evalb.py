"""EVALB bracket scoring (Sekine & Collins), as the C program computes it with COLLINS.prm.

    result = evalb(gold_lines, test_lines)          # one bracketed tree per line
    result["all"]["f1"], result["len<=40"]["f1"]    # also recall, precision, tagging, ...
    print(format_report(result))

The rules, in the order the C program applies them (COLLINS.prm's values):
  * A tree is read left to right. `(LABEL word)` is a terminal (a preterminal
    and its word); any other `(LABEL ...)` is a constituent spanning the words
    read between its brackets. The unlabeled outer bracket of treebank files,
    `( (S ...) )`, is a constituent with the empty label (it is not deleted).
  * Terminals whose POS tag is a delete label (TOP, -NONE-, and the punctuation
    tags `,` `:` `` '' `.`) are removed before spans are counted, so
    punctuation moves no bracket boundary. The sentence length used for the
    "len <= 40" figures counts every terminal except -NONE- (punctuation
    included).
  * A constituent that covers no remaining word is dropped. Labels are cut at
    the first '-' or '=' (NP-SBJ-1 -> NP, PP=2 -> PP); constituents labelled
    with a delete label (e.g. TOP) are dropped, their children kept.
    Preterminals are not constituents.
  * Labels ADVP and PRT are equal (EQ_LABEL), for brackets and for tags.
  * Each gold constituent matches at most one unmatched test constituent with
    the same span and an equal label, so repeated identical brackets count
    with multiplicity.
  * Crossing brackets: test constituents that cross some gold constituent.
  * Tagging accuracy compares the remaining words' POS tags position by position.
  * A sentence whose test tree has no word is skipped; one whose words differ
    in number or form from the gold tree's, or whose brackets do not balance,
    is an error sentence; neither counts in the totals.
Totals: recall = matched / gold constituents, precision = matched / test
constituents, F1 = 2PR / (P + R) (NaN when both are 0, as EVALB prints it),
complete match, average crossing, no crossing, <= 2 crossing (per valid
sentence), tagging accuracy (per word).
"""

import dataclasses
import math

from t2t_keras.errors import InputError


@dataclasses.dataclass(frozen=True)
class Params:
  """An EVALB parameter file's settings (defaults: COLLINS.prm)."""
  cutoff_len: int = 40
  labeled: bool = True
  delete_labels: tuple = ("TOP", "-NONE-", ",", ":", "``", "''", ".")
  delete_labels_for_length: tuple = ("-NONE-",)
  equal_labels: tuple = (("ADVP", "PRT"),)
  equal_words: tuple = ()

  def label_equal(self, a, b):
    return a == b or any({a, b} == {x, y} for x, y in self.equal_labels)

  def word_equal(self, a, b):
    return a == b or any({a, b} == {x, y} for x, y in self.equal_words)


COLLINS = Params()


@dataclasses.dataclass
class Tree:
  """One line as EVALB reads it: remaining (word, tag) terminals, constituents, length."""
  terminals: list
  brackets: list  # [start, end, label] over `terminals`, before label trimming
  length: int     # terminals whose tag is not a delete-for-length label
  error: str = ""


def _is_terminator(c):
  return c.isspace() or c in "()"


def read_tree(line, params=COLLINS):
  """Parses one bracketed tree (a line of a gold or test file) as EVALB does."""
  terminals, brackets, stack = [], [], []
  length, error, i, n = 0, "", 0, len(line)
  while i < n:
    c = line[i]
    if c.isspace():
      i += 1
    elif c == "(":
      i += 1
      start = i
      while i < n and not _is_terminator(line[i]):
        i += 1
      label = line[start:i]
      if i < n and line[i].isspace():
        q = i
        while q < n and line[q].isspace():
          q += 1
        w = q
        while q < n and not _is_terminator(line[q]):
          q += 1
        word = line[w:q]
        if q < n and line[q] == ")":  # a terminal: (TAG word)
          if label not in params.delete_labels_for_length:
            length += 1
          if label not in params.delete_labels:
            terminals.append((word, label))
          i = q + 1
          continue
        if q >= n or line[q] != "(":
          return Tree(terminals, brackets, length, f"more than two elements in ({label} ...")
      stack.append(len(brackets))
      brackets.append([len(terminals), None, label])
    elif c == ")":
      if not stack:
        return Tree(terminals, brackets, length, "unbalanced brackets (too many ')')")
      brackets[stack.pop()][1] = len(terminals)
      i += 1
    else:
      return Tree(terminals, brackets, length, f"unexpected text at character {i}")
  if stack:
    error = "unbalanced brackets (too many '(')"
  return Tree(terminals, brackets, length, error)


def _trim(label):
  for k, ch in enumerate(label):
    if ch in "-=":
      return label[:k]
  return label


def constituents(tree, params=COLLINS):
  """The counted constituents of a read tree: [(start, end, trimmed label)], in order."""
  out = []
  for start, end, label in tree.brackets:
    if end is None or start == end:
      continue
    label = _trim(label)
    if any(params.label_equal(label, d) for d in params.delete_labels):
      continue
    out.append((start, end, label))
  return out


@dataclasses.dataclass
class SentenceResult:
  status: int          # 0 valid, 1 error, 2 skipped (EVALB's Stat.)
  length: int          # gold length for the cutoff (without -NONE-)
  matched: int = 0
  gold: int = 0
  test: int = 0
  crossing: int = 0
  words: int = 0
  correct_tags: int = 0
  error: str = ""


def score_sentence(gold_line, test_line, params=COLLINS):
  """EVALB's figures for one sentence."""
  gold, test = read_tree(gold_line, params), read_tree(test_line, params)
  error = gold.error or test.error
  if not test.terminals:
    return SentenceResult(2, gold.length)
  if len(gold.terminals) != len(test.terminals):
    return SentenceResult(1, gold.length,
                          error=f"length mismatch ({len(gold.terminals)}|{len(test.terminals)})")
  for (g, _), (t, _) in zip(gold.terminals, test.terminals):
    if not params.word_equal(g, t):
      return SentenceResult(1, gold.length, error=f"words differ ({g}|{t})")
  gold_b, test_b = constituents(gold, params), constituents(test, params)
  used = [False] * len(test_b)
  matched = 0
  for gs, ge, gl in gold_b:
    for j, (ts, te, tl) in enumerate(test_b):
      if not used[j] and (gs, ge) == (ts, te) and (
          not params.labeled or params.label_equal(gl, tl)):
        used[j] = True
        matched += 1
        break
  crossing = sum(
      1 for ts, te, _ in test_b
      if any(gs < ts < ge < te or ts < gs < te < ge for gs, ge, _ in gold_b))
  correct = sum(params.label_equal(g, t) for (_, g), (_, t) in zip(gold.terminals, test.terminals))
  return SentenceResult(1 if error else 0, gold.length, matched, len(gold_b), len(test_b),
                        crossing, len(gold.terminals), correct, error)


def _summary(results):
  valid = [r for r in results if r.status == 0]
  matched, gold, test = (sum(getattr(r, k) for r in valid) for k in ("matched", "gold", "test"))
  words = sum(r.words for r in valid)
  recall = 100.0 * matched / gold if gold else 0.0
  precision = 100.0 * matched / test if test else 0.0
  n = len(valid)
  return {
      "sentences": len(results),
      "error_sentences": sum(r.status == 1 for r in results),
      "skipped_sentences": sum(r.status == 2 for r in results),
      "valid_sentences": n,
      "recall": recall, "precision": precision,
      "f1": 2 * precision * recall / (precision + recall) if precision + recall else math.nan,
      "complete_match": 100.0 * sum(r.gold == r.test == r.matched for r in valid) / n if n else 0.0,
      "average_crossing": sum(r.crossing for r in valid) / n if n else 0.0,
      "no_crossing": 100.0 * sum(r.crossing == 0 for r in valid) / n if n else 0.0,
      "two_or_less_crossing": 100.0 * sum(r.crossing <= 2 for r in valid) / n if n else 0.0,
      "tagging_accuracy": 100.0 * sum(r.correct_tags for r in valid) / words if words else 0.0,
      "matched": matched, "gold_brackets": gold, "test_brackets": test, "words": words,
  }


def evalb(gold_lines, test_lines, params=COLLINS):
  """EVALB over parallel lists of tree lines; blank lines are sentences too, as in EVALB.

  Returns {"all": summary, f"len<={cutoff}": summary, "sentences": [SentenceResult]}.
  Raises InputError when the two lists differ in length.
  """
  gold_lines, test_lines = list(gold_lines), list(test_lines)
  if len(gold_lines) != len(test_lines):
    raise InputError(f"{len(gold_lines)} gold trees but {len(test_lines)} test trees: "
                     "one test tree per gold line is needed")
  results = [score_sentence(g, t, params) for g, t in zip(gold_lines, test_lines)]
  short = [r for r in results if r.length <= params.cutoff_len]
  return {"all": _summary(results), f"len<={params.cutoff_len}": _summary(short),
          "sentences": results}


LENGTH_BUCKETS = (10, 20, 30, 40)


def by_length(result, edges=LENGTH_BUCKETS):
  """[(label, summary)] for sentences of 1-10, 11-20, ... words and the rest ("41+")."""
  out, low = [], 0
  sentences = result["sentences"]
  for high in list(edges) + [None]:
    chosen = [r for r in sentences if r.length > low and (high is None or r.length <= high)]
    out.append((f"{low + 1}-{high}" if high is not None else f"{low + 1}+", _summary(chosen)))
    low = high
  return out


def format_by_length(result, edges=LENGTH_BUCKETS):
  """F1 / recall / precision per sentence-length bucket, one line each."""
  lines = ["words    sentences  recall  precision     F1"]
  for label, s in by_length(result, edges):
    lines.append(f"{label:>7s}  {s['valid_sentences']:9d}  {s['recall']:6.2f}  "
                 f"{s['precision']:9.2f}  {s['f1']:6.2f}")
  return "\n".join(lines) + "\n"


def format_report(result):
  """EVALB's summary block (both sections) as text."""
  lines = []
  for name, s in ((k, v) for k, v in result.items() if k != "sentences"):
    lines.append(f"-- {'All' if name == 'all' else name} --")
    lines += [f"Number of sentence        = {s['sentences']:6d}",
              f"Number of Error sentence  = {s['error_sentences']:6d}",
              f"Number of Skip  sentence  = {s['skipped_sentences']:6d}",
              f"Number of Valid sentence  = {s['valid_sentences']:6d}",
              f"Bracketing Recall         = {s['recall']:6.2f}",
              f"Bracketing Precision      = {s['precision']:6.2f}",
              f"Bracketing FMeasure       = {s['f1']:6.2f}",
              f"Complete match            = {s['complete_match']:6.2f}",
              f"Average crossing          = {s['average_crossing']:6.2f}",
              f"No crossing               = {s['no_crossing']:6.2f}",
              f"2 or less crossing        = {s['two_or_less_crossing']:6.2f}",
              f"Tagging accuracy          = {s['tagging_accuracy']:6.2f}", ""]
  return "\n".join(lines).rstrip() + "\n"
