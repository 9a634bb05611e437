"""Trainer behaviour: distribution equivalence, resume, failures, output files."""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.data import datagen
from t2t_keras.hparam import HParamsError
from t2t_keras.training import trainer as trainer_lib
from t2t_keras.training.strategy import make_strategy

PROBLEM_ARGS = dict(num_train=1500, num_dev=100, num_test=100, max_length=8, num_symbols=6)


def tiny_hparams(**changes):
  base = dict(hidden_size=32, filter_size=64, num_heads=2, num_encoder_layers=1,
              num_decoder_layers=1, batch_size=512, max_length=16,
              learning_rate_warmup_steps=50)
  base.update(changes)
  return registry.hparams("transformer_tiny").replace(**base)


@pytest.fixture(scope="session")
def copy_data(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("copy_data"))
  datagen.generate("algorithmic_copy", data_dir, log=None, **PROBLEM_ARGS)
  return data_dir


def make_trainer(data_dir, output_dir, hparams=None, **kwargs):
  problem = datagen.make_problem("algorithmic_copy", **PROBLEM_ARGS)
  kwargs.setdefault("log", lambda *a: None)
  kwargs.setdefault("eval_every", 0)
  kwargs.setdefault("eval_bleu_sentences", 0)
  kwargs.setdefault("use_xla", False)  # XLA compiles once per batch shape: slow for short runs
  return trainer_lib.Trainer(problem, hparams or tiny_hparams(), data_dir, str(output_dir),
                             **kwargs)


def test_mirrored_two_logical_cpus_equal_one_device(copy_data, tmp_path):
  """Same global batch: one device vs 2 replicas give the same updated weights."""
  hp = tiny_hparams(layer_prepostprocess_dropout=0.0)
  rng = np.random.RandomState(0)
  batch = {"inputs": rng.randint(2, 10, size=(8, 6)).astype("int32"),
           "targets": rng.randint(2, 10, size=(8, 5)).astype("int32")}
  batch["targets"][:4, 3:] = 0  # uneven token counts across the two halves
  updated = []
  for name, strategy in (("one", make_strategy()),
                         ("two", make_strategy(devices=["/cpu:0", "/cpu:1"]))):
    t = make_trainer(copy_data, tmp_path / name, hp, strategy=strategy, use_xla=True)
    if updated:
      for v, w in zip(t.model.weights, first_init):
        v.assign(w)
    else:
      first_init = [w.numpy() for w in t.model.weights]
    n = strategy.num_replicas_in_sync
    assert n == (1 if name == "one" else 2) and t.local_replicas == n
    halves = {k: np.stack(np.split(v, n)) for k, v in batch.items()}
    t.iterator = iter(tf.data.Dataset.from_tensor_slices(halves).repeat())
    loss, tokens = t.train_step()
    assert tokens == float((batch["targets"] != 0).sum())
    updated.append([w.numpy() for w in t.model.trainable_weights])
  changed = max(np.abs(a - b).max() for a, b in zip(updated[0], first_init))
  assert changed > 1e-4
  for a, b in zip(*updated):
    np.testing.assert_allclose(a, b, atol=1e-5)


def test_trains_resumes_and_writes_outputs(copy_data, tmp_path):
  out = tmp_path / "run"
  lines = []
  t = make_trainer(copy_data, out, save_every=10, eval_every=10, eval_steps=2,
                   eval_bleu_sentences=8, log=lines.append)
  s = t.train(20)
  # Copy pairs are at most 8 symbols + EOS: none exceeds max_length 16.
  assert "train split: 0 of 1500 pairs are longer than max_length=16 and are dropped" in lines
  assert s["step"] == 20 and not s["interrupted"] and np.isfinite(s["loss"])
  assert 0.0 <= s["dev_accuracy"] <= 1.0 and s["dev_perplexity"] > 1.0
  assert 0.0 <= s["dev_char_bleu"] <= 100.0 and 0.0 <= s["dev_bleu"] <= 100.0
  assert {"checkpoint", "hparams.json", "run.json", "vocab.model", "metrics.jsonl",
          "learning_curves.png", "ckpt-10.index", "ckpt-20.index"} <= set(os.listdir(out))
  assert json.load(open(out / "run.json"))["problem"] == "algorithmic_copy"
  assert os.path.exists(out / "train") and os.listdir(out / "train")  # TensorBoard events
  t2 = make_trainer(copy_data, out, save_every=10)
  s2 = t2.train(30)
  assert (s2["start_step"], s2["step"]) == (20, 30)
  assert t2.optimizer.iterations.numpy() == 30


def test_changed_hparams_are_refused_with_keys_named(copy_data, tmp_path):
  out = tmp_path / "run"
  make_trainer(copy_data, out).train(2)
  with pytest.raises(HParamsError, match=r"hidden_size: saved 32 != new 48"):
    make_trainer(copy_data, out, tiny_hparams(hidden_size=48))


def test_non_finite_loss_stops_and_keeps_last_checkpoint(copy_data, tmp_path):
  out = tmp_path / "run"
  t = make_trainer(copy_data, out, save_every=2)
  real_step = t._train_step
  def poisoned(batches):
    loss, tokens = real_step(batches)
    return (loss * np.nan if int(t.step) == 2 else loss), tokens
  t._train_step = poisoned
  with pytest.raises(trainer_lib.NonFiniteLossError, match=r"loss is nan at step 3.*ckpt-2"):
    t.train(6)
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-2")


def test_mixed_precision_trains_close_to_float32(copy_data, tmp_path):
  """GPU paths on CPU: bf16, and fp16 with loss scaling, stay finite and near fp32."""
  losses = {}
  for precision in ("float32", "mixed_bfloat16", "mixed_float16"):
    hp = tiny_hparams(precision=precision, layer_prepostprocess_dropout=0.0)
    t = make_trainer(copy_data, tmp_path / precision, hp, use_xla=False)
    assert t.model.compute_dtype == precision.replace("mixed_", "")
    losses[precision] = [t.train_step()[0] for _ in range(5)]
  for mixed in ("mixed_bfloat16", "mixed_float16"):
    assert all(np.isfinite(losses[mixed]))
    np.testing.assert_allclose(losses[mixed], losses["float32"], rtol=0.05)
  assert losses["float32"][-1] < losses["float32"][0]


def test_packed_rows_train_and_evaluate(copy_data, tmp_path):
  """packed_length > 0: the trainer feeds packed rows (one shape) and its dev metrics work."""
  lines = []
  t = make_trainer(copy_data, tmp_path / "packed", tiny_hparams(packed_length=32),
                   eval_every=10, eval_steps=2, eval_bleu_sentences=8, log=lines.append)
  batch = next(t.iterator)
  assert batch["inputs"].shape == (512 // 32, 32) and "targets_segmentation" in batch
  s = t.train(20)
  assert s["step"] == 20 and np.isfinite(s["loss"]) and s["dev_perplexity"] > 1.0
