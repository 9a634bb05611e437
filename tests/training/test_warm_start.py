"""Warm start (t2t-trainer --warm_start_from): exact values, what is not copied, resume,
and the one-line errors."""

import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import bin as t2t_bin
from t2t_keras import checkpoint_graph, runs
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.errors import InputError
from t2t_keras.training import warm_start
from test_trainer import copy_data, make_trainer, tiny_hparams  # noqa: F401  (fixture)


@pytest.fixture(scope="module")
def source(copy_data, tmp_path_factory):  # noqa: F811
  """A source run trained 12 steps; (its output_dir, its final trainer)."""
  out = str(tmp_path_factory.mktemp("source"))
  trainer = make_trainer(copy_data, out, seed=5)
  trainer.train(12)
  return out, trainer


def _values(variables):
  return [np.array(v.numpy()) for v in variables]


def _rng_states(trainer):
  return _values([v for v in trainer.model.variables if "seed_generator_state" in v.path])


@pytest.mark.heavy
def test_loads_every_weight_exactly_and_nothing_else(copy_data, source, tmp_path):  # noqa: F811
  src_dir, src = source
  reference = runs.load_model(src_dir)[0]
  trainer = make_trainer(copy_data, tmp_path / "ft", seed=9, warm_start_from=src_dir)
  rng_before = _rng_states(trainer)
  assert trainer.restore() == 0
  ours, theirs = _values(trainer.model.trainable_variables), _values(reference.trainable_variables)
  assert len(ours) == len(theirs) == len(src.model.trainable_variables)
  for a, b in zip(ours, theirs):
    np.testing.assert_array_equal(a, b)
  # Fresh optimizer (the schedule warms up again), this run's own dropout RNG states.
  assert int(trainer.optimizer.iterations.numpy()) == 0
  assert all(not np.any(v.numpy()) for v in trainer.optimizer.variables
             if "learning_rate" not in v.path)  # moments and iterations
  for a, b in zip(_rng_states(trainer), rng_before):
    np.testing.assert_array_equal(a, b)


def test_optimizer_state_comes_with_the_flag(copy_data, source, tmp_path):  # noqa: F811
  src_dir, src = source
  trainer = make_trainer(copy_data, tmp_path / "ft", warm_start_from=src_dir,
                         warm_start_optimizer=True)
  trainer.restore()
  assert int(trainer.optimizer.iterations.numpy()) == 12
  ours, theirs = trainer.optimizer.variables, src.optimizer.variables
  assert len(ours) == len(theirs) > 2 * len(trainer.model.trainable_variables)
  for a, b in zip(ours, theirs):
    np.testing.assert_array_equal(a.numpy(), b.numpy(), err_msg=a.path)
  assert float(trainer.optimizer.learning_rate) == pytest.approx(
      float(src.optimizer.learning_rate))


@pytest.mark.heavy
def test_trains_records_the_source_and_resumes_its_own_checkpoint(copy_data, source,  # noqa: F811
                                                                   tmp_path):
  src_dir, _ = source
  out = tmp_path / "ft"
  summary = make_trainer(copy_data, out, warm_start_from=src_dir).train(4)
  assert summary["step"] == 4
  info = json.loads((out / runs.RUN_FILE).read_text())
  assert info["warm_start"] == {"from": os.path.join(src_dir, "ckpt-12"), "optimizer": False}
  own = runs.load_model(str(out))[0]
  # A resumed run continues from its own step 4, not the source; a changed warm-start flag
  # does not rewrite what the run started from.
  messages = []
  again = make_trainer(copy_data, out, warm_start_from=src_dir, warm_start_optimizer=True,
                       log=messages.append)
  assert again.warm_start == info["warm_start"]
  assert any("keeps it" in m for m in messages)
  assert again.restore() == 4
  for a, b in zip(_values(again.model.trainable_variables), _values(own.trainable_variables)):
    np.testing.assert_array_equal(a, b)
  assert json.loads((out / runs.RUN_FILE).read_text())["warm_start"] == info["warm_start"]


def test_a_different_shape_names_the_first_mismatching_variable(copy_data, source,  # noqa: F811
                                                                tmp_path):
  src_dir, _ = source
  trainer = make_trainer(copy_data, tmp_path / "ft", tiny_hparams(filter_size=48),
                         warm_start_from=src_dir)
  with pytest.raises(InputError) as e:
    trainer.restore()
  message = str(e.value)
  assert "\n" not in message
  assert "filter_dense/_kernel has shape [32, 64] in" in message
  assert "ckpt-12 and [32, 48] in this model" in message


