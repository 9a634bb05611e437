"""Where a t2t-serve process is in its life, and the limits every request runs under.

    life = Lifecycle()          # ready once the model is loaded and warm (before listening)
    await life.bounded(work, timeout_s=120)  # the request's deadline
    life.drain()                # SIGTERM: /readyz says 503, /healthz still 200
    life.expire()               # the drain deadline: requests still running get 503
    life.die(error)             # the batch worker died: /healthz says 503, the process exits

A request runs as one task raced against its deadline and against the drain's end
(`bounded`); once its body is read, also against its client leaving
(`unless_client_leaves`). The loser is cancelled, so a request that times out or is
abandoned leaves the batcher's queue before it reaches the model (`batching.py`).
"""

import asyncio


class Deadline(Exception):
  """A request's deadline passed before its answer (HTTP 408 or 504: the caller knows
  whether the body was still arriving)."""


class Expired(Exception):
  """The drain's deadline passed before the request was answered (HTTP 503)."""


class ClientGone(Exception):
  """The client closed its connection before the answer (logged as 499, nothing sent)."""


class Lifecycle:
  """Readiness, liveness and the drain of one server process."""

  def __init__(self):
    self.draining = False
    self.dead = None  # why the batch worker died, if it did
    self.expired_requests = 0  # requests answered 503 at the drain's deadline
    self._expired = asyncio.Event()  # set at the drain's deadline

  @property
  def ready(self):
    """Whether new requests are welcome (/readyz): not draining, worker alive."""
    return not self.draining and self.dead is None

  @property
  def live(self):
    """Whether the process is worth keeping (/healthz): its batch worker is alive."""
    return self.dead is None

  def drain(self):
    self.draining = True

  def expire(self):
    """The drain's deadline: every request still running is answered 503 now."""
    self._expired.set()

  def die(self, error):
    self.dead = error

  async def bounded(self, work, timeout_s):
    """Awaits coroutine `work`; Deadline after `timeout_s` (None: no limit), Expired when
    the drain's deadline passes first (`work` is then cancelled)."""
    finished, value = await _first(work, self._expired.wait(), timeout_s)
    if finished:
      return value
    if value:
      self.expired_requests += 1
      raise Expired()
    raise Deadline()


async def unless_client_leaves(receive, work):
  """Awaits coroutine `work`; ClientGone (and `work` cancelled) if the client disconnects
  first. `receive` is the request's ASGI receive, its body already read."""
  finished, value = await _first(work, _disconnect(receive))
  if finished:
    return value
  raise ClientGone()


async def _first(work, rival, timeout_s=None):
  """Races coroutine `work` against coroutine `rival` for at most `timeout_s`: (True,
  work's result) if work ends first, else (False, whether rival ended) with work cancelled
  and awaited. The rival is always cancelled."""
  task = asyncio.ensure_future(work)
  other = asyncio.ensure_future(rival)
  try:
    done, _ = await asyncio.wait({task, other}, timeout=timeout_s,
                                 return_when=asyncio.FIRST_COMPLETED)
  except asyncio.CancelledError:
    task.cancel()
    raise
  finally:
    other.cancel()
  if task in done:
    return True, task.result()
  await _cancel(task)
  return False, other in done


async def _disconnect(receive):
  while (await receive())["type"] != "http.disconnect":
    pass


async def _cancel(task):
  task.cancel()
  try:
    await task
  except (asyncio.CancelledError, Exception):  # pylint: disable=broad-except
    pass
