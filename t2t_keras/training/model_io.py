"""What a training run leaves in output_dir, and how later steps load it.

output_dir/
  hparams.json     the training HParams (later steps reuse them)
  run.json         {"problem", "model", "vocab_size", "vocab_file"}
  vocab.model      a copy of the problem's sentencepiece model (self-contained runs)
  ckpt-<step>.*    tf.train checkpoints: model, optimizer, step, input iterator
  checkpoint       the CheckpointManager's index of kept checkpoints
"""

import json
import os
import shutil

import tensorflow as tf

from t2t_keras import registry
from t2t_keras.hparam import HParams

HPARAMS_FILE = "hparams.json"
RUN_FILE = "run.json"
VOCAB_FILE = "vocab.model"


def save_run_info(output_dir, hparams, problem_name, vocab_size, vocab_path=None,
                  model_name="transformer"):
  """Writes hparams.json, run.json and a copy of the vocabulary (atomically)."""
  tf.io.gfile.makedirs(output_dir)
  hparams.save(os.path.join(output_dir, HPARAMS_FILE))
  info = {"problem": problem_name, "model": model_name, "vocab_size": int(vocab_size),
          "vocab_file": VOCAB_FILE if vocab_path else None}
  if vocab_path:
    tmp = os.path.join(output_dir, VOCAB_FILE + ".tmp")
    shutil.copyfile(vocab_path, tmp)
    os.replace(tmp, os.path.join(output_dir, VOCAB_FILE))
  tmp = os.path.join(output_dir, RUN_FILE + ".tmp")
  with open(tmp, "w") as f:
    json.dump(info, f, indent=2)
  os.replace(tmp, os.path.join(output_dir, RUN_FILE))


def load_run_info(output_dir):
  """(HParams, run-info dict) saved by a training run; FileNotFoundError names the path."""
  paths = [os.path.join(output_dir, n) for n in (HPARAMS_FILE, RUN_FILE)]
  for path in paths:
    if not os.path.exists(path):
      raise FileNotFoundError(f"{path} not found: is {output_dir!r} a t2t-trainer output_dir?")
  with open(paths[1]) as f:
    info = json.load(f)
  if info.get("vocab_file"):
    info["vocab_path"] = os.path.join(output_dir, info["vocab_file"])
  return HParams.load(paths[0]), info


def build_model(hparams, vocab_size, model_name="transformer"):
  """A built (variables created) registered model."""
  model = registry.model(model_name)(vocab_size, hparams)
  model.build_for_ids()
  return model


def latest_checkpoint(output_dir):
  path = tf.train.latest_checkpoint(output_dir)
  if path is None:
    raise FileNotFoundError(f"no checkpoint found in {output_dir!r}")
  return path


def load_model(output_dir, checkpoint_path=None):
  """Restores the model of a training run for decoding or export.

  Args:
    output_dir: the trainer's output_dir (hparams.json, run.json, checkpoints).
    checkpoint_path: a specific checkpoint prefix (e.g. an averaged one);
      default: the latest in output_dir.
  Returns:
    (model, hparams, run-info dict with "vocab_path", checkpoint path used).
  """
  hparams, info = load_run_info(output_dir)
  model = build_model(hparams, info["vocab_size"], info.get("model", "transformer"))
  path = checkpoint_path or latest_checkpoint(output_dir)
  tf.train.Checkpoint(model=model).restore(path).expect_partial().assert_existing_objects_matched()
  return model, hparams, info, path
