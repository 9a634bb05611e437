"""What a user hands the binaries, generated (Hypothesis, tests/fuzz_inputs.py): t2t-decoder's
input files, and `--hparams` / `--decode_hparams` strings (docs/decoding.md states what each
may hold). A file is translated line for line (one output line per input line, CRLF read
as LF, an empty line as an empty line) or refused in one line naming the file and the
first line that is not UTF-8; a flag string is taken or refused in one line naming the
key; never a traceback. In process through the decoder's own functions, then a sample
through real t2t-decoder processes.

    T2T_FUZZ_FILES=1000 T2T_FUZZ_FLAGS=1000 T2T_FUZZ_PROCESSES=20 \
        ./run_tests.sh tests/decoding/test_fuzz_inputs.py -s
"""

import os
import subprocess
import sys

import pytest
from binaries import run_binary
from fuzz_inputs import input_files, line_count, override_strings
from hypothesis import HealthCheck, given, seed, settings
from hypothesis import strategies as st
from serve_process import DECODE, QUIET, exported_tiny_run

from t2t_keras import registry, runs
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.decoding import files
from t2t_keras.decoding.settings import DEFAULTS, parse_decode_hparams
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.errors import InputError

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

FILES = int(os.environ.get("T2T_FUZZ_FILES", "40"))
FLAG_STRINGS = int(os.environ.get("T2T_FUZZ_FLAGS", "300"))
PROCESSES = int(os.environ.get("T2T_FUZZ_PROCESSES", "1"))
SEED = int(os.environ.get("T2T_FUZZ_SEED", "1"))
MESSAGE_CHARS = 600  # a refusal's bound: the key, a shortened value, the keys it knows
FUZZ = dict(deadline=None, database=None, suppress_health_check=list(HealthCheck),
            print_blob=True)


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return exported_tiny_run(tmp_path_factory)


@pytest.fixture(scope="module")
def loaded(run_dir):
  """(model, vocab, training hparams, problem, settings, search) of the shared tiny run."""
  model, vocab, hparams, info, _ = runs.load(run_dir)
  decode = parse_decode_hparams(DECODE)
  return (model, vocab, hparams, info["problem"], decode,
          DecodingSpec(None, decode).search_fn(model, vocab))


def first_bad_line(data):
  """The 1-based number of the first line of `data` that is not UTF-8, or None."""
  for number, line in enumerate(data.split(b"\n"), start=1):
    try:
      line.decode("utf-8")
    except UnicodeDecodeError:
      return number
  return None


def assert_one_line(message, known=()):
  """One line, quoting the user's text shortened: at most MESSAGE_CHARS beside the list of
  the `known` names an unknown one is answered with."""
  bound = MESSAGE_CHARS + len(", ".join(known))
  assert message and "\n" not in message and len(message) <= bound, message
  assert "Traceback" not in message, message


def test_generated_input_files_translate_line_for_line_or_name_the_line(loaded, tmp_path):
  model, vocab, _, _, decode, search = loaded
  count = [0]

  @settings(max_examples=FILES, **FUZZ)
  @seed(SEED)
  @given(data=input_files())
  def one(data):
    count[0] += 1
    source, output = tmp_path / f"in{count[0]}.txt", tmp_path / f"out{count[0]}.txt"
    source.write_bytes(data)
    bad = first_bad_line(data)
    try:
      files.decode_file(model, vocab, files.InputFiles(str(source)), decode,
                        files.Outputs(str(output), progress=False), search, log=lambda _: None)
    except InputError as e:
      assert bad is not None, (data, e)
      assert str(e).startswith(f"{source}:{bad}: invalid UTF-8"), (data, e)
      assert_one_line(str(e))
      assert not output.exists()
      return
    assert bad is None, data
    written = output.read_bytes()
    assert written.count(b"\n") == line_count(data), (data, written)
    for source, translation in zip(data.split(b"\n"), written.split(b"\n")):
      if not source.rstrip(b"\r"):
        assert translation == b"", (data, written)  # an empty line: an empty line

  try:
    one()
  finally:
    print(f"fuzz seed {SEED}: {count[0]} input files")


