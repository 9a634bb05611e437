"""A data_dir written by tensor2tensor's t2t-datagen, read as it is.

tensor2tensor writes (generator_utils.py, problem.py; the same in 1.4 and 1.15):

  <problem>-train-00000-of-00100 ...   TFRecord shards of tf.train.Example with int64
  <problem>-dev-00000-of-00001         lists "inputs" and "targets", EOS (1) appended
  vocab.<problem>.<size>.subwords      its SubwordTextEncoder vocabulary (1.5 and later;
                                       1.4 named it vocab.ende.8192, vocab.enfr.32768, ...)

The records are the format t2t-keras writes itself; only the names differ (no
.tfrecord suffix, another vocabulary file). A problem reads these names where
its own files are absent (`data.problem.Text2TextProblem`).
"""

import os

from t2t_keras import fileio

# tensor2tensor 1.4's vocabulary file names ("%s.%d" % (vocab_name, targeted size)).
_VOCAB_1_4 = {
    "translate_ende_wmt8k": "vocab.ende.8192", "translate_ende_wmt32k": "vocab.ende.32768",
    "translate_enfr_wmt8k": "vocab.enfr.8192", "translate_enfr_wmt32k": "vocab.enfr.32768",
    "translate_encs_wmt32k": "vocab.encs.32768",
}


def shard_pattern(data_dir, name, split):
  """The glob of t2t's shards of `split` ("dev" and "test" as t2t names them)."""
  digits = "[0-9]" * 5
  return os.path.join(data_dir, f"{name}-{split}-{digits}-of-{digits}")


def vocab_path(data_dir, name):
  """t2t's vocabulary of problem `name` in data_dir, or None: vocab.<name>.<size>.subwords
  (one size only), else 1.4's name for the problem."""
  found = sorted(fileio.glob(os.path.join(data_dir, f"vocab.{name}.*.subwords")))
  if len(found) > 1:
    from t2t_keras.errors import InputError  # pylint: disable=import-outside-toplevel
    raise InputError(f"{data_dir} holds several tensor2tensor vocabularies of {name} "
                     f"({', '.join(os.path.basename(p) for p in found)}): keep the one "
                     "its shards were written with")
  if found:
    return found[0]
  legacy = _VOCAB_1_4.get(name)
  if legacy and fileio.exists(os.path.join(data_dir, legacy)):
    return os.path.join(data_dir, legacy)
  return None
