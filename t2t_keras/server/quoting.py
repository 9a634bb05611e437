r"""User input as the server's log lines and error messages may quote it: escaped, shortened.

    printable("a" + chr(10) + "b")     # a, then the 4 characters \x0a, then b: a log line
                                       # no request can end
    shown(chr(0xD800))                 # the 6 characters \ud800 (UTF-8 cannot hold a lone
                                       # surrogate, so the JSON answer could not either)
    shown("x" * 500)                   # 80 x's, then "... (500 characters)"
    shown_names(["b", "a"])            # "['a', 'b']"

A request's text reaches an error message only through these, so an answer's body is
always valid UTF-8 JSON of bounded size, whatever the request held (a lone surrogate in a
signature name made the JSON response unencodable, a 500).
"""

SHOWN_CHARS = 80  # characters of one user value an error message quotes
SHOWN_NAMES = 8  # names of a user-given list an error message quotes


def printable(text):
  """`text` with every character that is not printable (control characters, lone
  surrogates, separators other than the space) and the backslash escaped: \\xNN below 256,
  \\uNNNN in the Basic Multilingual Plane, else \\UNNNNNNNN."""
  return "".join(c if c.isprintable() and c != "\\" else _escape(c) for c in text)


def _escape(c):
  code = ord(c)
  if code < 0x100:
    return f"\\x{code:02x}"
  return f"\\u{code:04x}" if code < 0x10000 else f"\\U{code:08x}"


def shown(text, limit=SHOWN_CHARS):
  """`printable(text)` of at most `limit` characters of `text` (a non-string as its type's
  name), with "... (N characters)" where it was longer."""
  if not isinstance(text, str):
    return f"<{type(text).__name__}>"
  if len(text) <= limit:
    return printable(text)
  return f"{printable(text[:limit])}... ({len(text)} characters)"


def shown_names(names, most=SHOWN_NAMES):
  """A user-given list of names (a JSON object's keys), sorted, as a list of quoted
  `shown` names: at most `most` of them, then how many more."""
  names = sorted(names)
  text = ", ".join(f"'{shown(n)}'" for n in names[:most])
  more = f", ... {len(names) - most} more" if len(names) > most else ""
  return f"[{text}{more}]"
