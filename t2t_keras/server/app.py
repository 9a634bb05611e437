"""The Starlette application of t2t-serve: TF Serving's REST API, probes, web page.

    GET  /v1/models/NAME[/versions/N]            version status
    GET  /v1/models/NAME[/versions/N]/metadata   signature defs
    POST /v1/models/NAME[/versions/N]:predict    {"instances": [...]} or {"inputs": ...}
                                                 ("prefix" in the instances: the prefix
                                                 signature, `rest.signature_name`;
                                                 "target_language": a tag in front of
                                                 "inputs", `rest.parse_predict`)
    GET  /healthz                                liveness: 200 while the batch worker lives
    GET  /readyz                                 readiness: 200 until SIGTERM starts the drain
    GET  /monitoring/prometheus/metrics          Prometheus metrics (prometheus.py)
    GET  /                                       the web page (page.html)

Errors are TF Serving's body, {"error": "..."}, with a plain message (the details of a
500 go to the log under the request's id): 400 bad request, 404 unknown model or version,
405 wrong method, 408 a body not received in time, 413 over a size limit, 503 queue full
or shutting down (with Retry-After), 504 past --request_timeout_ms, 500 a bug.
Every response carries X-Request-Id (the client's, when it sends a usable one).
"""

import asyncio
import contextlib
import json
import logging
import os
import re

import tensorflow as tf
from starlette.applications import Starlette
from starlette.exceptions import HTTPException
from starlette.requests import ClientDisconnect
from starlette.responses import HTMLResponse, JSONResponse, Response
from starlette.routing import Route

from t2t_keras.server import access, lifecycle, paths, rest
from t2t_keras.server import prometheus
from t2t_keras.server.quoting import shown
from t2t_keras.server.batching import QueueFull, ShuttingDown, WorkerDead
from t2t_keras.server.model import NotFound
from t2t_keras.server.versions import UnknownVersion

LOG = logging.getLogger("t2t_serve")
PROBES = ("/healthz", "/readyz", "/", prometheus.PATH)


class HttpError(Exception):
  """An answer other than 200, with TF Serving's error body."""

  def __init__(self, status, message):
    super().__init__(message)
    self.status = status


def create_app(versions, model_name, limits, life, metrics):
  """The ASGI application serving `versions` (versions.Versions: each ServedModel with
  its Batcher) within `limits` (rest.Limits), in the life `life` (lifecycle.Lifecycle)
  tells, counted in `metrics` (metrics.Metrics).

  The batchers (and polling for new versions) are started and stopped with the
  application's lifespan (after the server stops accepting and in-flight requests are
  answered).
  """
  page = _page(model_name)
  timeout_s = limits.request_timeout_ms / 1000 if limits.request_timeout_ms else None

  async def models(request, rest_path):
    phase = ["headers"]
    try:
      return await life.bounded(
          _models(request, rest_path, phase, versions, model_name, limits), timeout_s)
    except lifecycle.Deadline:
      return _deadline_error(phase[0] == "body", limits.request_timeout_ms)
    except Exception as e:  # pylint: disable=broad-except
      return _answer_error(e, request)

  async def other(request):
    path = request.url.path
    if path[:4].lower() == "/v1/":
      return await models(request, path[4:])
    return _unrouted(request)

  async def healthz(_):
    body = {"status": "ok" if life.live else "dead", "model": model_name,
            "version": versions.numbers[0], "versions": versions.numbers,
            "queued": versions.queued, "batches": versions.batches}
    return JSONResponse(body, status_code=200 if life.live else 503)

  async def readyz(_):
    state = "ready" if life.ready else ("draining" if life.live else "dead")
    return JSONResponse({"status": state}, status_code=200 if life.ready else 503)

  async def index(_):
    return HTMLResponse(page)

  async def exposition(_):
    body, content_type = metrics.exposition()
    return Response(body, headers={"Content-Type": content_type})

  @contextlib.asynccontextmanager
  async def lifespan(_):
    await versions.start()
    yield
    await versions.stop()

  app = Starlette(routes=[
      Route("/healthz", healthz, methods=["GET"]),
      Route("/readyz", readyz, methods=["GET"]),
      Route("/", index, methods=["GET"]),
      Route(prometheus.PATH, exposition, methods=["GET"]),
      Route("/{path:path}", other, methods=list(paths.METHODS)),
  ], lifespan=lifespan,
      exception_handlers={HTTPException: lambda request, _: _unrouted(request)})
  return access.AccessLog(app, metrics)


async def _models(request, rest_path, phase, versions, model_name, limits):
  """Dispatches /v1/<rest_path>: status, metadata or predict."""
  try:
    target = paths.parse(request.method, rest_path, model_name, versions.numbers)
  except paths.PathError as e:
    raise HttpError(e.status, str(e)) from None
  state = request.scope.setdefault("state", {})
  state["api"] = target.verb  # for the metrics' labels
  if target.verb == "status":
    return JSONResponse(versions.status(target.version))
  if target.verb == "metadata":
    return JSONResponse(versions.get(target.version)[0].metadata(model_name))
  phase[0] = "body"
  body = await _read_body(request, limits.max_request_bytes)
  phase[0] = "model"
  # From here to enqueue nothing awaits: a version being retired has either left the
  # table or still answers what it holds, so a swap fails no request.
  model, batcher = versions.get(target.version)
  parsed_body = rest.parse_body(body)
  signature = rest.signature_name(parsed_body)
  model.signature(signature)  # NotFound for an unknown one
  state["signature"] = signature
  mergeable = model.mergeable(signature)
  parsed = rest.parse_predict(parsed_body, model.input_names(signature), limits,
                              model.list_inputs(signature), mergeable, model.target_languages,
                              language_tokens=model.export_info.get("language_tokens"))
  outputs = await lifecycle.unless_client_leaves(
      request.receive, batcher.enqueue(signature, parsed.inputs))
  # Off the event loop: a large answer (attention) must not stall /healthz.
  content = await asyncio.to_thread(_json_bytes, rest.predict_response,
                                    outputs, model.output_names(signature), parsed.row_format)
  return Response(content, media_type="application/json")


