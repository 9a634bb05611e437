"""t2t-serve under generated requests (Hypothesis, tests/fuzz_requests.py): a real server on
127.0.0.1, real HTTP. Every answer is a 200 with well-formed outputs or a 4xx with TF
Serving's error body whose message is printable and short; never a 500, a hang or a dead
process, and /healthz answers after each request.

    T2T_FUZZ_REQUESTS=5000 T2T_FUZZ_SEED=2 ./run_tests.sh tests/server/test_fuzz_server.py -s

The seed is fixed (printed with the counts; `-s` shows them), so CI sends the same requests
every run; another seed sends others.
"""

import collections
import http.client
import json
import os
import socket

import pytest
from fuzz_requests import requests
from hypothesis import HealthCheck, given, seed, settings
from serve_process import MODEL, Server, call, exported_tiny_run

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

REQUESTS = int(os.environ.get("T2T_FUZZ_REQUESTS", "300"))
SEED = int(os.environ.get("T2T_FUZZ_SEED", "1"))
ANSWERED = (200, 400, 404, 405, 408, 413)  # what a request alone may get (no load)
MESSAGE_CHARS = 1000  # an error message's bound: a few quoted values of 80 characters
TIMEOUT_S = 60  # past this, a request counts as hung


@pytest.fixture(scope="module")
def server(tmp_path_factory):
  run_dir = exported_tiny_run(tmp_path_factory)
  yield from Server.for_module(run_dir, tmp_path_factory, "--request_timeout_ms=20000")


def send(port, request):
  """(status, content type, body bytes) of one request, or None where the server closed
  the connection without an answer."""
  conn = http.client.HTTPConnection("127.0.0.1", port, timeout=TIMEOUT_S)
  try:
    conn.putrequest(request.method, request.path, skip_accept_encoding=True)
    headers = dict(request.headers)
    if "Content-Length" not in headers and "Transfer-Encoding" not in headers:
      headers["Content-Length"] = str(len(request.body))
    for name, value in headers.items():
      conn.putheader(name, value)
    conn.endheaders(request.body)
    if request.half_close:
      try:
        conn.sock.shutdown(socket.SHUT_WR)
      except OSError:  # ENOTCONN: the server has answered and closed it already
        pass
    response = conn.getresponse()
    return response.status, response.getheader("Content-Type", ""), response.read()
  except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
    return None
  finally:
    conn.close()


def _strings(value):
  if isinstance(value, str):
    yield value
  elif isinstance(value, list):
    for v in value:
      yield from _strings(v)
  elif isinstance(value, dict):
    for k, v in value.items():
      yield k
      yield from _strings(v)


def check_answer(request, answer):
  """The answer's faults, as a list of strings (empty: a good answer)."""
  if answer is None:
    return [] if request.half_close else ["closed without an answer"]
  status, content_type, data = answer
  if status not in ANSWERED:
    return [f"status {status}: {data[:300]!r}"]
  if not request.path.startswith("/v1/") and status == 200:
    return []
  if not content_type.startswith("application/json"):
    return [f"status {status} with Content-Type {content_type!r}: {data[:300]!r}"]
  try:
    body = json.loads(data.decode("utf-8"))  # strict UTF-8
  except ValueError as e:
    return [f"status {status}, not UTF-8 JSON ({e}): {data[:300]!r}"]
  faults = []
  for text in _strings(body):
    try:
      text.encode("utf-8")
    except UnicodeEncodeError:
      faults.append(f"a lone surrogate in the answer: {data[:300]!r}")
  if status != 200:
    if not (isinstance(body, dict) and list(body) == ["error"]
            and isinstance(body["error"], str)):
      return faults + [f"status {status} without TF Serving's error body: {body!r:.300}"]
    message = body["error"]
    if len(message) > MESSAGE_CHARS or not message.isprintable():
      faults.append(f"message of {len(message)} characters, or not printable: "
                    f"{message[:300]!r}")
  elif request.instances is not None and "predictions" in body:
    if len(body["predictions"]) != request.instances:
      faults.append(f"{len(body['predictions'])} predictions for {request.instances} "
                    f"instances")
  return faults


def test_generated_requests_get_200_or_4xx_and_the_server_lives(server):
  statuses = collections.Counter()
  faults = []

  @settings(max_examples=REQUESTS, deadline=None, database=None,
            suppress_health_check=list(HealthCheck), print_blob=True)
  @seed(SEED)
  @given(request=requests(MODEL))
  def one(request):
    answer = send(server.port, request)
    statuses[answer[0] if answer else "closed"] += 1
    found = check_answer(request, answer)
    if call(server.url, "/healthz")[0] != 200 or server.proc.poll() is not None:
      found.append("/healthz does not answer 200 after it")
    if found:
      faults.append((request, found))
    assert not found, (request, found)

  try:
    one()
  finally:
    print(f"fuzz seed {SEED}: {sum(statuses.values())} requests, statuses "
          f"{dict(sorted(statuses.items(), key=str))}")
  log = open(server.log_path, encoding="utf-8", errors="replace").read()
  assert "Traceback" not in log and "internal error" not in log, log[-3000:]
  # The generator reaches both sides: requests the model answers and requests refused.
  assert statuses[200] >= REQUESTS // 20 and statuses[400] >= REQUESTS // 4, statuses
