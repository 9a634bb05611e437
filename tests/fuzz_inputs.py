"""Hypothesis strategies for what a user hands the binaries: t2t-decoder's input files and
the `--hparams` / `--decode_hparams` strings (tests/decoding/test_fuzz_inputs.py).

    input_files()         # -> bytes of a file: words, empty and long lines, NUL bytes,
                          #    control characters, CRLF and lone CR, a BOM, invalid UTF-8
    override_strings(keys)  # -> "a=1,b=x": known keys and others, values of every kind
"""

from hypothesis import strategies as st

WORDS = ("nine", "one hundred and five", "twenty-three", "seven thousand", "neun", "<2de>",
         "__en__", "x" * 40)

_LINE_PARTS = st.one_of(
    st.sampled_from(WORDS).map(str.encode),
    st.text(max_size=20).map(lambda s: s.encode("utf-8")),
    st.sampled_from([b"\x00", b"\r", b"\t", b"\x0c", b"\x1b[31m", "\u2028".encode(),
                     "\ufeff".encode(), " ".encode(), b"\xff", b"\xc3", b"\xed\xa0\x80",
                     b"\xf4\x90\x80\x80"]),
    st.integers(50, 400).map(lambda n: b"nine " * n))  # past the model's input length


@st.composite
def input_files(draw):
  """A source file's bytes: up to 8 lines of parts, each ended by LF or CRLF, the last
  sometimes by nothing."""
  lines = draw(st.lists(st.lists(_LINE_PARTS, max_size=4).map(b"".join), max_size=8))
  endings = [draw(st.sampled_from([b"\n", b"\n", b"\r\n"])) for _ in lines]
  if lines and draw(st.booleans()):
    endings[-1] = b""
  data = b"".join(line + end for line, end in zip(lines, endings))
  if draw(st.integers(0, 9)) == 5:
    data = "\ufeff".encode() + data
  return data


def line_count(data):
  """The lines a file of `data` holds: its LF-separated lines, the last counted when it
  has text without an ending."""
  if not data:
    return 0
  return data.count(b"\n") + (0 if data.endswith(b"\n") else 1)


_NUMBER_TEXT = st.one_of(
    st.integers().map(str), st.floats().map(repr),
    st.sampled_from(["nan", "inf", "-inf", "1e400", "-0", "0x10", "1_000", "\u0665",
                     "9" * 30, "9" * 5000, "true", "False", "", " 4 ", "4,5"]))
_TEXT = st.text(max_size=12)


@st.composite
def override_strings(draw, keys):
  """A t2t-style "key=value,..." string: keys mostly from `keys`, values of any type."""
  items = []
  for _ in range(draw(st.integers(0, 4))):
    key = draw(st.one_of(st.sampled_from(sorted(keys)), st.sampled_from(sorted(keys)), _TEXT))
    value = draw(st.one_of(_NUMBER_TEXT, _TEXT, st.sampled_from(["", "=", "a=b"])))
    form = draw(st.sampled_from(["pair", "pair", "pair", "bare", "empty"]))
    items.append(f"{key}={value}" if form == "pair" else key if form == "bare" else "")
  return draw(st.sampled_from([",", ", ", ",,"])).join(items)
