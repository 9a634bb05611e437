"""Hypothesis strategies over TF Serving's REST grammar: the HTTP requests the server fuzz
test (tests/server/test_fuzz_server.py) sends to a real t2t-serve.

    requests(model)  # -> Request(method, path, headers, body, half_close, instances)

A body is a JSON object in the row form ({"instances": [...]}) or the columnar form
({"inputs": ...}), with or without a signature name (the export's, or anything), whose
values are strings (plain, base64, long, lone surrogates, control characters), nested
lists and objects, numbers of every size (NaN and 5,000 digits included), booleans and
null; then, sometimes, the bytes are cut short, spliced with random bytes, nested too
deeply, or replaced. Headers vary Content-Type, Content-Encoding and Content-Length (right,
smaller, larger with the client's side closed, or not a number). A few requests go to
other paths and methods.
"""

import base64
import collections
import json
import re
import urllib.parse

from hypothesis import strategies as st

SIGNATURES = ("serving_default", "nbest", "prefix", "constrained", "attention")
INPUT_KEYS = ("inputs", "prefix", "constraints", "outputs", "target_language",
              "source_language", "b64")
WORDS = ("nine", "one hundred and five", "twenty-three", "seven thousand", "", " ",
         "<2de> nine", "__en__ nine", "neun")

Request = collections.namedtuple(
    "Request", "method path headers body half_close instances")

_SURROGATES = st.text(st.characters(min_codepoint=0xD800, max_codepoint=0xDFFF),
                      min_size=1, max_size=3)
_CONTROLS = st.text(st.characters(max_codepoint=0x1F), min_size=1, max_size=5)


@st.composite
def _texts(draw):
  """A string a client may send: a word the model knows, any text, lone surrogates or
  control characters mixed in, or one over the server's sentence limit."""
  kind = draw(st.sampled_from(["word", "any", "surrogate", "control", "long"]))
  if kind == "word":
    return draw(st.sampled_from(WORDS))
  if kind == "any":
    return draw(st.text(max_size=40))
  if kind == "long":
    return draw(st.sampled_from(WORDS[:4])) * draw(st.integers(100, 600))
  odd = draw(_SURROGATES if kind == "surrogate" else _CONTROLS)
  word = draw(st.sampled_from(WORDS))
  cut = draw(st.integers(0, len(word)))
  return word[:cut] + odd + word[cut:]


# A number of n digits, written into the JSON text by _dumps (Python's int() and json.dumps
# refuse over 4,300 digits).
_DIGITS = "@@digits:{}@@"
_NUMBERS = st.one_of(
    st.integers(), st.integers(min_value=-(10 ** 40), max_value=10 ** 40),
    st.floats(allow_nan=True, allow_infinity=True),
    st.sampled_from([2 ** 63, -(2 ** 63) - 1, -1, 0, 7]),
    st.integers(300, 6000).map(_DIGITS.format))
_B64 = st.one_of(
    st.binary(max_size=40).map(lambda b: {"b64": base64.b64encode(b).decode()}),
    st.sampled_from(["nine", "twenty-three"]).map(
        lambda s: {"b64": base64.b64encode(s.encode()).decode()}),
    st.text(max_size=12).map(lambda s: {"b64": s}))
_SCALARS = st.one_of(st.none(), st.booleans(), _NUMBERS, _texts(), _B64)
_VALUES = st.recursive(
    _SCALARS, lambda inner: st.one_of(
        st.lists(inner, max_size=4),
        st.dictionaries(st.one_of(st.sampled_from(INPUT_KEYS), st.text(max_size=8)), inner,
                        max_size=4)), max_leaves=12)


@st.composite
def _instance(draw):
  """One row: a sentence, or an object of named inputs (mostly the signatures' own)."""
  if draw(st.booleans()):
    return draw(st.one_of(_texts(), _texts(), _texts(), _B64, _VALUES))
  keys = draw(st.lists(st.sampled_from(INPUT_KEYS), max_size=3, unique=True))
  if draw(st.integers(0, 9)) == 5:
    keys.append(draw(st.one_of(st.text(max_size=8), _SURROGATES)))
  row = {}
  for key in ["inputs"] + keys:
    if key == "constraints":
      row[key] = draw(st.one_of(st.lists(_texts(), max_size=3), _VALUES))
    else:
      row[key] = draw(st.one_of(_texts(), _texts(), _VALUES))
  return row


@st.composite
def _body(draw):
  """A predict body as a Python object (what is serialized), and its instance count."""
  body = {}
  name = draw(st.one_of(st.none(), st.sampled_from(SIGNATURES + ("", "nope")), _texts(),
                        _VALUES))
  if name is not None:
    body["signature_name"] = name
  rows = draw(st.lists(_instance(), max_size=5))
  form = draw(st.sampled_from(["instances", "instances", "inputs", "inputs-object",
                               "both", "neither", "other"]))
  if form == "instances":
    body["instances"] = rows
  elif form == "inputs":
    body["inputs"] = [r if not isinstance(r, dict) else r.get("inputs") for r in rows]
  elif form == "inputs-object":
    body["inputs"] = draw(st.dictionaries(st.sampled_from(INPUT_KEYS),
                                          st.one_of(st.lists(_texts(), max_size=4), _VALUES),
                                          max_size=3))
  elif form == "both":
    body["instances"], body["inputs"] = rows, rows
  elif form == "other":
    body = draw(_VALUES)
  if isinstance(body, dict) and draw(st.integers(0, 9)) == 5:
    body[draw(st.text(max_size=10))] = draw(_VALUES)
  return body, len(rows) if form == "instances" else None


