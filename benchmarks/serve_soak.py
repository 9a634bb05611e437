"""t2t-serve soaked: good and bad clients together for a bounded time, with a version swap.

    python benchmarks/serve_soak.py --export_dir=t2t_train/numbers_tiny --minutes=20

Copies the export's newest version into a temporary base directory and serves it with
polling (`--poll_seconds=2 --keep_versions=2`), then runs, all at once, for --minutes:
  good       --clients keep-alive clients, 1 to 4 sentences a request, each sent when the
             last returned; a 200 is answered, any other status an error of its code,
             no response at all (reset, timeout) "unanswered"
  bad        one client sending bodies the server must refuse (invalid JSON, deep
             nesting, a 5,000-digit number, an unknown signature, a non-string): a 4xx
             is expected, a 5xx or no answer counts as an error
  slow       one client opening a connection every second that sends half a request
             line and stops (the server must close it: 408 within --header_timeout_s)
  abandoned  one client sending a request every 0.2 s and closing before the answer
  swap       half-way, a copy of the version is renamed into the base as version + 1
Each minute it prints the good requests answered, errors by kind, latency p50 / p99 of
that minute and the server's resident memory; at the end, the totals, the RSS drift and
RESULT lines. With `--keep_versions=2` the new version is loaded beside the old one, so
memory steps up once; the drift is measured within each version's stretch: minute 2 to
the last minute before the swap, and the first minute that starts a minute after the
new version is AVAILABLE (`GET /v1/models/NAME`) to the last; the larger of the two is
the RESULT. The server is
stopped with SIGTERM; its exit status is reported. Exits 1 if a good request went
unanswered, a bad body got a 5xx, or the server exited non-zero.
"""

import argparse
import collections
import json
import os
import shutil
import signal
import socket
import statistics
import sys
import tempfile
import threading
import time
import urllib.request

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
# pylint: disable-next=wrong-import-position
from serve_bench import Client, rss_mib, sentences, start_server  # noqa: E402

BAD_BODIES = [b"{not json", b"[" * 50_000 + b"]" * 50_000,
              b'{"instances": [' + b"7" * 5000 + b"]}",
              b'{"signature_name": "nope", "instances": ["x"]}', b'{"instances": [7]}']


class Tally:
  """Thread-safe counters and the good requests' latencies, per minute."""

  def __init__(self):
    self.lock = threading.Lock()
    self.counts = collections.Counter()
    self.latencies = collections.defaultdict(list)  # minute -> seconds

  def add(self, kind, minute=None, seconds=None):
    with self.lock:
      self.counts[kind] += 1
      if seconds is not None:
        self.latencies[minute].append(seconds)


def _post(port, path, body, timeout=60):
  """(status or None, seconds) of one request on a new connection."""
  start = time.perf_counter()
  try:
    with socket.create_connection(("127.0.0.1", port), timeout=timeout) as sock:
      sock.sendall(f"POST {path} HTTP/1.1\r\nHost: x\r\nContent-Type: application/json\r\n"
                   f"Content-Length: {len(body)}\r\nConnection: close\r\n\r\n".encode() + body)
      head = sock.recv(64)
    return int(head.split()[1]), time.perf_counter() - start
  except (OSError, IndexError, ValueError):
    return None, time.perf_counter() - start


