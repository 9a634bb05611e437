"""docs/library.md's Python blocks run as written, one after another in one namespace, in a
directory where t2t_train/numbers_tiny is a run (conftest's tiny run, random weights); a
block after the comment "not run by the page's test" names the test that covers it. The
page's searches run without XLA (`t2t_keras.load` given "jit=false" under what the page
passes): what the page shows does not depend on it, and each search's XLA program is the
decoding tests' (tests/decoding/)."""

import functools
import os

import pytest
from conftest import make_tiny_run

pytestmark = pytest.mark.heavy

PAGE = os.path.join(os.path.dirname(__file__), "..", "..", "docs", "library.md")
SKIP = "<!-- not run by the page's test: "


def blocks():
  """(python source, run?) of each ```python block of the page, in order."""
  found, lines = [], open(PAGE, encoding="utf-8").read().split("\n")
  for i, line in enumerate(lines):
    if line == "```python":
      end = lines.index("```", i + 1)
      found.append(("\n".join(lines[i + 1:end]), not (i and lines[i - 1].startswith(SKIP))))
  return found


def test_the_pages_blocks_run_as_written(tmp_path, monkeypatch, capsys):
  found = blocks()
  assert len(found) == 4 and [run for _, run in found] == [True, True, True, False]
  skipped = [source for source, run in found if not run]
  assert all("t2t_keras.train(" in source for source in skipped)  # test_main_job's call
  (tmp_path / "t2t_train" / "numbers_tiny").mkdir(parents=True)
  make_tiny_run(tmp_path / "t2t_train" / "numbers_tiny", num_encoder_layers=1,
                num_decoder_layers=1)
  monkeypatch.chdir(tmp_path)
  import t2t_keras  # pylint: disable=import-outside-toplevel
  monkeypatch.setattr(t2t_keras, "load", functools.partial(t2t_keras.load,
                                                           decode_hparams="jit=false"))
  namespace = {}
  for source, run in found:
    if run:
      exec(compile(source, PAGE, "exec"), namespace)  # pylint: disable=exec-used
  printed = capsys.readouterr().out.splitlines()
  assert printed[-1] == "4", printed  # the settings' beam_size after a call with 8
  assert len(printed) == 4  # the first print, an n-best line for each of two lines, the beam
  attention = namespace["attention"]
  assert attention.weights.shape[:2] == (1, 2)  # 1 decoder layer, 2 heads
  assert attention.source_pieces[-1] == attention.target_pieces[-1] == "</s>"