def test_a_missing_or_extra_layer_is_named(copy_data, source, tmp_path):  # noqa: F811
  src_dir, _ = source
  deeper = make_trainer(copy_data, tmp_path / "a", tiny_hparams(num_decoder_layers=2),
                        warm_start_from=src_dir)
  with pytest.raises(InputError, match=r"has no model/decoder_layer_1/\S+ \(shape \["):
    deeper.restore()
  post = make_trainer(copy_data, tmp_path / "b", tiny_hparams(norm_type="post"),
                      warm_start_from=src_dir)
  with pytest.raises(InputError, match=r"holds model/\S+_norm/\S+ .*no place for"):
    post.restore()


def test_a_different_vocabulary_file_is_refused(copy_data, source, tmp_path):  # noqa: F811
  src_dir, _ = source
  other = tmp_path / "other_vocab_run"
  shutil.copytree(src_dir, other)
  with open(other / runs.VOCAB_FILE, "ab") as f:
    f.write(b"\0")
  with pytest.raises(InputError, match=r"its vocabulary \(.*\) differs from this problem's"):
    make_trainer(copy_data, tmp_path / "ft", warm_start_from=str(other))


def test_resolve_takes_a_run_a_checkpoint_or_a_checkpoint_dir(source, tmp_path):
  src_dir, _ = source
  prefix = os.path.join(src_dir, "ckpt-12")
  assert warm_start.resolve(src_dir) == (prefix, src_dir)
  assert warm_start.resolve(prefix) == (prefix, src_dir)
  bare = tmp_path / "bare"
  bare.mkdir()
  for name in os.listdir(src_dir):
    if name.startswith("ckpt-12") or name == "checkpoint":
      shutil.copy(os.path.join(src_dir, name), bare / name)
  assert warm_start.resolve(str(bare)) == (os.path.join(str(bare), "ckpt-12"), None)
  for bad in (str(tmp_path / "nowhere"), prefix + ".index", str(tmp_path)):
    with pytest.raises(InputError, match=r"^--warm_start_from=\S+: "):
      warm_start.resolve(bad)


@pytest.mark.heavy
def test_t2t_trainer_flags(copy_data, source, tmp_path, capsys):  # noqa: F811
  """No --hparams_set: the source run's hparams; one-line errors for bad flags."""
  src_dir, _ = source
  out = str(tmp_path / "ft")
  args = ["t2t-trainer", "--problem=algorithmic_copy", f"--data_dir={copy_data}",
          f"--output_dir={out}", "--train_steps=2", "--eval_every=0",
          "--eval_bleu_sentences=0", "--hparams=layer_prepostprocess_dropout=0.0"]
  assert t2t_bin.run_in_process(trainer_bin, args + [f"--warm_start_from={src_dir}"]) == 0
  saved = runs.load_run_info(out)[0]
  expected = runs.load_run_info(src_dir)[0].replace(layer_prepostprocess_dropout=0.0,
                                                    train_steps=2)
  assert saved.diff(expected) == []
  assert "warm start: " in capsys.readouterr().out
  assert t2t_bin.run_in_process(trainer_bin, args + [
      f"--output_dir={tmp_path / 'x'}", "--warm_start_optimizer"]) != 0
  assert "--warm_start_optimizer needs --warm_start_from" in capsys.readouterr().err
  assert t2t_bin.run_in_process(trainer_bin, args + [
      f"--output_dir={tmp_path / 'y'}", f"--warm_start_from={tmp_path / 'nowhere'}"]) != 0
  err = capsys.readouterr().err.strip().splitlines()
  assert err[-1].startswith("t2t-trainer: error: --warm_start_from=") and "not a run directory" in err[-1]


def test_weights_read_back_through_a_checkpoint_with_a_fresh_root(source):
  """`matched_variables` finds the model's own paths in a checkpoint whose saver reached
  many weights through the optimizer first (the Trainer's checkpoints)."""
  src_dir, src = source
  reader = tf.train.load_checkpoint(os.path.join(src_dir, "ckpt-12"))
  graph = checkpoint_graph.object_graph(reader)
  found = checkpoint_graph.matched_variables(graph, "model", src.model,
                                             src.model.trainable_variables)
  assert len(found) == len(src.model.trainable_variables)
  keys = [key for _, _, key in found]
  assert any(k.startswith("optimizer/") for k in keys)  # the saver's first path
  assert all(path.startswith("model/") for path, _, _ in found)
