"""The error every binary prints as one line (`t2t-<name>: error: <message>`) instead of a traceback.

Library code raises `InputError` (hparams_lib's `HParamsError` and registry's `RegistryError`
are InputErrors) or
`FileNotFoundError`) for input a user can fix: a bad flag value, a malformed
file, a missing checkpoint. A write the file system refuses is one line too
(`cannot_write`: a full disk or file size limit, `out_of_space`; a read-only directory or
file system, `permission_denied`), whoever raised it: Python, or TensorFlow writing a
checkpoint or a SavedModel; so is memory running out (`out_of_memory`: sizes asked for
that no allocation can hold). Anything else is a bug and keeps its traceback.
"""

import errno

# What Python's OSError and TensorFlow's own file errors say when a write finds no room.
NO_SPACE = {errno.ENOSPC: "No space left on device", errno.EFBIG: "File too large",
            errno.EDQUOT: "Disk quota exceeded"}
# ... and when the file system refuses access (TensorFlow's PermissionDeniedError says the first).
DENIED = {errno.EACCES: "Permission denied", errno.EROFS: "Read-only file system"}


class InputError(ValueError):
  """Bad user input: the message names the flag, file or value and what was expected."""


def user_errors():
  """The exception types that mean bad user input (one line, no traceback); InputError
  includes hparams_lib's HParamsError and registry's RegistryError."""
  return (InputError, FileNotFoundError, FileExistsError, NotADirectoryError,
          IsADirectoryError, PermissionError)


_KEPT = ("run the same command again: what it finished is kept, and nothing half-written "
         "is left under a final name")


def _file_system_error(error, errnos):
  """(the file, its cause) for an error of the file system that `errnos` ({errno: its
  text}) name: an OSError of one of them, or a TensorFlow error whose message holds one of
  the texts (then no file: the message's first line names it); else None. InputError's
  message is the project's own, never the file system's."""
  if isinstance(error, OSError):
    if error.errno not in errnos:
      return None
    return error.filename, error.strerror or errnos[error.errno]
  if isinstance(error, InputError):
    return None
  text = str(getattr(error, "message", "") or error).strip()
  if not any(phrase in text for phrase in errnos.values()):
    return None
  return None, text.splitlines()[0]


def out_of_space(error):
  """The one-line message for an error that means a write found no room (the disk, a quota
  or the file size limit: NO_SPACE's errnos or texts), else None."""
  found = _file_system_error(error, NO_SPACE)
  if found is None:
    return None
  where = f" writing {found[0]}" if found[0] else ""
  return f"out of space{where}: {found[1]}. Free some (or raise the limit) and {_KEPT}"


def permission_denied(error):
  """The one-line message for an error that means the file system refused access (a
  read-only directory or file system, another user's file: DENIED's errnos or texts),
  else None."""
  found = _file_system_error(error, DENIED)
  if found is None:
    return None
  where = f" on {found[0]}" if found[0] else ""
  return (f"permission denied{where}: {found[1]}. Give this user access (make the "
          f"directory writable, or choose another) and {_KEPT}")


RESOURCE_EXHAUSTED = 8  # tf.errors.ResourceExhaustedError's error_code


def out_of_memory(error):
  """The one-line message for an error that means memory ran out (MemoryError, TensorFlow's
  ResourceExhaustedError: an allocation the sizes asked for cannot get), else None."""
  if not (isinstance(error, MemoryError)
          or getattr(error, "error_code", None) == RESOURCE_EXHAUSTED):
    return None
  lines = [line.strip() for line in str(getattr(error, "message", "") or error).splitlines()]
  found = [line for line in lines if "OOM" in line or "memory" in line.lower()] or lines
  cause = (found[0] if found else type(error).__name__)[:200]
  return (f"out of memory: {cause}. Ask for less at once (the decoder: --decode_hparams "
          f"batch_size, beam_size, extra_length or max_decode_length; the trainer: --hparams "
          f"batch_size) and {_KEPT}")


def cannot_write(error):
  """`out_of_space`'s or `permission_denied`'s message for `error`, else None."""
  return out_of_space(error) or permission_denied(error)
