"""Dynamic batching: concurrent requests to one signature merged into one call.

    batcher = Batcher(model.run, max_batch_size=32, batch_timeout_ms=5, max_queued=1024)
    await batcher.start()
    outputs = await batcher.submit("serving_default", {"inputs": [b"one", b"two"]})
    await batcher.stop()

One worker takes the oldest waiting request, waits up to `batch_timeout_ms` for
more of the same signature (less if `max_batch_size` sentences are already
there), runs them as one call in a thread, and hands each request its rows.
While a call runs, new requests queue, so under load batches fill without
waiting. A request larger than max_batch_size is split into several. The export
already sorts a batch's sentences by length before its beam search
(`exporting/export.py`), so the batcher keeps arrival order.

Signatures whose outputs have rows of different widths per batch (the
attention signature pads to the batch's longest sentence) are never merged:
`mergeable` says which may be.

A request that is cancelled while it waits (its client left, its deadline passed) leaves
the queue at once and never reaches the model. When a merged call fails, each of its
requests is run again alone, so only the one that fails gets the error. Once `stop` has
begun, new requests get ShuttingDown while the waiting ones are answered. If the worker
itself dies, `dead` holds why and every waiting request gets WorkerDead.
"""

import asyncio
import collections
import concurrent.futures
import dataclasses

import numpy as np


class QueueFull(Exception):
  """More sentences are waiting than the queue holds (HTTP 503)."""


class ShuttingDown(Exception):
  """The server stopped before this request reached the model (HTTP 503)."""


class WorkerDead(Exception):
  """The batch worker has died; the server is no longer live (HTTP 503)."""


@dataclasses.dataclass(eq=False)  # items compare by identity
class _Item:
  signature: str
  inputs: dict  # input name -> list [size]
  size: int
  future: asyncio.Future
  mergeable: bool


