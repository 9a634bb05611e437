"""t2t-serve under an operator's eye: clients that stall, leave or send hostile bodies,
deadlines, draining, request ids. Real processes on 127.0.0.1, raw sockets where a
well-behaved HTTP client cannot misbehave as needed."""

import json
import os
import re
import resource
import select
import shutil
import signal
import socket
import subprocess
import sys
import threading
import time
import urllib.request

import pytest
from conftest import TINY_SENTENCES
from prometheus_client.parser import text_string_to_metric_families
from serve_process import MODEL, Server, call, exported_tiny_run, predict

from t2t_keras.server.lifecycle import Lifecycle

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

PREDICT = f"/v1/models/{MODEL}:predict"


@pytest.fixture(scope="module")
def run_dir(tmp_path_factory):
  return exported_tiny_run(tmp_path_factory)


def _small_fd_limit():
  """In the server's process: at most 1,024 open files, as on many hosts by default."""
  _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  resource.setrlimit(resource.RLIMIT_NOFILE, (1024, hard))


@pytest.fixture(scope="module")
def guarded(run_dir, tmp_path_factory):
  """A server with small limits: 400 connections, headers in 2 s, answers in 10 s."""
  yield from Server.for_module(
      run_dir, tmp_path_factory, "--max_connections=400", "--header_timeout_s=2",
      "--request_timeout_ms=10000", "--batch_timeout_ms=300", "--max_batch_size=8",
      preexec_fn=_small_fd_limit)


def _post_headers(length, request_id=None):
  extra = f"X-Request-Id: {request_id}\r\n" if request_id else ""
  return (f"POST {PREDICT} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json"
          f"\r\nContent-Length: {length}\r\n{extra}\r\n").encode()


def _stalled_upload(port):
  """A connection that sends a predict request's headers and 1 of its 100 body bytes."""
  sock = socket.create_connection(("127.0.0.1", port), timeout=30)
  sock.sendall(_post_headers(100) + b"{")
  return sock


def _read_answer(sock, timeout=30):
  """(status, headers dict, body bytes) of the one response on `sock`; None if the server
  closed it without one."""
  sock.settimeout(timeout)
  data = b""
  while b"\r\n\r\n" not in data:
    chunk = sock.recv(65536)
    if not chunk:
      return None
    data += chunk
  head, body = data.split(b"\r\n\r\n", 1)
  lines = head.decode("latin-1").split("\r\n")
  headers = dict(line.lower().split(": ", 1) for line in lines[1:])
  while len(body) < int(headers.get("content-length", 0)):
    chunk = sock.recv(65536)
    if not chunk:
      break
    body += chunk
  return int(lines[0].split()[1]), headers, body


def _log(server):
  with open(server.log_path) as f:
    return f.read()


def test_stalled_connections_beyond_the_cap_do_not_lock_out_a_good_client(guarded):
  """3,000 connections that send headers and one body byte, then nothing: those past
  --max_connections get 503 at once, the others 408 at the request deadline; a client
  that retries on 503 gets its translation. (Without the cap and the deadline, a server
  allowed 1,024 open files stops accepting: accept() fails for ever.)"""
  _, hard = resource.getrlimit(resource.RLIMIT_NOFILE)
  if hard != resource.RLIM_INFINITY and hard < 3500:
    pytest.skip(f"this process may open only {hard} files; the test holds 3,000 sockets")
  resource.setrlimit(resource.RLIMIT_NOFILE, (max(3500, resource.getrlimit(
      resource.RLIMIT_NOFILE)[0]), hard))
  stalled = [_stalled_upload(guarded.port) for _ in range(3000)]
  try:
    start, answer = time.time(), None
    while time.time() - start < 60:
      status, answer = predict(guarded.url, {"instances": ["nine"]})
      if status == 200:
        break
      assert status == 503 and "--max_connections" in answer["error"], answer
      time.sleep(0.5)
    assert status == 200 and answer["predictions"][0]["outputs"], answer
    answers = [_read_answer(s) for s in stalled[:400]]
    codes = sorted({a[0] for a in answers if a})
    assert set(codes) <= {408, 503} and 408 in codes, codes
    assert all(json.loads(a[2])["error"] for a in answers if a)
  finally:
    for s in stalled:
      s.close()
  assert call(guarded.url, "/healthz")[0] == 200


