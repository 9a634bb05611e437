"""Penn Treebank trees for parsing as translation (the paper's section 6.3, after Vinyals &
Kaiser et al. 2014): read `.mrg` files, clean the trees, linearize them, and read a model's
output back into a well-formed tree.

    trees = read_mrg("wsj_0001.mrg")                    # nltk Trees, outer bracket dropped
    tree = clean(trees[0])                              # no -NONE-, no function tags
    words, target = linearize(tree)                     # ["Pierre", ...], "(S (NP XX XX ..."
    delinearize(target.split(), words)                  # "(S (NP (XX Pierre) ...) ...)"

Trees are read with nltk's s-expression reader and `Tree.fromstring` (a kept library,
rather than a hand-written reader). Cleaning is the standard preprocessing: empty elements
(-NONE-) are removed with the constituents they leave empty, function tags and
co-indices are cut from phrase labels (NP-SBJ-1 -> NP, PP=2 -> PP; tags that start with
'-', such as -LRB-, are kept whole), and the unlabeled outer bracket is dropped.
nltk is imported by the two functions that build trees (`read_mrg`, `clean`), not with
this module: every binary imports this module through the problem registry, and nltk's
import is slow (docs/notebook.md, the suite's time).
Linearized targets are Vinyals et al.'s: "(LABEL" opens, ")LABEL" closes, and every
part-of-speech tag is normalized to "XX" (or, `words_as_leaves`, replaced by its word).
"""

import warnings

POS_TOKEN = "XX"
# Tags given back to punctuation words when a tree is rebuilt, so that EVALB deletes
# the same words from test trees as from gold ones (its COLLINS.prm deletes , : `` '' .).
PUNCTUATION_TAGS = {",": ",", ".": ".", "?": ".", "!": ".", ":": ":", ";": ":", "--": ":",
                    "...": ":", "``": "``", "''": "''", "-LRB-": "-LRB-", "-RRB-": "-RRB-",
                    "$": "$", "#": "#", "`": "``", "-": ":"}


def read_mrg(path):
  """The trees of a Penn Treebank `.mrg` file (nltk Trees; the unlabeled outer bracket dropped)."""
  from nltk.corpus.reader.util import read_sexpr_block  # pylint: disable=import-outside-toplevel
  from nltk.tree import Tree  # pylint: disable=import-outside-toplevel
  trees = []
  with open(path, encoding="utf-8") as f, warnings.catch_warnings():
    warnings.simplefilter("ignore")  # nltk warns about multi-byte encodings; .mrg is ASCII
    while True:
      block = read_sexpr_block(f)
      if not block:
        return trees
      trees += [Tree.fromstring(s, remove_empty_top_bracketing=True) for s in block]


def strip_label(label):
  """NP-SBJ-1 -> NP, PP=2 -> PP; labels starting with '-' (-NONE-, -LRB-) are kept."""
  if label.startswith("-"):
    return label
  for k, ch in enumerate(label):
    if ch in "-=":
      return label[:k] or label
  return label


def clean(tree):
  """A copy without -NONE- elements, the constituents they leave empty, or function tags.

  Returns None if nothing is left. Preterminals (a tag over one word) keep their tag.
  """
  from nltk.tree import Tree  # pylint: disable=import-outside-toplevel
  if isinstance(tree, str):
    return tree
  if len(tree) == 1 and isinstance(tree[0], str):  # preterminal
    return None if tree.label() == "-NONE-" else Tree(tree.label(), [tree[0]])
  children = [c for c in (clean(child) for child in tree) if c is not None]
  return Tree(strip_label(tree.label()), children) if children else None


def linearize(tree, words_as_leaves=False):
  """(words, target string): the sentence and the tree as Vinyals et al.'s token sequence.

  Leaves are "XX" (their normalized POS tags), or with `words_as_leaves` the words
  themselves: "(S (VP runs (NP the race )NP )VP . )S", which tells the decoder
  where in the sentence it is.
  """
  words, tokens = [], []

  def walk(t):
    if len(t) == 1 and isinstance(t[0], str):
      words.append(t[0])
      tokens.append(t[0] if words_as_leaves else POS_TOKEN)
      return
    tokens.append("(" + t.label())
    for child in t:
      walk(child)
    tokens.append(")" + t.label())

  walk(tree)
  return words, " ".join(tokens)


def _leaf(word):
  return f"({PUNCTUATION_TAGS.get(word, POS_TOKEN)} {word})"


def _words_taken(token, words, k):
  """How many input words (from words[k]) a leaf token takes: 0, 1 or 2.

  A leaf that spells words[k] takes it; one that spells words[k + 1] takes both (the
  model skipped a word); one that repeats words[k - 1] takes none; any other leaf (XX, a
  misspelled copy) takes words[k]. Past the last word, nothing.
  """
  if k < len(words) and token == words[k]:
    return 1
  if k + 1 < len(words) and token == words[k + 1]:
    return 2
  if 0 < k <= len(words) and token == words[k - 1]:
    return 0
  return 1 if k < len(words) else 0


def delinearize(tokens, words, root="S"):
  """A well-formed bracketed tree (one line) from output tokens, with `words` as its leaves.

  Never fails: "(LABEL" opens a constituent, ")..." closes the innermost open one (extra
  closes are ignored), a lone "(" is ignored, and any other token is a leaf that takes
  the next word (`_words_taken`: "XX", or a word when the targets have words as leaves;
  extra ones are ignored); constituents
  still open at the end are closed; words left over join the outermost open constituent
  (or the root);
  constituents left without words are dropped; several top-level constituents (or none)
  go under one `root`. Words get the tag "XX", punctuation its Penn tag
  (`PUNCTUATION_TAGS`) so that EVALB treats it as in the gold trees.
  """
  stack = [[root, []]]  # [label, children as strings]
  next_word = 0

  def close():  # the innermost open constituent joins its parent, if it has words
    label, children = stack.pop()
    if children:
      stack[-1][1].append(f"({label} {' '.join(children)})")

  for token in tokens:
    if token.startswith("(") and len(token) > 1:
      stack.append([token[1:], []])
    elif token.startswith(")"):
      if len(stack) > 1:
        close()
    elif not token.startswith("("):
      take = _words_taken(token, words, next_word)
      stack[-1][1].extend(_leaf(w) for w in words[next_word:next_word + take])
      next_word += take
  while len(stack) > 2:  # inner constituents still open
    close()
  stack[-1][1].extend(_leaf(w) for w in words[next_word:])  # in order, after the rest
  while len(stack) > 1:
    close()
  top = stack[0][1]
  if len(top) == 1 and not top[0].startswith(f"({POS_TOKEN} ") and top[0].count("(") > 1:
    return top[0]
  return f"({root} {' '.join(top)})"


def right_branching(words, label="S"):
  """The right-branching baseline tree over `words`: (S w1 (S w2 (S ... (S wn-1 wn)))).

  Words get the tags `delinearize` gives them (XX, punctuation its Penn tag).
  """
  if not words:
    return f"({label} )"
  tree = _leaf(words[-1])
  for word in reversed(words[:-1]):
    tree = f"({label} {_leaf(word)} {tree})"
  return tree if len(words) > 1 else f"({label} {tree})"


def tree_string(tree):
  """One-line bracketing of an nltk Tree, as EVALB files hold them."""
  return tree.pformat(margin=10 ** 9)
