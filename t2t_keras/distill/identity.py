"""What a resumable translation must find unchanged: the teacher's files and the input's bytes.

    teacher_identity("runs/teacher")     # {"path", "models": [{"checkpoint", "files"}]}
    file_digest("train.en.gz")           # "sha256:..."
    changed(old, new)                    # "checkpoint ckpt-900 -> ckpt-1000"

A run's identity is its checkpoint (the one given, else its newest readable, resolved here
so that a run still training cannot change the teacher between two pieces of one file)
and the files a load reads: the checkpoint's .index and .data files, run.json,
hparams.json and the vocabulary copy. A directory from elsewhere (tensor2tensor, Marian,
Hugging Face) is every file under it. Each file is named by its size and the SHA-256 of
its bytes, or for files over HASH_LIMIT bytes its size and modification time (hashing
gigabytes at every start would cost more than it guards).
"""

import hashlib
import os

from t2t_keras import fileio, runs

HASH_LIMIT = 64 << 20


def file_digest(path, block=1 << 20):
  """"sha256:<hex>" of a file's bytes (any fileio path)."""
  digest = hashlib.sha256()
  with fileio.open(path, "rb") as f:
    for chunk in iter(lambda: f.read(block), b""):
      digest.update(chunk)
  return f"sha256:{digest.hexdigest()}"


def _file_identity(path):
  size = fileio.size(path)
  if size > HASH_LIMIT and not fileio.is_remote(path):
    return f"{size} bytes, modified {os.stat(path).st_mtime_ns}"
  return f"{size} bytes, {file_digest(path)}"


def resolve_checkpoints(path, checkpoint_path=None):
  """The checkpoint prefix of each run of `path` (comma-separated runs: an ensemble), the
  given ones (one per run, comma-separated) or each run's newest readable."""
  directories = runs.split_runs(path)
  given = runs.split_runs(checkpoint_path) if checkpoint_path else [None] * len(directories)
  return [g or runs.latest_checkpoint(d) for d, g in zip(directories, given)]


def teacher_identity(path, checkpoint_path=None, kind="run"):
  """{"path": path, "models": [{"checkpoint": its name (runs only), "files": {name: size
  and digest}}, one per run]} of a teacher; kind: "run" (a run or runs, comma-separated)
  or "directory" (a model from elsewhere: every file under it, by relative name). Names
  are relative, so a teacher moved or copied whole keeps its identity (`changed`)."""
  if kind != "run":
    files = sorted(os.path.relpath(os.path.join(d, n), path)
                   for d, _, names in os.walk(path) for n in names)
    return {"path": str(path), "models": [
        {"files": {f: _file_identity(os.path.join(path, f)) for f in files}}]}
  models = []
  for directory, prefix in zip(runs.split_runs(path), resolve_checkpoints(path, checkpoint_path)):
    files = fileio.glob(prefix + ".*") + [
        os.path.join(directory, n) for n in (runs.RUN_FILE, runs.HPARAMS_FILE, runs.VOCAB_FILE)]
    models.append({"checkpoint": os.path.basename(prefix),
                   "files": {os.path.basename(f): _file_identity(f)
                             for f in files if fileio.exists(f)}})
  return {"path": str(path), "models": models}


def changed(old, new):
  """What differs between two identities, in a few words ("" where nothing does): the
  number of models, a checkpoint, else the first file added, removed or changed."""
  before, after = old.get("models", []), new.get("models", [])
  if len(before) != len(after):
    return f"{len(before)} model(s) -> {len(after)}"
  for a, b in zip(before, after):
    if a.get("checkpoint") != b.get("checkpoint"):
      return f"checkpoint {a.get('checkpoint')} -> {b.get('checkpoint')}"
    for name in sorted(set(a["files"]) | set(b["files"])):
      if a["files"].get(name) != b["files"].get(name):
        what = ("removed" if name not in b["files"] else "added" if name not in a["files"]
                else "changed")
        return f"{name} {what}"
  return ""