def _unrouted(request):
  """405 for a wrong method on a probe or the page, else a JSON 404 (also for paths the
  catch-all route's pattern cannot match, such as one with a decoded newline)."""
  path = request.url.path
  if path in PROBES:
    return _error(405, f"{request.method} is not allowed on {path}: use GET")
  return _error(404, f"no such path: {shown(path)}; t2t-serve answers "
                     f"/v1/models/NAME[/versions/N][:predict|/metadata], {', '.join(PROBES)}")


def _json_bytes(build, *args):
  """JSON of `build(*args)` as UTF-8 (a lone surrogate, which UTF-8 cannot hold, as "?")."""
  return json.dumps(build(*args), ensure_ascii=False, allow_nan=False,
                    separators=(",", ":")).encode("utf-8", errors="replace")


async def _read_body(request, limit):
  """The request body; 413 naming the limit when it is larger."""
  message = (f"request body is over the limit of {limit} bytes (--max_request_bytes)")
  declared = request.headers.get("content-length", "")
  # ASCII digits only (str.isdigit takes "²", which int() refuses), by length first (int()
  # refuses over 4,300 digits).
  if re.fullmatch(r"[0-9]+", declared) and (len(declared.lstrip("0")) > 19
                                            or int(declared) > limit):
    raise HttpError(413, f"{message}: {shown(declared)} bytes")
  chunks, size = [], 0
  async for chunk in request.stream():
    size += len(chunk)
    if size > limit:
      raise HttpError(413, message)
    chunks.append(chunk)
  return b"".join(chunks)


def _deadline_error(reading_body, timeout_ms):
  """408 (closing the connection) while the body was still arriving, else 504."""
  if reading_body:
    return _error(408, f"request body not received within {timeout_ms} ms "
                       f"(--request_timeout_ms)", {"Connection": "close"})
  return _error(504, f"Timed out waiting for the answer: over {timeout_ms} ms "
                     f"(--request_timeout_ms)")


def _answer_error(e, request):
  """The error response for exception `e` raised while answering `request`."""
  request_id = request.scope.get("state", {}).get("request_id", "-")
  retry_later = "; retry later"
  if isinstance(e, HttpError):
    return _error(e.status, str(e))
  if isinstance(e, rest.BadRequest):
    return _error(e.status, str(e))
  if isinstance(e, NotFound):  # an unknown signature: 400, as TF Serving answers
    return _error(400, str(e))
  if isinstance(e, UnknownVersion):  # retired while the body arrived
    return _error(404, f"Servable not found for request: {e}")
  if isinstance(e, QueueFull):
    return _error(503, str(e), {"Retry-After": "1"})
  if isinstance(e, (ShuttingDown, lifecycle.Expired)):
    return _error(503, "the server is shutting down and could not answer in time"
                  + retry_later, {"Retry-After": "1", "Connection": "close"})
  if isinstance(e, WorkerDead):
    return _error(503, str(e), {"Connection": "close"})
  if isinstance(e, (lifecycle.ClientGone, ClientDisconnect)):
    LOG.info("request %s: the client disconnected before the answer", request_id)
    return Response(status_code=499)
  if isinstance(e, tf.errors.InvalidArgumentError):
    return _error(400, plain_tf_message(e.message))
  LOG.error("request %s: internal error", request_id, exc_info=e)
  return _error(500, f"internal error; the server's log has the details under request id "
                     f"{request_id}")


def plain_tf_message(message):
  """A TensorFlow error message without the graph's node, op and stack text: the message
  of a failed assertion, else its first line of substance."""
  failed = re.search(r"assertion failed: \[(.*?)\]", message)
  if failed:
    return failed.group(1)
  lines = [line.strip() for line in message.split("\n")]
  lines = [line for line in lines if line and not line.startswith(_TF_NOISE)]
  text = re.split(r"\s*\[\[|\s*\[Op:|\s*\(defined at", lines[0])[0] if lines else ""
  return text.strip() or "the model refused this input"


_TF_NOISE = ("Graph execution error", "Detected at node", "<stack", "[[", "{{")


def _error(status, message, headers=None):
  """TF Serving's error body: {"error": message}. The message quotes user input only
  through quoting.shown; the encoding cannot fail whatever it holds (`_json_bytes`)."""
  return Response(_json_bytes(dict, {"error": message}), status_code=status, headers=headers,
                  media_type="application/json")


def _page(model_name):
  """page.html with the model's name filled in."""
  with open(os.path.join(os.path.dirname(__file__), "page.html"), encoding="utf-8") as f:
    html = f.read()
  name = model_name.replace("&", "&amp;").replace("<", "&lt;").replace('"', "&quot;")
  return html.replace("{{MODEL_NAME}}", name)
