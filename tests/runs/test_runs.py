"""A run directory: what training writes there, and `runs.load`, the one way to load it."""

import os

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry, runs
from t2t_keras.errors import InputError


def test_checkpoint_holds_every_weight_and_loads_back(tmp_path):
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32)
  model = runs.build_model(hp, 20)
  path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  saved = [n for n, _ in tf.train.list_variables(path) if n.startswith("model/")]
  assert len(saved) == len(model.weights)
  vocab = tmp_path / "src.model"
  vocab.write_bytes(b"proto")
  runs.save_run_info(str(tmp_path), hp, "translate_ende_numbers", 20, str(vocab))
  loaded, hp2, info, used = runs.load_model(str(tmp_path))
  assert hp2 == hp and used == path and info["problem"] == "translate_ende_numbers"
  assert open(info["vocab_path"], "rb").read() == b"proto"
  for a, b in zip(model.weights, loaded.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_load_model_errors_name_the_path(tmp_path):
  with pytest.raises(FileNotFoundError, match="hparams.json not found"):
    runs.load_model(str(tmp_path))
  hp = registry.hparams("transformer_tiny")
  runs.save_run_info(str(tmp_path), hp, "p", 20)
  with pytest.raises(FileNotFoundError, match="no checkpoint found"):
    runs.load_model(str(tmp_path))


def test_a_run_trained_in_bf16_loads_as_float32(tmp_path):
  """The decoder and exporter search in float32 whatever the training precision: the
  variables are float32 under a mixed policy, so the checkpoint loads into float32 layers."""
  import keras  # pylint: disable=import-outside-toplevel
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32,
                                                    precision="mixed_bfloat16")
  keras.mixed_precision.set_dtype_policy("mixed_bfloat16")  # as the Trainer builds it
  try:
    model = runs.build_model(hp, 20)
  finally:
    keras.mixed_precision.set_dtype_policy("float32")
  assert model.compute_dtype == "bfloat16"
  tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  runs.save_run_info(str(tmp_path), hp, "translate_ende_numbers", 20)
  loaded, hp2, _, _ = runs.load_model(str(tmp_path))
  assert hp2.precision == "mixed_bfloat16"
  assert loaded.compute_dtype == "float32"
  for a, b in zip(model.weights, loaded.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


@pytest.mark.heavy
def test_load_gives_model_vocabulary_hparams_info_and_checkpoint(tmp_path):
  """A real sentencepiece vocabulary beside a checkpoint: `load` restores both; a run
  without its vocabulary copy is refused naming the file."""
  from t2t_keras.data import vocabulary
  corpus = [f"{a} {b}" for a in ("one", "two", "three") for b in ("four", "five", "six")]
  spm = vocabulary.train_sentencepiece(corpus, str(tmp_path / "src.model"), 20, num_threads=1)
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32)
  model = runs.build_model(hp, spm.vocab_size)
  run_dir = tmp_path / "run"
  checkpoint = tf.train.Checkpoint(model=model)
  first = checkpoint.save(str(run_dir / "ckpt"))
  w0 = model.weights[0].numpy()
  model.weights[0].assign(model.weights[0] + 1.0)
  checkpoint.save(str(run_dir / "ckpt"))
  runs.save_run_info(str(run_dir), hp, "translate_ende_numbers", spm.vocab_size,
                     str(tmp_path / "src.model"))
  run = runs.load(str(run_dir), checkpoint_path=first)
  assert run.checkpoint_path == first and run.hparams == hp
  assert run.info["problem"] == "translate_ende_numbers"
  assert run.vocab.encode("two five") == spm.encode("two five")
  np.testing.assert_array_equal(run.model.weights[0].numpy(), w0)
  assert runs.load(str(run_dir)).checkpoint_path.endswith("ckpt-2")
  os.remove(run_dir / runs.VOCAB_FILE)
  with pytest.raises(FileNotFoundError, match=r"run has no vocabulary copy \(vocab.model, "
                                              r"named by run.json's vocab_file\)"):
    runs.load(str(run_dir))


def test_a_decoders_hparams_may_differ_from_the_run_in_training_only_values(tmp_path):
  """t2t's scripts pass the training's --hparams to t2t-decoder and t2t-exporter: batch size,
  dropout, learning rate and the like change nothing there; the model's shape does."""
  runs.save_run_info(str(tmp_path), registry.hparams("transformer_tiny"), "p", 20,
                     hparams_set="transformer_tiny")
  runs.check_run_matches(str(tmp_path), hparams="batch_size=4096,relu_dropout=0.3,"
                                                "learning_rate_warmup_steps=8000,train_steps=9")
  runs.check_run_matches(str(tmp_path), hparams_set="transformer_tiny",
                         hparams="label_smoothing=0.2")
  with pytest.raises(InputError, match=r"--hparams give num_heads=3 \(run: 4\), which does "
                                       r"not match the run"):
    runs.check_run_matches(str(tmp_path), hparams="batch_size=4096,num_heads=3")
