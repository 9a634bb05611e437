"""The server's dynamic batcher, with a recording stand-in for the model (no TensorFlow)."""

import asyncio
import threading
import time

import numpy as np
import pytest

from t2t_keras.server.batching import Batcher, QueueFull


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


def test_bad_sizes_are_refused():
  with pytest.raises(ValueError, match="max_batch_size"):
    Batcher(Recorder(), max_batch_size=8, max_queued=4)
