"""The server's dynamic batcher, with a recording stand-in for the model (no TensorFlow)."""

import asyncio
import threading
import time

import numpy as np
import pytest

from t2t_keras.server.batching import Batcher, QueueFull, ShuttingDown, WorkerDead


class Recorder:
  """run(signature, inputs) -> each input row doubled; records every call's rows."""

  def __init__(self, seconds=0.0):
    self.calls = []
    self.seconds = seconds
    self.lock = threading.Lock()

  def __call__(self, signature, inputs):
    with self.lock:
      self.calls.append((signature, list(inputs["inputs"])))
    time.sleep(self.seconds)
    return {"outputs": np.array([x * 2 for x in inputs["inputs"]]),
            "rows": np.arange(len(inputs["inputs"]))}


def run(coroutine):
  return asyncio.run(coroutine)


async def _with(batcher, body):
  await batcher.start()
  try:
    return await body()
  finally:
    await batcher.stop()


def test_concurrent_requests_share_one_call_in_arrival_order():
  model = Recorder()
  batcher = Batcher(model, max_batch_size=8, batch_timeout_ms=200, max_queued=64)

  async def body():
    return await asyncio.gather(*(batcher.submit("s", {"inputs": [i, 10 + i]})
                                  for i in range(3)))

  results = run(_with(batcher, body))
  assert model.calls == [("s", [0, 10, 1, 11, 2, 12])]
  for i, result in enumerate(results):
    assert result["outputs"].tolist() == [2 * i, 2 * (10 + i)]
    assert result["rows"].tolist() == [2 * i, 2 * i + 1]  # its own slice of the call


def test_a_full_batch_does_not_wait_for_the_timeout():
  model = Recorder()
  batcher = Batcher(model, max_batch_size=4, batch_timeout_ms=60_000, max_queued=64)

  async def body():
    start = time.perf_counter()
    result = await batcher.submit("s", {"inputs": [1, 2, 3, 4]})
    return result, time.perf_counter() - start

  result, seconds = run(_with(batcher, body))
  assert result["outputs"].tolist() == [2, 4, 6, 8] and seconds < 5


def test_large_request_is_split_and_reassembled():
  model = Recorder()
  batcher = Batcher(model, max_batch_size=4, batch_timeout_ms=1, max_queued=64)
  result = run(_with(batcher, lambda: batcher.submit("s", {"inputs": list(range(10))})))
  assert [rows for _, rows in model.calls] == [[0, 1, 2, 3], [4, 5, 6, 7], [8, 9]]
  assert result["outputs"].tolist() == [2 * i for i in range(10)]


def test_signatures_are_not_mixed_and_unmergeable_ones_run_alone():
  model = Recorder()
  batcher = Batcher(model, max_batch_size=8, batch_timeout_ms=200, max_queued=64,
                    mergeable=lambda signature: signature != "alone")

  async def body():
    return await asyncio.gather(
        batcher.submit("a", {"inputs": [1]}), batcher.submit("b", {"inputs": [2]}),
        batcher.submit("a", {"inputs": [3]}), batcher.submit("alone", {"inputs": [4, 5]}),
        batcher.submit("alone", {"inputs": [6]}))

  results = run(_with(batcher, body))
  assert sorted(model.calls) == [("a", [1, 3]), ("alone", [4, 5]), ("alone", [6]),
                                 ("b", [2])]
  assert [r["outputs"].tolist() for r in results] == [[2], [4], [6], [8, 10], [12]]


def test_queue_full_names_the_flag_and_stop_answers_waiting_requests():
  model = Recorder(seconds=0.2)
  batcher = Batcher(model, max_batch_size=2, batch_timeout_ms=1, max_queued=4)

  async def body():
    waiting = [asyncio.ensure_future(batcher.submit("s", {"inputs": [i, i]}))
               for i in range(2)]
    await asyncio.sleep(0)  # both are queued: 4 sentences
    with pytest.raises(QueueFull, match="--max_queued_sentences"):
      await batcher.submit("s", {"inputs": [9]})
    return waiting

  async def main():
    await batcher.start()
    waiting = await body()
    await batcher.stop()  # returns only after both were answered
    return [w.result()["outputs"].tolist() for w in waiting]

  assert run(main()) == [[0, 0], [2, 2]]


