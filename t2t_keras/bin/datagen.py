"""t2t-datagen: writes a problem's vocabulary and TFRecords into --data_dir.

  t2t-datagen --problem=translate_ende_numbers --data_dir=~/t2t_data
  t2t-datagen --problem=translate_ende_multi30k --data_dir=~/t2t_data/multi30k \
      --raw_dir=/path/to/multi30k
  t2t-datagen --problem=translate_parallel_text --data_dir=~/t2t_data/mine \
      --parallel_train=train.en.gz,train.de.gz --parallel_dev=dev.en,dev.de \
      --parallel_test=test.en,test.de --vocab_size=16000
  t2t-datagen --registry_help
"""

import os

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

import t2t_keras.bin  # noqa: E402,F401  (quiet TensorFlow start-up)
from absl import app  # noqa: E402
from absl import flags  # noqa: E402

from t2t_keras import registry  # noqa: E402
from t2t_keras.bin import problem_flags  # noqa: E402  (--raw_dir, --parallel_*, --vocab_size)
from t2t_keras.data import datagen  # noqa: E402
from t2t_keras.usr_dir import import_usr_dir  # noqa: E402

NAME = "t2t-datagen"
FLAGS = flags.FLAGS
t2t_keras.bin.define_flag("string", "problem", None, "Registered problem name (a `_rev` suffix is allowed).")
t2t_keras.bin.define_flag("string", "data_dir", None, "Where vocabulary and TFRecords go.")
t2t_keras.bin.define_flag("string", "tmp_dir", None, "Download / scratch area (tfds data, raw files).")
t2t_keras.bin.define_flag("string", "t2t_usr_dir", None, "A directory of modules registering more problems.")
t2t_keras.bin.define_flag("bool", "registry_help", False, "Print the registered names and exit.")
t2t_keras.bin.define_flag("integer", "max_pairs", None, "Cap every split at this many raw pairs (quick runs).")
t2t_keras.bin.define_flag("integer", "num_train_shards", None,
                          "Override the problem's number of train shards (more for big corpora: "
                          "the unit of parallel and resumable writing).")
t2t_keras.bin.define_flag("integer", "num_concurrent_processes", 0,
                          "Processes writing a split's shards (0: one per CPU core, at most one "
                          "per unfinished shard).")
t2t_keras.bin.define_flag("integer", "vocab_sample_pairs", None,
                          "Train the vocabulary on a sample of this many train pairs (default: "
                          "the problem's, 1,000,000; 0: all).")
t2t_keras.bin.define_flag("integer", "vocab_sample_seed", 1, "The seed of that sample.")


def _problem_kwargs():
  """The problem's constructor arguments: problem_flags' and this binary's caps."""
  return dict(problem_flags.problem_kwargs(FLAGS.problem), max_pairs=FLAGS.max_pairs,
              num_train_shards=FLAGS.num_train_shards)


def main(argv):
  if FLAGS.t2t_usr_dir:
    import_usr_dir(FLAGS.t2t_usr_dir)
  if FLAGS.registry_help:
    print(registry.help_string())
    return 0
  if not FLAGS.problem or not FLAGS.data_dir:
    raise app.UsageError("--problem and --data_dir are required (see --registry_help)")
  summary = datagen.generate(FLAGS.problem, FLAGS.data_dir, FLAGS.tmp_dir,
                             t2t_usr_dir=FLAGS.t2t_usr_dir,
                             num_workers=FLAGS.num_concurrent_processes,
                             vocab_sample_pairs=FLAGS.vocab_sample_pairs,
                             vocab_sample_seed=FLAGS.vocab_sample_seed,
                             **_problem_kwargs())
  print(datagen.format_summary(summary))
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
