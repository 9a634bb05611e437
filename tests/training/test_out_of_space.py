"""A write that finds no room: one line, exit 1, nothing half-written under a final name,
what was finished kept, and the same command run again (with room) completes.

The machine's disk cannot be filled safely in a test, so the file size limit stands in
for it (`RLIMIT_FSIZE`, the shell's `ulimit -f`): Python ignores SIGXFSZ, so a write past
the limit fails with EFBIG ("File too large") where a full disk fails with ENOSPC ("No
space left on device"); both, and TensorFlow's own file errors that carry those words,
take the same path (`errors.out_of_space`).
"""

import contextlib
import glob
import os
import resource

import pytest
import tensorflow as tf
from binaries import run_binary
from conftest import make_two_checkpoint_run

import t2t_keras.bin as t2t_bin
from t2t_keras import errors, runs
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.bin import datagen as datagen_bin
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.bin import trainer as trainer_bin

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

PROBLEM = "algorithmic_copy"
TINY = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "batch_size=256,max_length=8")


@contextlib.contextmanager
def file_size_limit(limit_bytes):
  """Files this process writes may not grow past `limit_bytes` (the soft limit; restored)."""
  soft, hard = resource.getrlimit(resource.RLIMIT_FSIZE)
  resource.setrlimit(resource.RLIMIT_FSIZE, (limit_bytes, hard))
  try:
    yield
  finally:
    resource.setrlimit(resource.RLIMIT_FSIZE, (soft, hard))


