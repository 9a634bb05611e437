"""The access log, request ids and the request metrics: ASGI middleware around the app.

    INFO 2026-11-27 07:01:02,345 127.0.0.1:50312 "POST /v1/models/m:predict" 200 31.2 ms 5f0c...

Each HTTP request gets an id: the client's X-Request-Id when it is 1 to 128 characters
of letters, digits and `-_.:@/+=`, else a new one (32 hex digits). The id is returned in
the response's X-Request-Id, written at the end of its access log line, and available to
the handlers as `request.state.request_id` (error logs name it). The logged path is the
one the client sent, still percent-encoded, with any control character escaped, so no
request can write a line of its own into the log.
"""

import logging
import re
import time
import uuid

from t2t_keras.server.quoting import printable

ACCESS_LOG = logging.getLogger("t2t_serve.access")
_USABLE_ID = re.compile(r"[A-Za-z0-9\-_.:@/+=]{1,128}")


def log_access_to(stream):
  """Sends the access log (one line per request) to `stream`, apart from absl's logging."""
  handler = logging.StreamHandler(stream)
  handler.setFormatter(logging.Formatter("%(asctime)s %(message)s"))
  ACCESS_LOG.addHandler(handler)
  ACCESS_LOG.setLevel(logging.INFO)
  ACCESS_LOG.propagate = False


def request_id(headers):
  """The client's X-Request-Id from ASGI `headers` when usable, else a new one."""
  for name, value in headers:
    if name == b"x-request-id":
      text = value.decode("latin-1")
      if _USABLE_ID.fullmatch(text):
        return text
  return uuid.uuid4().hex


class AccessLog:
  """ASGI middleware: a request id, one log line per HTTP request with its status and
  latency, and each /v1/ request counted in `metrics` (metrics.Metrics, or None)."""

  def __init__(self, app, metrics=None):
    self.app = app
    self.metrics = metrics

  async def __call__(self, scope, receive, send):
    if scope["type"] != "http":
      return await self.app(scope, receive, send)
    start = time.perf_counter()
    status = [500]
    rid = request_id(scope.get("headers", ()))
    state = scope.setdefault("state", {})
    state["request_id"] = rid
    counted = self.metrics is not None and scope["path"][:4].lower() == "/v1/"
    if counted:
      self.metrics.request_started()

    async def send_with_id(message):
      if message["type"] == "http.response.start":
        status[0] = message["status"]
        message = dict(message, headers=list(message.get("headers", ())) +
                       [(b"x-request-id", rid.encode("latin-1"))])
      await send(message)

    try:
      await self.app(scope, receive, send_with_id)
    finally:
      seconds = time.perf_counter() - start
      if counted:
        self.metrics.request_done(state, status[0], seconds)
      client = scope.get("client") or ("-", 0)
      path = scope.get("raw_path") or scope["path"].encode("utf-8")
      query = scope.get("query_string") or b""
      target = path + (b"?" + query if query else b"")
      ACCESS_LOG.info('%s:%s "%s %s" %d %.1f ms %s', client[0], client[1],
                      printable(scope["method"]), printable(target.decode("latin-1")),
                      status[0], seconds * 1000, rid)
