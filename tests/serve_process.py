"""A t2t-serve process on 127.0.0.1 for the tests, and plain HTTP calls to it."""

import json
import os
import select
import shutil
import signal
import subprocess
import sys
import urllib.error
import urllib.request

import session_shared

MODEL = "translate_ende_numbers"  # the tiny run's problem: the default model name
DECODE = "beam_size=2,extra_length=4,batch_size=4,jit=false"
MAX_LENGTH = 12
QUIET = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


class Server:
  """A t2t-serve process on a free port (it binds port 0 and prints the one it got)."""

  def __init__(self, export_dir, log_path, *flags, preexec_fn=None):
    self.log_path = log_path
    self.log = open(log_path, "w")
    self.proc = subprocess.Popen(
        [sys.executable, "-m", "t2t_keras.bin.serve", f"--export_dir={export_dir}",
         "--port=0", *flags], stdout=subprocess.PIPE, stderr=self.log, text=True, env=QUIET,
        preexec_fn=preexec_fn)
    self.ready_line = self._read_line(300)
    assert self.ready_line.startswith(f"t2t-serve: serving {MODEL} version 7 at http://"), (
        self.ready_line, open(log_path).read()[-3000:])
    self.url = self.ready_line.rsplit(" ", 1)[1].rstrip("/")
    self.port = int(self.url.rsplit(":", 1)[1])

  @classmethod
  def for_module(cls, export_dir, tmp_path_factory, *flags, preexec_fn=None):
    """A module fixture's body: the server, yielded, then stopped and checked to have
    exited cleanly (`yield from Server.for_module(...)`)."""
    server = cls(export_dir, str(tmp_path_factory.mktemp("log") / "serve.log"), *flags,
                 preexec_fn=preexec_fn)
    yield server
    status, out = server.stop()
    assert status == 0 and "t2t-serve: stopped" in out, out

  def _read_line(self, timeout):
    ready, _, _ = select.select([self.proc.stdout], [], [], timeout)
    return self.proc.stdout.readline().strip() if ready else ""

  def stop(self, signalled=False):
    """SIGTERM (unless already sent); returns (exit status, the rest of stdout)."""
    if not signalled:
      self.proc.send_signal(signal.SIGTERM)
    out, _ = self.proc.communicate(timeout=120)
    self.log.close()
    return self.proc.returncode, out


def exported_tiny_run(tmp_path_factory, **run_kwargs):
  """conftest's tiny run (MAX_LENGTH, 1+1 layers, then `run_kwargs`) exported with DECODE as
  version 7;
  returns its directory. The plain run (no `run_kwargs`) is made once and shared by the
  pytest-xdist workers of a session (in run_tests.sh's $T2T_TEST_SHARED, else the session's
  base directory): a file lock; the first worker builds it in a temporary directory and
  renames it into place. Tests only read it (one that changes it copies it first)."""
  if run_kwargs:
    return _export_tiny_run(tmp_path_factory.mktemp("run"), run_kwargs)
  return str(session_shared.directory("shared_exported_tiny_run",
                                      lambda path: _export_tiny_run(path, {}),
                                      tmp_path_factory))


def _export_tiny_run(directory, run_kwargs):
  """The run, 1+1 layers (every server start loads and warms up its signatures: one layer
  each side keeps that short), exported with DECODE as version 7."""
  from conftest import make_tiny_run  # pylint: disable=import-outside-toplevel
  from t2t_keras.exporting import export  # pylint: disable=import-outside-toplevel
  run = make_tiny_run(directory, MAX_LENGTH, num_encoder_layers=1, num_decoder_layers=1,
                      **run_kwargs)
  export.export_model(run, decode_hparams=DECODE, log=None)
  return run


def call(url, path, body=None, method=None, raw=None):
  """(HTTP status, parsed JSON body) of one request."""
  data = raw if raw is not None else (None if body is None else json.dumps(body).encode())
  request = urllib.request.Request(url + path, data=data, method=method,
                                   headers={"Content-Type": "application/json"})
  try:
    with urllib.request.urlopen(request, timeout=120) as response:
      return response.status, json.load(response)
  except urllib.error.HTTPError as e:
    return e.code, json.load(e)


def predict(url, body, version=""):
  return call(url, f"/v1/models/{MODEL}{version}:predict", body)


def headless_chromium():
  """A selenium driver of Debian's chromium, headless, or a skip naming what to install
  (the web page's browser tests)."""
  import pytest  # pylint: disable=import-outside-toplevel
  browser, driver = shutil.which("chromium"), shutil.which("chromedriver")
  if not (browser and driver):
    pytest.skip("the browser test needs Debian's chromium and chromium-driver "
                "(apt-get install chromium chromium-driver; .ci/run installs them)")
  from selenium import webdriver  # pylint: disable=import-outside-toplevel
  from selenium.webdriver.chrome.service import Service  # pylint: disable=import-outside-toplevel
  options = webdriver.ChromeOptions()
  options.binary_location = browser
  for arg in ("--headless=new", "--no-sandbox", "--disable-gpu", "--disable-quic",
              "--no-first-run", "--disable-background-networking",
              "--disable-component-update", "--disable-sync", "--disable-dev-shm-usage"):
    options.add_argument(arg)
  return webdriver.Chrome(options=options, service=Service(executable_path=driver))
