"""Files at any path a user gives: local ones through `os`, any other scheme through tf.io.gfile.

Data dirs, run directories, vocabularies, run records, metrics and exports may live on
an object store (`gs://bucket/run`, `s3://`, `hdfs://`, where TensorFlow's filesystem
plugin for it is installed) or in TensorFlow's in-process `ram://` filesystem (tests).
A path with "://" goes through `tf.io.gfile` (TensorFlow imported on first use); any
other path through the standard library, so tools that load no TensorFlow (the
CTranslate2 client) still read local files.

    from t2t_keras import fileio
    fileio.write_atomic(fileio.join(output_dir, "run.json"), text)
    with fileio.open(path, "rb") as f: ...

Object stores have no atomic rename: `replace` there is a copy and a delete, so a reader
can see a half-written file only on a store, never locally.
"""

import builtins
import contextlib
import json
import os
import platform
import shutil
import tempfile

from t2t_keras import errors
from t2t_keras.errors import InputError

# The one temporary suffix of files being written (`atomic_open`, datagen's shards): a file
# with it is incomplete, and the next run overwrites it.
TMP_SUFFIX = ".incomplete"


def is_remote(path):
  """True for a path with a scheme ("gs://b/x", "ram://x"): handled by tf.io.gfile."""
  return "://" in str(path)


def _gfile():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return tf.io.gfile


def abspath(path):
  """A local path made absolute (with ~ expanded); a remote one unchanged."""
  path = str(path)
  return path if is_remote(path) else os.path.abspath(os.path.expanduser(path))


def join(path, *parts):
  return os.path.join(str(path), *parts)


def dirname(path):
  return os.path.dirname(str(path))


def basename(path):
  return os.path.basename(str(path))


def open(path, mode="r"):  # pylint: disable=redefined-builtin
  """A file object; text modes read and write UTF-8."""
  if is_remote(path):
    return _gfile().GFile(path, mode)
  if "b" in mode:
    return builtins.open(path, mode)
  return builtins.open(path, mode, encoding="utf-8")


def exists(path):
  return _gfile().exists(path) if is_remote(path) else os.path.exists(path)


def size(path):
  """The file's size in bytes (FileNotFoundError where it is missing)."""
  if is_remote(path):
    if not _gfile().exists(path):
      raise FileNotFoundError(f"{path}: no such file")
    return _gfile().stat(path).length
  return os.path.getsize(path)


def isdir(path):
  return _gfile().isdir(path) if is_remote(path) else os.path.isdir(path)


def isfile(path):
  """True for a path that exists and is not a directory (a FIFO too: a shell's `<(...)`)."""
  if is_remote(path):
    return _gfile().exists(path) and not _gfile().isdir(path)
  return os.path.exists(path) and not os.path.isdir(path)


def makedirs(path):
  """Creates path and its parents; fine if it exists."""
  if is_remote(path):
    _gfile().makedirs(path)
  elif path:
    os.makedirs(path, exist_ok=True)


def listdir(path):
  """Entry names (not paths), sorted."""
  names = _gfile().listdir(path) if is_remote(path) else os.listdir(path)
  return sorted(n.rstrip("/") for n in names)


def glob(pattern):
  """Matching paths, sorted."""
  if is_remote(pattern):
    return sorted(_gfile().glob(pattern))
  import glob as glob_lib  # pylint: disable=import-outside-toplevel
  return sorted(glob_lib.glob(pattern))


def replace(src, dst):
  """Renames src to dst, replacing dst (atomic on local disks)."""
  if is_remote(src) or is_remote(dst):
    _gfile().rename(src, dst, overwrite=True)
  else:
    os.replace(src, dst)


def remove(path):
  """Deletes a file; fine if it is missing."""
  if is_remote(path):
    if _gfile().exists(path):
      _gfile().remove(path)
  elif os.path.exists(path):
    os.remove(path)


def rmtree(path):
  """Deletes a directory tree; fine if it is missing."""
  if is_remote(path):
    if _gfile().exists(path):
      _gfile().rmtree(path)
  else:
    shutil.rmtree(path, ignore_errors=True)


def private_temporary_dir(parent, prefix):
  """A new local directory in `parent` (None: the system's temporary directory) named
  `<prefix><host>-<pid>-<random>`: a writer's work space until it renames the result into
  place. Once its process is gone, `remove_dead_temporaries` removes it."""
  return tempfile.mkdtemp(prefix=f"{prefix}{_host()}-{os.getpid()}-", dir=parent)


