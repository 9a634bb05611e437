"""The distilled problem: the filtered teacher outputs as train, the original dev and test.

    write_splits("translate_ende_numbers", "distill/data")     # <split>.source / .target
    generate("distill/t2t_data", train=("filtered/train.source", "filtered/train.target"),
             dev=("val.en", "val.de"), test=("test.en", "test.de"), vocab_from="runs/teacher")

The problem is `translate_parallel_text` (problems/parallel_text.py), registered already
and pointed at files when its data is generated (t2t-datagen's --parallel_train / _dev /
_test), so nothing is registered at run time and later tools (t2t-trainer, t2t-decoder,
t2t-avg-all, the exports) find it by name in run.json. Its vocabulary is either the
teacher's (`vocab_from`: copied into data_dir as the problem's vocabulary file, which
datagen then reuses) or its own, trained on the distilled train text (`vocab_size`).
data_dir/distilled.json records the SHA-256 of every split's files and the vocabulary
chosen; a later call with other files or another vocabulary is refused in one line (datagen
keeps finished shards, so it would train on the old ones).
"""

import inspect
import json

from t2t_keras import fileio, runs
from t2t_keras.errors import InputError

PROBLEM = "translate_parallel_text"
SPLITS = ("train", "dev", "test")
RECORD_FILE = "distilled.json"


def write_splits(problem_name, output_dir, *, max_lines=None, tmp_dir=None, raw_dir=None,
                 problem_kwargs=None, log=print):
  """A registered problem's splits as text files (output_dir/<split>.source and .target,
  atomically; train cut to its first `max_lines` pairs where given, at least 1): how a
  problem (translate_ende_numbers, a corpus) gets the files the distillation reads.
  raw_dir: a corpus problem's raw files, passed where the problem's constructor takes
  one (a problem that generates its data ignores it). problem_kwargs: its constructor's
  other arguments (the numbers' num_train). Returns {split: (source path, target path)}."""
  log = log or (lambda message: None)
  from t2t_keras.data.datagen import make_problem  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.files import split_pairs, write_lines  # pylint: disable=import-outside-toplevel
  if max_lines is not None and (not isinstance(max_lines, int) or max_lines < 1):
    raise InputError(f"max_lines={max_lines!r}: expected a whole number of pairs, at least 1 "
                     "(or none: every pair)")
  kwargs = dict(problem_kwargs or {})
  if raw_dir and _takes_raw_dir(problem_name):
    kwargs["raw_dir"] = raw_dir
  problem, paths = make_problem(problem_name, **kwargs), {}
  for split in SPLITS:
    sources, targets = split_pairs(problem, split=split, tmp_dir=tmp_dir)
    if split == "train" and max_lines is not None:
      sources, targets = sources[:max_lines], targets[:max_lines]
    paths[split] = tuple(fileio.join(output_dir, f"{split}.{side}")
                         for side in ("source", "target"))
    write_lines(paths[split][0], sources)
    write_lines(paths[split][1], targets)
    log(f"{problem_name} {split}: {len(sources)} pairs -> {paths[split][0]}, {paths[split][1]}")
  return paths


def _takes_raw_dir(problem_name):
  """Whether the registered problem's constructor takes a raw_dir."""
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  parameters = inspect.signature(type(registry.problem(problem_name)).__init__).parameters
  return "raw_dir" in parameters