def good_client(port, model, texts, tally, start, stop, seed):
  client, i = Client(port, model), seed
  while not stop.is_set():
    batch = [texts[(i + j) % len(texts)] for j in range(1 + i % 4)]
    i += 7
    status, seconds = client.send_batch(batch)
    minute = int((time.time() - start) // 60)
    if status == 200:
      tally.add("answered", minute, seconds)
    elif status is None:
      tally.add("unanswered")
      client = Client(port, model)
    else:
      tally.add(f"good got {status}")


def bad_client(port, model, tally, stop):
  i = 0
  while not stop.is_set():
    status, _ = _post(port, f"/v1/models/{model}:predict", BAD_BODIES[i % len(BAD_BODIES)])
    i += 1
    tally.add("bad refused 4xx" if status and 400 <= status < 500 else f"bad got {status}")
    time.sleep(0.2)


def slow_client(port, header_timeout_s, tally, stop):
  while not stop.is_set():
    with socket.create_connection(("127.0.0.1", port), timeout=header_timeout_s + 10) as s:
      s.sendall(b"POST /v1/models/")
      try:
        head = s.recv(64)
        tally.add("slow closed 408" if b" 408 " in head else f"slow got {head[:20]!r}")
      except OSError:
        tally.add("slow not closed in time")
    time.sleep(1.0)


def abandoning_client(port, model, tally, stop):
  body = json.dumps({"instances": ["one two three"]}).encode()
  while not stop.is_set():
    with socket.create_connection(("127.0.0.1", port), timeout=10) as sock:
      sock.sendall(f"POST /v1/models/{model}:predict HTTP/1.1\r\nHost: x\r\n"
                   f"Content-Length: {len(body)}\r\n\r\n".encode() + body)
    tally.add("abandoned")
    time.sleep(0.2)


def _report_minute(minute, tally, rss):
  with tally.lock:
    lat = sorted(tally.latencies.get(minute, []))
    counts = dict(tally.counts)
  p50 = statistics.median(lat) * 1000 if lat else float("nan")
  p99 = lat[int(0.99 * (len(lat) - 1))] * 1000 if lat else float("nan")
  print(f"minute {minute + 1:3d}: {len(lat):6d} good answered, p50 {p50:7.1f} ms, p99 "
        f"{p99:7.1f} ms, RSS {rss:7.1f} MiB, totals {counts}", flush=True)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--export_dir", required=True)
  parser.add_argument("--minutes", type=float, default=20.0)
  parser.add_argument("--clients", type=int, default=8)
  parser.add_argument("--sentences", default=None)
  parser.add_argument("--header_timeout_s", type=float, default=2.0)
  args = parser.parse_args()
  from t2t_keras.server.model import resolve  # pylint: disable=import-outside-toplevel
  version_dir, version = resolve(args.export_dir)
  with tempfile.TemporaryDirectory() as base:
    shutil.copytree(version_dir, os.path.join(base, str(version)))
    return _soak(args, base, version)


def _soak(args, base, version):
  """Runs the clients against a server on `base` (see the module's docstring)."""
  proc, port, model = start_server(base, ["--poll_seconds=2", "--keep_versions=2",
                                          f"--header_timeout_s={args.header_timeout_s}"])
  texts, tally, stop, start = sentences(args.sentences), Tally(), threading.Event(), time.time()
  workers = [threading.Thread(target=good_client, args=(port, model, texts, tally, start,
                                                         stop, i)) for i in range(args.clients)]
  workers += [threading.Thread(target=bad_client, args=(port, model, tally, stop)),
              threading.Thread(target=slow_client, args=(port, args.header_timeout_s, tally,
                                                         stop)),
              threading.Thread(target=abandoning_client, args=(port, model, tally, stop))]
  for w in workers:
    w.start()
  rss, minute = [], 0
  swapped = available = None  # the minutes (0-based) of the swap and of the new version's load
  while time.time() - start < args.minutes * 60:
    time.sleep(1.0)
    if swapped is None and time.time() - start > args.minutes * 30:
      staging = os.path.join(base, f".tmp-{version + 1}")
      shutil.copytree(os.path.join(base, str(version)), staging)
      os.rename(staging, os.path.join(base, str(version + 1)))
      swapped = minute
      print(f"version {version + 1} published", flush=True)
    elif swapped is not None and available is None and _serves(port, model, version + 1):
      available = minute
      print(f"version {version + 1} available", flush=True)
    if time.time() - start >= (minute + 1) * 60:
      rss.append(rss_mib(proc.pid))
      _report_minute(minute, tally, rss[-1])
      minute += 1
  stop.set()
  for w in workers:
    w.join(timeout=120)
  proc.send_signal(signal.SIGTERM)
  code = proc.wait(timeout=120)
  return _summary(tally, rss, code, swapped, available)


def _serves(port, model, version):
  """Whether the server lists `version` as AVAILABLE."""
  try:
    with urllib.request.urlopen(f"http://127.0.0.1:{port}/v1/models/{model}",
                                timeout=10) as response:
      status = json.load(response)["model_version_status"]
  except (OSError, ValueError, KeyError):
    return False
  return any(s["version"] == str(version) and s["state"] == "AVAILABLE" for s in status)


def _drifts(rss, swapped, available):
  """[(label, percent)]: the last RSS sample against the first after warm-up, within each
  version's stretch (module docstring); rss[i] is minute i + 1's."""
  def drift(first, last):
    return (rss[last] / rss[first] - 1) * 100 if last > first else float("nan")
  if swapped is None:
    return [("minute 2 to the last", drift(1, len(rss) - 1))]
  out = [(f"minute 2 to {swapped}", drift(1, swapped - 1))]
  if available is not None:  # minute `available + 2` starts a minute after the load
    out.append((f"minute {available + 2} to {len(rss)}", drift(available + 1, len(rss) - 1)))
  return out


def _summary(tally, rss, code, swapped, available):
  lat = sorted(s for minute in tally.latencies.values() for s in minute)
  counts = tally.counts
  bad = {k: v for k, v in counts.items()
         if k.startswith(("good got", "bad got", "slow got", "slow not")) or k == "unanswered"}
  drifts = _drifts(rss, swapped, available)
  drift = max((d for _, d in drifts), key=abs)
  print(f"good requests answered: {counts['answered']}; unanswered: {counts['unanswered']}")
  print(f"refused bad bodies: {counts['bad refused 4xx']}; slow connections closed with 408: "
        f"{counts['slow closed 408']}; abandoned requests: {counts['abandoned']}")
  print(f"errors by kind: {bad or 'none'}")
  if lat:
    print(f"latency p50 {statistics.median(lat) * 1000:.1f} ms, p99 "
          f"{lat[int(0.99 * (len(lat) - 1))] * 1000:.1f} ms")
  print(f"RSS per minute (MiB): {', '.join(f'{r:.0f}' for r in rss)}; drift "
        + ", ".join(f"{label}: {d:+.1f}%" for label, d in drifts))
  print(f"server exit status after SIGTERM: {code}")
  print(f"RESULT soak_unanswered {counts['unanswered']}")
  print(f"RESULT soak_rss_drift_percent {drift:.1f}")
  return 1 if bad or code != 0 else 0


if __name__ == "__main__":
  sys.exit(main())
