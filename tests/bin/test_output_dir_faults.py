"""An output directory that turns read-only, or is removed, while a binary runs: one line and
exit 1 where the output cannot be written (nothing written elsewhere, the earlier
checkpoints kept), and the same command run again completes.

The binaries run as their own processes. The tests run as root on most machines, whom
permission bits do not stop: the child then runs as root without the two capabilities that
override them (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH, dropped from its bounding set before
exec), so a directory at mode 0555 refuses its writes as it would a user's. "Mid-run" is a
chosen point: the trainer's first checkpoint on disk (its `checkpoint` index written); for
the decoder, its input read from a FIFO, which the test feeds only after changing the
directory (the decoder has loaded the model and is waiting for its input).
"""

import ctypes
import errno
import glob
import os
import shutil
import subprocess
import sys
import time

import pytest
from binaries import run_binary
from conftest import make_two_checkpoint_run

from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.data import datagen

pytestmark = pytest.mark.heavy

PROBLEM = "algorithmic_copy"
TINY = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "batch_size=256,max_length=8")
QUIET = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
PR_CAPBSET_DROP, CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH = 24, 1, 2


def _without_permission_override():
  """Run in the child before exec: root loses the capabilities that ignore permissions."""
  libc = ctypes.CDLL(None, use_errno=True)
  for cap in (CAP_DAC_OVERRIDE, CAP_DAC_READ_SEARCH):
    if libc.prctl(PR_CAPBSET_DROP, cap, 0, 0, 0) != 0:
      raise OSError(ctypes.get_errno(), "prctl(PR_CAPBSET_DROP) failed")


def start(module, *args, **kwargs):
  """`python -m module args` as a process that permission bits stop (see the docstring)."""
  preexec = _without_permission_override if os.geteuid() == 0 else None
  return subprocess.Popen([sys.executable, "-m", module, *args], env=QUIET, text=True,
                          stdout=subprocess.PIPE, stderr=subprocess.PIPE, preexec_fn=preexec,
                          **kwargs)


@pytest.fixture(scope="module", autouse=True)
def permissions_stop_a_child(tmp_path_factory):
  """Skips the module where a child cannot be made to obey permission bits."""
  locked = tmp_path_factory.mktemp("locked")
  os.chmod(locked, 0o555)
  try:
    proc = start("os")  # `python -m os` does nothing; checks that the child starts
    proc.communicate(timeout=60)
    probe = subprocess.run(
        [sys.executable, "-c", f"open({str(locked / 'x')!r}, 'w')"], capture_output=True,
        preexec_fn=_without_permission_override if os.geteuid() == 0 else None, check=False)
  except OSError as e:
    pytest.skip(f"a child process cannot drop root's permission override here ({e})")
  finally:
    os.chmod(locked, 0o755)
  if probe.returncode == 0:
    pytest.skip("a directory at mode 0555 does not stop this machine's child processes")


def _one_line(code, err, name):
  """Exit 1 and one error line, the last (after any progress bar); no traceback."""
  last = err.strip().splitlines()[-1]
  assert code == 1 and "Traceback" not in err and err.count(f"{name}: error:") == 1, err
  assert last.startswith(f"{name}: error: "), err
  return last


def _checkpoints(run):
  return sorted(int(p.rsplit("-", 1)[1][:-len(".index")])
                for p in glob.glob(os.path.join(run, "ckpt-*.index")))


def test_trainer_output_dir_turning_read_only(capsys, tmp_path):
  data, run = str(tmp_path / "data"), str(tmp_path / "run")
  datagen.generate(PROBLEM, data, log=None, num_train=300, num_dev=20, num_test=20,
                   max_length=6, num_symbols=5)
  flags = [f"--output_dir={run}", f"--problem={PROBLEM}", f"--data_dir={data}",
           f"--hparams={TINY}", "--save_every=2", "--eval_every=0", "--eval_bleu_sentences=0"]
  proc = start("t2t_keras.bin.trainer", *flags, "--train_steps=1000000")
  try:
    deadline = time.time() + 120
    while not os.path.exists(os.path.join(run, "checkpoint")) and proc.poll() is None:
      assert time.time() < deadline, "no checkpoint in 120 s"
      time.sleep(0.05)
    os.chmod(run, 0o555)
    _, err = proc.communicate(timeout=120)
  finally:
    proc.kill()
    os.chmod(run, 0o755)
  line = _one_line(proc.returncode, err, "t2t-trainer")
  assert line.startswith("t2t-trainer: error: permission denied: ") and run in line, line
  assert "Permission denied" in line and "run the same command again" in line, line
  kept = _checkpoints(run)
  assert kept and not glob.glob(os.path.join(run, "*temp*")), os.listdir(run)

  code, out, err = run_binary(capsys, trainer_bin, *flags, f"--train_steps={kept[-1] + 2}")
  assert code == 0, err
  assert f"resumed from {run}/ckpt-{kept[-1]} at step {kept[-1]}" in out, out
  assert _checkpoints(run)[-1] == kept[-1] + 2


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  return make_two_checkpoint_run(tmp_path_factory.mktemp("run"), num_encoder_layers=1,
                                 num_decoder_layers=1)


