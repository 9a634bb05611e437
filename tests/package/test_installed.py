"""The program installed from its wheel, run outside the checkout, as a user runs it.

The wheel (built as tests/package/test_packaging.py builds it) is installed, not editable, into a
fresh venv without pip whose only other path is this venv's site-packages (a .pth line:
the dependencies are reused, nothing is downloaded, and this venv's editable finder for
the checkout is not loaded). Every command runs in an empty directory with the checkout
off the path.
"""

import json
import os
import select
import signal
import subprocess
import sys
import sysconfig
import urllib.request

import pytest

from conftest import SHARED_DATA
from test_packaging import build, copy_source

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

T2T_CKPT = os.path.join(SHARED_DATA, "t2t", "transformer_test_ckpt")
VOCAB_8K = os.path.join(SHARED_DATA, "t2t", "vocab.translate_ende_wmt8k.8192.subwords.gz")


class Installed:
  """A venv holding the built wheel; `run` runs a command in an empty directory."""

  def __init__(self, root, wheel):
    self.venv, self.cwd = str(root / "venv"), str(root / "work")
    os.makedirs(self.cwd)
    subprocess.run([sys.executable, "-m", "venv", "--without-pip", self.venv], check=True)
    site, = [os.path.join(self.venv, "lib", d, "site-packages")
             for d in os.listdir(os.path.join(self.venv, "lib"))]
    paths = sorted({sysconfig.get_paths()["purelib"], sysconfig.get_paths()["platlib"]})
    with open(os.path.join(site, "t2t_test_dependencies.pth"), "w") as f:
      f.write("\n".join(paths) + "\n")
    done = subprocess.run(
        [sys.executable, "-m", "pip", "--python", self.bin("python"), "install", "--no-deps",
         "--no-index", "--ignore-installed", "--no-cache-dir", "--quiet", wheel],
        capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stdout + done.stderr
    self.env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    self.env.update(TF_CPP_MIN_LOG_LEVEL="3", HOME=self.cwd,
                    PATH=os.path.join(self.venv, "bin") + os.pathsep + "/usr/bin:/bin")

  def bin(self, name):
    return os.path.join(self.venv, "bin", name)

  def run(self, *command, timeout=600):
    """subprocess.run of `command` (its first word a script of the venv) in the empty
    directory; the CompletedProcess."""
    return subprocess.run([self.bin(command[0]), *command[1:]], cwd=self.cwd, env=self.env,
                          capture_output=True, text=True, timeout=timeout)

  def ok(self, *command, timeout=600):
    done = self.run(*command, timeout=timeout)
    assert done.returncode == 0, (command, done.stdout[-3000:], done.stderr[-3000:])
    return done.stdout


@pytest.fixture(scope="module")
def installed(tmp_path_factory):
  source = copy_source(into=tmp_path_factory.mktemp("source"))
  wheel, = build(source, tmp_path_factory.mktemp("dist"), "--wheel")
  return Installed(tmp_path_factory.mktemp("installed"), wheel)


def test_the_package_comes_from_the_wheel_not_the_checkout(installed):
  checkout = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
  out = installed.ok("python", "-c", "import json, sys, t2t_keras, t2t_keras.problems, "
                     "t2t_keras.importing.t2t_checkpoint, t2t_keras.hparams as h; "
                     "print(t2t_keras.__file__); print(h.__file__); print(json.dumps(sys.path))")
  package, hparams, path = out.splitlines()
  assert package.startswith(installed.venv) and hparams.startswith(installed.venv), out
  assert checkout not in json.loads(path) and os.getcwd() not in json.loads(path), path


# The binaries test_the_numbers_problem_end_to_end runs (their modules import there).
END_TO_END = ("t2t-datagen", "t2t-trainer", "t2t-decoder", "t2t-exporter", "t2t-serve")


def test_every_binary_answers_version_and_imports_from_the_wheel(installed):
  """--version from each console script before TensorFlow is imported; the modules of the
  binaries the end-to-end test does not run import from the wheel, in one process, with
  absl's --version flag defined. (--help as a process: test_cli.py's
  test_trainer_help_as_a_process; every binary's help text: test_cli.py.)"""
  from t2t_keras import __version__
  from t2t_keras.launcher import BINARIES
  names = list(BINARIES.values())
  assert set(END_TO_END) <= set(names), names
  for name in names:
    version = installed.run(name, "--version")
    assert version.returncode == 0 and version.stderr == "", version
    assert version.stdout.startswith(f"{name} {__version__} (t2t-keras; TensorFlow 2."), version
  modules = [m for m, name in BINARIES.items() if name not in END_TO_END]
  out = installed.ok("python", "-c", (
      "import importlib, sys\n"
      "from absl import flags\n"
      "for m in sys.argv[1:]:\n"
      "  print(importlib.import_module('t2t_keras.bin.' + m).__file__)\n"
      "print('version' in flags.FLAGS)"), *modules)
  *files, has_version = out.splitlines()
  assert len(files) == len(modules) and all(f.startswith(installed.venv) for f in files), out
  assert has_version == "True", out


def test_a_missing_part_is_one_line_naming_it(installed):
  """A broken install (t2t_keras/importing/ gone, as from the setup.py that listed its
  packages) makes t2t-import say so in one line where it imports that part."""
  site = os.path.dirname(os.path.dirname(installed.ok(
      "python", "-c", "import t2t_keras.importing; print(t2t_keras.importing.__file__)")))
  hidden = os.path.join(site, "importing.hidden")
  os.rename(os.path.join(site, "importing"), hidden)
  try:
    done = installed.run("t2t-import", "--t2t_dir=nowhere", "--output_dir=imported")
  finally:
    os.rename(hidden, os.path.join(site, "importing"))
  assert done.returncode == 1 and done.stdout == "", done
  assert done.stderr == ("t2t-import: error: this installation of t2t-keras has no "
                         "t2t_keras.importing: reinstall the package (`pip install "
                         "--force-reinstall --no-deps .` in its source tree, or the same with "
                         "its wheel)\n"), done.stderr


def test_the_numbers_problem_end_to_end(installed):
  """t2t-datagen, t2t-trainer (a few steps), t2t-decoder, t2t-exporter, then t2t-serve
  answering one request on 127.0.0.1, from the installed binaries."""
  from t2t_keras import __version__
  run = "t2t_train/numbers"
  installed.ok("t2t-datagen", "--problem=translate_ende_numbers", "--data_dir=t2t_data",
               "--max_pairs=2000")  # 2,000 of the 40,000 train pairs: 20 steps read fewer
  installed.ok("t2t-trainer", "--problem=translate_ende_numbers", "--data_dir=t2t_data",
               f"--output_dir={run}", "--train_steps=20", "--save_every=20",
               "--eval_bleu_sentences=0",  # the dev BLEU decode: test_trainer.py's
               "--hparams=hidden_size=32,filter_size=64,num_heads=2,batch_size=512,"
               "num_encoder_layers=1,num_decoder_layers=1")
  with open(os.path.join(installed.cwd, run, "run.json")) as f:
    assert json.load(f)["t2t_keras_version"] == __version__
  with open(os.path.join(installed.cwd, "in.txt"), "w") as f:
    f.write("one hundred and five\ntwenty-three\n")
  # jit=false: XLA's compiles (the decoder's, the server's warm-up of every signature) are
  # test_export.py's and test_xla_cache.py's; this test is the installed package's.
  installed.ok("t2t-decoder", f"--output_dir={run}", "--decode_from_file=in.txt",
               "--decode_to_file=out.txt", "--decode_hparams=beam_size=2,jit=false")
  with open(os.path.join(installed.cwd, "out.txt")) as f:
    decoded = f.read().splitlines()
  assert len(decoded) == 2
  library = installed.ok("python", "-c", (  # the Python API from the wheel: the same lines
      "import t2t_keras\n"
      f"t = t2t_keras.load({run!r}, decode_hparams='beam_size=2,jit=false')\n"
      "for r in t.translate(['one hundred and five', 'twenty-three']): print(r.text)"))
  assert library.splitlines() == decoded
  installed.ok("t2t-exporter", f"--output_dir={run}", "--decode_hparams=beam_size=2,jit=false")
  with open(os.path.join(installed.cwd, run, "export", "20", "assets",
                         "export_info.json")) as f:
    assert json.load(f)["t2t_keras_version"] == __version__
  # --max_batch_size=1: the warm-up compiles serving_default for 1 row, not 1 to 32.
  server = subprocess.Popen([installed.bin("t2t-serve"), f"--export_dir={run}", "--port=0",
                             "--max_batch_size=1"],
                            cwd=installed.cwd, env=installed.env, stdout=subprocess.PIPE,
                            stderr=subprocess.PIPE, text=True)
  try:
    ready, _, _ = select.select([server.stdout], [], [], 300)
    line = server.stdout.readline().strip() if ready else ""
    assert line.startswith("t2t-serve: serving translate_ende_numbers version 20 at http://"), (
        line, server.stderr.read() if server.poll() is not None else "")
    url = line.rsplit(" ", 1)[1].rstrip("/")
    request = urllib.request.Request(
        url + "/v1/models/translate_ende_numbers:predict",
        data=json.dumps({"instances": ["one hundred and five"]}).encode(),
        headers={"Content-Type": "application/json"})
    with urllib.request.urlopen(request, timeout=120) as response:
      answer = json.load(response)
    assert len(answer["predictions"]) == 1 and "outputs" in answer["predictions"][0], answer
    with urllib.request.urlopen(url + "/v1/models/translate_ende_numbers/metadata",
                                timeout=120) as response:
      metadata = json.load(response)["metadata"]
    assert metadata["t2t_keras"] == {"server_version": __version__,
                                     "export_version": __version__}
  finally:
    server.send_signal(signal.SIGTERM)
    out, err = server.communicate(timeout=120)
  assert server.returncode == 0 and "t2t-serve: stopped" in out, (out, err[-2000:])


def test_t2t_import_of_the_shared_checkpoint(installed):
  if not (os.path.isdir(T2T_CKPT) and os.path.isfile(VOCAB_8K)):
    pytest.skip(f"{T2T_CKPT} or {VOCAB_8K} is absent (../shared/data)")
  installed.ok("t2t-import", f"--t2t_dir={T2T_CKPT}", f"--vocab={VOCAB_8K}",
               "--output_dir=imported")
  from t2t_keras import __version__
  with open(os.path.join(installed.cwd, "imported", "run.json")) as f:
    assert json.load(f)["t2t_keras_version"] == __version__
  assert os.path.isfile(os.path.join(installed.cwd, "imported", "checkpoint"))
