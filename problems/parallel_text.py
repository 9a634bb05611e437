"""Problems read from aligned parallel text files (plain or .gz, one sentence a line).

Two ways to use them:

1. The generic registered problem `translate_parallel_text`, pointed at files by
   the datagen flags `--parallel_train=SRC,TGT --parallel_dev=SRC,TGT
   --parallel_test=SRC,TGT` (and `--vocab_size`), which are its constructor
   arguments `train=`, `dev=`, `test=` (and `vocab_size=`). Its files in data_dir
   are named `translate_parallel_text-*`, so use one data_dir per corpus.

2. A few lines in a user directory (`--t2t_usr_dir`):

       from t2t_keras import fileio, registry
       from t2t_keras.problems.parallel_text import ParallelTextProblem

       @registry.register_problem
       class TranslateEnfrMyCorpus(ParallelTextProblem):
         vocab_size = 16000
         files = {"train": ("train.en.gz", "train.fr.gz"),
                  "dev": ("dev.en", "dev.fr"),
                  "test": ("test.en", "test.fr")}

Relative file names are looked up in the raw directory: the `raw_dir`
argument (datagen `--raw_dir`), else tmp_dir. The library reads no environment
variable; `raw_dir_env` only names the deprecated one the binaries still read
for --raw_dir (`bin/problem_flags.py`).

Bad input fails loudly before anything is marked finished: a missing file
names its path; line counts that differ name both files and both counts;
invalid UTF-8 names the file and line. Pairs with an empty side are skipped
and counted in the datagen summary.
"""

import contextlib
import gzip
import itertools
import os

from t2t_keras.errors import InputError
from t2t_keras import fileio, registry
from t2t_keras.data.problem import SPLITS, Text2TextProblem


@contextlib.contextmanager
def _open_binary(path):
  """Any fileio path (local, gs://, ram://, ...) read as bytes, gunzipped when it is gzip."""
  with fileio.open(path, "rb") as f:
    gzipped = path.endswith(".gz") or f.read(2) == b"\x1f\x8b"
    f.seek(0)
    if gzipped:
      with gzip.GzipFile(fileobj=f, mode="rb") as g:
        yield g
    else:
      yield f


def _decode_lines(path):
  with _open_binary(path) as f:
    for lineno, raw in enumerate(f, start=1):
      try:
        yield raw.decode("utf-8").rstrip("\r\n")
      except UnicodeDecodeError as e:
        raise InputError(
            f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start} of the line)"
        ) from None


def read_parallel(source_path, target_path):
  """Yields (source, target) line pairs; raises InputError on bad input.

  Line counts are checked as the files are read: if one file runs out first,
  the rest of the other is counted and the error names both files and counts.
  """
  count = 0
  sentinel = object()
  src_lines, tgt_lines = _decode_lines(source_path), _decode_lines(target_path)
  for src, tgt in itertools.zip_longest(src_lines, tgt_lines, fillvalue=sentinel):
    if src is sentinel or tgt is sentinel:
      n_src = count + (0 if src is sentinel else 1 + sum(1 for _ in src_lines))
      n_tgt = count + (0 if tgt is sentinel else 1 + sum(1 for _ in tgt_lines))
      raise InputError(
          f"parallel files have different line counts: {source_path} has {n_src} "
          f"lines, {target_path} has {n_tgt} lines")
    count += 1
    yield src, tgt


class ParallelTextProblem(Text2TextProblem):
  """Base of problems made of aligned source/target text files.

  Subclasses set `files = {split: (source, target)}` (paths absolute or
  relative to the raw directory) and `vocab_size`. `raw_dir_env`: deprecated, the
  environment variable the binaries read where --raw_dir is not given.
  """

  files = None
  raw_dir_env = None

  def __init__(self, was_reversed=False, *, raw_dir=None, files=None, **kwargs):
    super().__init__(was_reversed, **kwargs)
    self.raw_dir = raw_dir
    if files is not None:
      self.files = dict(files)

  def resolve_raw_dir(self, tmp_dir):
    """The raw directory: the `raw_dir` argument (--raw_dir), else tmp_dir (or None)."""
    return self.raw_dir or tmp_dir

  def split_files(self, split, tmp_dir):
    """(source path, target path) of `split`."""
    if not self.files or split not in self.files:
      raise InputError(
          f"problem {self.data_name} has no files for split {split!r}; "
          f"give files for {', '.join(SPLITS)}")
    raw_dir = self.resolve_raw_dir(tmp_dir)
    paths = []
    for p in self.files[split]:
      p = os.path.expanduser(p)
      if not (fileio.is_remote(p) or os.path.isabs(p)):
        if not raw_dir:
          raise InputError(f"{self.data_name}: relative file {p!r} needs a directory: set "
                           "--raw_dir or --tmp_dir")
        p = os.path.join(raw_dir, p)
      paths.append(p)
    return tuple(paths)

  def describe_source(self, split, tmp_dir):
    return f" (read from {', '.join(self.split_files(split, tmp_dir))})"

  def check_inputs(self, tmp_dir):
    missing = [p for split in SPLITS for p in self.split_files(split, tmp_dir)
               if not fileio.isfile(p)]
    if missing:
      raise FileNotFoundError(
          f"{self.data_name}: missing input file(s): {', '.join(missing)}")

  def count_forward_samples(self, split, tmp_dir=None, limit=None):
    """The source file's line count (read in 1 MiB blocks; the target's is checked when
    the pairs are read); `limit` is not needed."""
    del limit
    source, _ = self.split_files(split, tmp_dir)
    lines, last = 0, b"\n"
    with _open_binary(source) as f:
      for block in iter(lambda: f.read(1 << 20), b""):
        lines += block.count(b"\n")
        last = block[-1:]
    return lines + (last != b"\n")

  def generate_forward_samples(self, split, tmp_dir=None):
    source, target = self.split_files(split, tmp_dir)
    for path in (source, target):
      if not fileio.isfile(path):
        raise FileNotFoundError(f"{self.data_name}: missing input file: {path}")
    for src, tgt in read_parallel(source, target):
      yield {"inputs": src, "targets": tgt}


def _file_pair(split, pair):
  """(source, target) of "SRC,TGT" or a 2-sequence; InputError naming --parallel_<split>."""
  if isinstance(pair, str):
    pair = tuple(p.strip() for p in pair.split(","))
  if len(pair) != 2 or not all(pair):
    raise InputError(f"--parallel_{split}: {split} files must be SOURCE,TARGET, got {pair!r}")
  return tuple(pair)


@registry.register_problem
class TranslateParallelText(ParallelTextProblem):
  """Any aligned corpus named by flags or constructor arguments (see the module doc)."""

  def __init__(self, was_reversed=False, *, train=None, dev=None, test=None, **kwargs):
    """`train`, `dev`, `test`: "SRC,TGT" or (source, target) paths of each split."""
    super().__init__(was_reversed, **kwargs)
    given = {"train": train, "dev": dev, "test": test}
    self.files = {split: _file_pair(split, given[split]) for split in SPLITS if given[split]}

  def resolve_raw_dir(self, tmp_dir):
    # Files named on the command line: relative to --raw_dir if given, else to
    # the working directory (as any command-line tool reads them).
    return self.raw_dir or os.getcwd()

  def split_files(self, split, tmp_dir):
    if split not in self.files:
      raise InputError(
          f"translate_parallel_text: no {split} files; pass --parallel_{split}=SRC,TGT "
          f"(t2t-datagen, t2t-trainer --generate_data) or {split}= to the problem")
    return super().split_files(split, tmp_dir)
