"""The error every binary prints as one line (`t2t-<name>: error: <message>`) instead of a traceback.

Library code raises `InputError` (or `HParamsError`, `RegistryError`,
`FileNotFoundError`) for input a user can fix: a bad flag value, a malformed
file, a missing checkpoint. Anything else is a bug and keeps its traceback.
"""


class InputError(ValueError):
  """Bad user input: the message names the flag, file or value and what was expected."""


def user_errors():
  """The exception types that mean bad user input (one line, no traceback)."""
  from t2t_keras.hparams_lib import HParamsError  # pylint: disable=import-outside-toplevel
  from t2t_keras.registry import RegistryError  # pylint: disable=import-outside-toplevel
  return (InputError, HParamsError, RegistryError, FileNotFoundError, FileExistsError,
          NotADirectoryError, IsADirectoryError, PermissionError)
