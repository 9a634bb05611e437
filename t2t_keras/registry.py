"""One registry for problems, hparams sets and models, as in tensor2tensor.

    @registry.register_hparams
    def transformer_base(): return HParams(...)

    registry.hparams("transformer_base")   # -> HParams
    registry.problem("translate_ende_numbers_rev")  # a `_rev` suffix reverses

Names are snake_case; registering a name twice is an error; an unknown name
raises `RegistryError` listing the known names and the closest match.
Built-in problems and hparams sets register on first lookup (import of
`t2t_keras.problems` / `t2t_keras.hparams`); user directories add more.
"""

import difflib
import importlib
import re

from t2t_keras.errors import InputError

_SNAKE = re.compile(r"^[a-z][a-z0-9_]*$")


class RegistryError(KeyError, InputError):
  """Unknown or duplicate registry name."""

  def __str__(self):  # KeyError quotes its message; keep it readable.
    return str(self.args[0])


def camel_to_snake(name):
  """ClassName -> class_name: the registered name of an unnamed registration."""
  s1 = re.sub(r"(.)([A-Z][a-z]+)", r"\1_\2", name)
  return re.sub(r"([a-z0-9])([A-Z])", r"\1_\2", s1).lower()


class _Table:
  """A name -> object table for one kind of thing."""

  def __init__(self, kind, builtin_module):
    self.kind = kind
    self._builtin_module = builtin_module
    self._items = {}

  def _load_builtins(self):
    importlib.import_module(self._builtin_module)

  def register(self, obj, name=None):
    name = name or camel_to_snake(obj.__name__)
    if not _SNAKE.match(name):
      raise RegistryError(f"{self.kind} name {name!r} is not snake_case")
    if name in self._items:
      raise RegistryError(f"{self.kind} {name!r} is already registered")
    self._items[name] = obj
    if self.kind == "problem" and isinstance(obj, type):
      obj.registered_name = name  # data files are named after the registered name
    return obj

  def names(self):
    self._load_builtins()
    return sorted(self._items)

  def get(self, name):
    self._load_builtins()
    if name in self._items:
      return self._items[name]
    raise RegistryError(unknown_message(self.kind, name, self.names()))


def unknown_message(kind, name, known):
  close = difflib.get_close_matches(name, known, n=1, cutoff=0.5)
  hint = f" Closest match: {close[0]!r}." if close else ""
  return f"unknown {kind} {name!r}.{hint} Known {kind}s: {', '.join(known) or '(none)'}"


_PROBLEMS = _Table("problem", "t2t_keras.problems")
_HPARAMS = _Table("hparams set", "t2t_keras.hparams")
_MODELS = _Table("model", "t2t_keras.models")


def _decorator(table):
  def register(obj=None, name=None):
    if obj is None or isinstance(obj, str):
      name = obj if isinstance(obj, str) else name
      return lambda o: table.register(o, name)
    return table.register(obj, name)
  return register


register_problem = _decorator(_PROBLEMS)
register_hparams = _decorator(_HPARAMS)
register_model = _decorator(_MODELS)


def hparams(name):
  """The HParams of a registered hparams set."""
  return _HPARAMS.get(name)()


def model(name):
  """The registered model class."""
  return _MODELS.get(name)


def problem(name):
  """An instance of a registered problem; a `_rev` suffix swaps inputs and targets."""
  _PROBLEMS._load_builtins()
  reverse = False
  base = name
  if name not in _PROBLEMS._items and name.endswith("_rev"):
    base, reverse = name[: -len("_rev")], True
  try:
    cls = _PROBLEMS.get(base)
  except RegistryError:
    raise RegistryError(unknown_message("problem", name, _PROBLEMS.names())) from None
  return cls(was_reversed=reverse)


def list_problems():
  return _PROBLEMS.names()


def list_hparams():
  return _HPARAMS.names()


def list_models():
  return _MODELS.names()


def help_string():
  """The text printed by `--registry_help`."""
  lines = []
  for title, names in (("Problems", list_problems()),
                       ("Hparams sets", list_hparams()),
                       ("Models", list_models())):
    lines.append(f"{title}:")
    lines.extend(f"  {n}" for n in names)
  lines.append("Any problem name plus '_rev' runs it in the reverse direction.")
  return "\n".join(lines)
