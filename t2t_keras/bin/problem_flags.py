"""The flags that point a problem at its raw files, for the binaries that run datagen.

t2t-datagen and t2t-trainer (--generate_data) pass them to the problem's constructor
(`datagen.make_problem`): --raw_dir for the built-in corpora and parallel-text
problems, --parallel_train / _dev / _test and --vocab_size for translate_parallel_text,
--target_languages and --language_temperature for multilingual problems.

Deprecated: the environment variables that stood for these flags before
(`T2T_PARALLEL_TRAIN` / `_DEV` / `_TEST`, `T2T_PARALLEL_VOCAB_SIZE`, and a problem's
`raw_dir_env`, e.g. `T2T_MULTI30K_DIR`) are still read here, and only here, where the
flag is not given, with a warning on stderr; the library reads no environment.
"""

import os
import sys

from absl import flags

import t2t_keras.bin

FLAGS = flags.FLAGS
SPLITS = ("train", "dev", "test")
# Deprecated environment variables of translate_parallel_text -> the flag each stands for.
PARALLEL_ENV = {"parallel_train": "T2T_PARALLEL_TRAIN", "parallel_dev": "T2T_PARALLEL_DEV",
                "parallel_test": "T2T_PARALLEL_TEST", "vocab_size": "T2T_PARALLEL_VOCAB_SIZE"}

_define = t2t_keras.bin.define_flag
_define("string", "raw_dir", None,
        "Directory of the problem's raw files (Multi30k, the WMT14 sample, the Penn "
        "Treebank, a parallel-text problem's relative file names); else --tmp_dir.")
for _split in SPLITS:
  _define("string", f"parallel_{_split}", None,
          f"translate_parallel_text: SRC,TGT {_split} files.")
_define("integer", "vocab_size", None, "Override the problem's target vocabulary size.")
_define("list", "target_languages", None,
        "A multilingual problem (translate_en_multi30k): the target languages to mix, a "
        "subset of its own (default: all).")
_define("float", "language_temperature", None,
        "A multilingual problem: train mixes the languages by shares proportional to "
        "pairs ** (1/T); 1 (its default): as the corpora come, larger: flatter.")


def problem_kwargs(problem_name, warn=None):
  """{"raw_dir", "vocab_size", "target_languages", "language_temperature", "train", "dev",
  "test"}: the problem's constructor arguments
  from the flags (None: not given), each missing one taken from its deprecated environment
  variable where that is set (`warn`ed about, default: a line on stderr)."""
  values = {name: FLAGS[name].value
            for name in ("raw_dir", "vocab_size", "target_languages", "language_temperature")}
  values.update({f"parallel_{s}": FLAGS[f"parallel_{s}"].value for s in SPLITS})
  for name, variable in _deprecated_variables(problem_name).items():
    if values[name] is None and os.environ.get(variable):
      values[name] = os.environ[variable]
      (warn or _stderr)(f"warning: ${variable} is deprecated; pass --{name} instead")
  kwargs = {s: values.pop(f"parallel_{s}") for s in SPLITS}
  return dict(values, **kwargs)


def _deprecated_variables(problem_name):
  """{flag name: environment variable} that problem_name's binaries still read."""
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  from t2t_keras.problems.parallel_text import \
      TranslateParallelText  # pylint: disable=import-outside-toplevel
  problem = registry.problem(problem_name)
  found = dict(PARALLEL_ENV) if isinstance(problem, TranslateParallelText) else {}
  if getattr(type(problem), "raw_dir_env", None):
    found["raw_dir"] = type(problem).raw_dir_env
  return found


def _stderr(message):
  print(message, file=sys.stderr, flush=True)
