"""Stopping a run cleanly: SIGTERM / Ctrl-C, and the same stop on every worker.

    with StopSignals() as signals:           # SIGTERM and SIGINT set signals.received
      ...
    agree = WorkerAgreement(strategy, num_workers, chief)
    stop, save = agree(signals.received is not None, time_to_save)
"""

import signal

import tensorflow as tf


class StopSignals:
  """A context manager: while inside, SIGTERM and SIGINT are recorded (not fatal).

  `received` is the last signal number, or None. Previous handlers come back on
  exit. Outside the main thread (where handlers cannot be set) nothing changes.
  """

  def __init__(self, signals=(signal.SIGTERM, signal.SIGINT)):
    self.signals = signals
    self.received = None
    self._previous = {}

  def __enter__(self):
    def handler(signum, frame):
      del frame
      self.received = signum
    for sig in self.signals:
      try:
        self._previous[sig] = signal.signal(sig, handler)
      except ValueError:  # not the main thread
        pass
    return self

  def __exit__(self, *exc):
    for sig, previous in self._previous.items():
      signal.signal(sig, previous)
    self._previous = {}
    return False


class WorkerAgreement:
  """(stop, save) as all workers will act on them this step.

  With several workers a signal on any one stops all of them after the same
  step, and time-based saves follow the chief's clock, so no worker waits in a
  collective that another has left (one scalar all-reduce per step). With one
  worker: the local decisions, at no cost.
  """

  def __init__(self, strategy, num_workers, chief):
    self.strategy, self.num_workers, self.chief = strategy, num_workers, chief
    self._fn = None

  def __call__(self, stop, save):
    if self.num_workers <= 1:
      return stop, save
    if self._fn is None:
      @tf.function
      def agree(flags):
        summed = self.strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.identity(flags)))  # on each replica's device
        return self.strategy.experimental_local_results(summed)[0]
      self._fn = agree
    flags = self._fn(tf.constant([float(stop), float(save and self.chief)]))
    return bool(flags[0] > 0), bool(flags[1] > 0)
