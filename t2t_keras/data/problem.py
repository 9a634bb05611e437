"""The problem API: a problem knows its raw data and its vocabulary, never the model.

A problem is a `Text2TextProblem` subclass registered with
`@registry.register_problem`. It implements one method,

    generate_forward_samples(split, tmp_dir) -> iterator of {"inputs": str, "targets": str}

for split in ("train", "dev", "test"), always in the forward direction. The base
class does the rest:

  generate_data(data_dir, tmp_dir)  trains the vocabulary on both sides of train,
                                    writes TFRecord shards of ids (EOS appended)
                                    and returns a summary dict; idempotent.
  get_vocabulary(data_dir)          -> the vocabulary (`vocabulary.load`)
  dataset(data_dir, split)          -> tf.data of {"inputs", "targets"} int32 ids

Files in data_dir (the reversed problem `<name>_rev` shares them and swaps
features when reading):

  vocab.<name>.model                          sentencepiece model (shared vocab)
  <name>-<split>-<i:05d>-of-<n:05d>.tfrecord  tf.train.Example with int64 lists
                                              "inputs" and "targets"
  <name>-<split>.stats.json                   pairs written / skipped for that split

Hooks: what decoding, serving and checkpoint selection ask of a problem, declared on
the base class with defaults that suit translation; a problem overrides the ones it
needs (problems/parsing.py overrides five). Callers reach them through
`hooks(problem_name)`, which gives the defaults for a reversed problem and for one not
registered in this process (a reversed problem keeps `fold_first_letter`):

  decode_defaults                   decode hparams applied before the user's overrides
  preprocess(source)                -> the text the model reads for a source line
  restore(source, output)           -> a decoded line as the run's text (what is scored
                                       against references: dev BLEU, selection, trials)
  postprocess(source, output)       -> the text written for a decoded line
  decode_constraint(vocab)          -> the searches' output constraint, or None
  serving_preprocess()              -> `preprocess` as a TensorFlow module, or None
  serving_postprocess()             -> `postprocess` as a TensorFlow module, or None
  dev_score()                       -> how checkpoints compare on dev (metrics.dev_score)

`source` is the line as the user gave it (before `preprocess`). With the class attribute
`fold_first_letter` the defaults of the four text hooks are the first-letter case fold
(`data/casing.py`: both sides of every pair folded for the vocabulary and the shards,
each source folded before the model reads it, the source's capital restored on the
output).

A data_dir written by tensor2tensor's t2t-datagen (`data.t2t_data_dir`: shards
without the .tfrecord suffix, a `.subwords` vocabulary) is read where these files
are absent; `vocabulary.load` reads either kind of vocabulary.

Every file is written under a temporary `.incomplete` name (`fileio.TMP_SUFFIX`) and
renamed when complete, so a failed run never leaves a finished-looking file behind.
"""

import collections
import itertools
import json
import os
import time

from t2t_keras import fileio, registry
from t2t_keras.errors import InputError
from t2t_keras.data import casing, shards, t2t_data_dir
from t2t_keras.data import vocabulary as vocab_lib

SPLITS = ("train", "dev", "test")


def _check_split(split):
  if split not in SPLITS:
    raise ValueError(f"unknown split {split!r}; expected one of {SPLITS}")


