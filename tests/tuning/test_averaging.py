import os

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras import runs
from t2t_keras.tuning import averaging

VOCAB = 23


def _train_like_run(output_dir, num_checkpoints, keep):
  """Checkpoints shaped like the trainer's: model, optimizer, step, input iterator."""
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32, num_heads=2)
  runs.save_run_info(str(output_dir), hp, "translate_ende_numbers", VOCAB)
  model = runs.build_model(hp, VOCAB)
  optimizer = keras.optimizers.Adam()
  optimizer.build(model.trainable_variables)
  iterator = iter(tf.data.Dataset.range(100))
  step = tf.Variable(0, dtype=tf.int64)
  ckpt = tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, iterator=iterator)
  manager = tf.train.CheckpointManager(ckpt, str(output_dir), max_to_keep=keep,
                                       checkpoint_name="ckpt")
  values = []
  floats = [v for v in model.variables if tf.as_dtype(v.dtype).is_floating]
  for i in range(num_checkpoints):
    for v in floats:
      v.assign(tf.random.normal(v.shape, seed=i))
    next(iterator)
    step.assign(100 * (i + 1))
    values.append([v.numpy().copy() for v in floats])
    manager.save(checkpoint_number=100 * (i + 1))
  return model, optimizer, step, iterator, values


def test_average_equals_mean_of_last_checkpoints(tmp_path):
  model, optimizer, step, iterator, values = _train_like_run(tmp_path, 4, keep=3)
  path, used = averaging.average_checkpoints(str(tmp_path), num_last=2)
  assert path == str(tmp_path / "averaged" / "ckpt-400")
  assert [p.rsplit("-", 1)[1] for p in used] == ["300", "400"]
  assert tf.train.latest_checkpoint(str(tmp_path / "averaged")) == path

  loaded, _, _, used_path = runs.load_model(str(tmp_path), checkpoint_path=path)
  assert used_path == path
  floats = [v for v in loaded.variables if tf.as_dtype(v.dtype).is_floating]
  assert len(floats) == len(values[0]) > 10
  for v, a, b in zip(floats, values[2], values[3]):
    np.testing.assert_allclose(v.numpy(), (a + b) / 2, rtol=1e-6, atol=1e-6)

  # The rest of the newest checkpoint comes along: step, optimizer, iterator.
  step.assign(0)
  tf.train.Checkpoint(model=model, optimizer=optimizer, step=step,
                      iterator=iterator).restore(path).assert_consumed()
  assert int(step) == 400 and int(next(iterator)) == 4


def test_average_all_kept(tmp_path):
  _, _, _, _, values = _train_like_run(tmp_path, 3, keep=5)
  out = str(tmp_path / "avg" / "mean")
  averaging.average_checkpoints(str(tmp_path), num_last=10, output_path=out)
  reader = tf.train.load_checkpoint(out)
  key = [k for k in averaging.object_checkpoint_keys(reader, "model") if "embeddings" in k][0]
  np.testing.assert_allclose(reader.get_tensor(key), np.mean([v[0] for v in values], 0),
                             rtol=1e-6, atol=1e-6)


def test_no_checkpoints(tmp_path):
  with pytest.raises(FileNotFoundError):
    averaging.average_checkpoints(str(tmp_path))


def test_relative_output_dir(tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  _, _, _, _, values = _train_like_run("run", 2, keep=2)
  path, used = averaging.average_checkpoints("run", num_last=2)
  assert used == [os.path.join("run", "ckpt-100"), os.path.join("run", "ckpt-200")]
  assert tf.train.latest_checkpoint(os.path.join("run", "averaged")) == path


def test_average_up_to_max_step(tmp_path):
  _, _, _, _, values = _train_like_run(tmp_path, 4, keep=4)
  path, used = averaging.average_checkpoints(str(tmp_path), num_last=2, max_step=350)
  assert [p.rsplit("-", 1)[1] for p in used] == ["200", "300"]
  assert path == str(tmp_path / "averaged" / "ckpt-300")
  reader = tf.train.load_checkpoint(path)
  key = [k for k in averaging.object_checkpoint_keys(reader, "model") if "embeddings" in k][0]
  np.testing.assert_allclose(reader.get_tensor(key), (values[1][0] + values[2][0]) / 2,
                             rtol=1e-6, atol=1e-6)
  with pytest.raises(ValueError, match=r"no checkpoint at or before step 50 .*kept: ckpt-100, "):
    averaging.average_checkpoints(str(tmp_path), max_step=50)


@pytest.mark.heavy
def test_average_all_waits_for_new_checkpoints(tmp_path):
  """t2t's --wait_minutes: a checkpoint saved while average_all waits is averaged as it
  comes (its window of n=2: the mean of ckpt-300 and the new ckpt-400), and the call
  returns once wait_minutes pass with nothing new."""
  import threading
  import time
  model_dir, out = tmp_path / "run", str(tmp_path / "avg")
  model, optimizer, step, iterator, values = _train_like_run(model_dir, 3, keep=5)
  floats = [v for v in model.variables if tf.as_dtype(v.dtype).is_floating]
  manager = tf.train.CheckpointManager(
      tf.train.Checkpoint(model=model, optimizer=optimizer, step=step, iterator=iterator),
      str(model_dir), max_to_keep=5, checkpoint_name="ckpt")

  def save_later():
    time.sleep(1.0)
    for v in floats:
      v.assign(tf.random.normal(v.shape, seed=3))
    manager.save(checkpoint_number=400)

  saver = threading.Thread(target=save_later)
  start = time.time()
  saver.start()
  written = averaging.average_all(str(model_dir), out, n=2, wait_minutes=0.05,
                                 log=lambda *_: None)
  saver.join()
  assert [os.path.basename(p) for p in written] == ["ckpt-200", "ckpt-300", "ckpt-400"]
  assert 3.0 <= time.time() - start < 30  # waited 3 s past the last new checkpoint
  newest = [v.numpy() for v in floats]
  loaded, _, _, _ = runs.load_model(out, checkpoint_path=written[-1])
  for v, a, b in zip([v for v in loaded.variables if tf.as_dtype(v.dtype).is_floating],
                     values[2], newest):
    np.testing.assert_allclose(v.numpy(), (a + b) / 2, rtol=1e-6, atol=1e-6)
