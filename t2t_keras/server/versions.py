"""The versions a t2t-serve process serves, each with its own batcher, and hot reload.

    versions = Versions(first_model, make_batcher, keep=2, base="runs/ende/export",
                        load=ServedModel.load, warm_up=warm_up, poll_seconds=30)
    await versions.start()                  # the batchers, and polling when poll_seconds > 0
    model, batcher = versions.get(None)     # the newest; versions.get(7) for /versions/7
    await versions.stop()                   # polling stops; each batcher answers its queue

Polling (TF Serving's way with a base path): every `poll_seconds` the base directory is
listed; a numbered version newer than the newest served is loaded and warmed up in a
thread, beside the versions being served, then added: new requests without a version go
to it from then on. Versions beyond the newest `keep` are then taken out of the table
first, and their batchers stopped after they have answered what they had queued, so a
swap fails no request. A version that cannot be loaded is logged once and skipped for
good; the others keep serving. Exports are written to a temporary directory and renamed
into place (`t2t-exporter`), so a poll never sees half a version.
"""

import asyncio
import logging
import os

from t2t_keras.server.model import versions_in

LOG = logging.getLogger("t2t_serve")


class UnknownVersion(Exception):
  """A version this process does not serve (HTTP 404)."""


class Versions:
  """Served versions: number -> (ServedModel, Batcher), the newest `keep` of them."""

  def __init__(self, first, make_batcher, keep=1, base=None, load=None, warm_up=None,
               poll_seconds=0.0, on_change=None):
    """`first`: the ServedModel loaded at start-up; `make_batcher(model)` -> a Batcher for
    it; `base`: the directory of numbered versions to poll (None: no polling); `load(path)`
    -> ServedModel; `warm_up(model)`; `on_change(added, removed)`: version numbers, called
    after each change (metrics)."""
    self.keep = keep
    self.base = base
    self._load, self._warm_up = load, warm_up
    self.poll_seconds = poll_seconds if base else 0.0
    self._make_batcher = make_batcher
    self._on_change = on_change or (lambda added, removed: None)
    self._served = {first.version: (first, make_batcher(first))}
    self._skipped = set()
    self._poller = None

  @property
  def numbers(self):
    """The served version numbers, newest first."""
    return sorted(self._served, reverse=True)

  @property
  def batchers(self):
    return [batcher for _, batcher in self._served.values()]

  @property
  def queued(self):
    return sum(b.queued for b in self.batchers)

  @property
  def batches(self):
    return sum(b.batches for b in self.batchers)

  def status(self, version):
    """TF Serving's GetModelStatusResponse: every served version, or `version` alone."""
    numbers = self.numbers if version is None else [self.get(version)[0].version]
    return {"model_version_status": [
        {"version": str(n), "state": "AVAILABLE",
         "status": {"error_code": "OK", "error_message": ""}} for n in numbers]}

  def get(self, version):
    """(ServedModel, Batcher) of `version` (None: the newest); UnknownVersion if not
    served."""
    number = self.numbers[0] if version is None else version
    if number not in self._served:
      raise UnknownVersion(f"version {version} is not served; served: "
                           f"{', '.join(map(str, self.numbers))}")
    return self._served[number]

  async def start(self):
    for batcher in self.batchers:
      await batcher.start()
    self._on_change(self.numbers, [])
    if self.poll_seconds > 0:
      self._poller = asyncio.get_running_loop().create_task(self._poll_forever())

  async def stop(self):
    if self._poller is not None:
      self._poller.cancel()
      try:
        await self._poller
      except asyncio.CancelledError:
        pass
    for batcher in self.batchers:
      await batcher.stop()

  async def _poll_forever(self):
    while True:
      await asyncio.sleep(self.poll_seconds)
      await self.poll()

  async def poll(self):
    """Loads, warms up and adds each new version newer than the newest served; then takes
    out the ones beyond `keep`. Returns the version numbers added."""
    try:
      found = await asyncio.to_thread(versions_in, self.base)
    except Exception as e:  # pylint: disable=broad-except
      LOG.warning("polling %s failed: %s", self.base, e)
      return []
    added = []
    for number in sorted(found):
      if number <= self.numbers[0] or number in self._skipped:
        continue
      try:
        model = await asyncio.to_thread(self._load_warm, number)
      except Exception as e:  # pylint: disable=broad-except
        self._skipped.add(number)
        LOG.error("version %d of %s cannot be served, skipped (still serving %s): %s",
                  number, self.base, self.numbers[0], e)
        continue
      batcher = self._make_batcher(model)
      await batcher.start()
      self._served[number] = (model, batcher)
      added.append(number)
      LOG.warning("now serving version %d", number)
    removed = self.numbers[self.keep:]
    retired = [self._served.pop(number)[1] for number in removed]
    if added or removed:
      self._on_change(added, removed)
    for batcher in retired:  # out of the table first: only what they hold is left to do
      await batcher.stop()
    return added

  def _load_warm(self, number):
    model = self._load(os.path.join(self.base, str(number)))
    self._warm_up(model)
    return model