def test_model_errors_reach_every_request_of_the_call():
  def broken(signature, inputs):
    raise ValueError("bad batch")

  batcher = Batcher(broken, max_batch_size=4, batch_timeout_ms=100, max_queued=8)

  async def body():
    return await asyncio.gather(batcher.submit("s", {"inputs": [1]}),
                                batcher.submit("s", {"inputs": [2]}), return_exceptions=True)

  results = run(_with(batcher, body))
  assert [str(r) for r in results] == ["bad batch", "bad batch"]


def test_a_failed_merged_call_fails_only_the_request_that_caused_it():
  model = Recorder()

  def refuses_negatives(signature, inputs):
    if any(x < 0 for x in inputs["inputs"]):
      raise ValueError("negative input")
    return model(signature, inputs)

  batcher = Batcher(refuses_negatives, max_batch_size=8, batch_timeout_ms=200, max_queued=16)

  async def body():
    return await asyncio.gather(*(batcher.submit("s", {"inputs": rows})
                                  for rows in ([1, 2], [-3], [4])), return_exceptions=True)

  good, bad, other = run(_with(batcher, body))
  assert good["outputs"].tolist() == [2, 4] and other["outputs"].tolist() == [8]
  assert isinstance(bad, ValueError) and str(bad) == "negative input"
  # the merged call failed before the model ran; then each request alone
  assert model.calls == [("s", [1, 2]), ("s", [4])]


def test_a_cancelled_request_leaves_the_queue_and_never_reaches_the_model():
  model = Recorder(seconds=0.3)
  batcher = Batcher(model, max_batch_size=1, batch_timeout_ms=1, max_queued=4)

  async def body():
    first = asyncio.ensure_future(batcher.submit("s", {"inputs": [1]}))
    await asyncio.sleep(0.1)  # the first is in the model
    left = asyncio.ensure_future(batcher.submit("s", {"inputs": [2, 3]}))
    await asyncio.sleep(0.01)
    assert batcher.queued == 2
    left.cancel()  # its client went away
    await asyncio.sleep(0.01)
    queued_after = batcher.queued
    last = await batcher.submit("s", {"inputs": [4]})
    return (await first)["outputs"].tolist(), queued_after, last["outputs"].tolist()

  first, queued_after, last = run(_with(batcher, body))
  assert (first, queued_after, last) == ([2], 0, [8])
  assert [rows for _, rows in model.calls] == [[1], [4]]


def test_a_stopping_batcher_answers_what_it_holds_and_refuses_the_rest():
  model = Recorder(seconds=0.3)
  batcher = Batcher(model, max_batch_size=1, batch_timeout_ms=1, max_queued=4)

  async def main():
    await batcher.start()
    running = asyncio.ensure_future(batcher.submit("s", {"inputs": [1]}))
    await asyncio.sleep(0.1)
    waiting = asyncio.ensure_future(batcher.submit("s", {"inputs": [2]}))
    await asyncio.sleep(0.01)
    stopping = asyncio.ensure_future(batcher.stop())
    await asyncio.sleep(0.01)
    with pytest.raises(ShuttingDown, match="no longer served"):
      batcher.enqueue("s", {"inputs": [3]})
    await stopping
    return (await running)["outputs"].tolist(), (await waiting)["outputs"].tolist()

  assert run(main()) == ([2], [4])
  assert batcher.queued == 0 and [rows for _, rows in model.calls] == [[1], [2]]


def test_a_dead_worker_fails_waiting_requests_and_says_why():
  deaths = []

  def returns_nothing(signature, inputs):
    return None  # the worker cannot slice this: a bug in the worker's own code path

  batcher = Batcher(returns_nothing, max_batch_size=1, batch_timeout_ms=1, max_queued=4,
                    on_dead=deaths.append)

  async def body():
    results = await asyncio.gather(batcher.submit("s", {"inputs": [1]}),
                                   batcher.submit("s", {"inputs": [2]}),
                                   return_exceptions=True)
    with pytest.raises(WorkerDead, match="no longer live"):
      await batcher.submit("s", {"inputs": [3]})
    return results

  first, second = run(_with(batcher, body))
  assert isinstance(first, WorkerDead) and isinstance(second, WorkerDead)
  assert len(deaths) == 1 and isinstance(batcher.dead, AttributeError)


def test_bad_sizes_are_refused():
  with pytest.raises(ValueError, match="max_batch_size"):
    Batcher(Recorder(), max_batch_size=8, max_queued=4)
