"""t2t-serve's served versions (`server/versions.py`) without TensorFlow models: a base
directory polled for numbered versions, the newest `keep` served, broken ones skipped.
(The same swap under load in a real process: test_server_operations.py.)"""

import asyncio
import os

import pytest

from t2t_keras.server.versions import UnknownVersion, Versions


class _Model:
  def __init__(self, version):
    self.version = version


class _Batcher:
  def __init__(self, model):
    self.model, self.started, self.stopped = model, False, False
    self.queued = self.batches = 0

  async def start(self):
    self.started = True

  async def stop(self):
    self.stopped = True


def _publish(base, number, broken=False):
  os.makedirs(base / str(number))
  (base / str(number) / "saved_model.pb").write_bytes(b"broken" if broken else b"ok")


def test_polling_adds_new_versions_skips_broken_ones_and_keeps_the_newest(tmp_path):
  changes, warmed = [], []

  def load(path):
    if (open(os.path.join(path, "saved_model.pb"), "rb").read()) == b"broken":
      raise ValueError("not a SavedModel")
    return _Model(int(os.path.basename(path)))

  versions = Versions(_Model(7), _Batcher, keep=2, base=str(tmp_path), load=load,
                      warm_up=warmed.append,
                      on_change=lambda added, removed: changes.append((added, removed)))

  async def scenario():
    await versions.start()
    first = versions.get(7)[1]
    _publish(tmp_path, 8)
    assert await versions.poll() == [8] and versions.numbers == [8, 7]
    _publish(tmp_path, 9, broken=True)
    assert await versions.poll() == [] and versions.numbers == [8, 7]
    assert await versions.poll() == []  # a skipped version is not loaded again
    _publish(tmp_path, 10)
    _publish(tmp_path, 11)
    assert await versions.poll() == [10, 11] and versions.numbers == [11, 10]
    assert first.stopped and all(b.started and not b.stopped for b in versions.batchers)
    await versions.stop()
    assert all(b.stopped for b in versions.batchers)

  asyncio.run(scenario())
  assert [m.version for m in warmed] == [8, 10, 11]
  assert changes == [([7], []), ([8], []), ([10, 11], [8, 7])]
  assert versions.get(None)[0].version == 11
  with pytest.raises(UnknownVersion, match="version 8 is not served; served: 11, 10"):
    versions.get(8)
