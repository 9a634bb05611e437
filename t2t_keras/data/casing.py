"""The first-letter case fold, a problem's option (`Text2TextProblem.fold_first_letter`).

    fold("Ein Mann schläft.")                      # -> "ein Mann schläft."
    restore("A man sleeps.", "ein Mann schläft.")  # -> "Ein Mann schläft."
    restore("2 dogs run.", "zwei Hunde rennen.")   # -> "Zwei Hunde rennen."
    restore("a man sleeps.", "ein Mann schläft.")  # -> "ein Mann schläft."

A sentence's first word is capitalized because it comes first, not for what it is (most of
Multi30k's German captions start with "Ein" or "Eine"); a folding problem trains on text
whose first letter is lowercased, on both sides, and puts the capital back by rule
(docs/data.md, "Case folding", has what it changes on Multi30k).

The rule:

  first letter  the first character after any leading ASCII whitespace (space, tab, LF,
                CR, FF, VT); nothing else is skipped: a text that starts with a quote, a
                digit or any other non-letter has no first letter to fold, nor has a blank
                one.
  capital       a character C whose lowercase (Unicode's full mapping, as str.lower) is one
                character c != C whose uppercase is C again: A-Z, Ä, Ö, Ü, É, Č, Σ, ...;
                not ǅ, İ or the Kelvin sign, whose mappings do not come back to them.
  fold(text)    the text with its first letter lowercased where it is a capital, else the
                text as it is. Applied to both sides of every pair before the vocabulary is
                trained and the pairs are written, and to every source a model reads.
  restore(source, output)  where the output's first letter is the fold of a capital (a
                lowercase c whose uppercase is one character C, a capital, with C.lower()
                == c), the output with that letter uppercased, unless the source's first
                character is a lowercase one (uppercasing changes it: a, ä, ß, ...: its
                writer did not capitalize the sentence); else the output as decoded. So a
                source that starts with a capital, a digit, a quote or any other uncased
                character has its output's first letter capitalized ("2 dogs run." ->
                "Zwei Hunde rennen."), one that starts with a lowercase letter keeps it
                lowercase.

Plain Python, no TensorFlow: `casing_tf.py` is the same rule in TensorFlow ops (the
SavedModel's), and `exporting/ct2_translate.py` holds a copy (it imports nothing of
t2t_keras); tests hold the three to the same outputs.
"""

SPACE = " \t\n\r\f\v"  # the leading whitespace skipped: ASCII's


def split_first(text):
  """(leading whitespace, first character, the rest) of `text`; the first is "" for a
  blank text."""
  body = text.lstrip(SPACE)
  return text[:len(text) - len(body)], body[:1], body[1:]


def is_capital(char):
  """Whether `char` (one character, or "") is a capital as the rule says."""
  lower = char.lower()
  return len(lower) == 1 and lower != char and lower.upper() == char


def fold(text):
  """`text` with its first letter lowercased where it is a capital (the module's rule)."""
  lead, first, rest = split_first(text)
  return lead + first.lower() + rest if is_capital(first) else text


def is_lowercase(char):
  """Whether `char` (one character, or "") is changed by uppercasing (a, ä, ß, ...)."""
  return char.upper() != char


def restore(source, output):
  """`output` with its first letter uppercased where it is a folded capital, unless the
  source's first character is a lowercase one (the module's rule); else `output`."""
  if is_lowercase(split_first(source)[1]):
    return output
  lead, first, rest = split_first(output)
  upper = first.upper()
  return lead + upper + rest if is_capital(upper) and upper.lower() == first else output
