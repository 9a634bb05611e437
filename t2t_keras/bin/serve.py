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

import dataclasses
import signal
import sys

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


def main(argv):
  del argv
  if not FLAGS.export_dir:
    raise app.UsageError("--export_dir is required")
  _check_flags()
  # pylint: disable-next=import-outside-toplevel
  from t2t_keras.server import access, launch, lifecycle, rest
  # pylint: disable-next=import-outside-toplevel
  from t2t_keras.server.model import ServedModel, version_base
  settings = launch.ServerSettings(**{f.name: getattr(FLAGS, f.name)
                                      for f in dataclasses.fields(launch.ServerSettings)})
  need, hard = launch.allow_open_files(settings.max_connections)
  if hard < need:
    raise app.UsageError(f"--max_connections={FLAGS.max_connections} needs {need} open "
                         f"files; this process may open at most {hard} (ulimit -Hn)")
  access.log_access_to(sys.stderr)
  model = ServedModel.load(FLAGS.export_dir)
  base = version_base(FLAGS.export_dir)
  if FLAGS.poll_seconds > 0 and base is None:
    raise app.UsageError(f"--poll_seconds needs --export_dir to be a directory of numbered "
                         f"versions (or a run directory); {FLAGS.export_dir} is a version")
  launch.warm_up(model, settings.max_batch_size)
  name = FLAGS.model_name or model.export_info.get("problem") or "model"
  life = lifecycle.Lifecycle()
  limits = rest.Limits(FLAGS.max_instances, FLAGS.max_sentence_chars,
                       FLAGS.max_attention_instances, FLAGS.max_attention_chars,
                       FLAGS.max_request_bytes, FLAGS.request_timeout_ms)
  config = launch.uvicorn_config(model, name, life, limits, settings, base)
  server = launch.DrainingServer(config, f"serving {name} version {model.version}", life,
                                 settings.drain_seconds)
  # uvicorn re-raises the signal that stopped it once it has shut down; these
  # handlers make that a clean exit instead of death by SIGTERM.
  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: None)
  server.run()
  if not server.started:
    raise OSError(f"could not listen on {FLAGS.host}:{FLAGS.port} (in use?)")
  return _exit_status(life)


def _check_flags():
  """UsageError naming the flags that cannot work together."""
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


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
