"""The error every binary prints as one line (`t2t-<name>: error: <message>`) instead of a traceback.

Library code raises `InputError` (hparams_lib's `HParamsError` and registry's `RegistryError`
are InputErrors) or
`FileNotFoundError`) for input a user can fix: a bad flag value, a malformed
file, a missing checkpoint. Anything else is a bug and keeps its traceback.
"""


class InputError(ValueError):
  """Bad user input: the message names the flag, file or value and what was expected."""


def user_errors():
  """The exception types that mean bad user input (one line, no traceback); InputError
  includes hparams_lib's HParamsError and registry's RegistryError."""
  return (InputError, FileNotFoundError, FileExistsError, NotADirectoryError,
          IsADirectoryError, PermissionError)
