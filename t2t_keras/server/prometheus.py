"""t2t-serve's Prometheus metrics, at TF Serving's path /monitoring/prometheus/metrics.

    t2t_serve_requests_total{api, signature, code}   /v1/ requests by HTTP status
    t2t_serve_request_seconds{api, signature}        their latency (histogram)
    t2t_serve_model_calls_total{signature}           calls of the model (merged batches)
    t2t_serve_batch_sentences{signature}             sentences per model call (histogram)
    t2t_serve_model_call_seconds{signature}          seconds per model call (histogram)
    t2t_serve_queued_sentences                       waiting, not yet in a call
    t2t_serve_in_flight_requests                     /v1/ requests not yet answered
    t2t_serve_info{model, version}                   1 per served version

The access log's middleware (`access.AccessLog`) counts and times each /v1/ request here.
`api` is predict, metadata or status ("" for a path TF Serving's patterns refuse);
`signature` is set only once the model knows it (else ""), so no client can create
series at will. TF Serving's own metrics (`:tensorflow:serving:request_count` ...) are
named differently; these follow Prometheus's conventions (seconds, `_total`).
"""

import time

import prometheus_client as prom

PATH = "/monitoring/prometheus/metrics"
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, 60, 120)
_SIZE_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256, 512, 1024)


class Metrics:
  """The registry of one server process, and the hooks that feed it."""

  def __init__(self, model_name):
    self.model_name = model_name
    self.registry = prom.CollectorRegistry()
    r = self.registry
    self.requests = prom.Counter("t2t_serve_requests", "HTTP requests under /v1/.",
                                 ["api", "signature", "code"], registry=r)
    self.latency = prom.Histogram("t2t_serve_request_seconds", "Seconds to answer a /v1/ "
                                  "request.", ["api", "signature"],
                                  buckets=_LATENCY_BUCKETS, registry=r)
    self.calls = prom.Counter("t2t_serve_model_calls", "Calls of the model.",
                              ["signature"], registry=r)
    self.batch = prom.Histogram("t2t_serve_batch_sentences", "Sentences per model call.",
                                ["signature"], buckets=_SIZE_BUCKETS, registry=r)
    self.call_seconds = prom.Histogram("t2t_serve_model_call_seconds", "Seconds per model "
                                       "call.", ["signature"], buckets=_LATENCY_BUCKETS,
                                       registry=r)
    self.queued = prom.Gauge("t2t_serve_queued_sentences", "Sentences waiting for a model "
                             "call.", registry=r)
    self.in_flight = prom.Gauge("t2t_serve_in_flight_requests", "/v1/ requests not yet "
                                "answered.", registry=r)
    self.info = prom.Gauge("t2t_serve_info", "The served model's versions.",
                           ["model", "version"], registry=r)

  def timed(self, run):
    """`run(signature, inputs)` that also counts the call, its sentences and seconds."""
    def timed_run(signature, inputs):
      start = time.perf_counter()
      outputs = run(signature, inputs)
      self.calls.labels(signature).inc()
      self.batch.labels(signature).observe(len(next(iter(inputs.values()))))
      self.call_seconds.labels(signature).observe(time.perf_counter() - start)
      return outputs
    return timed_run

  def watch_queue(self, versions):
    self.queued.set_function(lambda: versions.queued)

  def versions_changed(self, added, removed):
    """versions.Versions' on_change: the info series of each served version."""
    for version in added:
      self.info.labels(self.model_name, str(version)).set(1)
    for version in removed:
      self.info.remove(self.model_name, str(version))

  def request_started(self):
    self.in_flight.inc()

  def request_done(self, state, code, seconds):
    """One /v1/ request answered; `state` is its scope's, where the handler named its api
    and signature."""
    self.in_flight.dec()
    api, signature = state.get("api", ""), state.get("signature", "")
    self.requests.labels(api, signature, str(code)).inc()
    self.latency.labels(api, signature).observe(seconds)

  def exposition(self):
    """(body bytes, content type) of the registry in Prometheus's text format."""
    return prom.generate_latest(self.registry), prom.CONTENT_TYPE_LATEST