def test_a_connection_that_never_finishes_its_headers_is_closed(guarded):
  """A byte every 0.3 s for up to 60 s: the answer comes while the bytes still trickle in
  (a timer reset by each byte would never fire), not before --header_timeout_s=2."""
  sock = socket.create_connection(("127.0.0.1", guarded.port), timeout=30)
  start = time.time()
  sock.sendall(b"POST /v1/models/")  # and then, a byte at a time, nothing useful
  while not select.select([sock], [], [], 0.3)[0] and time.time() - start < 60:
    sock.sendall(b"x")  # (the answer comes within a select's 0.3 s, not between two)
  waited = time.time() - start
  status, headers, body = _read_answer(sock)
  sock.close()
  assert status == 408 and "--header_timeout_s" in json.loads(body)["error"]
  assert headers["connection"] == "close" and 1.9 < waited < 60, waited


def test_attention_requests_are_bounded_and_health_answers_during_them(guarded):
  # 256 instances of 300-word inputs and 1,000-word outputs, in under 1 MiB
  big = {"signature_name": "attention",
         "instances": [{"inputs": " ".join("a" * 300), "outputs": " ".join("b" * 1000)}] * 256}
  assert len(json.dumps(big)) < 1 << 20
  status, answer = predict(guarded.url, big)
  assert status == 413 and "--max_attention_instances" in answer["error"], answer
  status, answer = predict(guarded.url, dict(big, instances=big["instances"][:8]))
  assert status == 400 and "--max_attention_chars" in answer["error"], answer
  widest = {"signature_name": "attention",
            "instances": [{"inputs": ("nine " * 80)[:400], "outputs": ("neun " * 80)[:400]}] * 8}
  done, slowest = [], [0.0]

  def attention():
    done.append(predict(guarded.url, widest))

  worker = threading.Thread(target=attention)
  began = time.time()
  worker.start()
  while worker.is_alive():
    start = time.time()
    assert call(guarded.url, "/healthz")[0] == 200
    slowest[0] = max(slowest[0], time.time() - start)
  worker.join()
  took = time.time() - began
  assert done[0][0] == 200 and len(done[0][1]["predictions"]) == 8
  # an event loop held by the model or the JSON encoding would keep one probe waiting
  # for most of the request's time; a free one answers each probe in a small part of it
  assert slowest[0] < max(1.0, 0.25 * took), (slowest, took)


@pytest.mark.parametrize("raw, message", [
    (b"[" * 100_000 + b"]" * 100_000, "nests JSON arrays or objects too deeply"),
    (b'{"instances": [' + b"7" * 5000 + b"]}", "4300 digits"),
])
def test_hostile_bodies_get_400_with_a_plain_message(guarded, raw, message):
  status, answer = call(guarded.url, PREDICT, raw=raw)
  assert status == 400 and message in answer["error"], answer
  assert "Error" not in answer["error"] and "Traceback" not in _log(guarded)


def test_a_client_leaving_mid_upload_is_logged_not_an_error(guarded):
  sock = socket.create_connection(("127.0.0.1", guarded.port), timeout=30)
  sock.sendall(_post_headers(1000, "left-mid-upload") + b'{"instances": ["ni')
  time.sleep(0.3)
  sock.close()
  deadline = time.time() + 10
  while "left-mid-upload" not in _log(guarded) and time.time() < deadline:
    time.sleep(0.1)
  line = [l for l in _log(guarded).splitlines() if "left-mid-upload" in l][-1]
  assert f'"POST {PREDICT}" 499 ' in line, line
  assert "internal error" not in _log(guarded) and "Traceback" not in _log(guarded)


def test_one_failing_request_in_a_merged_call_fails_alone(guarded):
  """Four requests to `constrained` arrive within the batch timeout and share one call;
  one carries 9 phrases, over the export's limit of 8, which fails that call. Each is then
  run alone: the three good ones get their outputs, the bad one a 400 without TensorFlow's
  node text."""
  bodies = [{"instances": [{"inputs": TINY_SENTENCES[i], "constraints": ["neun"]}]}
            for i in range(3)]
  bodies.insert(1, {"instances": [{"inputs": "nine", "constraints": ["neun"] * 9}]})
  before = call(guarded.url, "/healthz")[1]["batches"]
  results = [None] * 4

  def client(i):
    results[i] = predict(guarded.url, bodies[i])

  threads = [threading.Thread(target=client, args=(i,)) for i in range(4)]
  for t in threads:
    t.start()
  for t in threads:
    t.join()
  assert [status for status, _ in results] == [200, 400, 200, 200], results
  assert "the limit set at export, 8" in results[1][1]["error"]
  assert "[[" not in results[1][1]["error"] and "node" not in results[1][1]["error"]
  assert all("neun" in r[1]["predictions"][0]["outputs"] for i, r in enumerate(results)
             if i != 1)
  # one merged call failed; the retries made three good calls (the failed ones uncounted)
  assert call(guarded.url, "/healthz")[1]["batches"] - before == 3


