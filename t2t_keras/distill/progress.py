"""Durable progress of a long job that writes line files piece by piece: append, then record.

    progress = Progress.open("work", ("translations", "scores"), key)   # key: what must not change
    progress.lines_done                        # where a killed run goes on from
    progress.append({"translations": [...], "scores": [...]})
    progress.finish()                          # work/translations.txt, work/scores.txt

Each output is appended to `<name>.txt.partial` (flushed and fsynced), then state.json is
rewritten atomically with the lines done and each partial file's byte length. A run killed
between the two leaves lines past the recorded length: opening again cuts each partial file
back to its recorded length, so no line is lost or written twice. `finish` copies each
partial file to `<name>.txt` (atomically: a final name only ever holds a whole file), marks
the state complete and removes the partial files. Local directories only (an object store
cannot append).
"""

import json
import os

from t2t_keras import fileio
from t2t_keras.errors import InputError

STATE_FILE = "state.json"
PARTIAL_SUFFIX = ".txt.partial"


class Progress:
  """A work directory's state (`state`: key, lines_done, bytes, complete) and its outputs."""

  def __init__(self, work_dir, names, state):
    self.work_dir, self.names, self.state = work_dir, tuple(names), state

  @classmethod
  def open(cls, work_dir, names, key):
    """The progress in `work_dir` (made if missing), cut back to what state.json records;
    a new one (nothing done) where there is no state yet; InputError where the state records
    other outputs. The caller compares `state["key"]` with its own `key` before going on (a
    different key: the caller refuses)."""
    if fileio.is_remote(work_dir):
      raise InputError(f"{work_dir}: a resumable job appends to its files: give a local "
                       "directory")
    fileio.makedirs(work_dir)
    path = os.path.join(work_dir, STATE_FILE)
    if not fileio.exists(path):
      progress = cls(work_dir, names, {"key": key, "lines_done": 0, "complete": False,
                                       "bytes": {n: 0 for n in names}})
      for name in names:
        with open(progress.partial(name), "wb"):
          pass
      progress.save()
      return progress
    progress = cls(work_dir, names, fileio.read_json(path))
    missing = [n for n in names if n not in progress.state.get("bytes", {})]
    if missing:
      raise InputError(f"{work_dir}: {STATE_FILE} records no {', '.join(missing)} (an older "
                       "version wrote it): start again in a new work directory")
    if not progress.state["complete"]:
      progress.cut_back()
    return progress

  @property
  def lines_done(self):
    return int(self.state["lines_done"])

  @property
  def complete(self):
    return bool(self.state["complete"])

  def partial(self, name):
    return os.path.join(self.work_dir, name + PARTIAL_SUFFIX)

  def final(self, name):
    return os.path.join(self.work_dir, name + ".txt")

  def cut_back(self):
    """Each partial file truncated to its recorded length (lines appended after the last
    record are dropped); InputError where one is missing or shorter."""
    for name in self.names:
      path, length = self.partial(name), int(self.state["bytes"][name])
      have = os.path.getsize(path) if os.path.exists(path) else -1
      if have < length:
        raise InputError(f"{path} holds {max(have, 0)} bytes but {STATE_FILE} records "
                         f"{length}: the work directory was damaged; start again in a new one")
      if have > length:
        os.truncate(path, length)

  def append(self, lines_by_name):
    """Appends one piece (the same number of lines to every output), durably, then records
    it; a line's own newlines become spaces."""
    counts = {len(lines_by_name[n]) for n in self.names}
    if len(counts) != 1:
      raise ValueError(f"a piece's outputs differ in length: {counts}")
    for name in self.names:
      data = "".join(line.replace("\r", " ").replace("\n", " ") + "\n"
                     for line in lines_by_name[name]).encode("utf-8")
      with open(self.partial(name), "ab") as f:
        f.write(data)
        f.flush()
        os.fsync(f.fileno())
      self.state["bytes"][name] = int(self.state["bytes"][name]) + len(data)
    self.state["lines_done"] = self.lines_done + counts.pop()
    self.save()

  def finish(self):
    """The partial files copied to their final names, the state marked complete, the
    partial files removed; returns {name: final path}."""
    if not self.complete:
      for name in self.names:
        fileio.copy_atomic(self.partial(name), self.final(name))
      self.state["complete"] = True
      self.save()
    for name in self.names:
      if os.path.exists(self.partial(name)):
        os.remove(self.partial(name))
    return {name: self.final(name) for name in self.names}

  def save(self):
    fileio.write_atomic(os.path.join(self.work_dir, STATE_FILE),
                        json.dumps(self.state, indent=1, sort_keys=True) + "\n")
