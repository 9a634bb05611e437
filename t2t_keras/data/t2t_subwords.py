"""tensor2tensor's SubwordTextEncoder vocabularies (`vocab.<problem>.<size>.subwords`).

    vocab = T2tSubwordVocabulary("vocab.translate_ende_wmt32k.32768.subwords")
    ids = vocab.encode("Hello, world!")      # tensor2tensor's ids, no EOS
    vocab.decode(ids)                        # "Hello, world!"

The conventions, from tensor2tensor's `data_generators/tokenizer.py` and
`text_encoder.py` (1.15; unchanged since 2017), which the tests compare against:

  * the file: one subtoken a line, in single or double quotes; the line's index is its
    id; `<pad>` is 0 and `<EOS>` 1 (written in the file as any other subtoken);
  * tokens: maximal runs of alphanumeric characters (Unicode category L* or N*) and
    of other characters; a run that is exactly one space and not at the start of the
    text is dropped (decoding puts a space back between two alphanumeric tokens);
  * escaping each token: "\\" -> "\\\\", "_" -> "\\u", and every character outside the
    vocabulary's alphabet (the characters of its subtokens, plus "\\_u;0123456789"),
    and "\\n", -> "\\NNN;" (its code point in decimal); then "_" ends the token;
  * subtokens: greedy longest match from the left over the escaped token, at most the
    longest subtoken's length at a time (every alphabet character is a subtoken, so a
    match always exists);
  * decoding: the subtokens joined, split at "_", each piece unescaped ("\\NNN;" that is
    not a code point becomes U+3013), empty pieces dropped, tokens joined.
"""

import functools
import gzip
import re
import unicodedata

from t2t_keras import fileio
from t2t_keras.errors import InputError
from t2t_keras.ids import content_ids

ESCAPE_CHARS = frozenset("\\_u;0123456789")
_UNESCAPE = re.compile(r"\\u|\\\\|\\([0-9]+);")


@functools.lru_cache(maxsize=None)
def is_alnum(char):
  """Whether tensor2tensor's tokenizer counts `char` as alphanumeric (category L* or N*)."""
  return unicodedata.category(char)[0] in "LN"


def tokenize(text):
  """Text -> tokens: runs of alphanumeric and other characters, single spaces between
  runs dropped (not one at the start)."""
  tokens, start = [], 0
  for pos in range(1, len(text)):
    if is_alnum(text[pos]) != is_alnum(text[pos - 1]):
      token = text[start:pos]
      if token != " " or start == 0:
        tokens.append(token)
      start = pos
  if text:
    tokens.append(text[start:])
  return tokens


def detokenize(tokens):
  """Tokens -> text: a space between two tokens that both start alphanumeric."""
  out = []
  for i, token in enumerate(tokens):
    if i and is_alnum(tokens[i - 1][0]) and is_alnum(token[0]):
      out.append(" ")
    out.append(token)
  return "".join(out)


def escape(token, alphabet):
  """One token -> its escaped form, ending in "_"."""
  token = token.replace("\\", "\\\\").replace("_", "\\u")
  return "".join(c if c in alphabet and c != "\n" else f"\\{ord(c)};" for c in token) + "_"


def _unescape_match(match):
  if match.group(1) is None:
    return "_" if match.group(0) == "\\u" else "\\"
  try:
    return chr(int(match.group(1)))
  except (ValueError, OverflowError):
    return "\u3013"


def unescape(escaped):
  """An escaped token (its final "_" optional) -> the token."""
  return _UNESCAPE.sub(_unescape_match, escaped[:-1] if escaped.endswith("_") else escaped)


def read_plain(path):
  """The file's bytes, gunzipped when it is gzip."""
  data = fileio.read_bytes(path)
  return gzip.decompress(data) if data[:2] == b"\x1f\x8b" else data


def is_subwords_file(path):
  """Whether `path` (plain or gzip) starts as tensor2tensor's vocabularies do: '<pad>'."""
  try:
    return read_plain(path).lstrip()[:7] in (b"'<pad>'", b'"<pad>"')
  except (OSError, EOFError):
    return False


def read_subtokens(path):
  """The subtoken strings of a `.subwords` file (plain or gzip), in id order."""
  data = read_plain(path)
  lines = data.decode("utf-8").split("\n")
  if lines and not lines[-1]:
    lines.pop()  # the final newline ends the last line
  subtokens = []
  for line in lines:
    s = line.strip()
    if (s.startswith("'") and s.endswith("'")) or (s.startswith('"') and s.endswith('"')):
      s = s[1:-1]
    subtokens.append(s)
  return subtokens


class T2tSubwordVocabulary:
  """A tensor2tensor SubwordTextEncoder vocabulary: text <-> ids, as tensor2tensor does.

  Args:
    path: a `.subwords` file (plain or `.gz`) written by tensor2tensor.
  """

  def __init__(self, path):
    if not fileio.exists(path):
      raise FileNotFoundError(f"vocabulary {path!r} not found")
    self.model_path = path
    self.subtokens = read_subtokens(path)
    if self.subtokens[:2] != ["<pad>", "<EOS>"]:
      raise InputError(f"{path}: not a tensor2tensor subword vocabulary (its first two lines "
                       f"must be '<pad>' and '<EOS>', got {self.subtokens[:2]})")
    self._ids = {s: i for i, s in enumerate(self.subtokens) if s}
    self._max_len = max(len(s) for s in self.subtokens)
    self.alphabet = frozenset(c for s in self.subtokens for c in s) | ESCAPE_CHARS
    self._cache = {}

  @property
  def vocab_size(self):
    """Number of ids (the model's embedding size), `<pad>` and `<EOS>` included."""
    return len(self.subtokens)

  def _token_ids(self, token):
    ids = self._cache.get(token)
    if ids is None:
      escaped, ids, start = escape(token, self.alphabet), [], 0
      while start < len(escaped):
        for end in range(min(len(escaped), start + self._max_len), start, -1):
          i = self._ids.get(escaped[start:end])
          if i is not None:
            ids.append(i)
            start = end
            break
        else:  # unreachable: every alphabet character is a subtoken
          raise InputError(f"{self.model_path}: no subtoken matches {escaped[start:]!r}")
      if len(self._cache) < 1 << 20:
        self._cache[token] = ids
    return ids

  def encode(self, text):
    """Text -> list of ids, without EOS."""
    return [i for token in tokenize(text) for i in self._token_ids(token)]

  def encode_batch(self, texts):
    """List of texts -> list of id lists, without EOS."""
    return [self.encode(text) for text in texts]

  def decode(self, ids):
    """Ids -> text; stops at the first EOS and drops PAD (ids out of range give nothing)."""
    pieces = [self.subtokens[i] for i in content_ids(ids) if 0 <= i < len(self.subtokens)]
    tokens = [unescape(t) for t in "".join(pieces).split("_") if t]
    return detokenize([t for t in tokens if t])

  def id_to_piece(self, i):
    return self.subtokens[int(i)]

  def piece_to_id(self, piece):
    return self._ids[piece]

  def tf_tokenizer(self):
    """The same vocabulary in TF ops (`t2t_subwords_tf.T2tSubwordTokenizer`)."""
    from t2t_keras.data.t2t_subwords_tf import T2tSubwordTokenizer  # pylint: disable=import-outside-toplevel
    return T2tSubwordTokenizer(self.subtokens, self.alphabet)

  def __repr__(self):
    return f"T2tSubwordVocabulary({self.model_path!r}, vocab_size={self.vocab_size})"
