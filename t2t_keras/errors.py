"""The error every binary prints as one line (`t2t-<name>: error: <message>`) instead of a traceback.

Library code raises `InputError` (hparams_lib's `HParamsError` and registry's `RegistryError`
are InputErrors) or
`FileNotFoundError`) for input a user can fix: a bad flag value, a malformed
file, a missing checkpoint. A write the file system refuses is one line too
(`cannot_write`: a full disk or file size limit, `out_of_space`; a read-only directory or
file system, `permission_denied`), whoever raised it: Python, or TensorFlow writing a
checkpoint or a SavedModel. Anything else is a bug and keeps its traceback.
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


def out_of_space(error):
  """The one-line message for an error that means a write found no room (the disk, a quota
  or the file size limit: an OSError of NO_SPACE's errnos, or a TensorFlow error whose
  message says so), else None."""
  if isinstance(error, OSError) and error.errno in NO_SPACE:
    where = f" writing {error.filename}" if error.filename else ""
    cause = error.strerror or NO_SPACE[error.errno]
  else:
    text = str(getattr(error, "message", "") or error).strip()
    if not any(phrase in text for phrase in NO_SPACE.values()):
      return None
    where, cause = "", text.splitlines()[0]
  return (f"out of space{where}: {cause}. Free some (or raise the limit) and run the same "
          "command again: what it finished is kept, and nothing half-written is left "
          "under a final name")


def permission_denied(error):
  """The one-line message for an error that means the file system refused access (a
  read-only directory or file system, another user's file: an OSError of DENIED's errnos,
  or a TensorFlow error whose message says so), else None."""
  if isinstance(error, OSError) and error.errno in DENIED:
    where = f" on {error.filename}" if error.filename else ""
    cause = error.strerror or DENIED[error.errno]
  elif isinstance(error, (OSError, InputError)):  # a message of the project's own, or another
    return None
  else:
    text = str(getattr(error, "message", "") or error).strip()
    if not any(phrase in text for phrase in DENIED.values()):
      return None
    where, cause = "", text.splitlines()[0]
  return (f"permission denied{where}: {cause}. Give this user access (make the directory "
          "writable, or choose another) and run the same command again: what it finished "
          "is kept, and nothing half-written is left under a final name")


def cannot_write(error):
  """`out_of_space`'s or `permission_denied`'s message for `error`, else None."""
  return out_of_space(error) or permission_denied(error)
