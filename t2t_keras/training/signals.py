"""Stopping a run cleanly: SIGTERM / Ctrl-C, and the same stop on every worker.

    with StopSignals() as signals:           # SIGTERM and SIGINT set signals.received
      ...
    agree = WorkerAgreement(strategy, num_workers, chief)
    stop, save = agree(signals.received is not None, time_to_save)
    agree.same_step(restored_step, output_dir)    # InputError where workers differ
    bleu = agree.from_chief([chief_bleu])         # the chief's value on every worker
"""

import signal

import tensorflow as tf

from t2t_keras.errors import InputError


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
    self._fn = self._sum_fn = None

  def __call__(self, stop, save):
    if self.num_workers <= 1:
      return stop, save
    if self._fn is None:
      @tf.function(autograph=False)
      def agree(flags):
        summed = self.strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.identity(flags)))  # on each replica's device
        return self.strategy.experimental_local_results(summed)[0]
      self._fn = agree
    flags = self._fn(tf.constant([float(stop), float(save and self.chief)]))
    return bool(flags[0] > 0), bool(flags[1] > 0)

  def _sum(self, values):
    """The sum over workers of a float64 vector (one all-reduce); `values` itself with one
    worker."""
    if self.num_workers <= 1:
      return [float(v) for v in values]
    if self._sum_fn is None:
      @tf.function(autograph=False)
      def summed(x):
        out = self.strategy.run(lambda: tf.distribute.get_replica_context().all_reduce(
            tf.distribute.ReduceOp.SUM, tf.identity(x)))
        return self.strategy.experimental_local_results(out)[0]
      self._sum_fn = summed
    # Every replica adds the vector: divide by the replicas each worker holds.
    per_worker = self.strategy.num_replicas_in_sync // self.num_workers
    return [float(v) / per_worker
            for v in self._sum_fn(tf.constant(values, tf.float64)).numpy()]

  def from_chief(self, values):
    """The chief's `values` (a list of floats) on every worker; the others pass any list
    of the same length."""
    return self._sum([v if self.chief else 0.0 for v in values])

  def same_step(self, step, output_dir):
    """InputError on every worker unless all of them restored `step`: a worker whose state
    (output_dir/worker_tmp_<i>) is missing or stale would train out of step with the rest
    (and hang or corrupt the run)."""
    chief_step = self.from_chief([float(step)])[0]
    others = self._sum([float(step != chief_step)])[0]
    if others:
      raise InputError(
          f"{int(others)} worker(s) restored another step than the chief's "
          f"{int(chief_step)} (this worker: {step}): their state in "
          f"{output_dir}/worker_tmp_<i> is missing or from another point of the run; "
          "put it back, or start the run afresh in a new --output_dir")
