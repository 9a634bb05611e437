"""The training stream through the tf.data service: batches made on other hosts.

    ds = service.distribute(batches, group, "grpc://dispatcher:5050")
    # batches(seed) -> the local batch stream; elements as make_dataset's

A dispatcher and its workers run elsewhere (`t2t-data-service --port=5050` starts a
dispatcher and a worker in one process; `--dispatcher_address=HOST:5050` more workers).
Every worker builds the whole stream from the split's files (`parallel_epochs`), so
each seeds its shuffles from its own clock when it starts:
with one fixed seed every worker would make the same batches and the trainer would see
each one once per worker. A run of `group` batches (one per replica of a step, one
shape) travels as one element, so the replicas of a step still get one shape. The
stream is not deterministic and its iterator cannot be checkpointed: a resumed run
draws afresh.
"""

import tensorflow as tf


def _clock_seed(unused):
  """int64 []: microseconds of the clock where the dataset is built (a service worker)."""
  return tf.cast(tf.timestamp() * 1e6, tf.int64) % (2 ** 31 - 1)


def distribute(batches, group, address):
  """The stream `batches(seed)` made by the tf.data service at `address`.

  batches: seed (int64 scalar tensor) -> a repeated dataset of batches whose runs of
    `group` consecutive batches share one shape.
  group: batches per run (replicas fed by this pipeline).
  address: the dispatcher, "grpc://host:port" (or "host:port").
  """
  ds = tf.data.Dataset.from_tensors(0).map(_clock_seed).flat_map(batches)
  if group > 1:
    ds = ds.batch(group, drop_remainder=True)  # [group, B, L]: one element per run
  ds = ds.apply(tf.data.experimental.service.distribute(
      processing_mode="parallel_epochs", service=address))
  if group > 1:
    ds = ds.unbatch()
  return ds.prefetch(tf.data.AUTOTUNE)


def serve(port, dispatcher=None):
  """Starts a dispatcher on `port` and a worker of it on a free port (or, given a running
  `dispatcher` "host:port", only a worker, on `port`). Returns (servers, their addresses
  "host:port"); they run until the process ends (the last is the worker: `join()` it)."""
  service = tf.data.experimental.service
  servers = []
  if dispatcher is None:
    servers.append(service.DispatchServer(service.DispatcherConfig(port=port)))
    dispatcher = servers[0].target.split("://")[1]
    port = 0
  servers.append(service.WorkerServer(service.WorkerConfig(dispatcher_address=dispatcher,
                                                           port=port)))
  return servers, [s._address for s in servers]  # pylint: disable=protected-access