def _refusal(text, parse, known):
  """None where parse(text) succeeds, else its InputError's message, checked to be one line
  naming a key or the item."""
  try:
    parse(text)
  except InputError as e:
    assert_one_line(str(e), known)
    return str(e)
  return None


def test_generated_flag_strings_are_taken_or_refused_in_one_line(capsys, run_dir, loaded,
                                                                 tmp_path):
  """In process: the parsers, then each refused string through the binary's run function,
  which prints the same line and writes nothing (it refuses before loading anything)."""
  _, _, hparams, problem, _, _ = loaded
  tiny = registry.hparams("transformer_tiny")
  counts = {"taken": 0, "refused": 0}
  source, never = tmp_path / "in.txt", tmp_path / "never"
  source.write_text("nine\n")
  binaries = (
      (decoder_bin, lambda t: [f"--decode_hparams={t}", f"--output_dir={run_dir}",
                               f"--decode_from_file={source}", f"--decode_to_file={never}"]),
      (trainer_bin, lambda t: [f"--hparams={t}", f"--output_dir={never}",
                               "--problem=translate_ende_numbers", f"--data_dir={never}"]))

  @settings(max_examples=FLAG_STRINGS, **FUZZ)
  @seed(SEED)
  @given(decode=override_strings(DEFAULTS.values()), train=override_strings(tiny.values()))
  def one(decode, train):
    for text, parse, known, (binary, flags) in (
        (decode, lambda t: DecodingSpec.for_run(problem, t, hparams), DEFAULTS.values(),
         binaries[0]),
        (train, tiny.override, tiny.values(), binaries[1])):
      message = _refusal(text, parse, known)
      counts["taken" if message is None else "refused"] += 1
      if message is not None:
        code, _, err = run_binary(capsys, binary, *flags(text))
        assert (code, err) == (1, f"{binary.NAME}: error: {message}\n"), (text, err)
        assert not never.exists(), text

  try:
    one()
  finally:
    print(f"fuzz seed {SEED}: flag strings {counts}")
  assert counts["taken"] and counts["refused"], counts  # the generator reaches both sides


def test_a_sample_through_real_decoder_processes(run_dir, tmp_path):
  """The same generators through `python -m t2t_keras.bin.decoder`: exit 0 with a line per
  input line, or exit 1 with one line on stderr; no traceback."""
  count = [0]

  @settings(max_examples=PROCESSES, **FUZZ)
  @seed(SEED)
  @given(data=input_files(), extra=override_strings(["alpha", "batch_size", "return_beams",
                                                     "num_samples", "beam_size"]),
         engine=st.just("tensorflow"))
  def one(data, extra, engine):
    count[0] += 1
    source, output = tmp_path / f"in{count[0]}.txt", tmp_path / f"out{count[0]}.txt"
    source.write_bytes(data)
    done = subprocess.run(
        [sys.executable, "-m", "t2t_keras.bin.decoder", f"--output_dir={run_dir}",
         f"--decode_from_file={source}", f"--decode_to_file={output}", f"--engine={engine}",
         f"--decode_hparams={DECODE},{extra}"],
        env=QUIET, capture_output=True, text=True, errors="replace", timeout=600)
    assert "Traceback" not in done.stderr, done.stderr[-3000:]
    if done.returncode == 0:
      assert output.read_bytes().count(b"\n") == line_count(data), (data, extra)
    else:
      assert done.returncode == 1, (done.returncode, done.stderr[-3000:])
      lines = [l for l in done.stderr.splitlines() if l.strip() and "%|" not in l]
      assert len(lines) == 1, (data, extra, done.stderr[-3000:])

  try:
    one()
  finally:
    print(f"fuzz seed {SEED}: {count[0]} decoder processes")
