"""The Starlette application of t2t-serve: TF Serving's REST API, health, web page.

    GET  /v1/models/NAME[/versions/N]            version status
    GET  /v1/models/NAME[/versions/N]/metadata   signature defs
    POST /v1/models/NAME[/versions/N]:predict    {"instances": [...]} or {"inputs": ...}
                                                 ("prefix" in the instances: the prefix
                                                 signature, `rest.signature_name`)
    GET  /healthz                                200 once the model is loaded and warm
    GET  /                                       the web page (page.html)

Errors are TF Serving's body, {"error": "..."}: 400 bad request, 404 unknown model,
version or signature, 405 wrong method, 413 over a size limit, 503 queue full, 500 a
bug (logged with its traceback).
"""

import contextlib
import logging
import os
import re
import time

import tensorflow as tf
from starlette.applications import Starlette
from starlette.responses import HTMLResponse, JSONResponse
from starlette.routing import Route

from t2t_keras.server import rest
from t2t_keras.server.batching import QueueFull
from t2t_keras.server.model import NotFound

ACCESS_LOG = logging.getLogger("t2t_serve.access")


def log_access_to(stream):
  """Sends the access log (one line per request) to `stream`, apart from absl's logging."""
  handler = logging.StreamHandler(stream)
  handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
  ACCESS_LOG.addHandler(handler)
  ACCESS_LOG.setLevel(logging.INFO)
  ACCESS_LOG.propagate = False


_MODEL_PATH = re.compile(
    r"(?P<name>[^/:]+)(?:/versions/(?P<version>[^/:]+)|/labels/(?P<label>[^/:]+))?"
    r"(?P<verb>/metadata|:[a-z]+)?")


class HttpError(Exception):
  """An answer other than 200, with TF Serving's error body."""

  def __init__(self, status, message):
    super().__init__(message)
    self.status = status


def create_app(model, batcher, model_name, limits, max_request_bytes=1 << 20):
  """The ASGI application serving `model` (ServedModel) through `batcher` (Batcher).

  The batcher is started and stopped with the application's lifespan (after the
  server stops accepting and in-flight requests are answered).
  """
  page = _page(model_name)

  async def models(request):
    try:
      return await _models(request, model, batcher, model_name, limits, max_request_bytes)
    except HttpError as e:
      return _error(e.status, str(e))
    except rest.BadRequest as e:
      return _error(e.status, str(e))
    except NotFound as e:
      return _error(404, str(e))
    except QueueFull as e:
      return _error(503, str(e))
    except tf.errors.InvalidArgumentError as e:
      return _error(400, e.message)
    except Exception as e:  # pylint: disable=broad-except
      logging.getLogger("t2t_serve").exception("internal error")
      return _error(500, f"internal error: {type(e).__name__}: {e}")

  async def healthz(_):
    return JSONResponse({"status": "ok", "model": model_name, "version": model.version,
                         "queued": batcher.queued, "batches": batcher.batches})

  async def index(_):
    return HTMLResponse(page)

  @contextlib.asynccontextmanager
  async def lifespan(_):
    await batcher.start()
    yield
    await batcher.stop()

  app = Starlette(routes=[
      Route("/v1/models/{rest:path}", models, methods=["GET", "POST"]),
      Route("/healthz", healthz, methods=["GET"]),
      Route("/", index, methods=["GET"]),
  ], lifespan=lifespan)
  return AccessLog(app)


async def _models(request, model, batcher, model_name, limits, max_request_bytes):
  """Dispatches /v1/models/...: status, metadata or predict."""
  match = _MODEL_PATH.fullmatch(request.path_params["rest"])
  if not match:
    raise HttpError(404, f"Malformed request: {request.method} {request.url.path}")
  name, version, label, verb = match.group("name", "version", "label", "verb")
  if name != model_name:
    spec = f"Specific({name}, {version})" if version else f"Latest({name})"
    raise HttpError(404, f"Servable not found for request: {spec}; this server serves "
                         f"{model_name!r}")
  if label is not None:
    raise HttpError(404, f"Unrecognized servable version label: {label} (t2t-serve "
                         f"serves one version, {model.version}, and no labels)")
  if version is not None and version != str(model.version):
    raise HttpError(404, f"Servable not found for request: Specific({name}, {version}); "
                         f"served version: {model.version}")
  wanted = {None: "GET", "/metadata": "GET", ":predict": "POST"}
  if verb not in wanted:
    raise HttpError(400, f"{verb[1:]} is not served: t2t-serve answers predict, "
                         f"metadata and status requests")
  if request.method != wanted[verb]:
    raise HttpError(405, f"{request.method} is not allowed here: use {wanted[verb]}")
  if verb is None:
    return JSONResponse(model.status())
  if verb == "/metadata":
    return JSONResponse(model.metadata(model_name))
  body = await _read_body(request, max_request_bytes)
  parsed_body = rest.parse_body(body)
  signature = rest.signature_name(parsed_body)
  model.signature(signature)  # NotFound for an unknown one
  parsed = rest.parse_predict(parsed_body, model.input_names(signature), limits,
                              model.list_inputs(signature))
  outputs = await batcher.submit(signature, parsed.inputs)
  return JSONResponse(rest.predict_response(outputs, model.output_names(signature),
                                            parsed.row_format))


async def _read_body(request, limit):
  """The request body; 413 naming the limit when it is larger."""
  message = (f"request body is over the limit of {limit} bytes (--max_request_bytes)")
  declared = request.headers.get("content-length")
  if declared and declared.isdigit() and int(declared) > limit:
    raise HttpError(413, f"{message}: {declared} bytes")
  chunks, size = [], 0
  async for chunk in request.stream():
    size += len(chunk)
    if size > limit:
      raise HttpError(413, message)
    chunks.append(chunk)
  return b"".join(chunks)


def _error(status, message):
  return JSONResponse({"error": message}, status_code=status)


def _page(model_name):
  """page.html with the model's name filled in."""
  with open(os.path.join(os.path.dirname(__file__), "page.html"), encoding="utf-8") as f:
    html = f.read()
  name = model_name.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
  return html.replace("{{MODEL_NAME}}", name)


class AccessLog:
  """ASGI middleware: one log line per HTTP request, with status and latency."""

  def __init__(self, app):
    self.app = app

  async def __call__(self, scope, receive, send):
    if scope["type"] != "http":
      return await self.app(scope, receive, send)
    start = time.perf_counter()
    status = [500]

    async def send_status(message):
      if message["type"] == "http.response.start":
        status[0] = message["status"]
      await send(message)

    try:
      await self.app(scope, receive, send_status)
    finally:
      client = scope.get("client") or ("-", 0)
      ACCESS_LOG.info('%s:%s "%s %s" %d %.1f ms', client[0], client[1], scope["method"],
                      scope["path"], status[0], (time.perf_counter() - start) * 1000)
