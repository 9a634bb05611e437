"""A t2t-serve process put together: its settings, the warm-up, uvicorn's config and server.

    settings = ServerSettings(port=0, max_batch_size=16)
    model = ServedModel.load("runs/tiny")
    warm_up(model, settings.max_batch_size)
    life = Lifecycle()
    server = DrainingServer(uvicorn_config(model, "numbers", life, rest.Limits(), settings),
                            "serving numbers version 7", life, settings.drain_seconds)
    server.run()   # prints "t2t-serve: serving numbers version 7 at http://HOST:PORT/"

`bin/serve.py` only turns its flags into these and reports the exit status.
"""

import asyncio
import dataclasses
import math
import os
import resource

import uvicorn

from t2t_keras.server import app as server_app
from t2t_keras.server import batching, prometheus, protocol, versions
from t2t_keras.server import model as served

NAME = "t2t-serve"


@dataclasses.dataclass(frozen=True)
class ServerSettings:
  """How one server process listens, batches, polls and drains (t2t-serve's flags of the
  same names; the request limits are `rest.Limits`)."""
  host: str = "127.0.0.1"
  port: int = 8501
  max_batch_size: int = 32
  batch_timeout_ms: float = 5.0
  max_queued_sentences: int = 1024
  header_timeout_s: float = 10.0
  keep_alive_s: int = 5
  max_connections: int = 1000
  poll_seconds: float = 0.0
  keep_versions: int = 1
  drain_seconds: float = 30.0


def warm_up(model, max_rows):
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
    language = model.target_languages[0]
    token = model.export_info.get("language_tokens", {}).get(language)  # leads the source
    model.run("target_language", {
        "inputs": [f"{token} warm up".encode() if token else b"warm up"],
        "target_language": [language.encode()]})


def allow_open_files(max_connections):
  """Raises this process's soft open-files limit to what `max_connections` need (plus 128:
  the model's files, logs and sockets of its own) where the hard limit allows; returns
  (need, hard), hard < need where it does not (hard: math.inf for no limit)."""
  need = max_connections + 128
  soft, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  if soft != resource.RLIM_INFINITY and soft < need and (
      hard == resource.RLIM_INFINITY or need <= hard):
    resource.setrlimit(resource.RLIMIT_NOFILE, (need, hard))
  return need, math.inf if hard == resource.RLIM_INFINITY else hard


def uvicorn_config(model, name, life, limits, settings, base=None):
  """The uvicorn.Config of the server: the app, its versions and their batchers, protocol
  and time limits. `base`: the directory of numbered versions polled every
  settings.poll_seconds (`model.version_base` of the export directory), or None."""
  counted = prometheus.Metrics(name)

  def make_batcher(version):
    return batching.Batcher(counted.timed(version.run), settings.max_batch_size,
                            settings.batch_timeout_ms, settings.max_queued_sentences,
                            mergeable=version.mergeable, on_dead=life.die)

  base = base if settings.poll_seconds > 0 else None
  table = versions.Versions(
      model, make_batcher, keep=settings.keep_versions, base=base,
      load=served.ServedModel.load, warm_up=lambda m: warm_up(m, settings.max_batch_size),
      poll_seconds=settings.poll_seconds, on_change=counted.versions_changed)
  counted.watch_queue(table)
  asgi = server_app.create_app(table, name, limits, life, counted)
  return uvicorn.Config(
      asgi, host=settings.host, port=settings.port, access_log=False, log_level="warning",
      lifespan="on", http=protocol.limited_protocol(settings.header_timeout_s,
                                                    settings.max_connections),
      timeout_keep_alive=settings.keep_alive_s,
      # A backstop only: at drain_seconds the app itself answers what is left (503).
      timeout_graceful_shutdown=int(settings.drain_seconds) + 5)


class DrainingServer(uvicorn.Server):
  """uvicorn.Server that prints "t2t-serve: <what> at http://HOST:PORT/" once its socket
  listens, drains on the first SIGTERM or SIGINT (for at most `drain_seconds`) and exits
  at once on the second, and stops when `life` dies."""

  def __init__(self, config, what, life, drain_seconds):
    super().__init__(config)
    self.what = what
    self.life = life
    self.drain_seconds = drain_seconds

  async def startup(self, sockets=None):
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
    deadline = loop.call_later(self.drain_seconds, self.life.expire)
    try:
      await super().shutdown(sockets)
    finally:
      deadline.cancel()