class Text2TextProblem:
  """Base class of all problems: text in, text out, one shared subword vocabulary.

  Class attributes a subclass may set:
    vocab_size        target size of the sentencepiece BPE vocabulary.
    num_shards        TFRecord shards per split (more for big corpora).
    vocab_character_coverage, vocab_input_sentence_size: sentencepiece options
                      (a sample of that many sentences if > 0).
    vocab_sample_pairs  the vocabulary is trained on a sample of this many train
                      pairs (0: all), drawn by datagen with a seed, in corpus order.
    vocab_user_symbols  pieces sentencepiece keeps whole (a multilingual problem's
                      target-language tags, `data/languages.py`).
    fold_first_letter  train on text whose first letter is lowercased, on both sides,
                      and restore the source's capital on outputs (`data/casing.py`'s
                      rule; the text hooks' defaults, see the module docstring).
    registered_name   only if registered under a name other than the
                      snake_case of the class name.
  """

  vocab_size = 8000
  num_shards = {"train": 1, "dev": 1, "test": 1}
  vocab_character_coverage = 1.0
  vocab_input_sentence_size = 0
  vocab_sample_pairs = 1_000_000
  vocab_user_symbols = ()
  fold_first_letter = False
  registered_name = None

  def __init__(self, was_reversed=False, *, vocab_size=None, max_pairs=None,
               num_train_shards=None):
    """`vocab_size` overrides the class's target; `max_pairs` caps each split (quick runs);
    `num_train_shards` overrides the class's shard count of train."""
    self.was_reversed = bool(was_reversed)
    if vocab_size is not None:
      self.vocab_size = int(vocab_size)
    self.max_pairs = max_pairs
    if num_train_shards is not None:
      if int(num_train_shards) < 1:
        raise InputError(f"num_train_shards must be >= 1, got {num_train_shards}")
      self.num_shards = dict(self.num_shards, train=int(num_train_shards))

  # Names and files.

  @property
  def data_name(self):
    """The forward registry name; names the files in data_dir."""
    return self.registered_name or registry.camel_to_snake(type(self).__name__)

  @property
  def name(self):
    """The registry name, with `_rev` when reversed."""
    return self.data_name + ("_rev" if self.was_reversed else "")

  @property
  def vocab_filename(self):
    return f"vocab.{self.data_name}.model"

  def vocab_path(self, data_dir):
    """Ours (vocab.<name>.model), else tensor2tensor's where t2t-datagen wrote data_dir."""
    ours = os.path.join(data_dir, self.vocab_filename)
    if fileio.exists(ours):
      return ours
    return t2t_data_dir.vocab_path(data_dir, self.data_name) or ours

  def shard_paths(self, data_dir, split):
    _check_split(split)
    n = self.num_shards.get(split, 1)
    return [os.path.join(data_dir, f"{self.data_name}-{split}-{i:05d}-of-{n:05d}.tfrecord")
            for i in range(n)]

  def filepattern(self, data_dir, split):
    """Our shards' glob, else tensor2tensor's where only t2t's shards are there."""
    _check_split(split)
    ours = os.path.join(data_dir, f"{self.data_name}-{split}-*-of-*.tfrecord")
    theirs = t2t_data_dir.shard_pattern(data_dir, self.data_name, split)
    if not fileio.glob(ours) and fileio.glob(theirs):
      return theirs
    return ours

  def stats_path(self, data_dir, split):
    return os.path.join(data_dir, f"{self.data_name}-{split}.stats.json")

  # Hooks (the module docstring); a reversed problem gets these defaults (`hooks`).

  decode_defaults = ""

  def preprocess(self, source):
    """A source line -> the text the model reads: the line, its first letter folded where
    the problem folds (`casing.fold`)."""
    return casing.fold(source) if self.fold_first_letter else source

  def restore(self, source, output):
    """A decoded line (and its source, as given) -> the run's text: the line, its source's
    capital restored where the problem folds (`casing.restore`)."""
    return casing.restore(source, output) if self.fold_first_letter else output

  def postprocess(self, source, output):
    """A decoded line (and its source, as given) -> the text t2t-decoder writes: `restore`'s
    (an override in a folding problem calls `restore` first)."""
    return self.restore(source, output)

  @staticmethod
  def decode_constraint(vocab):
    """The searches' output constraint (`decoding/output_constraint.py`) for `vocab`; None: free."""
    del vocab

  def serving_preprocess(self):
    """`preprocess` as a TensorFlow module, strings [n] -> [n], for the export's graph (the
    sources as given in, what the model reads out); None: sources are read as given."""
    if not self.fold_first_letter:
      return None
    from t2t_keras.data import casing_tf  # pylint: disable=import-outside-toplevel
    return casing_tf.FirstLetterFold()

  def serving_postprocess(self):
    """`postprocess` as a TensorFlow module, (outputs [n], sources [n]) -> texts [n], for
    the export's graph; None: outputs are served as decoded."""
    if not self.fold_first_letter:
      return None
    from t2t_keras.data import casing_tf  # pylint: disable=import-outside-toplevel
    return casing_tf.FirstLetterRestore()

  @staticmethod
  def dev_score():
    """How t2t-avg-all's selection compares checkpoints on dev: cased sacreBLEU, ties to chrF."""
    from t2t_keras.metrics import dev_score  # pylint: disable=import-outside-toplevel
    return dev_score.SACREBLEU

  # Samples.

  def generate_forward_samples(self, split, tmp_dir):
    """Yields {"inputs": str, "targets": str} in the forward direction. Subclasses implement."""
    raise NotImplementedError

  def describe_source(self, split, tmp_dir):
    """Where `split`'s raw pairs come from, for error messages (e.g. " (read from a.en, a.de)")."""
    del split, tmp_dir
    return ""

  def check_inputs(self, tmp_dir):
    """Raises before anything is written if raw inputs are missing. Optional hook."""

  def raw_samples(self, split, tmp_dir=None):
    """The forward samples of `split` as generated (capped by max_pairs), uncleaned."""
    _check_split(split)
    for i, sample in enumerate(self.generate_forward_samples(split, tmp_dir)):
      if self.max_pairs is not None and i >= self.max_pairs:
        return
      yield sample

  def count_raw_samples(self, split, tmp_dir=None):
    """How many samples `raw_samples` yields: the shards' ranges of a split written in
    several shards."""
    n = self.count_forward_samples(split, tmp_dir, limit=self.max_pairs)
    return n if self.max_pairs is None else min(n, self.max_pairs)

  def count_forward_samples(self, split, tmp_dir=None, limit=None):
    """The forward samples of `split`, counted no further than `limit` (None: all) by a
    pass over them; a problem that knows its sizes overrides this (and may ignore
    `limit`)."""
    return sum(1 for _ in itertools.islice(self.generate_forward_samples(split, tmp_dir), limit))

  def generate_samples(self, split, tmp_dir=None):
    """Raw text pairs of `split`, swapped when the problem is reversed."""
    for s in self.raw_samples(split, tmp_dir):
      if self.was_reversed:
        yield {"inputs": s["targets"], "targets": s["inputs"]}
      else:
        yield s

  def clean_pair(self, sample):
    """(inputs, targets) with surrounding whitespace stripped (each first letter folded
    where the problem folds: `casing.fold`), or the reason the pair is skipped
    ("empty_inputs", "empty_targets", "empty_inputs_and_targets")."""
    inputs, targets = sample["inputs"].strip(), sample["targets"].strip()
    if inputs and targets:
      return (casing.fold(inputs), casing.fold(targets)) if self.fold_first_letter else (
          inputs, targets)
    return ("empty_inputs_and_targets" if not inputs and not targets
            else "empty_inputs" if not inputs else "empty_targets")

  def _clean_samples(self, split, tmp_dir, skipped):
    """Cleaned forward pairs; skipped ones are counted in `skipped` by reason."""
    for s in self.raw_samples(split, tmp_dir):
      pair = self.clean_pair(s)
      if isinstance(pair, str):
        skipped[pair] += 1
      else:
        yield pair

  # Data generation.

  vocabulary_text = "both sides"  # what `vocabulary_sentences` takes, for the datagen log

  def vocabulary_sentences(self, pairs):
    """The text the vocabulary is trained on: both sides of each (inputs, targets) pair."""
    return (side for pair in pairs for side in pair)

  def get_vocabulary(self, data_dir):
    return vocab_lib.load(self.vocab_path(data_dir))

  def generate_data(self, data_dir, tmp_dir=None, log=None, *, num_workers=1,
                    vocab_sample_pairs=None, vocab_sample_seed=1, usr_dir=None):
    """Writes vocabulary and TFRecords for every split; skips finished files and shards.

    Args:
      data_dir, tmp_dir: where the files go; downloads and raw files.
      log: a print-like function for progress (None: silent).
      num_workers: processes writing a split's shards (`shards.write_split`).
      vocab_sample_pairs: the vocabulary is trained on a sample of this many train
        pairs, kept in corpus order (None: the class's `vocab_sample_pairs`; 0: all).
      vocab_sample_seed: the seed of that sample.
      usr_dir: a --t2t_usr_dir the worker processes import (its problems).
    Returns:
      a summary dict: {"problem", "data_dir", "vocab_file", "vocab_size",
      "vocab_trained", "splits": {split: {"pairs", "skipped": {reason: n},
      "lengths": {pair length: n}, "files", "reused"}}, "seconds"}.
    """
    log = log or (lambda msg: None)
    start = time.time()
    fileio.makedirs(data_dir)
    if tmp_dir:
      fileio.makedirs(tmp_dir)
    self.check_inputs(tmp_dir)

    vocab_path = self.vocab_path(data_dir)
    vocab_trained = False
    if fileio.exists(vocab_path):
      log(f"vocabulary {vocab_path} exists; reusing it")
      vocab = vocab_lib.load(vocab_path)
    else:
      limit = self.vocab_sample_pairs if vocab_sample_pairs is None else vocab_sample_pairs
      vocab = self._train_vocabulary(vocab_path, tmp_dir, limit, vocab_sample_seed, log)
      vocab_trained = True

    splits = {}
    for split in SPLITS:
      splits[split] = self._generate_split(data_dir, tmp_dir, split, vocab, log,
                                           num_workers, usr_dir)
    return {
        "problem": self.data_name,
        "data_dir": data_dir,
        "vocab_file": vocab_path,
        "vocab_size": vocab.vocab_size,
        "vocab_trained": vocab_trained,
        "splits": splits,
        "seconds": round(time.time() - start, 3),
    }

  def _train_vocabulary(self, vocab_path, tmp_dir, limit, seed, log):
    """Trains the BPE vocabulary on both sides of (a sample of `limit` pairs of) train."""
    pairs, total = vocab_lib.sample_in_order(
        self._clean_samples("train", tmp_dir, collections.Counter()), limit, seed)
    if not pairs:
      raise InputError(f"{self.data_name}: the train split has no pair with both sides "
                       f"non-empty{self.describe_source('train', tmp_dir)}: nothing to "
                       "learn a vocabulary from")
    sample = (f"all {total:,} train pairs" if len(pairs) == total else
              f"a sample of {len(pairs):,} of {total:,} train pairs (seed {seed}; "
              "--vocab_sample_pairs=0 for all)")
    log(f"training a {self.vocab_size}-piece BPE vocabulary on {self.vocabulary_text} of "
        f"{sample}")
    vocab = vocab_lib.train_sentencepiece(
        self.vocabulary_sentences(pairs), vocab_path, self.vocab_size,
        character_coverage=self.vocab_character_coverage,
        input_sentence_size=self.vocab_input_sentence_size,
        user_defined_symbols=self.vocab_user_symbols)
    log(f"wrote {vocab_path} ({vocab.vocab_size} pieces)")
    return vocab

  def _generate_split(self, data_dir, tmp_dir, split, vocab, log, num_workers=1,
                      usr_dir=None):
    paths = self.shard_paths(data_dir, split)
    stats_path = self.stats_path(data_dir, split)
    if all(fileio.exists(p) for p in paths) and (
        fileio.exists(stats_path) or not shards.finished(paths)):
      if fileio.exists(stats_path):
        stats = json.loads(fileio.read_text(stats_path))
      else:  # written before per-shard stats existed
        stats = {"pairs": _count_records(paths), "skipped": {}}
      log(f"{split}: {len(paths)} finished file(s) exist; skipping")
      return dict(stats, files=paths, reused=True)
    others = sorted(set(fileio.glob(self.filepattern(data_dir, split))) - set(paths))
    if others:
      raise InputError(f"{data_dir} holds {split} files of another shard count "
                       f"({fileio.basename(others[0])}, ...) than the {len(paths)} asked for: "
                       "remove them, or generate with their count")
    stats = shards.write_split(self, tmp_dir, split, paths, vocab, num_workers=num_workers,
                               usr_dir=usr_dir, log=log)
    # Each shard's size, which readers check (`pipeline.check_shards`): tf.data takes a
    # shard cut short for a shorter one, silently.
    stats["shard_bytes"] = {fileio.basename(p): fileio.size(p) for p in paths}
    fileio.write_atomic(stats_path, json.dumps(stats, indent=2, sort_keys=True))
    for p in paths:
      fileio.remove(shards.shard_stats_path(p))
    log(f"{split}: {stats['pairs']} pairs in {len(paths)} file(s); skipped "
        f"{stats['skipped'] or 0}")
    return dict(stats, files=paths, reused=False)

  # Reading.

  def records(self, data_dir, split, *, shuffle_files=False, seed=None,
              num_input_pipelines=1, input_pipeline_id=0):
    """A tf.data.Dataset of serialized tf.Example records (string scalars) of a split.

    Reads `filepattern(data_dir, split)`. With several input pipelines, shards by
    file when there are enough files, else by record. `parse_records` turns
    them into features.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    pattern = self.filepattern(data_dir, split)
    files = sorted(tf.io.gfile.glob(pattern))
    if not files:
      raise FileNotFoundError(
          f"no data files match {pattern}; run "
          f"`t2t-datagen --problem={self.data_name} --data_dir={data_dir}` first")
    ds = tf.data.Dataset.from_tensor_slices(files)
    by_file = num_input_pipelines > 1 and len(files) >= num_input_pipelines
    if by_file:
      ds = ds.shard(num_input_pipelines, input_pipeline_id)
    if shuffle_files and len(files) > 1:
      ds = ds.shuffle(len(files), seed=seed, reshuffle_each_iteration=True)
    ds = ds.interleave(tf.data.TFRecordDataset, cycle_length=min(8, len(files)),
                       num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)
    if num_input_pipelines > 1 and not by_file:
      ds = ds.shard(num_input_pipelines, input_pipeline_id)
    return ds

  def parse_records(self, records):
    """{"inputs", "targets"} int32 ids (EOS included) of serialized records.

    records: a string scalar (-> tensors [len]) or vector [k] (-> ragged
    [k, None], one parse for all k: the input pipeline's way). Swaps the
    features when reversed.
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    parse = tf.io.parse_single_example if records.shape.rank == 0 else tf.io.parse_example
    parsed = parse(records, _features())
    inputs = tf.cast(parsed["inputs"], tf.int32)
    targets = tf.cast(parsed["targets"], tf.int32)
    if self.was_reversed:
      inputs, targets = targets, inputs
    return {"inputs": inputs, "targets": targets}

  def dataset(self, data_dir, split, *, shuffle_files=False, seed=None,
              num_input_pipelines=1, input_pipeline_id=0):
    """A tf.data.Dataset of {"inputs": int32 [len], "targets": int32 [len]} (EOS included).

    `records` parsed one by one (see there for the arguments).
    """
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    ds = self.records(data_dir, split, shuffle_files=shuffle_files, seed=seed,
                      num_input_pipelines=num_input_pipelines,
                      input_pipeline_id=input_pipeline_id)
    return ds.map(self.parse_records, num_parallel_calls=tf.data.AUTOTUNE, deterministic=True)

  def __repr__(self):
    return f"<{type(self).__name__} {self.name}>"


def hooks(problem_name):
  """The problem whose hooks apply to runs of `problem_name`: the registered problem, or a
  plain Text2TextProblem (the defaults) for a reversed problem (its hooks read the other
  direction; its `fold_first_letter` is kept, both sides being folded), for one not
  registered in this process (a usr dir not imported) or None."""
  try:
    instance = registry.problem(problem_name) if problem_name else None
  except registry.RegistryError:
    instance = None
  if instance is not None and not instance.was_reversed:
    return instance
  defaults = Text2TextProblem()
  if instance is not None and instance.fold_first_letter:
    defaults.fold_first_letter = True
  return defaults


def _features():
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return {"inputs": tf.io.RaggedFeature(tf.int64), "targets": tf.io.RaggedFeature(tf.int64)}


def _count_records(paths):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  return sum(1 for p in paths for _ in tf.data.TFRecordDataset(p).as_numpy_iterator())

