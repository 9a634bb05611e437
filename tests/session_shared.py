"""Directories built once per test session and shared by its pytest-xdist workers.

    run_dir = session_shared.directory("numbers_vocab", build, tmp_path_factory)

`build(path)` fills a fresh directory; the first worker to ask builds it (under a file lock,
in a temporary directory renamed into place), the others wait for it and reuse it. The root
is run_tests.sh's $T2T_TEST_SHARED, else the session's base directory (above each worker's
own). Tests only read what is shared: one that changes it copies it first.
"""

import fcntl
import os
import pathlib


def root(tmp_path_factory):
  """The session's shared directory."""
  if os.environ.get("T2T_TEST_SHARED"):
    return pathlib.Path(os.environ["T2T_TEST_SHARED"])
  base = tmp_path_factory.getbasetemp()
  return base.parent if os.environ.get("PYTEST_XDIST_WORKER") else base


def directory(name, build, tmp_path_factory):
  """<root>/<name>, built by `build(path)` the first time any worker asks; returns its path."""
  shared = root(tmp_path_factory) / name
  with open(root(tmp_path_factory) / f"{name}.lock", "w") as lock:
    fcntl.flock(lock, fcntl.LOCK_EX)
    if not shared.exists():
      staging = tmp_path_factory.mktemp(name)
      build(staging)
      os.rename(staging, shared)
  return shared
