"""uvicorn's HTTP/1.1 protocol (h11) with the two limits it lacks, a header deadline and a
cap on open connections, and TF Serving's JSON error body for a request h11 cannot parse.

    config = uvicorn.Config(app, http=limited_protocol(header_timeout_s=10,
                                                       max_connections=1000))

uvicorn starts no timer on a connection until it has sent a response (its keep-alive
timer), so a client that opens a connection and sends nothing, or half a request line,
holds a file descriptor for ever. Here each connection must deliver a request's headers
within `header_timeout_s` of its first byte (of opening, for the first request): past
it, it gets 408 and is closed. The timer is not restarted by each byte, so trickling
a header one byte at a time does not extend it. (The body's deadline is the request's:
`--request_timeout_ms`, in `app.py`.)

A connection beyond `max_connections` is answered 503 with Retry-After as soon as its
headers arrive (as nginx's limit_conn does; its headers are still held to the deadline),
and closed, so a flood of connections that stall cannot hold more than max_connections
file descriptors for longer than the header deadline; those within the cap run out their
header deadline or their request's.
"""

import errno
import json
import logging
import time

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol


def _raw_response(status, reason, message):
  body = json.dumps({"error": message}).encode()
  return (b"HTTP/1.1 %d %s\r\ncontent-type: application/json\r\nconnection: close\r\n"
          b"content-length: %d\r\n\r\n%s" % (status, reason, len(body), body))


def _busy_app(message):
  """An ASGI app answering every request 503 with Retry-After, closing the connection."""
  body = json.dumps({"error": message}).encode()
  headers = [(b"content-type", b"application/json"), (b"retry-after", b"1"),
             (b"connection", b"close"), (b"content-length", str(len(body)).encode())]

  async def busy(scope, receive, send):
    del scope, receive
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": body})

  return busy


def limited_protocol(header_timeout_s, max_connections):
  """An H11Protocol subclass with a header deadline and a connection cap (see above)."""
  timeout_answer = _raw_response(
      408, b"Request Timeout",
      f"request headers not received within {header_timeout_s:g} s (--header_timeout_s)")
  busy = _busy_app(f"the server holds {max_connections} connections (--max_connections); "
                   f"retry later")

  class LimitedH11Protocol(H11Protocol):
    """H11Protocol: 408 when headers are late, 503 beyond the connection cap."""

    def connection_made(self, transport):
      self._header_timer = None
      super().connection_made(transport)
      if len(self.connections) > max_connections:
        self.app = busy  # this connection's request is answered 503
      self._arm()

    def data_received(self, data):
      super().data_received(data)
      if self._awaiting_headers():
        self._arm()
      else:
        self._disarm()

    def send_400_response(self, msg):
      """uvicorn's answer to a request h11 cannot parse, in TF Serving's error shape (JSON,
      not uvicorn's text/plain), closing the connection."""
      self.transport.write(_raw_response(400, b"Bad Request", msg))
      self.transport.close()

    def connection_lost(self, exc):
      self._disarm()
      super().connection_lost(exc)

    def _awaiting_headers(self):
      return self.conn.their_state is h11.IDLE and not self.transport.is_closing()

    def _arm(self):
      if self._header_timer is None:
        self._header_timer = self.loop.call_later(header_timeout_s, self._headers_late)

    def _disarm(self):
      if self._header_timer is not None:
        self._header_timer.cancel()
        self._header_timer = None

    def _headers_late(self):
      self._header_timer = None
      if self._awaiting_headers() and self.conn.our_state is h11.IDLE:
        self.transport.write(timeout_answer)
        self.transport.close()

  return LimitedH11Protocol


_OUT_OF_FILES = (errno.EMFILE, errno.ENFILE, errno.ENOBUFS, errno.ENOMEM)


def quiet_accept_errors(loop, every_s=10.0):
  """Makes `loop` log running out of file descriptors on accept() as one warning line per
  `every_s` seconds instead of a traceback per attempt (asyncio pauses accepting for a
  second and retries by itself: the connections wait in the listen backlog)."""
  last = [-every_s]

  def handler(loop, context):
    exc = context.get("exception")
    if (isinstance(exc, OSError) and exc.errno in _OUT_OF_FILES and
        "accept" in context.get("message", "")):
      if time.monotonic() - last[0] >= every_s:
        last[0] = time.monotonic()
        logging.getLogger("t2t_serve").warning(
            "out of file descriptors (%s): accepting paused for a second; lower "
            "--max_connections or raise the open-files limit", exc.strerror)
      return
    loop.default_exception_handler(context)

  loop.set_exception_handler(handler)
