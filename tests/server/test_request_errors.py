"""What the server says of a bad request: quoting.py's escaping and cutting, and the parsers'
messages (rest.py, paths.py) that quote user input, each a 400 rather than a 500."""

import json

import pytest

from t2t_keras.server.paths import PathError, parse
from t2t_keras.server.quoting import printable, shown, shown_names
from t2t_keras.server.rest import BadRequest, Limits, parse_body, parse_predict


def test_printable_escapes_what_could_end_a_line_or_break_utf8():
  assert printable("a\nb\\c\x7f") == "a\\x0ab\\x5cc\\x7f"
  assert printable("\ud800") == "\\ud800"
  assert printable("\u2028") == "\\u2028"  # a line separator
  assert printable("\U000e0001") == "\\U000e0001"  # a format character outside the BMP
  assert printable("Grüße, 日本 ✓") == "Grüße, 日本 ✓"  # printable text is kept


def test_shown_cuts_at_the_limit_and_says_how_long_it_was():
  assert shown("x" * 80) == "x" * 80
  assert shown("x" * 81) == "x" * 80 + "... (81 characters)"
  assert shown("\ud800" * 100, limit=2) == "\\ud800\\ud800... (100 characters)"
  assert shown(["a"]) == "<list>"


def test_shown_names_sorts_quotes_and_counts_the_rest():
  assert shown_names(["b", "a"]) == "['a', 'b']"
  assert shown_names([str(i) for i in range(10)], most=3) == "['0', '1', '2', ... 7 more]"
  assert shown_names(["\udc00"]) == "['\\udc00']"


@pytest.mark.parametrize("body, message", [
    ({"instances": ["a"], "x" * 500: 1}, "unknown field '" + "x" * 80 + "... (500 characters)'"),
    ({"instances": ["a"], "\ud800": 1}, "unknown field '\\ud800'"),
])
def test_request_fields_are_quoted_shortened(body, message):
  with pytest.raises(BadRequest) as e:
    parse_body(json.dumps(body).encode())
  assert str(e.value).startswith(message), str(e.value)
  str(e.value).encode("utf-8")  # no lone surrogate: the answer can be encoded


def test_instance_keys_are_quoted_shortened():
  keys = {f"k{i}\n": "x" for i in range(20)}
  with pytest.raises(BadRequest) as e:
    parse_predict({"instances": [dict(inputs="a", **keys)]}, ["inputs"], Limits())
  assert str(e.value).startswith("instance 0 has inputs ['inputs', 'k0\\x0a', 'k1\\x0a', 'k10\\x0a', ")
  assert "... 13 more]" in str(e.value) and "\n" not in str(e.value)


def test_paths_quote_names_and_long_versions():
  with pytest.raises(PathError, match=r"Latest\(a\\x0ab\)"):
    parse("GET", "models/a\nb", "m", [1])
  with pytest.raises(PathError) as e:
    parse("GET", "models/m/versions/" + "9" * 5000, "m", [1])  # int() refuses 4,301 digits
  assert (e.value.status, str(e.value)) == (
      400, f"Failed to convert version: {'9' * 80}... (5000 characters) to numeric.")
  assert parse("GET", "models/m/versions/" + "0" * 30 + "1", "m", [1]).version == 1


def test_base64_beyond_ascii_is_a_bad_request():
  """Found by test_fuzz_server.py: base64.b64decode raises ValueError (not binascii.Error)
  for a character beyond ASCII, which the server answered 500."""
  with pytest.raises(BadRequest, match=r"instance 0: invalid base64 \(string argument should "
                                       r"contain only ASCII characters\)"):
    parse_predict({"instances": [{"b64": "\u0080"}]}, ["inputs"], Limits())