class Batcher:
  """Merges concurrent `submit` calls into calls of run(signature, inputs) -> outputs."""

  def __init__(self, run, max_batch_size=32, batch_timeout_ms=5.0, max_queued=1024,
               mergeable=lambda signature: True, on_dead=None):
    """`run(signature, {input: list}) -> {output: np.ndarray [rows, ...]}` is called from one
    worker thread; `mergeable(signature)`: whether requests to it may share a call;
    `on_dead(exception)`: called once if the worker dies."""
    if max_batch_size < 1 or max_queued < max_batch_size:
      raise ValueError(f"need 1 <= max_batch_size ({max_batch_size}) <= max_queued "
                       f"({max_queued})")
    self._run = run
    self.max_batch_size = max_batch_size
    self.batch_timeout = batch_timeout_ms / 1000.0
    self.max_queued = max_queued
    self._mergeable = mergeable
    self._pending = collections.deque()
    self.queued = 0  # sentences waiting, not yet in a running call
    self.batches = 0  # calls made, for the health endpoint and tests
    self._busy = False  # a call is running
    self._running = []  # its items
    self._arrived = None
    self._task = None
    self._on_dead = on_dead
    self._stopping = False
    self.dead = None  # the exception that killed the worker, if one did
    self._executor = concurrent.futures.ThreadPoolExecutor(1, thread_name_prefix="model")

  async def start(self):
    self._arrived = asyncio.Event()
    self._task = asyncio.get_running_loop().create_task(self._guarded_loop())

  @property
  def idle(self):
    """Nothing waits and no call runs."""
    return not self._pending and not self._busy

  def _fail_waiting(self, error):
    """Answers every request still waiting with `error`."""
    while self._pending:
      item = self._pending.popleft()
      self.queued -= item.size
      if not item.future.done():
        item.future.set_exception(error)

  async def stop(self):
    """Finishes every waiting request, then stops the worker; later submits get
    ShuttingDown."""
    self._stopping = True
    while not self.idle and self.dead is None:
      await asyncio.sleep(0.01)
    if self._task:
      self._task.cancel()
      try:
        await self._task
      except asyncio.CancelledError:
        pass
    self._executor.shutdown(wait=True)

  async def submit(self, signature, inputs):
    """{input: list [n]} -> {output: np.ndarray [n, ...]}; QueueFull when over max_queued."""
    return await self.enqueue(signature, inputs)

  def enqueue(self, signature, inputs):
    """Queues the request now (no await before it is in the queue) and returns the
    awaitable of its outputs; QueueFull, ShuttingDown or WorkerDead at once."""
    size = len(next(iter(inputs.values())))
    if self.queued + size > self.max_queued:
      raise QueueFull(f"the server is busy: {self.queued} sentences are waiting and this "
                      f"request adds {size}, over the queue's {self.max_queued} "
                      f"(--max_queued_sentences); retry later")
    if self._stopping:
      raise ShuttingDown("this version is no longer served; retry")
    if self.dead is not None:
      raise WorkerDead(f"the batch worker has died ({self.dead!r}); this server is no "
                       f"longer live")
    loop = asyncio.get_running_loop()
    mergeable = self._mergeable(signature)
    step = self.max_batch_size if mergeable else size
    items = []
    for start in range(0, size, step):
      chunk = {k: v[start:start + step] for k, v in inputs.items()}
      items.append(_Item(signature, chunk, len(next(iter(chunk.values()))),
                         loop.create_future(), mergeable))
    self._pending.extend(items)
    self.queued += size
    self._arrived.set()
    return self._outputs(items)

  async def _outputs(self, items):
    """The items' rows joined; a cancelled wait takes them off the queue."""
    try:
      parts = await asyncio.gather(*(item.future for item in items))
    except asyncio.CancelledError:
      self._withdraw(items)
      raise
    return {k: np.concatenate([p[k] for p in parts]) for k in parts[0]}

  def _withdraw(self, items):
    """Takes a cancelled request's items that have not reached the model off the queue."""
    for item in items:
      if item in self._pending:
        self._pending.remove(item)
        self.queued -= item.size
      if not item.future.done():
        item.future.cancel()

  def _waiting_rows(self, signature):
    return sum(i.size for i in self._pending if i.signature == signature and i.mergeable)

  async def _guarded_loop(self):
    """_loop; if it dies, every waiting request gets WorkerDead and on_dead is told."""
    try:
      await self._loop()
    except asyncio.CancelledError:
      raise
    except BaseException as e:  # pylint: disable=broad-except
      self.dead = e
      error = WorkerDead(f"the batch worker has died ({e!r}); this server is no longer live")
      for item in self._running:
        if not item.future.done():
          item.future.set_exception(error)
      self._fail_waiting(error)
      if self._on_dead is not None:
        self._on_dead(e)

  async def _loop(self):
    loop = asyncio.get_running_loop()
    while True:
      while not self._pending:
        self._arrived.clear()
        await self._arrived.wait()
      first = self._pending[0]
      if first.mergeable:
        deadline = loop.time() + self.batch_timeout
        while self._waiting_rows(first.signature) < self.max_batch_size:
          remaining = deadline - loop.time()
          if remaining <= 0:
            break
          self._arrived.clear()
          try:
            await asyncio.wait_for(self._arrived.wait(), remaining)
          except asyncio.TimeoutError:
            break
      if first not in self._pending:  # withdrawn while the batch filled
        continue
      self._running = self._take(first)
      self._busy = True
      try:
        await self._call(loop, self._running)
        self._running = []  # (kept if the call died: _guarded_loop answers them)
      finally:
        self._busy = False

  def _take(self, first):
    """Removes and returns `first` and the following items of its signature that fit."""
    batch, rows = [], 0
    for item in list(self._pending):
      if item is first or (first.mergeable and item.mergeable and
                           item.signature == first.signature and
                           rows + item.size <= self.max_batch_size):
        batch.append(item)
        rows += item.size
        self._pending.remove(item)
      if not first.mergeable:
        break
    self.queued -= rows
    return batch

  async def _call(self, loop, batch):
    """Runs one merged call in the worker thread and gives each item its rows; when it
    fails, each item is run again alone so the error reaches only the items that cause it."""
    inputs = {k: [x for item in batch for x in item.inputs[k]] for k in batch[0].inputs}
    try:
      outputs = await loop.run_in_executor(self._executor, self._run, batch[0].signature,
                                           inputs)
    except Exception as e:  # pylint: disable=broad-except
      if len(batch) == 1:
        if not batch[0].future.done():
          batch[0].future.set_exception(e)
        return
      for item in batch:
        if not item.future.done():
          await self._call(loop, [item])
      return
    self.batches += 1
    start = 0
    for item in batch:
      if not item.future.done():  # a cancelled request (client gone) is skipped
        item.future.set_result({k: v[start:start + item.size] for k, v in outputs.items()})
      start += item.size
