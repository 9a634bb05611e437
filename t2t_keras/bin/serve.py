"""t2t-serve: an exported model behind TF Serving's REST API, with dynamic batching and a web page.

    t2t-serve --export_dir=runs/tiny            # the run's newest export, port 8501
    curl -d '{"instances": ["one hundred"]}' localhost:8501/v1/models/NAME:predict
    open http://127.0.0.1:8501/                 # type a sentence, see the translation

--export_dir is a SavedModel from t2t-exporter: a version directory, its parent
(the highest version), or a run directory (its export/). NAME is --model_name,
by default the problem the export was trained on. The process imports
TensorFlow, TensorFlow Text, Starlette, uvicorn and prometheus-client only, none of the
training code.

Startup loads the model and calls each signature (serving_default at every
batch size the export compiles, so the first users wait for no compilation of
those shapes), then listens and prints one line,
"t2t-serve: serving NAME version V at http://HOST:PORT/". Each request logs one
line to stderr: client, method, path, status, latency, request id.

Draining: SIGTERM (or Ctrl-C) makes /readyz answer 503 (/healthz stays 200), stops
accepting, answers every request already accepted and exits 0. If that takes more
than --drain_seconds, what is left is answered 503 and the exit status is 1. A
second SIGTERM or Ctrl-C exits at once (status 1). If the batch worker dies,
/healthz answers 503 and the process exits with status 1.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

import asyncio
import os
import resource
import signal
import sys

import uvicorn
from absl import app, flags

NAME = "t2t-serve"
FLAGS = flags.FLAGS

_define = t2t_keras.bin.define_flag
_define("string", "export_dir", None,
        "A SavedModel from t2t-exporter, its parent directory, or a run directory.")
_define("string", "model_name", None, "The NAME in /v1/models/NAME (default: the problem).")
_define("string", "host", "127.0.0.1", "Address to listen on (0.0.0.0: every interface).")
_define("integer", "port", 8501, "Port (TF Serving's REST port; 0: any free port).")
_define("integer", "max_batch_size", 32, "Most sentences merged into one model call.")
_define("float", "batch_timeout_ms", 5.0,
        "Longest wait for more requests before a call that is not full.")
_define("integer", "max_queued_sentences", 1024,
        "Sentences waiting beyond this get 503 (the server is busy).")
_define("integer", "max_request_bytes", 1 << 20, "Larger request bodies get 413.")
_define("integer", "max_instances", 256, "More sentences in one request get 413.")
_define("integer", "max_sentence_chars", 2000, "Longer sentences get 400.")
_define("integer", "max_attention_instances", 8,
        "More sentences in one request to a signature never merged (attention) get 413.")
_define("integer", "max_attention_chars", 400,
        "Longer inputs or outputs of a signature never merged (attention) get 400.")
_define("integer", "request_timeout_ms", 120_000,
        "From a request's headers to its answer: a body not received by then gets 408, "
        "an answer not ready 504 (TF Serving's --rest_api_timeout_in_ms; 0: no limit).")
_define("float", "header_timeout_s", 10.0,
        "A connection's request headers must arrive within this (else 408, closed).")
_define("integer", "keep_alive_s", 5, "Idle keep-alive connections are closed after this.")
_define("integer", "max_connections", 1000,
        "A connection beyond this is answered 503 as soon as its headers arrive, and closed.")
_define("float", "poll_seconds", 0.0,
        "Every this many seconds, look for a new numbered version under --export_dir (a "
        "base directory or a run's export/), load and warm it up, then serve it (0: never).")
_define("integer", "keep_versions", 1,
        "Versions kept addressable under /versions/N while polling (the newest N).")
_define("float", "drain_seconds", 30.0,
        "After SIGTERM, the longest wait for accepted requests; then they get 503.")


def _model_name(model):
  return FLAGS.model_name or model.export_info.get("problem") or "model"


def _warm_up(model, max_rows):
  """Calls each signature before the first user does: serving_default at every batch size
  the export compiles (powers of two up to its batch_size and max_rows), the others once."""
  rows = 1
  limit = min(max_rows, model.export_info.get("decode_hparams", {}).get("batch_size", 1))
  while True:
    model.run("serving_default", {"inputs": [b"warm up"] * rows})
    if rows >= limit:
      break
    rows *= 2
  signatures = model.signature_defs
  if "nbest" in signatures:
    outputs = model.run("nbest", {"inputs": [b"warm up"]})["outputs"]
    if "attention" in signatures:
      model.run("attention", {"inputs": [b"warm up"], "outputs": [outputs[0][0]]})
  if "prefix" in signatures:
    model.run("prefix", {"inputs": [b"warm up"], "prefix": [b""]})
  if "constrained" in signatures:
    model.run("constrained", {"inputs": [b"warm up"], "constraints": [[b"warm"]]})
  if "target_language" in signatures and model.target_languages:
    model.run("target_language", {"inputs": [b"warm up"],
                                  "target_language": [model.target_languages[0].encode()]})


def main(argv):
  del argv
  if not FLAGS.export_dir:
    raise app.UsageError("--export_dir is required")
  from t2t_keras.server import access, rest  # pylint: disable=import-outside-toplevel
  from t2t_keras.server.lifecycle import Lifecycle  # pylint: disable=import-outside-toplevel
  from t2t_keras.server.model import ServedModel  # pylint: disable=import-outside-toplevel
  _check_flags()
  access.log_access_to(sys.stderr)
  model = ServedModel.load(FLAGS.export_dir)
  _warm_up(model, FLAGS.max_batch_size)
  name = _model_name(model)
  life = Lifecycle()
  limits = rest.Limits(FLAGS.max_instances, FLAGS.max_sentence_chars,
                       FLAGS.max_attention_instances, FLAGS.max_attention_chars,
                       FLAGS.max_request_bytes, FLAGS.request_timeout_ms)
  server = _Server(_config(model, name, life, limits), f"serving {name} version "
                   f"{model.version}", life)
  # uvicorn re-raises the signal that stopped it once it has shut down; these
  # handlers make that a clean exit instead of death by SIGTERM.
  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: None)
  server.run()
  if not server.started:
    raise OSError(f"could not listen on {FLAGS.host}:{FLAGS.port} (in use?)")
  return _exit_status(life)


def _check_flags():
  """UsageError naming the flags that cannot work together; raises the open-files limit
  to what --max_connections needs."""
  if not 1 <= FLAGS.max_batch_size <= FLAGS.max_queued_sentences:
    raise app.UsageError(f"need 1 <= --max_batch_size ({FLAGS.max_batch_size}) <= "
                         f"--max_queued_sentences ({FLAGS.max_queued_sentences})")
  if FLAGS.max_instances > FLAGS.max_queued_sentences:
    raise app.UsageError(f"--max_instances ({FLAGS.max_instances}) is over "
                         f"--max_queued_sentences ({FLAGS.max_queued_sentences}): a request "
                         f"that large could never be queued")
  for flag in ("max_connections", "header_timeout_s", "keep_alive_s", "drain_seconds",
               "max_attention_instances", "max_attention_chars", "keep_versions"):
    if getattr(FLAGS, flag) <= 0:
      raise app.UsageError(f"--{flag} must be positive, got {getattr(FLAGS, flag)}")
  if FLAGS.poll_seconds < 0:
    raise app.UsageError(f"--poll_seconds must be >= 0 (0: no polling), got "
                         f"{FLAGS.poll_seconds}")
  if FLAGS.request_timeout_ms < 0:
    raise app.UsageError(f"--request_timeout_ms must be >= 0 (0: no limit), got "
                         f"{FLAGS.request_timeout_ms}")
  need = FLAGS.max_connections + 128  # the model's files, logs, sockets of its own
  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  if soft != resource.RLIM_INFINITY and soft < need:
    if hard != resource.RLIM_INFINITY and hard < need:
      raise app.UsageError(f"--max_connections={FLAGS.max_connections} needs {need} open "
                           f"files; this process may open at most {hard} (ulimit -Hn)")
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))


def _config(model, name, life, limits):
  """The uvicorn.Config of the server: the app, its versions and their batchers, protocol
  and time limits."""
  from t2t_keras.server import app as server_app  # pylint: disable=import-outside-toplevel
  # pylint: disable-next=import-outside-toplevel
  from t2t_keras.server import batching, metrics, model as served, protocol, versions
  counted = metrics.Metrics(name)

  def make_batcher(version):
    return batching.Batcher(counted.timed(version.run), FLAGS.max_batch_size,
                            FLAGS.batch_timeout_ms, FLAGS.max_queued_sentences,
                            mergeable=version.mergeable, on_dead=life.die)

  base = served.version_base(FLAGS.export_dir) if FLAGS.poll_seconds > 0 else None
  if FLAGS.poll_seconds > 0 and base is None:
    raise app.UsageError(f"--poll_seconds needs --export_dir to be a directory of numbered "
                         f"versions (or a run directory); {FLAGS.export_dir} is a version")
  table = versions.Versions(
      model, make_batcher, keep=FLAGS.keep_versions, base=base, load=served.ServedModel.load,
      warm_up=lambda m: _warm_up(m, FLAGS.max_batch_size), poll_seconds=FLAGS.poll_seconds,
      on_change=counted.versions_changed)
  counted.watch_queue(table)
  asgi = server_app.create_app(table, name, limits, life, counted)
  return uvicorn.Config(
      asgi, host=FLAGS.host, port=FLAGS.port, access_log=False, log_level="warning",
      lifespan="on", http=protocol.limited_protocol(FLAGS.header_timeout_s,
                                                    FLAGS.max_connections),
      timeout_keep_alive=FLAGS.keep_alive_s,
      # A backstop only: at --drain_seconds the app itself answers what is left (503).
      timeout_graceful_shutdown=int(FLAGS.drain_seconds) + 5)


def _exit_status(life):
  if life.dead is not None:
    print(f"{NAME}: the batch worker died ({life.dead!r}); exiting", file=sys.stderr)
    return 1
  if life.expired_requests:
    print(f"{NAME}: stopped; {life.expired_requests} request(s) not finished within "
          f"--drain_seconds={FLAGS.drain_seconds:g} were answered 503", flush=True)
    return 1
  print(f"{NAME}: stopped", flush=True)
  return 0


class _Server(uvicorn.Server):
  """uvicorn.Server that prints the ready line once its socket listens, drains on the
  first SIGTERM or SIGINT and exits at once on the second, and stops when `life` dies."""

  def __init__(self, config, what, life):
    super().__init__(config)
    self.what = what
    self.life = life

  async def startup(self, sockets=None):
    from t2t_keras.server import protocol  # pylint: disable=import-outside-toplevel
    protocol.quiet_accept_errors(asyncio.get_running_loop())
    await super().startup(sockets)
    if self.started:
      host, port = self.servers[0].sockets[0].getsockname()[:2]
      print(f"{NAME}: {self.what} at http://{host}:{port}/", flush=True)

  def handle_exit(self, sig, frame):
    if self.life.draining:
      os.write(2, f"{NAME}: second signal: exiting now\n".encode())
      os._exit(1)  # pylint: disable=protected-access
    self.life.drain()
    super().handle_exit(sig, frame)

  async def on_tick(self, counter):
    if not self.life.live:
      self.should_exit = True
    return await super().on_tick(counter)

  async def shutdown(self, sockets=None):
    loop = asyncio.get_running_loop()
    self.life.drain()
    deadline = loop.call_later(FLAGS.drain_seconds, self.life.expire)
    try:
      await super().shutdown(sockets)
    finally:
      deadline.cancel()


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
