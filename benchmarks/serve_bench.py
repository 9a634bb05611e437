"""t2t-serve under load: sentences/s and latency with concurrent clients, against the same
sentences sent one at a time and against the SavedModel called in this process.

    python benchmarks/serve_bench.py --export_dir=t2t_train/numbers_tiny
    python benchmarks/serve_bench.py --export_dir=RUN --clients=16 --seconds=300  # RSS check

Starts `t2t-serve --port=0` on the export (default flags: dynamic batching of up
to 32 sentences, 5 ms timeout), then, one phase after another:
  in-process   serving_default called with one sentence at a time, no HTTP
  sequential   one client, one sentence per request, each sent when the last returns
               (at most 30 s)
  concurrent   --clients clients, each a keep-alive connection sending one sentence
               per request as soon as its last one returned, for --seconds
It prints sentences/s, latency p50/p95/p99, errors, the server's resident memory
(sampled each second: the first sample after warm-up, the last, and the peak)
and the ratio concurrent / sequential. Sentences: --sentences (a file, one per
line) or numbers written in English words (num2words, seed 1), the main job's
input language.
"""

import argparse
import http.client
import json
import os
import random
import select
import statistics
import subprocess
import sys
import threading
import time

from t2t_keras.tf_startup import import_tensorflow_quietly


def sentences(path, n=500):
  if path:
    with open(path, encoding="utf-8") as f:
      return [line.rstrip("\n") for line in f if line.strip()]
  from num2words import num2words  # pylint: disable=import-outside-toplevel
  rng = random.Random(1)
  return [num2words(rng.randrange(1, 100_000)) for _ in range(n)]


def start_server(export_dir, flags=()):
  """(process, port, model name) of a t2t-serve on a free port, once it listens."""
  proc = subprocess.Popen([sys.executable, "-m", "t2t_keras.bin.serve",
                           f"--export_dir={export_dir}", "--port=0", *flags],
                          stdout=subprocess.PIPE, stderr=subprocess.DEVNULL, text=True)
  ready, _, _ = select.select([proc.stdout], [], [], 600)
  line = proc.stdout.readline().strip() if ready else ""
  if " at http://" not in line:
    proc.kill()
    sys.exit(f"serve_bench: t2t-serve did not start: {line!r}")
  return proc, int(line.rstrip("/").rsplit(":", 1)[1]), line.split(" ")[2]


def rss_mib(pid, field="VmRSS"):
  with open(f"/proc/{pid}/status") as f:
    for line in f:
      if line.startswith(field + ":"):
        return int(line.split()[1]) / 1024
  return float("nan")


class Client:
  """One keep-alive connection; `send(sentence)` -> (ok, seconds)."""

  def __init__(self, port, model):
    self.conn = http.client.HTTPConnection("127.0.0.1", port, timeout=120)
    self.path = f"/v1/models/{model}:predict"

  def send(self, sentence):
    status, seconds = self.send_batch([sentence])
    return status == 200, seconds

  def send_batch(self, batch):
    """(HTTP status, or None for no answer or a 200 without predictions; seconds)."""
    body = json.dumps({"instances": batch})
    start = time.perf_counter()
    try:
      self.conn.request("POST", self.path, body, {"Content-Type": "application/json"})
      response = self.conn.getresponse()
      status = response.status
      if status == 200 and "predictions" not in json.loads(response.read()):
        status = None
      elif status != 200:
        response.read()
    except (OSError, http.client.HTTPException, ValueError):
      self.conn.close()
      status = None
    return status, time.perf_counter() - start


def load(port, model, lines, clients, seconds, on_tick=None):
  """`clients` threads sending for `seconds`; returns the phase's figures."""
  latencies, errors, stop = [], [0], time.perf_counter() + seconds
  lock = threading.Lock()

  def worker(k):
    client, i = Client(port, model), k
    while time.perf_counter() < stop:
      ok, t = client.send(lines[i % len(lines)])
      i += clients
      with lock:
        (latencies.append(t) if ok else errors.__setitem__(0, errors[0] + 1))

  threads = [threading.Thread(target=worker, args=(k,)) for k in range(clients)]
  start = time.perf_counter()
  for t in threads:
    t.start()
  while any(t.is_alive() for t in threads):
    time.sleep(1.0)
    if on_tick:
      on_tick()
  for t in threads:
    t.join()
  return summary(latencies, errors[0], time.perf_counter() - start)


def summary(latencies, errors, seconds):
  ms = sorted(1000 * t for t in latencies)
  pick = lambda q: round(ms[min(len(ms) - 1, int(q * len(ms)))], 1) if ms else None
  return {"sentences": len(ms), "errors": errors,
          "sentences_per_s": round(len(ms) / seconds, 2),
          "p50_ms": pick(0.50), "p95_ms": pick(0.95), "p99_ms": pick(0.99),
          "mean_ms": round(statistics.fmean(ms), 1) if ms else None}


def in_process(export_dir, lines, seconds):
  """serving_default one sentence at a time in this process (no HTTP, no batching)."""
  import_tensorflow_quietly()
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  from t2t_keras.server.model import resolve  # pylint: disable=import-outside-toplevel
  signature = tf.saved_model.load(resolve(export_dir)[0]).signatures["serving_default"]
  signature(inputs=tf.constant(lines[:1]))  # compile
  latencies, stop, i = [], time.perf_counter() + seconds, 0
  start = time.perf_counter()
  while time.perf_counter() < stop:
    t = time.perf_counter()
    signature(inputs=tf.constant([lines[i % len(lines)]]))
    latencies.append(time.perf_counter() - t)
    i += 1
  return summary(latencies, 0, time.perf_counter() - start)


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--export_dir", required=True)
  parser.add_argument("--clients", type=int, default=16)
  parser.add_argument("--seconds", type=float, default=30)
  parser.add_argument("--sentences", default=None)
  args = parser.parse_args()
  lines = sentences(args.sentences)
  proc, port, model = start_server(args.export_dir)
  try:
    Client(port, model).send(lines[0])
    sequential = load(port, model, lines, 1, min(args.seconds, 30))
    rss = []
    concurrent = load(port, model, lines, args.clients, args.seconds,
                      on_tick=lambda: rss.append(rss_mib(proc.pid)))
    peak = rss_mib(proc.pid, "VmHWM")
  finally:
    proc.terminate()
    proc.wait(timeout=120)
  local = in_process(args.export_dir, lines, min(args.seconds, 30))
  result = {
      "cpu": cpu_name(), "export_dir": args.export_dir, "clients": args.clients,
      "seconds": args.seconds, "in_process": local, "sequential": sequential,
      "concurrent": concurrent,
      "concurrent_over_sequential": round(concurrent["sentences_per_s"]
                                          / sequential["sentences_per_s"], 2),
      "server_rss_mib": {"first": round(rss[0], 1), "last": round(rss[-1], 1),
                         "peak": round(peak, 1),
                         "last_over_first": round(rss[-1] / rss[0], 3),
                         "each_minute": [round(r, 1) for r in rss[::60]]},
      "server_exit_status": proc.returncode}
  print(json.dumps(result, indent=2))


def cpu_name():
  with open("/proc/cpuinfo") as f:
    for line in f:
      if line.startswith("model name"):
        return line.split(":", 1)[1].strip()
  return "unknown"


if __name__ == "__main__":
  main()