def _one_line(code, err, name):
  """Exit 1 and one error line (after any progress bar), no traceback."""
  last = err.strip().splitlines()[-1]
  assert code == 1 and "Traceback" not in err and err.count(f"{name}: error:") == 1, err
  assert last.startswith(f"{name}: error: out of space"), err
  assert "File too large" in last and "run the same command again" in last, err


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A 1+1-layer run with checkpoints 7 and 9 (random weights; one layer each side keeps
  its exports short)."""
  return make_two_checkpoint_run(tmp_path_factory.mktemp("run"), num_encoder_layers=1,
                                 num_decoder_layers=1)


def test_the_message_of_each_kind_of_full_write():
  assert "No space left on device" in errors.out_of_space(OSError(28, "No space left on device",
                                                                  "/d/f"))
  assert " writing /d/f: File too large" in errors.out_of_space(OSError(27, "File too large",
                                                                        "/d/f"))
  assert "out of space: /x/ckpt-2.data; No space left on device" in errors.out_of_space(
      tf.errors.ResourceExhaustedError(None, None, "/x/ckpt-2.data; No space left on device"))
  assert errors.out_of_space(OSError(2, "No such file")) is None
  assert errors.out_of_space(ValueError("bad")) is None


def test_the_message_of_a_refused_access():
  line = errors.cannot_write(PermissionError(13, "Permission denied", "/d/f"))
  assert line.startswith("permission denied on /d/f: Permission denied. Give this user access")
  assert errors.cannot_write(OSError(30, "Read-only file system", "/d/f")).startswith(
      "permission denied on /d/f: Read-only file system.")
  assert errors.cannot_write(tf.errors.PermissionDeniedError(
      None, None, "/x/checkpoint.tmp1; Permission denied")).startswith(
          "permission denied: /x/checkpoint.tmp1; Permission denied.")
  assert errors.cannot_write(OSError(28, "No space left on device", "/d/f")).startswith(
      "out of space writing /d/f")
  assert errors.permission_denied(errors.InputError("x is not writable (Permission denied)")) \
      is None
  assert errors.cannot_write(OSError(2, "No such file or directory", "/d/f")) is None


def test_memory_run_out_is_one_line(capsys):
  """Sizes no allocation can hold (found by test_fuzz_inputs.py's strings: the decoder with
  extra_length=99999999999 stopped on TensorFlow's ResourceExhaustedError, a traceback):
  one line naming the allocation and what to lower; a full disk keeps its own line."""
  oom = tf.errors.ResourceExhaustedError(None, None, "Graph execution error:\n\nOOM when "
                                         "allocating tensor with shape[4,99999999999]")
  line = errors.out_of_memory(oom)
  assert line.startswith("out of memory: OOM when allocating tensor with shape[4,99999999999]. "
                         "Ask for less at once (the decoder: --decode_hparams batch_size,")
  assert errors.out_of_memory(MemoryError()).startswith("out of memory: MemoryError.")
  assert errors.out_of_memory(ValueError("memory")) is None

  def main(argv):
    raise oom

  assert t2t_bin.run_main(main, "t2t-decoder", ["t2t-decoder"]) == 1
  assert capsys.readouterr().err == f"t2t-decoder: error: {line}\n"


def test_exporter(capsys, tiny_run, tmp_path):
  with file_size_limit(100_000):  # the vocabulary (240 KB) does not fit
    code, _, err = run_binary(capsys, exporter_bin, f"--output_dir={tiny_run}",
                              f"--export_dir={tmp_path}/export")
  _one_line(code, err, exporter_bin.NAME)
  assert os.listdir(tmp_path / "export") == []  # no version, no temporary directory
  code, out, err = run_binary(capsys, exporter_bin, f"--output_dir={tiny_run}",
                              f"--export_dir={tmp_path}/export")
  assert code == 0 and out.strip().endswith(f"{tmp_path}/export/9"), err


def test_ctranslate2_export(capsys, tiny_run, tmp_path):
  pytest.importorskip("ctranslate2", reason="the [ctranslate2] extra is not installed")
  args = [f"--output_dir={tiny_run}", f"--export_dir={tmp_path}/ct2", "--format=ctranslate2"]
  with file_size_limit(50_000):  # the vocabulary (240 KB) and model.bin do not fit
    code, _, err = run_binary(capsys, exporter_bin, *args)
  _one_line(code, err, exporter_bin.NAME)
  assert not (tmp_path / "ct2").exists()  # no model directory, no temporary one
  assert [n for n in os.listdir(tmp_path) if n.startswith(".ct2-")] == []
  code, _, err = run_binary(capsys, exporter_bin, *args)
  assert code == 0 and (tmp_path / "ct2" / "model.bin").exists(), err


def test_avg_all(capsys, tiny_run, tmp_path):
  args = [f"--model_dir={tiny_run}", f"--output_dir={tmp_path}/avg", "--n=2"]
  with file_size_limit(20_000):  # the averaged weights (about 58 KB) do not fit
    code, _, err = run_binary(capsys, avg_all_bin, *args)
  _one_line(code, err, avg_all_bin.NAME)
  assert tf.train.latest_checkpoint(str(tmp_path / "avg")) is None
  assert not glob.glob(str(tmp_path / "avg" / "*.index"))
  code, out, err = run_binary(capsys, avg_all_bin, *args)
  assert code == 0 and tf.train.latest_checkpoint(str(tmp_path / "avg")), out + err


def test_decoder(capsys, tiny_run, tmp_path):
  source = tmp_path / "in.txt"
  source.write_text("one hundred and five\ntwenty-three\nnine\n" * 100)
  args = [f"--output_dir={tiny_run}", f"--decode_from_file={source}",
          f"--decode_to_file={tmp_path}/out.txt", "--decode_hparams=beam_size=1,jit=false"]
  with file_size_limit(1_000):  # 300 translations do not fit in 1,000 bytes
    code, _, err = run_binary(capsys, decoder_bin, *args)
  _one_line(code, err, decoder_bin.NAME)
  assert sorted(os.listdir(tmp_path)) == ["in.txt"]  # no output, no temporary file
  code, _, err = run_binary(capsys, decoder_bin, *args)
  assert code == 0 and len((tmp_path / "out.txt").read_text().splitlines()) == 300, err


def test_datagen_then_the_trainer(capsys, tmp_path):
  """datagen: no shard under its final name until it is whole; run again, it finishes. The
  trainer: the checkpoints written before are kept; run again, it resumes from them."""
  data = str(tmp_path / "data")
  gen = [f"--problem={PROBLEM}", f"--data_dir={data}", "--num_concurrent_processes=1"]
  with file_size_limit(30_000):
    code, _, err = run_binary(capsys, datagen_bin, *gen)
  _one_line(code, err, datagen_bin.NAME)
  assert not glob.glob(os.path.join(data, "*-train-*.tfrecord")), os.listdir(data)
  code, _, err = run_binary(capsys, datagen_bin, *gen)
  assert code == 0, err

  run = str(tmp_path / "run")
  train = [f"--output_dir={run}", f"--problem={PROBLEM}", f"--data_dir={data}",
           f"--hparams={TINY}", "--save_every=2", "--eval_every=0", "--eval_bleu_sentences=0"]
  code, _, err = run_binary(capsys, trainer_bin, *train, "--train_steps=2")
  assert code == 0, err
  size = os.path.getsize(os.path.join(run, "ckpt-2.data-00000-of-00001"))
  with file_size_limit(size // 2):
    code, _, err = run_binary(capsys, trainer_bin, *train, "--train_steps=4")
  _one_line(code, err, trainer_bin.NAME)
  assert tf.train.latest_checkpoint(run).endswith("ckpt-2")
  code, out, err = run_binary(capsys, trainer_bin, *train, "--train_steps=4")
  assert code == 0 and f"resumed from {run}/ckpt-2 at step 2" in out, out + err
  assert tf.train.latest_checkpoint(run).endswith("ckpt-4")


def test_t2t_import(capsys, tmp_path):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import t2t_checkpoint_writer as writer  # pylint: disable=import-outside-toplevel
  from t2t_keras.bin import t2t_import as import_bin  # pylint: disable=import-outside-toplevel
  hp = dict(writer.BASE, hidden_size=8, filter_size=16, num_heads=2, num_hidden_layers=1,
            symbol_modality_num_shards=2)
  writer.write_t2t_dir(str(tmp_path / "t2t"), hp, np.random.default_rng(0), target_space=5)
  args = [f"--t2t_dir={tmp_path / 't2t'}", f"--output_dir={tmp_path / 'run'}"]
  size = os.path.getsize(glob.glob(str(tmp_path / "t2t" / "model.ckpt-*.data-*"))[0])
  with file_size_limit(size // 4):
    code, _, err = run_binary(capsys, import_bin, *args)
  _one_line(code, err, import_bin.NAME)
  assert not (tmp_path / "run" / runs.RUN_FILE).exists()  # no run: the same import runs again
  code, _, err = run_binary(capsys, import_bin, *args)
  assert code == 0 and runs.load(str(tmp_path / "run")).info["imported_from"], err
