"""t2t-serve: an exported model behind TF Serving's REST API, with dynamic batching and a web page.

    t2t-serve --export_dir=runs/tiny            # the run's newest export, port 8501
    curl -d '{"instances": ["one hundred"]}' localhost:8501/v1/models/NAME:predict
    open http://127.0.0.1:8501/                 # type a sentence, see the translation

--export_dir is a SavedModel from t2t-exporter: a version directory, its parent
(the highest version), or a run directory (its export/). NAME is --model_name,
by default the problem the export was trained on. The process imports
TensorFlow, TensorFlow Text, Starlette and uvicorn only, none of the training code.

Startup loads the model and calls each signature (serving_default at every
batch size the export compiles, so the first users wait for no compilation of
those shapes), then listens and prints one line,
"t2t-serve: serving NAME version V at http://HOST:PORT/". SIGTERM or Ctrl-C
stops accepting, answers the requests already accepted, and exits 0. Each
request logs one line to stderr: client, method, path, status, latency.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

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
  if "nbest" in model.signature_defs:
    outputs = model.run("nbest", {"inputs": [b"warm up"]})["outputs"]
    if "attention" in model.signature_defs:
      model.run("attention", {"inputs": [b"warm up"], "outputs": [outputs[0][0]]})


def main(argv):
  del argv
  if not FLAGS.export_dir:
    raise app.UsageError("--export_dir is required")
  from t2t_keras.server import app as server_app  # pylint: disable=import-outside-toplevel
  from t2t_keras.server import batching, rest  # pylint: disable=import-outside-toplevel
  from t2t_keras.server.model import ServedModel  # pylint: disable=import-outside-toplevel
  server_app.log_access_to(sys.stderr)
  model = ServedModel.load(FLAGS.export_dir)
  _warm_up(model, FLAGS.max_batch_size)
  name = _model_name(model)
  try:
    batcher = batching.Batcher(model.run, FLAGS.max_batch_size, FLAGS.batch_timeout_ms,
                               FLAGS.max_queued_sentences, mergeable=model.mergeable)
  except ValueError as e:
    raise app.UsageError(f"--max_batch_size / --max_queued_sentences: {e}") from None
  limits = rest.Limits(FLAGS.max_instances, FLAGS.max_sentence_chars)
  asgi = server_app.create_app(model, batcher, name, limits, FLAGS.max_request_bytes)
  config = uvicorn.Config(asgi, host=FLAGS.host, port=FLAGS.port, access_log=False,
                          log_level="warning", lifespan="on")
  server = _Server(config, f"serving {name} version {model.version}")
  # uvicorn re-raises the signal that stopped it once it has shut down; these
  # handlers make that a clean exit 0 instead of death by SIGTERM.
  for sig in (signal.SIGTERM, signal.SIGINT):
    signal.signal(sig, lambda *_: None)
  server.run()
  if not server.started:
    raise OSError(f"could not listen on {FLAGS.host}:{FLAGS.port} (in use?)")
  print(f"{NAME}: stopped", flush=True)
  return 0


class _Server(uvicorn.Server):
  """uvicorn.Server that prints the ready line once its socket listens."""

  def __init__(self, config, what):
    super().__init__(config)
    self.what = what

  async def startup(self, sockets=None):
    await super().startup(sockets)
    if self.started:
      host, port = self.servers[0].sockets[0].getsockname()[:2]
      print(f"{NAME}: {self.what} at http://{host}:{port}/", flush=True)


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