def generate(data_dir, *, train, dev, test, vocab_from=None, vocab_size=8000, log=print):
  """Datagen of the distilled problem into data_dir (`datagen.generate`'s summary).

  train, dev, test: (source path, target path) each. vocab_from: a run directory (or
  runs, comma-separated: the first's) whose vocabulary, one sentencepiece model, the
  student shares; else a vocab_size-piece BPE vocabulary is trained on the distilled
  train text. InputError (one line) where data_dir was generated from other files or
  another vocabulary choice (distilled.json), or already holds another vocabulary.
  """
  from t2t_keras.data import datagen  # pylint: disable=import-outside-toplevel
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  splits = {"train": tuple(train), "dev": tuple(dev), "test": tuple(test)}
  source = _shared_vocabulary(vocab_from) if vocab_from else None
  _check_record(data_dir, _record(splits, source, vocab_size))
  if vocab_from:
    run_dir = runs.split_runs(vocab_from)[0]
    target = registry.problem(PROBLEM).vocab_path(data_dir)
    if not fileio.exists(target):
      fileio.copy_atomic(source, target)
    elif not fileio.same_content(source, target):
      raise InputError(f"{target} is not {run_dir}'s vocabulary: give a new data directory")
  return datagen.generate(PROBLEM, data_dir, log=log, vocab_size=vocab_size, **splits)


def _shared_vocabulary(vocab_from):
  """The vocabulary file of vocab_from's first run; InputError (one line) where it is no
  run directory or its vocabulary is not one sentencepiece model (the distilled
  problem's datagen reads only that)."""
  from t2t_keras.data import marian_vocab, t2t_subwords  # pylint: disable=import-outside-toplevel
  run_dir = runs.split_runs(vocab_from)[0]
  if not fileio.exists(fileio.join(run_dir, runs.RUN_FILE)):
    raise InputError(f"{run_dir}: sharing the teacher's vocabulary needs its run directory "
                     "(run.json and vocab.model; t2t-import makes one from elsewhere); or "
                     "train the student's own")
  path = runs.load_run_info(run_dir)[1].get("vocab_path")
  if not path:
    raise InputError(f"{run_dir}/{runs.RUN_FILE} names no vocabulary file to share: train "
                     "the student's own (VOCAB=own, --vocab_size)")
  if not fileio.exists(path):
    raise FileNotFoundError(f"{path} not found: the teacher's vocabulary, to share")
  kind = ("a tensor2tensor .subwords vocabulary" if t2t_subwords.is_subwords_file(path)
          else "a Marian pair (a source and a target model, perhaps separate vocabularies)"
          if marian_vocab.is_archive(path) else None)
  if kind:
    raise InputError(f"{path} is {kind}: the student can share only one sentencepiece "
                     "model; train its own (VOCAB=own, --vocab_size)")
  return path


def _record(splits, vocab_path, vocab_size):
  """What data_dir's data is made of: each split's files by SHA-256, and the vocabulary
  (the shared file's SHA-256, else the size of the student's own)."""
  from t2t_keras.distill.identity import file_digest  # pylint: disable=import-outside-toplevel
  vocab = ({"shared": file_digest(vocab_path)} if vocab_path
           else {"own": {"vocab_size": vocab_size}})
  return {"splits": {split: [file_digest(p) for p in paths] for split, paths in splits.items()},
          "vocab": vocab}


def _check_record(data_dir, record):
  """Writes data_dir/distilled.json where missing; InputError (one line) naming what differs
  where it records other files or another vocabulary."""
  path = fileio.join(data_dir, RECORD_FILE)
  if not fileio.exists(path):
    fileio.makedirs(data_dir)
    fileio.write_atomic(path, json.dumps(record, indent=1, sort_keys=True) + "\n")
    return
  old = fileio.read_json(path)
  what = [f"{split}'s files" for split in SPLITS
          if old.get("splits", {}).get(split) != record["splits"][split]]
  if old.get("vocab") != record["vocab"]:
    what.append(f"the vocabulary ({_describe(old.get('vocab'))} -> "
                f"{_describe(record['vocab'])})")
  if what:
    raise InputError(f"{data_dir} was generated from other data ({', '.join(what)} changed "
                     "since): datagen would reuse its shards; give a new data directory")


def _describe(vocab):
  if not vocab:
    return "none recorded"
  if "shared" in vocab:
    return "the teacher's"
  return f"its own, {vocab['own']['vocab_size']} pieces"
