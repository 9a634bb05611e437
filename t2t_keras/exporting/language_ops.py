"""A multilingual export's language handling in TensorFlow ops (the SavedModel's
`target_language` signature): `languages.with_tag` and `languages.frame_with_tokens` as
graph functions, refusing unknown languages with the known ones listed."""

import re

import tensorflow as tf

from t2t_keras.data import languages

# data/languages.py's leading tag in RE2: its `\s` is Python's str.isspace(), listed here.
_SPACE = (r"[\t-\r\x{1c}-\x{20}\x{85}\x{a0}\x{1680}\x{2000}-\x{200a}\x{2028}\x{2029}"
          r"\x{202f}\x{205f}\x{3000}]")
_LEADING_TAG = rf"^{_SPACE}*(?:<2{languages.CODE}>(?:{_SPACE}+|$))?"


def tag_in_graph(inputs, target_language, known):
  """`languages.with_tag` in TF ops: strings [n], language codes [n] -> each input with its
  language's tag in front ("<2fr> ..."; a leading tag already there is replaced, invalid
  UTF-8 becomes U+FFFD). InvalidArgumentError where the sizes differ or a language is not
  one of `known` (the message lists them, the unknown ones follow it)."""
  inputs, target_language = tf.reshape(inputs, [-1]), tf.reshape(target_language, [-1])
  same = tf.debugging.assert_equal(
      tf.size(target_language), tf.size(inputs),
      message="'target_language' needs one language per input")
  with tf.control_dependencies([same]):
    valid = tf.reduce_any(tf.equal(target_language[:, None], tf.constant(list(known))[None]),
                          axis=1)
  check = tf.debugging.Assert(tf.reduce_all(valid), [
      f"unknown target language; this model knows {', '.join(known)}",
      tf.boolean_mask(target_language, tf.logical_not(valid))])
  text = tf.strings.unicode_transcode(inputs, "UTF-8", "UTF-8", errors="replace",
                                      replacement_char=0xFFFD)
  rest = tf.strings.regex_replace(tf.strings.regex_replace(text, _LEADING_TAG, ""),
                                  f"{_SPACE}+$", "")
  tags = "<2" + target_language + ">"
  with tf.control_dependencies([check]):
    return tf.where(tf.equal(rest, ""), tags, tags + " " + rest)


def tokens_in_graph(inputs, target_language, tokens):
  """`languages.frame_with_tokens`'s prefixes in TF ops: strings [n], language codes [n] ->
  each code's token [n] ({code: token} `tokens`). InvalidArgumentError where the sizes
  differ, a code is unknown (the message lists the known ones) or an input does not start
  with a source language's token."""
  inputs, target_language = tf.reshape(inputs, [-1]), tf.reshape(target_language, [-1])
  codes = sorted(tokens)
  same = tf.debugging.assert_equal(
      tf.size(target_language), tf.size(inputs),
      message="'target_language' needs one language per input")
  with tf.control_dependencies([same]):
    match = tf.equal(target_language[:, None], tf.constant(codes)[None])
  valid = tf.reduce_any(match, axis=1)
  known = tf.strings.regex_full_match(
      inputs, "(" + "|".join(re.escape(tokens[c]) for c in codes) + ")( .*)?")
  checks = [tf.debugging.Assert(tf.reduce_all(valid), [
                f"unknown target language; this model knows {', '.join(codes)}",
                tf.boolean_mask(target_language, tf.logical_not(valid))]),
            tf.debugging.Assert(tf.reduce_all(known), [
                "each input starts with the token of its source language (one of "
                f"{', '.join(tokens[c] for c in codes)}); these do not:",
                tf.boolean_mask(inputs, tf.logical_not(known))])]
  with tf.control_dependencies(checks):
    return tf.gather(tf.constant([tokens[c] for c in codes]),
                     tf.argmax(tf.cast(match, tf.int32), axis=1))