def test_request_ids_are_kept_or_made_and_the_log_cannot_be_forged(guarded):
  request = urllib.request.Request(guarded.url + PREDICT, data=b'{"instances": ["nine"]}',
                                   headers={"X-Request-Id": "client-id_42"})
  with urllib.request.urlopen(request, timeout=60) as response:
    assert response.headers["X-Request-Id"] == "client-id_42"
  request = urllib.request.Request(guarded.url + "/healthz",
                                   headers={"X-Request-Id": "bad id with spaces"})
  with urllib.request.urlopen(request, timeout=60) as response:
    assert re.fullmatch(r"[0-9a-f]{32}", response.headers["X-Request-Id"])
  call(guarded.url, "/nowhere%0A2026-01-01_00:00:00_forged_line")
  time.sleep(0.3)
  log = _log(guarded)
  assert re.search(rf'"POST {PREDICT}" 200 [0-9.]+ ms client-id_42$', log, re.M)
  forged = [l for l in log.splitlines() if "forged_line" in l]
  assert len(forged) == 1 and "/nowhere%0A2026" in forged[0], forged


def test_readiness_and_liveness():
  life = Lifecycle()
  assert life.ready and life.live
  life.drain()
  assert not life.ready and life.live
  life.die(RuntimeError("worker"))
  assert not life.ready and not life.live


@pytest.fixture(scope="module")
def slow_batches(run_dir, tmp_path_factory):
  """A server that waits 6 s to fill a batch of 8 and gives each request 3 s (a full batch
  runs at once: its 3 s are for the model alone)."""
  yield from Server.for_module(run_dir, tmp_path_factory, "--batch_timeout_ms=6000",
                               "--max_batch_size=8", "--request_timeout_ms=3000")


def _wait_for(condition, seconds, what):
  deadline = time.time() + seconds
  while not condition():
    assert time.time() < deadline, what
    time.sleep(0.05)


def test_an_abandoned_request_leaves_the_queue_and_never_reaches_the_model(slow_batches):
  health = lambda: call(slow_batches.url, "/healthz")[1]  # noqa: E731
  before = health()["batches"]
  sock = socket.create_connection(("127.0.0.1", slow_batches.port), timeout=30)
  body = b'{"instances": ["nine"]}'
  sock.sendall(_post_headers(len(body), "abandoned") + body)
  _wait_for(lambda: health()["queued"] == 1, 5, "the request never queued")
  sock.close()  # the client leaves while its request waits for a batch
  _wait_for(lambda: health()["queued"] == 0, 4, "the abandoned request stayed queued")
  time.sleep(6.5)  # past the batch timeout: nothing is left to run
  assert health()["batches"] == before
  line = [l for l in _log(slow_batches).splitlines() if "abandoned" in l][-1]
  assert f'"POST {PREDICT}" 499 ' in line, line


def test_past_its_deadline_a_request_gets_504_and_leaves_the_queue(slow_batches):
  before = call(slow_batches.url, "/healthz")[1]["batches"]
  start = time.time()
  status, answer = predict(slow_batches.url, {"instances": ["nine"]})
  assert status == 504 and "--request_timeout_ms" in answer["error"], answer
  assert time.time() - start > 2.9  # (had it waited for the batch, it would be 200)
  assert call(slow_batches.url, "/healthz")[1]["queued"] == 0
  time.sleep(3.5)  # past the batch timeout: nothing was left to run
  assert call(slow_batches.url, "/healthz")[1]["batches"] == before
  status, answer = predict(slow_batches.url, {"instances": TINY_SENTENCES[:2] * 4})
  assert status == 200 and len(answer["predictions"]) == 8  # a full batch waits for nothing