def _dumps(value, ensure_ascii):
  """JSON text of `value` as bytes: lone surrogates as \\ud800 escapes, or (ensure_ascii
  False) as the invalid UTF-8 their code points would be."""
  text = json.dumps(value, ensure_ascii=ensure_ascii, allow_nan=True)
  text = re.sub(r'"@@digits:(\d+)@@"', lambda m: "9" * int(m.group(1)), text)
  return text.encode("utf-8", errors="surrogatepass")


@st.composite
def _body_bytes(draw):
  """(bytes sent, instance count the server should answer, None when unknown)."""
  body, rows = draw(_body())
  data = _dumps(body, draw(st.booleans()))
  mutation = draw(st.sampled_from(["none"] * 6 + ["cut", "splice", "deep", "bytes", "empty"]))
  if mutation == "cut":
    return data[:draw(st.integers(0, max(len(data) - 1, 0)))], None
  if mutation == "splice":
    at = draw(st.integers(0, len(data)))
    return data[:at] + draw(st.binary(min_size=1, max_size=8)) + data[at:], None
  if mutation == "deep":
    depth = draw(st.integers(100, 100_000))
    return (b'{"instances": ' + b"[" * depth + b'"nine"' + b"]" * depth + b"}"), None
  if mutation == "bytes":
    return draw(st.binary(max_size=64)), None
  if mutation == "empty":
    return b"", None
  return data, rows


def _quoted(text):
  return urllib.parse.quote(text.encode("utf-8", errors="surrogatepass"), safe="/:")


@st.composite
def _path(draw, model):
  """Mostly the model's predict path; sometimes a version, another model, a long version
  number or any text."""
  predict = f"/v1/models/{model}:predict"
  kind = draw(st.sampled_from(["predict"] * 12 + ["version", "other", "digits", "any",
                                                  "metadata"]))
  if kind == "predict":
    return predict
  if kind == "version":
    return f"/v1/models/{model}/versions/{draw(st.sampled_from([7, 0, 8, 2 ** 63]))}:predict"
  if kind == "other":
    return f"/v1/models/{_quoted(draw(_texts()))}:predict"
  if kind == "digits":
    return f"/v1/models/{model}/versions/{'9' * draw(st.integers(18, 6000))}:predict"
  if kind == "metadata":
    return f"/v1/models/{model}/metadata"
  return "/" + _quoted(draw(_texts()))


_HEADER_TEXT = st.text(st.characters(min_codepoint=0x20, max_codepoint=0x7E), max_size=20)


@st.composite
def _well_formed(draw, model):
  """A request the model answers (most of the time): known words and signatures."""
  words = st.sampled_from(WORDS)
  rows = draw(st.lists(words, min_size=1, max_size=4))
  name = draw(st.sampled_from(["serving_default", "nbest", None]))
  form = draw(st.sampled_from(["instances", "inputs", "prefix", "constraints", "b64"]))
  if form == "prefix":
    body = {"instances": [{"inputs": r, "prefix": draw(words)} for r in rows]}
  elif form == "constraints":
    body = {"instances": [{"inputs": r, "constraints": draw(st.lists(words, max_size=2))}
                          for r in rows]}
  elif form == "b64":
    body = {"instances": [{"b64": base64.b64encode(r.encode()).decode()} for r in rows]}
  else:
    body = {form: rows}
  if name and form not in ("prefix", "constraints"):
    body["signature_name"] = name
  return Request("POST", f"/v1/models/{model}:predict", {"Content-Type": "application/json"},
                 _dumps(body, draw(st.booleans())), False,
                 len(rows) if "instances" in body else None)


def requests(model):
  """A Request to a t2t-serve of `model`: a third well-formed, the rest anything."""
  return st.one_of(_well_formed(model), _any_request(model), _any_request(model))


@st.composite
def _any_request(draw, model):
  """Any Request to a t2t-serve of `model`."""
  method = draw(st.sampled_from(["POST"] * 12 + ["GET", "PUT", "DELETE", "PATCH", "OPTIONS"]))
  body, rows = draw(_body_bytes())
  headers = {}
  content_type = draw(st.sampled_from(
      [None, "application/json", "application/json", "text/plain",
       "application/json; charset=latin-1", "other"]))
  if content_type == "other":
    content_type = draw(_HEADER_TEXT)
  if content_type is not None:
    headers["Content-Type"] = content_type
  if draw(st.integers(0, 9)) == 5:  # not 0, which Hypothesis draws most
    headers["Content-Encoding"] = draw(st.sampled_from(["gzip", "br", "identity", "x"]))
  length = draw(st.sampled_from(["right"] * 8 + ["smaller", "larger", "word", "digits"]))
  half_close = False
  if length == "smaller" and body:
    headers["Content-Length"] = str(draw(st.integers(0, len(body) - 1)))
  elif length == "larger":
    headers["Content-Length"] = str(len(body) + draw(st.integers(1, 1000)))
    half_close = True  # the client sends no more: the server must not wait for ever
  elif length == "word":
    headers["Content-Length"] = draw(st.sampled_from(["-1", "12abc", "\u00b2", " 5", "0x10"]))
  elif length == "digits":
    headers["Content-Length"] = "9" * draw(st.integers(19, 5000))
  if draw(st.integers(0, 19)) == 13:  # the body is not in chunks: refused, or waited for
    headers["Transfer-Encoding"] = "chunked"
    half_close = True
  path = draw(_path(model))
  counted = rows if method == "POST" and path.endswith(f"/{model}:predict") and \
      length == "right" and "Transfer-Encoding" not in headers else None
  return Request(method, path, headers, body, half_close, counted)
