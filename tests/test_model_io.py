import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.training import model_io


def test_checkpoint_holds_every_weight_and_loads_back(tmp_path):
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32)
  model = model_io.build_model(hp, 20)
  path = tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  saved = [n for n, _ in tf.train.list_variables(path) if n.startswith("model/")]
  assert len(saved) == len(model.weights)
  vocab = tmp_path / "src.model"
  vocab.write_bytes(b"proto")
  model_io.save_run_info(str(tmp_path), hp, "translate_ende_numbers", 20, str(vocab))
  loaded, hp2, info, used = model_io.load_model(str(tmp_path))
  assert hp2 == hp and used == path and info["problem"] == "translate_ende_numbers"
  assert open(info["vocab_path"], "rb").read() == b"proto"
  for a, b in zip(model.weights, loaded.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())


def test_load_model_errors_name_the_path(tmp_path):
  with pytest.raises(FileNotFoundError, match="hparams.json not found"):
    model_io.load_model(str(tmp_path))
  hp = registry.hparams("transformer_tiny")
  model_io.save_run_info(str(tmp_path), hp, "p", 20)
  with pytest.raises(FileNotFoundError, match="no checkpoint found"):
    model_io.load_model(str(tmp_path))


def test_a_run_trained_in_bf16_loads_as_float32(tmp_path):
  """The decoder and exporter search in float32 whatever the training precision: the
  variables are float32 under a mixed policy, so the checkpoint loads into float32 layers."""
  import keras  # pylint: disable=import-outside-toplevel
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32,
                                                    precision="mixed_bfloat16")
  keras.mixed_precision.set_dtype_policy("mixed_bfloat16")  # as the Trainer builds it
  try:
    model = model_io.build_model(hp, 20)
  finally:
    keras.mixed_precision.set_dtype_policy("float32")
  assert model.compute_dtype == "bfloat16"
  tf.train.Checkpoint(model=model).save(str(tmp_path / "ckpt"))
  model_io.save_run_info(str(tmp_path), hp, "translate_ende_numbers", 20)
  loaded, hp2, _, _ = model_io.load_model(str(tmp_path))
  assert hp2.precision == "mixed_bfloat16"
  assert loaded.compute_dtype == "float32"
  for a, b in zip(model.weights, loaded.weights):
    np.testing.assert_array_equal(a.numpy(), b.numpy())
