"""Frozen hyperparameters with t2t-style "a=1,b=2.5,c=true,d=name" overrides.

One `HParams` object is made from a registered hparams set, overridden once from
flags, saved as JSON beside the checkpoints and passed down to every module.
It is immutable: `override` and `replace` return a new object.
"""

import difflib
import json
import math

from t2t_keras import fileio
from t2t_keras.errors import InputError

_TRUE = ("true", "1", "yes", "on")
_FALSE = ("false", "0", "no", "off")


class HParamsError(InputError):
  """A bad hparams override or a mismatch with saved hparams."""


def _parse_value(key, text, default):
  """Parses `text` into the type of `default`; raises HParamsError naming the key."""
  kind = type(default)
  try:
    if kind is bool:
      low = text.strip().lower()
      if low in _TRUE:
        return True
      if low in _FALSE:
        return False
      raise ValueError(text)
    if kind is int:
      return int(text)
    if kind is float:
      value = float(text)
      if not math.isfinite(value):  # nan, inf: never a learning rate, dropout or alpha
        raise ValueError(text)
      return value
    if kind is str:
      return text.strip()
  except ValueError:  # int() also refuses over 4,300 digits
    pass
  what = "a finite float" if kind is float else kind.__name__
  raise HParamsError(
      f"hparam {key!r}: cannot parse {shown(text)} as {what} (default is {default!r})")


def shown(text, limit=80):
  """repr(text), cut to `limit` characters with how many there were (an error message
  quotes a user's value so)."""
  if len(text) <= limit:
    return repr(text)
  return f"{text[:limit]!r}... ({len(text)} characters)"


class HParams:
  """An immutable mapping of hyperparameter names to bool/int/float/str values.

  Example:
    hp = HParams(hidden_size=512, dropout=0.1).override("hidden_size=256")
    hp.hidden_size  # 256
  """

  __slots__ = ("_values",)

  def __init__(self, **values):
    for key, value in values.items():
      if not isinstance(value, (bool, int, float, str)):
        raise HParamsError(
            f"hparam {key!r}: values must be bool, int, float or str, "
            f"got {type(value).__name__}")
    object.__setattr__(self, "_values", dict(values))

  def __getattr__(self, name):
    try:
      return self._values[name]
    except KeyError:
      raise AttributeError(self._unknown_message(name)) from None

  def __setattr__(self, name, value):
    raise AttributeError("HParams is frozen: use override() or replace()")

  def __contains__(self, name):
    return name in self._values

  def __eq__(self, other):
    return isinstance(other, HParams) and self._values == other._values

  def __hash__(self):
    return hash(tuple(sorted(self._values.items())))

  def __repr__(self):
    body = ", ".join(f"{k}={v!r}" for k, v in sorted(self._values.items()))
    return f"HParams({body})"

  def _unknown_message(self, key):
    close = difflib.get_close_matches(key, self._values, n=1)
    hint = f" Did you mean {close[0]!r}?" if close else ""
    return (f"unknown hparam {shown(key)}.{hint} Valid keys: "
            f"{', '.join(sorted(self._values))}")

  def values(self):
    """A copy of the values as a plain dict."""
    return dict(self._values)

  def get(self, name, default=None):
    return self._values.get(name, default)

  def replace(self, **changes):
    """A new HParams with `changes` applied; keys must exist, types must match."""
    values = dict(self._values)
    for key, value in changes.items():
      if key not in values:
        raise HParamsError(self._unknown_message(key))
      default = values[key]
      if isinstance(default, float) and isinstance(value, int) and not isinstance(value, bool):
        value = float(value)
      if type(value) is not type(default):
        raise HParamsError(
            f"hparam {key!r}: expected {type(default).__name__}, got "
            f"{type(value).__name__} {value!r}")
      values[key] = value
    return HParams(**values)

  def override(self, text):
    """Applies "a=1,b=2.5,c=true,d=name"; an empty string changes nothing."""
    changes = {}
    for item in (text or "").split(","):
      if not item.strip():
        continue
      if "=" not in item:
        raise HParamsError(f"bad hparams override {shown(item)}: expected key=value")
      key, raw = item.split("=", 1)
      key = key.strip()
      if key not in self._values:
        raise HParamsError(self._unknown_message(key))
      changes[key] = _parse_value(key, raw, self._values[key])
    return self.replace(**changes)

  def diff(self, other):
    """Keys whose values differ between self and other (either side missing counts)."""
    keys = set(self._values) | set(other._values)
    return sorted(k for k in keys if self._values.get(k, None) != other._values.get(k, None))

  def to_json(self):
    return json.dumps(self._values, indent=2, sort_keys=True)

  @classmethod
  def from_json(cls, text):
    return cls(**json.loads(text))

  def save(self, path):
    """Writes JSON atomically (temporary name, then rename)."""
    fileio.write_atomic(path, self.to_json())

  @classmethod
  def load(cls, path):
    """The HParams saved in `path`; InputError naming it when it is damaged."""
    return cls(**fileio.read_json(path))