SOURCES = "one hundred and five\ntwenty-three\nnine\n"


def _decode_from_fifo(tmp_path, tiny_run, out_file, change):
  """The decoder reading a FIFO: `change()` runs once it has loaded the model and opened its
  input; then the sources are fed. Returns (code, stdout, stderr)."""
  fifo = str(tmp_path / "sources.fifo")
  os.mkfifo(fifo)
  proc = start("t2t_keras.bin.decoder", f"--output_dir={tiny_run}",
               f"--decode_from_file={fifo}", f"--decode_to_file={out_file}",
               "--decode_hparams=beam_size=1,jit=false")
  try:
    deadline = time.time() + 120
    while proc.poll() is None:  # until the decoder opens its input (or exits: an error)
      try:
        fd = os.open(fifo, os.O_WRONLY | os.O_NONBLOCK)
      except OSError as e:
        if e.errno != errno.ENXIO:  # ENXIO: no reader yet
          raise
        assert time.time() < deadline, "the decoder did not open its input in 120 s"
        time.sleep(0.05)
        continue
      change()
      os.set_blocking(fd, True)
      os.write(fd, SOURCES.encode())
      os.close(fd)
      break
    out, err = proc.communicate(timeout=120)
  finally:
    proc.kill()
  return proc.returncode, out, err


def test_decoder_output_dir_turning_read_only(tmp_path, tiny_run):
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  try:
    code, out, err = _decode_from_fifo(tmp_path, tiny_run, out_dir / "out.txt",
                                       lambda: os.chmod(out_dir, 0o555))
  finally:
    os.chmod(out_dir, 0o755)
  line = _one_line(code, err, "t2t-decoder")
  assert f"{out_dir}/out.txt" in line and "not writable" in line, line
  assert "the 3 translations are not written" in line and "run the same command" in line, line
  assert "decoded 3 sentences" in out, out
  assert os.listdir(out_dir) == []  # nothing half-written
  assert sorted(os.listdir(tmp_path)) == ["out", "sources.fifo"]  # nor elsewhere


def test_decoder_output_dir_read_only_from_the_start_fails_before_decoding(tmp_path,
                                                                            tiny_run):
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  (tmp_path / "in.txt").write_text(SOURCES)
  os.chmod(out_dir, 0o555)
  try:
    proc = start("t2t_keras.bin.decoder", f"--output_dir={tiny_run}",
                 f"--decode_from_file={tmp_path}/in.txt", f"--decode_to_file={out_dir}/out.txt",
                 "--decode_hparams=beam_size=1,jit=false")
    out, err = proc.communicate(timeout=120)
  finally:
    os.chmod(out_dir, 0o755)
  line = _one_line(proc.returncode, err, "t2t-decoder")
  assert f"{out_dir}/out.txt" in line and "not writable" in line, line
  assert "loaded" not in out, out  # refused before the model loads
  assert os.listdir(out_dir) == []


def test_decoder_output_dir_removed_writes_the_translations_where_asked(tmp_path, tiny_run):
  """The output file's directory is made again (as for any new path): nothing lost."""
  out_dir = tmp_path / "out"
  out_dir.mkdir()
  code, out, err = _decode_from_fifo(tmp_path, tiny_run, out_dir / "out.txt",
                                     lambda: shutil.rmtree(out_dir))
  assert code == 0, err
  assert len((out_dir / "out.txt").read_text().splitlines()) == 3
  assert sorted(os.listdir(out_dir)) == ["out.txt"]