def _scrape(server):
  """{(sample name, frozenset(labels)): value} of the server's Prometheus metrics."""
  with urllib.request.urlopen(server.url + "/monitoring/prometheus/metrics",
                              timeout=60) as response:
    assert response.headers["Content-Type"].startswith("text/plain")
    text = response.read().decode()
  return {(sample.name, frozenset(sample.labels.items())): sample.value
          for family in text_string_to_metric_families(text) for sample in family.samples}


def test_metrics_count_known_traffic(slow_batches):
  """Three full batches of 8 sentences (no batch wait) and one unknown signature: the
  counters move by exactly that; the queue is empty and nothing is in flight."""
  before = _scrape(slow_batches)
  for _ in range(3):
    status, _ = predict(slow_batches.url, {"instances": TINY_SENTENCES[:4] * 2})
    assert status == 200
  status, _ = predict(slow_batches.url, {"signature_name": "nope", "instances": ["nine"]})
  assert status == 400
  after = _scrape(slow_batches)

  def moved(name, **labels):
    key = (name, frozenset(labels.items()))
    return after.get(key, 0) - before.get(key, 0)

  served = dict(api="predict", signature="serving_default")
  assert moved("t2t_serve_requests_total", code="200", **served) == 3
  assert moved("t2t_serve_requests_total", api="predict", signature="", code="400") == 1
  assert moved("t2t_serve_request_seconds_count", **served) == 3
  assert moved("t2t_serve_model_calls_total", signature="serving_default") == 3
  assert moved("t2t_serve_batch_sentences_sum", signature="serving_default") == 24
  assert moved("t2t_serve_batch_sentences_bucket", signature="serving_default",
               le="4.0") == 0
  assert moved("t2t_serve_batch_sentences_bucket", signature="serving_default",
               le="8.0") == 3
  assert after[("t2t_serve_queued_sentences", frozenset())] == 0
  assert after[("t2t_serve_in_flight_requests", frozenset())] == 0
  assert after[("t2t_serve_info", frozenset({("model", MODEL), ("version", "7")}))] == 1


@pytest.fixture
def start(run_dir, tmp_path):
  """start(*flags, export_dir=run_dir) -> a Server of this test, killed if still running at
  the end (a failed assertion leaves no process behind)."""
  started = []

  def start_server(*flags, export_dir=run_dir):
    started.append(Server(str(export_dir), str(tmp_path / f"serve{len(started)}.log"),
                          *flags))
    return started[-1]

  yield start_server
  for s in started:
    if s.proc.poll() is None:
      s.proc.kill()
      s.proc.wait()


def _in_flight_upload(server):
  """A stalled upload (_stalled_upload) once the server has read its headers: a request
  in flight that SIGTERM's drain must wait for (before that, shutdown just closes it)."""
  stalled = _stalled_upload(server.port)
  _wait_for(lambda: _scrape(server)[("t2t_serve_in_flight_requests", frozenset())] == 1, 30,
            "the server never read the stalled upload's headers")
  return stalled


def test_sigterm_stops_accepting_answers_the_queue_then_503_past_the_drain(start):
  """Six requests wait in the queue (a 4-s batch timeout), a seventh that would overflow it
  gets 503, and an upload stalls in flight. SIGTERM stops accepting connections and the six
  are answered; the stalled upload gets 503 "shutting down" once --drain_seconds=6 are up
  (the 120-s request deadline would 408), and the exit status (1) says so."""
  s = start("--drain_seconds=6", "--batch_timeout_ms=4000", "--max_batch_size=8",
            "--max_queued_sentences=8", "--max_instances=8")
  status, body = predict(s.url, {"instances": TINY_SENTENCES[:6]})  # what each should get
  assert status == 200
  want = [row["outputs"] for row in body["predictions"]]
  stalled = _in_flight_upload(s)
  results = [None] * 6

  def client(i):
    results[i] = predict(s.url, {"instances": [TINY_SENTENCES[i]]})

  threads = [threading.Thread(target=client, args=(i,)) for i in range(6)]
  for t in threads:
    t.start()
  _wait_for(lambda: call(s.url, "/healthz")[1]["queued"] == 6, 60, "requests never queued")
  status, body = predict(s.url, {"instances": ["nine"] * 3})
  assert status == 503 and "--max_queued_sentences" in body["error"]
  signalled = time.time()
  s.proc.send_signal(signal.SIGTERM)

  def refused():
    try:
      socket.create_connection(("127.0.0.1", s.port), timeout=1).close()
      return False
    except ConnectionRefusedError:
      return True
  _wait_for(refused, 3, "still accepting connections after SIGTERM")
  for t in threads:
    t.join(timeout=120)
  for (status, body), expected in zip(results, want):  # accepted before SIGTERM: answered
    assert status == 200 and body["predictions"][0]["outputs"] == expected, body
  status, headers, body = _read_answer(stalled, timeout=100)
  waited = time.time() - signalled
  assert status == 503 and "shutting down" in json.loads(body)["error"]
  assert headers["retry-after"] == "1" and waited > 5.9, waited
  code, out = s.stop(signalled=True)
  assert code == 1, (code, out)
  assert "1 request(s) not finished within --drain_seconds=6 were answered 503" in out, out