def remove_dead_temporaries(parent, prefix):
  """Removes `parent`'s `private_temporary_dir(parent, prefix)` directories whose process
  on this host is gone (a writer killed before its rename; the next run of the same
  command calls this first); returns their names. Live processes' and other hosts' stay."""
  parent = parent or tempfile.gettempdir()
  mine = f"{prefix}{_host()}-"
  removed = []
  for name in sorted(os.listdir(parent)) if os.path.isdir(parent) else []:
    if name.startswith(mine) and not _alive(name[len(mine):].split("-", 1)[0]):
      shutil.rmtree(os.path.join(parent, name), ignore_errors=True)
      removed.append(name)
  return removed


def _host():
  """This host's name as a temporary name holds it (no "/")."""
  return (platform.node() or "host").replace("/", "_")


def _alive(pid):
  """False only for a pid (a string) of no live process on this host (POSIX)."""
  if not (pid.isascii() and pid.isdigit()) or os.name != "posix":
    return True
  try:
    os.kill(int(pid), 0)
  except ProcessLookupError:
    return False
  except PermissionError:
    pass  # another user's process
  return True


def copy(src, dst):
  """Copies a file's bytes, replacing dst."""
  if is_remote(src) or is_remote(dst):
    _gfile().copy(src, dst, overwrite=True)
  else:
    shutil.copyfile(src, dst)


def copy_atomic(src, dst):
  """Copies src to dst under a temporary name first, so dst is never half-written locally."""
  copy(src, dst + TMP_SUFFIX)
  replace(dst + TMP_SUFFIX, dst)


def upload_tree(local_dir, path):
  """Copies the local directory tree local_dir to path (any scheme), file by file."""
  for root, _, names in os.walk(local_dir):
    relative = os.path.relpath(root, local_dir)
    target = path if relative == "." else join(path, relative)
    makedirs(target)
    for name in names:
      copy(os.path.join(root, name), join(target, name))


def read_bytes(path):
  with open(path, "rb") as f:
    return f.read()


def read_text(path):
  with open(path, "r") as f:
    return f.read()


def read_json(path):
  """The JSON object (a dict) in `path`; InputError naming the file, and where it stops
  parsing, when it is damaged (cut short, overwritten, not UTF-8)."""
  try:
    value = json.loads(read_text(path))
  except json.JSONDecodeError as e:
    raise InputError(f"{path} is damaged: not valid JSON ({e}); restore it from a copy, or "
                     f"re-create it") from e
  except UnicodeDecodeError as e:
    raise InputError(f"{path} is damaged: not UTF-8 text ({e.reason} at byte {e.start}); "
                     f"restore it from a copy, or re-create it") from e
  if not isinstance(value, dict):
    raise InputError(f"{path} is damaged: a JSON {type(value).__name__}, not the object "
                     f"expected; restore it from a copy, or re-create it")
  return value


@contextlib.contextmanager
def atomic_open(path, mode="w"):
  """A file object that writes `path` + TMP_SUFFIX, renamed to `path` when the block ends.

  The one way this project writes a file a reader may see: an error in the block removes
  the partial file and leaves `path` as it was.
  """
  tmp = str(path) + TMP_SUFFIX
  try:
    with open(tmp, mode) as f:
      yield f
  except BaseException:
    remove(tmp)
    raise
  replace(tmp, path)


def check_writable(path):
  """Makes path's directory and creates (then removes) path + TMP_SUFFIX in it, so that a
  read-only directory shows before the work whose output goes there, not after it;
  InputError naming the path where the file system refuses. Local paths only (an object
  store's permissions show at the write)."""
  if is_remote(path):
    return
  tmp = abspath(path) + TMP_SUFFIX
  try:
    makedirs(dirname(tmp))
    with builtins.open(tmp, "ab"):
      pass
    os.remove(tmp)
  except OSError as e:
    if e.errno not in errors.DENIED:
      raise
    raise InputError(f"{path} is not writable ({e.strerror} on {e.filename}): make its "
                     "directory writable, or choose another path") from e


def write_atomic(path, data):
  """Writes str (UTF-8) or bytes to path under a temporary name, then renames it."""
  with atomic_open(path, "wb" if isinstance(data, bytes) else "w") as f:
    f.write(data)


def same_content(a, b):
  """True if the two files hold the same bytes."""
  return read_bytes(a) == read_bytes(b)
