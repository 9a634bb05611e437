"""A persistent cache of XLA-compiled programs, on by default in the binaries.

XLA compiles a program per input shape: the fused training kernels once per
batch shape, beam search once per decoder start, seconds each (figures:
docs/notebook.md). TensorFlow can keep them on disk (`TF_XLA_FLAGS=
--tf_xla_persistent_cache_directory=DIR`): a later run with the same shapes,
a resumed run, another row of a sweep, t2t-decoder or t2t-exporter, loads them
instead of compiling.

    T2T_XLA_CACHE unset     <user cache dir>/t2t-keras/xla/<host key>
    T2T_XLA_CACHE=DIR       DIR/<host key>
    T2T_XLA_CACHE= (empty)  off

The host key names the TensorFlow version and a hash of the CPU's model and
instruction-set flags (and the GPUs' models): XLA compiles for the device it
runs on, and a program built with AVX-512 must never be loaded on a CPU
without it (a home directory shared between machines, or a cloud VM on
another CPU model the next day). Entries
are keyed by TensorFlow on the program's fingerprint, so a changed model
compiles anew. A TF_XLA_FLAGS that already names a cache directory wins.
Entries are about 13 KB; `rm -rf` the directory to reclaim the space.

`configure()` must run before TensorFlow is imported (TF reads TF_XLA_FLAGS
once, at start-up); `t2t_keras.tf_startup` calls it, so every binary and sweep child has the cache.
Python users set TF_XLA_FLAGS themselves, or call `configure()` first.
"""

import atexit
import glob
import hashlib
import os
import platform
import shutil
import sys
import tempfile

ENV = "T2T_XLA_CACHE"
FLAG = "--tf_xla_persistent_cache_directory"


def host_key():
  """'tf<version>-<12 hex digits>': TensorFlow's version and a hash of the CPU's
  model name and instruction-set flags (from /proc/cpuinfo where it exists)
  and of the NVIDIA GPUs' models."""
  from importlib import metadata  # pylint: disable=import-outside-toplevel
  try:
    version = metadata.version("tensorflow")
  except metadata.PackageNotFoundError:
    version = "unknown"
  return f"tf{version}-{hashlib.sha256(_cpu_description().encode()).hexdigest()[:12]}"


def _cpu_description():
  """The CPU's model and flags, and the NVIDIA GPUs' models (XLA's GPU programs
  are built for the GPU they run on, and TensorFlow's key does not say which)."""
  model, flags = "", ""
  try:
    with open("/proc/cpuinfo", encoding="utf-8", errors="replace") as f:
      for line in f:
        key, _, value = line.partition(":")
        key = key.strip()
        if key == "model name" and not model:
          model = value.strip()
        elif key in ("flags", "Features") and not flags:
          flags = " ".join(sorted(value.split()))
        if model and flags:
          break
  except OSError:
    pass
  gpus = []
  for info in sorted(glob.glob("/proc/driver/nvidia/gpus/*/information")):
    try:
      with open(info, encoding="utf-8", errors="replace") as f:
        gpus += [line.split(":", 1)[1].strip() for line in f if line.startswith("Model:")]
    except OSError:
      pass
  return "|".join([platform.machine(), platform.processor(), model, flags] + gpus)


def default_base():
  """<XDG_CACHE_HOME or ~/.cache>/t2t-keras/xla."""
  root = os.environ.get("XDG_CACHE_HOME") or os.path.join(os.path.expanduser("~"), ".cache")
  return os.path.join(root, "t2t-keras", "xla")


def cache_dir(environ=None):
  """The directory this process should cache XLA programs in, or None when off."""
  environ = os.environ if environ is None else environ
  base = environ.get(ENV)
  if base is None:
    base = default_base()
  if not base:
    return None
  return os.path.join(os.path.expanduser(base), host_key())


def configure(environ=None):
  """Points TF_XLA_FLAGS (in `environ`, default os.environ) at this run's view of the cache.

  TensorFlow writes entries in place and fails the op that loads a broken one,
  so processes never write into the shared directory: each gets a private
  directory inside it (`.run-<host>-<pid>-*`) holding hard links to the
  finished entries, and at exit `publish` links its new entries into the
  shared one under their final names (an atomic step). A run killed mid-write
  leaves only its private directory, removed by the next run on that host.

  Returns the private directory, or None when the cache is off, TF_XLA_FLAGS
  already names a directory (that one is used as it is), TensorFlow was
  imported before (too late to take effect: nothing is changed), or the
  directory cannot be written (the run goes on without the cache).
  """
  environ = os.environ if environ is None else environ
  flags = environ.get("TF_XLA_FLAGS", "")
  if FLAG in flags:
    return None
  if environ is os.environ and "tensorflow" in sys.modules:
    return None
  shared = cache_dir(environ)
  if shared is None:
    return None
  try:
    os.makedirs(shared, exist_ok=True)
    _remove_dead_runs(shared)
    private = tempfile.mkdtemp(prefix=f"{_run_prefix()}{os.getpid()}-", dir=shared)
    for name in _entries(shared):
      _link(os.path.join(shared, name), os.path.join(private, name))
  except OSError:
    return None  # e.g. a read-only home: run without the cache
  environ["TF_XLA_FLAGS"] = f"{flags} {FLAG}={private}".strip()
  atexit.register(publish, private, shared)
  return private


def publish(private, shared):
  """Links `private`'s new entries into `shared` and removes `private`."""
  try:
    for name in set(_entries(private)) - set(_entries(shared)):
      try:
        os.link(os.path.join(private, name), os.path.join(shared, name))
      except FileExistsError:
        pass  # another run published the same program
      except OSError:
        tmp = os.path.join(shared, f".tmp-{os.getpid()}-{name}")
        shutil.copyfile(os.path.join(private, name), tmp)
        os.replace(tmp, os.path.join(shared, name))
  except OSError:
    pass  # the cache is an optimization: never fail a finished run over it
  finally:
    shutil.rmtree(private, ignore_errors=True)


def _run_prefix():
  """'.run-<host>-': private directories are named after the host and the pid."""
  return f".run-{platform.node() or 'host'}-"


def _entries(directory):
  return [n for n in os.listdir(directory) if n.endswith(".pb") and not n.startswith(".")]


def _link(src, dst):
  try:
    os.link(src, dst)
  except OSError:
    shutil.copyfile(src, dst)


def _remove_dead_runs(shared):
  """Removes the private directories of this host's runs that are no longer alive."""
  if os.name != "posix":
    return  # os.kill(pid, 0) probes a process only on POSIX
  prefix = _run_prefix()
  for name in os.listdir(shared):
    if not name.startswith(prefix):
      continue
    try:
      pid = int(name[len(prefix):].split("-", 1)[0])
      os.kill(pid, 0)
      continue  # alive
    except (ValueError, ProcessLookupError):
      pass
    except PermissionError:
      continue  # alive, another user's
    shutil.rmtree(os.path.join(shared, name), ignore_errors=True)
