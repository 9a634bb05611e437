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
"""

from t2t_keras import fileio, runs
from t2t_keras.errors import InputError

PROBLEM = "translate_parallel_text"
SPLITS = ("train", "dev", "test")


def write_splits(problem_name, output_dir, *, max_lines=None, tmp_dir=None,
                 problem_kwargs=None, log=print):
  """A registered problem's splits as text files (output_dir/<split>.source and .target,
  atomically; train cut to its first `max_lines` pairs where given): how a generated
  problem (translate_ende_numbers) gets the files the distillation reads. problem_kwargs:
  its constructor's arguments (the numbers' num_train, a corpus' raw_dir). Returns
  {split: (source path, target path)}."""
  log = log or (lambda message: None)
  from t2t_keras.data.datagen import make_problem  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.files import split_pairs, write_lines  # pylint: disable=import-outside-toplevel
  problem, paths = make_problem(problem_name, **(problem_kwargs or {})), {}
  for split in SPLITS:
    sources, targets = split_pairs(problem, split=split, tmp_dir=tmp_dir)
    if split == "train" and max_lines:
      sources, targets = sources[:max_lines], targets[:max_lines]
    paths[split] = tuple(fileio.join(output_dir, f"{split}.{side}")
                         for side in ("source", "target"))
    write_lines(paths[split][0], sources)
    write_lines(paths[split][1], targets)
    log(f"{problem_name} {split}: {len(sources)} pairs -> {paths[split][0]}, {paths[split][1]}")
  return paths


def generate(data_dir, *, train, dev, test, vocab_from=None, vocab_size=8000, log=print):
  """Datagen of the distilled problem into data_dir (`datagen.generate`'s summary).

  train, dev, test: (source path, target path) each. vocab_from: a run directory (or
  runs, comma-separated: the first's) whose vocabulary the student shares; else a
  vocab_size-piece BPE vocabulary is trained on the distilled train text. InputError
  where data_dir already holds another vocabulary for the problem.
  """
  from t2t_keras.data import datagen  # pylint: disable=import-outside-toplevel
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  if vocab_from:
    run_dir = runs.split_runs(vocab_from)[0]
    if not fileio.exists(fileio.join(run_dir, runs.RUN_FILE)):
      raise InputError(f"{run_dir}: sharing the teacher's vocabulary needs its run directory "
                       "(run.json and vocab.model; t2t-import makes one from elsewhere); or "
                       "train the student's own")
    source = runs.load_run_info(run_dir)[1]["vocab_path"]
    target = registry.problem(PROBLEM).vocab_path(data_dir)
    fileio.makedirs(data_dir)
    if not fileio.exists(target):
      fileio.copy_atomic(source, target)
    elif not fileio.same_content(source, target):
      raise InputError(f"{target} is not {run_dir}'s vocabulary: give a new data directory")
  return datagen.generate(PROBLEM, data_dir, log=log, train=tuple(train), dev=tuple(dev),
                          test=tuple(test), vocab_size=vocab_size)
