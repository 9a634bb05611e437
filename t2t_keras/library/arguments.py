"""The library's arguments checked: text lines, and per-line values (prefixes, terms)."""

from t2t_keras.errors import InputError


def check_n_best(n_best, beam_size):
  """InputError unless n_best is an int from 1 to beam_size."""
  if not isinstance(n_best, int) or not 1 <= n_best <= beam_size:
    raise InputError(f"n_best must be an int from 1 to beam_size ({beam_size}), got "
                     f"{n_best!r}")


def texts(lines, name):
  """`lines` as a list of str; InputError naming the argument otherwise."""
  if isinstance(lines, str) or not hasattr(lines, "__iter__"):
    raise InputError(f"{name} must be a list of str, got {type(lines).__name__}")
  lines = list(lines)
  for i, line in enumerate(lines):
    if not isinstance(line, str):
      raise InputError(f"{name}[{i}] must be a str, got {type(line).__name__}")
  return lines


def per_line(value, batch, single, name, kind):
  """A per-line argument as one item per line (None stays None): for one line the item
  itself (a `kind`), for several a list of them."""
  if value is None:
    return None
  items = [value] if single else value
  if isinstance(items, (str, bytes)) or not hasattr(items, "__iter__"):
    raise InputError(f"{name} for a list of lines must be a list with one item per line")
  items = list(items)
  if len(items) != len(batch):
    raise InputError(f"{len(items)} {name} items for {len(batch)} lines")
  for i, item in enumerate(items):
    if not isinstance(item, kind) or (kind is list and not all(isinstance(p, str) and p.strip()
                                                               for p in item)):
      expected = "a str" if kind is str else "a list of non-empty str"
      raise InputError(f"{name}{'' if single else f'[{i}]'} must be {expected}, got "
                       f"{item!r:.80}")
  return items

