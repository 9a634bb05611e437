"""Target-language tags: how one multilingual model is told which language to write.

A multilingual run's sources start with a reserved piece naming the target language,
`<2de>`, `<2fr>`, ... (Johnson et al., 2017's `<2xx>` tokens): the problem writes it in
front of every training and dev source, sentencepiece keeps it whole (a user-defined
symbol of the shared vocabulary), and every way of decoding puts it back in front of a
user's line:

    tag("de")                              # "<2de>"
    languages_of(vocab)                    # ("cs", "de", "fr"): the tags the vocabulary holds
    with_tag("A dog runs.", "fr", langs)   # "<2fr> A dog runs."
    language_of_line("<2fr> A dog runs.")  # "fr"

A language the model was not trained on is one InputError listing the known ones.

Models imported from fairseq's M2M-100 (and NLLB) name languages otherwise: a language
token (`__fr__`, `fra_Latn`; the vocabulary's `labels`) in front of the source names the
source language, and the decoder's first token, forced, the target language:

    language_tokens(vocab)                 # {"de": "__de__", "en": "__en__", ...}
    frame_with_tokens(["A dog."], None, "en", "de", tokens, "input")
                                           # (["__en__ A dog."], ["__de__"]): the prefixes
"""

import re

from t2t_keras.errors import InputError

# A language code in a tag: ISO 639 ("de", "fra"), optionally a script or region ("zh_Hant").
CODE = r"[a-z]{2,3}(?:_[A-Za-z]{2,4})?"
_TAG = re.compile(rf"^<2({CODE})>$")
_LEADING_TAG = re.compile(rf"^\s*<2({CODE})>(?:\s+|$)")


def tag(language):
  """The reserved piece of `language` (an ISO 639 code such as "de"): "<2de>"."""
  if not _TAG.match(f"<2{language}>"):
    raise InputError(f"target language {language!r} is not a language code such as 'de' "
                     "or 'pt_BR'")
  return f"<2{language}>"


def languages_of(vocab):
  """The target languages whose tags are pieces of `vocab` (sorted codes; () for a
  bilingual vocabulary). Reads the source side's pieces of a vocabulary pair (the tags are
  source pieces)."""
  pieces = getattr(vocab, "source", vocab)
  found = []
  for i in range(pieces.vocab_size):
    m = _TAG.match(pieces.id_to_piece(i))
    if m:
      found.append(m.group(1))
  return tuple(sorted(found))


def check_language(language, languages):
  """`language` if it is one of `languages`, else one InputError listing them."""
  if not languages:
    raise InputError(f"target language {language!r} asked of a model with one target "
                     "language (its vocabulary has no <2xx> tags)")
  if language not in languages:
    raise InputError(f"unknown target language {language!r}; this model knows "
                     f"{', '.join(languages)}")
  return language


def language_of_line(line):
  """The language of the tag `line` starts with, or None."""
  m = _LEADING_TAG.match(line)
  return m.group(1) if m else None


def with_tag(line, language, languages):
  """`line` with `language`'s tag in front (a tag already there is replaced)."""
  check_language(language, languages)
  m = _LEADING_TAG.match(line)
  rest = line[m.end():] if m else line.lstrip()
  return f"{tag(language)} {rest}".rstrip() if rest else tag(language)


def tag_lines(lines, language, languages, source_name="input"):
  """Each line with its tag: `language`'s where given, else the line's own, which every
  line must then carry (an InputError names the first line without a known one)."""
  if language is not None:
    return [with_tag(line, language, languages) for line in lines]
  for number, line in enumerate(lines, start=1):
    found = language_of_line(line)
    if found is None:
      raise InputError(
          f"{source_name} line {number} has no target-language tag: start it with one of "
          f"{', '.join(tag(x) for x in languages)}, or give the language "
          "(t2t-decoder's --target_language, the library's target_language=)")
    check_language(found, languages)
  return list(lines)


def language_tokens(vocab):
  """{code: token} of a vocabulary whose language tokens are labels (M2M-100's `__fr__`
  -> "fr", NLLB's `fra_Latn` as it is); {} for any other vocabulary."""
  labels = getattr(vocab, "labels", ())
  return {(label[2:-2] if label.startswith("__") and label.endswith("__") else label): label
          for label in labels}


def token_for(language, tokens, side):
  """The token of `language` (a code of `tokens`, or a token itself); InputError listing
  the known codes."""
  if language in tokens:
    return tokens[language]
  if language in tokens.values():
    return language
  raise InputError(f"unknown {side} language {language!r}; this model knows "
                   f"{', '.join(sorted(tokens))}")


def frame_with_tokens(sources, prefixes, source_language, target_language, tokens, name):
  """(sources, prefixes) as a language-token model reads them: each source led by the
  source language's token (`source_language`'s, or its own, which every line must then
  carry), each target prefix ("" or None: none) led by `target_language`'s token, the
  decoder's forced first token. InputError without a target language, or naming the
  first line without a source-language token."""
  if target_language is None:
    raise InputError(f"this model starts its output with the target language's token: "
                     f"give the target language (one of {', '.join(sorted(tokens))})")
  target = token_for(target_language, tokens, "target")
  source = None if source_language is None else token_for(source_language, tokens, "source")
  known, framed = set(tokens.values()), []
  for number, line in enumerate(sources, start=1):
    first, _, rest = line.strip().partition(" ")
    if source is not None:
      line = f"{source} {rest if first in known else line.strip()}".rstrip()
    elif first not in known:
      raise InputError(f"{name} line {number} does not start with a source-language token: "
                       f"start it with one, or give the source language (one of "
                       f"{', '.join(sorted(tokens))})")
    framed.append(line)
  return framed, [f"{target} {p}" if p else target for p in (prefixes or [""] * len(sources))]


def label_pattern(labels=()):
  """The regular expression `marian_vocab.split_label` applies, in RE2's syntax too (the
  SavedModel's graph runs it): group 1 a leading label, group 2 the rest. A label is
  `>>...<<` up to the first `<<`, or one of `labels` followed by a space or the end (the
  space dropped)."""
  known = "".join(f"|(?:{re.escape(label)})(?: |$)" for label in sorted(labels))
  return f"(?s)^(>>.*?<<{known})?(.*)$"
