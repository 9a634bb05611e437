"""`trees.delinearize` in TensorFlow ops, so an exported parser returns trees by itself.

    trees = TreeBuilder()(outputs, sentences)   # strings [n], [n] -> bracketed trees [n]

The same stack machine as `t2t_keras.data.trees.delinearize` (tests compare the
two on real and malformed outputs): "(LABEL" opens a constituent, ")..."
closes the innermost open one (extra closes are ignored), a lone "(" is
ignored and any other token ("XX" or a word) is a leaf that takes the next word
(or two, or none: `trees._words_taken`; extra ones are ignored); still-open
constituents are closed, words left over join the outermost open constituent,
constituents without words are dropped and several top-level constituents go
under one root. Words get the tag XX, punctuation its Penn tag. Only core TensorFlow string ops: a SavedModel
using it loads with TensorFlow (and TF Text for the vocabulary) alone.
"""

import tensorflow as tf

from t2t_keras.data.trees import POS_TOKEN, PUNCTUATION_TAGS


def _put(vector, index, value):
  """vector [k] with vector[index] = value (any dtype, strings included)."""
  return tf.concat([vector[:index], tf.reshape(value, [1]), vector[index + 1:]], axis=0)


def _append(text, item):
  """text + " " + item, or item when text is empty (a space-joined list)."""
  return tf.where(tf.equal(text, ""), item, tf.strings.join([text, item], separator=" "))


class TreeBuilder(tf.Module):
  """Callable: (linearized outputs [n], sentences [n]) -> well-formed trees [n] (strings)."""

  def __init__(self, root="S", name="tree_builder"):
    super().__init__(name=name)
    self.root = root
    self.tags = tf.lookup.StaticHashTable(
        tf.lookup.KeyValueTensorInitializer(list(PUNCTUATION_TAGS),
                                            list(PUNCTUATION_TAGS.values())),
        default_value=POS_TOKEN)

  def __call__(self, outputs, sentences):
    outputs = tf.reshape(tf.convert_to_tensor(outputs, tf.string), [-1])
    sentences = tf.reshape(tf.convert_to_tensor(sentences, tf.string), [-1])
    return tf.map_fn(lambda pair: self.build(pair[0], pair[1]), (outputs, sentences),
                     fn_output_signature=tf.TensorSpec([], tf.string))

  def build(self, output, sentence):
    """One tree: output (a linearized tree, string []) with sentence's words as leaves.

    Long: a tf.while_loop whose body and close step share the loop's five state tensors;
    kept together so the loop reads as the stack machine it is."""
    tokens = tf.strings.split(output)
    words = tf.strings.split(sentence)
    leaves = tf.strings.join(["(", self.tags.lookup(words), " ", words, ")"])
    num_words = tf.size(words)
    padded = tf.concat([[""], words, [""]], axis=0)  # padded[j + 1] = words[j]; "" outside
    size = tf.size(tokens) + 2  # the root, and at most one level per token
    labels = tf.fill([size], "")
    children = tf.fill([size], "")  # each open level's children, space-joined
    counts = tf.zeros([size], tf.int32)

    def close(depth, labels, children, counts):
      """The innermost open constituent joins its parent, if it has words."""
      kids = children[depth]
      has_words = tf.not_equal(kids, "")
      item = tf.strings.join(["(", labels[depth], " ", kids, ")"])
      parent = depth - 1
      children = tf.cond(has_words,
                         lambda: _put(children, parent, _append(children[parent], item)),
                         lambda: children)
      counts = tf.cond(has_words, lambda: _put(counts, parent, counts[parent] + 1),
                       lambda: counts)
      return depth - 1, labels, children, counts

    def step(i, depth, next_word, labels, children, counts):
      token = tokens[i]
      first = tf.strings.substr(token, 0, 1)
      is_open = tf.logical_and(tf.equal(first, "("), tf.strings.length(token) > 1)
      is_close = tf.logical_and(tf.equal(first, ")"), depth > 0)
      is_leaf = tf.logical_and(tf.not_equal(first, "("), tf.not_equal(first, ")"))
      # trees._words_taken: 1 if the leaf spells words[k], 2 if words[k + 1] (a word
      # skipped), 0 if it repeats words[k - 1], else 1 while words are left.
      k = next_word
      spelled = lambda j: tf.equal(token, padded[tf.minimum(j + 1, num_words + 1)])
      take = tf.where(spelled(k), 1, tf.where(spelled(k + 1), 2, tf.where(
          spelled(k - 1), 0, tf.where(k < num_words, 1, 0))))
      is_word = tf.logical_and(is_leaf, take > 0)

      def do_open():
        d = depth + 1
        label = tf.strings.substr(token, 1, tf.strings.length(token) - 1)
        return (d, next_word, _put(labels, d, label), _put(children, d, ""),
                _put(counts, d, 0))

      def do_close():
        d, l, c, n = close(depth, labels, children, counts)
        return d, next_word, l, c, n

      def do_word():
        taken = tf.strings.reduce_join(leaves[k:k + take], separator=" ")
        return (depth, next_word + take, labels,
                _put(children, depth, _append(children[depth], taken)),
                _put(counts, depth, counts[depth] + take))

      def skip():
        return depth, next_word, labels, children, counts

      out = tf.case([(is_open, do_open), (is_close, do_close), (is_word, do_word)],
                    default=skip, exclusive=False)
      return (i + 1, *out)

    invariants = (tf.TensorShape([]),) * 3 + (tf.TensorShape([None]),) * 3
    _, depth, next_word, labels, children, counts = tf.while_loop(
        lambda i, *_: i < tf.size(tokens), step,
        (0, 0, 0, labels, children, counts), shape_invariants=invariants)
    # Inner constituents still open are closed; leftover words join the outermost open
    # one (or the root); then everything is closed.
    depth, labels, children, counts = tf.while_loop(
        lambda d, *_: d > 1, close, (depth, labels, children, counts),
        shape_invariants=(tf.TensorShape([]),) + (tf.TensorShape([None]),) * 3)
    rest = leaves[next_word:]
    children = tf.cond(tf.size(rest) > 0,
                       lambda: _put(children, depth, _append(
                           children[depth], tf.strings.reduce_join(rest, separator=" "))),
                       lambda: children)
    counts = _put(counts, depth, counts[depth] + tf.size(rest))
    depth, labels, children, counts = tf.while_loop(
        lambda d, *_: d > 0, close, (depth, labels, children, counts),
        shape_invariants=(tf.TensorShape([]),) + (tf.TensorShape([None]),) * 3)
    top = children[0]
    brackets = tf.strings.length(top) - tf.strings.length(
        tf.strings.regex_replace(top, r"\(", ""))
    single = tf.logical_and(
        tf.equal(counts[0], 1),
        tf.logical_and(tf.logical_not(tf.strings.regex_full_match(
            top, r"\(" + POS_TOKEN + r" .*")), brackets > 1))
    wrapped = tf.strings.join(["(", self.root, " ", top, ")"])
    return tf.where(single, top, wrapped)
