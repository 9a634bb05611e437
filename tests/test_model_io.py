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