def test_flags_that_cannot_work_together_are_refused_before_loading(tmp_path):
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  out = subprocess.run(
      [sys.executable, "-m", "t2t_keras.bin.serve", f"--export_dir={tmp_path}",
       "--max_queued_sentences=64", "--max_batch_size=8"], capture_output=True, text=True,
      env=env, timeout=120)
  assert out.returncode != 0
  assert "--max_instances (256) is over --max_queued_sentences (64)" in out.stderr, out.stderr


def test_new_versions_are_polled_warmed_and_swapped_in_under_load(run_dir, tmp_path, start):
  """A base directory polled every 0.3 s, the newest two versions kept: version 8 appears
  (renamed into place, as t2t-exporter does) while two clients send requests; a broken 9
  is logged and skipped. No request fails at any point. (Retiring the oldest, and the
  polling's other cases: test_server_versions.py. Loading and warming a version up
  takes seconds on an idle machine, minutes on a loaded one.) Then, with an upload in
  flight, a second SIGTERM during the drain exits at once (status 1), not after
  --drain_seconds=60; the clean stop is every module server's (Server.for_module)."""

  base = tmp_path / "base"
  base.mkdir()
  shutil.copytree(os.path.join(run_dir, "export", "7"), base / "7")
  s = start("--poll_seconds=0.3", "--keep_versions=2", "--drain_seconds=60", export_dir=base)
  failures, answered, stop = [], [0], threading.Event()

  def client():
    while not stop.is_set():
      status, answer = predict(s.url, {"instances": ["nine"]})
      answered[0] += 1
      if status != 200:
        failures.append(answer)
      # Steady traffic, 2 requests a second from each client: at 20 a second each, the
      # two kept a 2-core machine's CPU busy and version 8 took minutes to load.
      stop.wait(0.5)

  def publish(version, broken=False):
    staging = tmp_path / f".tmp-{version}"
    if broken:
      staging.mkdir()
      (staging / "saved_model.pb").write_bytes(b"not a SavedModel")
    else:
      shutil.copytree(base / "7", staging)
    os.rename(staging, base / str(version))

  def served():
    return call(s.url, "/healthz")[1]["versions"]

  clients = [threading.Thread(target=client) for _ in range(2)]
  for t in clients:
    t.start()
  try:
    publish(8)
    _wait_for(lambda: served() == [8, 7], 600, "version 8 never served")
    count = answered[0]
    _wait_for(lambda: answered[0] > count + 5, 60, "no requests after the swap")
    publish(9, broken=True)
    _wait_for(lambda: "version 9 of" in _log(s), 120, "the broken version was not logged")
    assert served() == [8, 7]
  finally:
    stop.set()
    for t in clients:
      t.join(timeout=120)
  assert failures == [] and answered[0] > 10, (failures[:3], answered)
  for version in (7, 8):
    status, _ = predict(s.url, {"instances": ["nine"]}, f"/versions/{version}")
    assert status == 200
  status, answer = predict(s.url, {"instances": ["nine"]}, "/versions/6")
  assert status == 404 and "served versions: 8, 7" in answer["error"]
  assert "cannot be served, skipped" in _log(s)
  metrics = _scrape(s)
  assert {dict(labels)["version"] for name, labels in metrics
          if name == "t2t_serve_info"} == {"7", "8"}
  stalled = _in_flight_upload(s)
  s.proc.send_signal(signal.SIGTERM)
  time.sleep(0.5)
  signalled = time.time()
  s.proc.send_signal(signal.SIGTERM)
  code, _ = s.stop(signalled=True)
  stalled.close()
  assert code == 1 and time.time() - signalled < 30  # not the 60 s of the drain
  assert "second signal: exiting now" in _log(s)
