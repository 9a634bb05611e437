"""Trainer behaviour: distribution equivalence, resume, failures, output files."""

import json
import math
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.data import datagen, pipeline
from t2t_keras.errors import InputError
from t2t_keras.hparams_lib import HParamsError
from t2t_keras.training import checkpoints, trainer as trainer_lib
from t2t_keras.training.config import TrainerConfig
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


def make_trainer(data_dir, output_dir, hparams=None, *, strategy=None, log=lambda *a: None,
                 **settings):
  """A Trainer of algorithmic_copy; `settings` are TrainerConfig fields."""
  problem = datagen.make_problem("algorithmic_copy", **PROBLEM_ARGS)
  settings.setdefault("eval_every", 0)
  settings.setdefault("eval_bleu_sentences", 0)
  settings.setdefault("use_xla", False)  # XLA compiles once per batch shape: slow for short runs
  return trainer_lib.Trainer(problem, hparams or tiny_hparams(), data_dir, str(output_dir),
                             TrainerConfig(**settings), strategy=strategy, log=log)


@pytest.mark.heavy
def test_checkpoint_of_an_earlier_input_pipeline_resumes_all_but_the_data_order(
    copy_data, tmp_path):
  """A checkpoint whose iterator another tf.data graph wrote (no input_pipeline
  record: version 1) restores model, optimizer and step, warns, and saves anew."""
  out = tmp_path / "run"
  t = make_trainer(copy_data, out, save_every=5)
  t.train(5)
  assert checkpoints.input_pipeline_version(t.manager.latest_checkpoint) == pipeline.VERSION
  old_graph = t.problem.dataset(copy_data, "train").padded_batch(8)
  old = tf.train.Checkpoint(model=t.model, optimizer=t.optimizer, step=t.step,
                            rng_states=t.checkpoints.without_data.rng_states,
                            iterator=iter(old_graph))
  t.step.assign(7)
  path = tf.train.CheckpointManager(old, str(out), max_to_keep=5,
                                    checkpoint_name="ckpt").save(checkpoint_number=7)
  assert checkpoints.input_pipeline_version(path) == 1
  weights = [w.numpy() for w in t.model.weights]
  with pytest.raises(tf.errors.NotFoundError, match="Failed to restore dataset iterator"):
    tf.train.Checkpoint(iterator=t.iterator).restore(path).expect_partial()

  lines = []
  t2 = make_trainer(copy_data, out, save_every=9, log=lines.append)
  assert t2.restore() == 7
  assert any("holds its place in the training data for input pipeline version 1, and "
             f"this t2t-keras reads with version {pipeline.VERSION}" in line
             and "data order starts afresh from --seed=1" in line for line in lines)
  for a, b in zip(weights, t2.model.weights):
    np.testing.assert_array_equal(a, b.numpy())
  s = t2.train(9)
  assert (s["start_step"], s["step"]) == (7, 9)
  assert checkpoints.input_pipeline_version(t2.manager.latest_checkpoint) == pipeline.VERSION
  assert make_trainer(copy_data, out).restore() == 9


@pytest.mark.slow
def test_changed_hparams_are_refused_with_keys_named(copy_data, tmp_path):
  """Slow: test_cli.py's test_bad_input_is_one_clear_line runs the same refusal through
  t2t-trainer on a trained run ("num_heads: saved 2 != new 4")."""
  out = tmp_path / "run"
  make_trainer(copy_data, out).train(2)
  with pytest.raises(HParamsError, match=r"hidden_size: saved 32 != new 48"):
    make_trainer(copy_data, out, tiny_hparams(hidden_size=48))


@pytest.mark.heavy
def test_non_finite_loss_stops_and_keeps_last_checkpoint(copy_data, tmp_path):
  out = tmp_path / "run"
  t = make_trainer(copy_data, out, save_every=2)
  real_step = t.step_fn.one_step
  def poisoned(batches):
    loss, tokens = real_step(batches)
    return (loss * np.nan if int(t.step) == 2 else loss), tokens
  t.step_fn.one_step = poisoned
  with pytest.raises(trainer_lib.NonFiniteLossError, match=r"loss is nan at step 3.*ckpt-2") as e:
    t.train(6)
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-2")
  # The recovery the message gives: a new run from the kept checkpoint, Adam and step
  # included, at a lower learning rate, trains on with finite losses from step 2.
  lower = t.hparams.learning_rate_constant / 2
  assert (f"--warm_start_from={out}/ckpt-2 --warm_start_optimizer" in str(e.value) and
          f"--hparams=learning_rate_constant=<lower than {t.hparams.learning_rate_constant:g}>"
          in str(e.value)), str(e.value)
  again = make_trainer(copy_data, tmp_path / "lower", tiny_hparams(learning_rate_constant=lower),
                       save_every=2, warm_start_from=f"{out}/ckpt-2", warm_start_optimizer=True)
  summary = again.train(4)  # the new run's own 4 steps: the schedule's steps 3 to 6
  assert summary["step"] == 4 and math.isfinite(summary["loss"])
  assert int(again.optimizer.iterations.numpy()) == 6  # Adam's count went on from 2


def test_an_output_dir_removed_mid_run_stops_without_writing_a_stray_run(copy_data, tmp_path):
  """The output directory removed at step 3: the save at step 4 stops with one line,
  instead of writing checkpoints into a fresh directory that holds no run.json (as
  TensorFlow's CheckpointManager would: it creates the directory again)."""
  out = tmp_path / "run"
  t = make_trainer(copy_data, out, save_every=2)
  real_step = t.train_step
  def step_then_remove():
    result = real_step()
    if int(t.step) == 3:
      shutil.rmtree(out)
    return result
  t.train_step = step_then_remove
  with pytest.raises(InputError, match=rf"{out}/run.json is gone: the output directory was "
                                       r"removed or replaced while training, so step 4 is not "
                                       "saved there"):
    t.train(6)
  assert not out.exists() or not list(out.glob("ckpt-*"))


@pytest.mark.heavy
def test_mixed_precision_trains_close_to_float32(copy_data, tmp_path):
  """GPU paths on CPU: bf16, and fp16 with loss scaling, stay finite and near fp32.
  Packed rows: one batch shape, so one trace per precision instead of one per step; the
  float32 run's rows are packed (segment ids) and its dev metrics work. float32 last:
  Keras's dtype policy is global, and a float32 run built after a mixed one is float32."""
  losses = {}
  for precision in ("mixed_bfloat16", "mixed_float16", "float32"):
    hp = tiny_hparams(precision=precision, layer_prepostprocess_dropout=0.0, packed_length=32)
    t = make_trainer(copy_data, tmp_path / precision, hp, use_xla=False, eval_steps=2,
                     eval_bleu_sentences=8)
    assert t.model.compute_dtype == precision.replace("mixed_", "")
    losses[precision] = [t.train_step()[0] for _ in range(5)]
  batch = next(t.iterator)
  assert batch["inputs"].shape == (512 // 32, 32) and "targets_segmentation" in batch
  dev = t.evaluate()
  assert dev["dev_perplexity"] > 1.0 and "dev_bleu" in dev, dev
  # Step 1 has the same weights and batch on all three: its loss differs only by the
  # forward's rounding, bf16 (2^-8 relative per op) and fp16 (2^-11) summed over a few
  # layers; later steps add diverging updates, hence 5%.
  for mixed, first_rtol in (("mixed_bfloat16", 2e-2), ("mixed_float16", 3e-3)):
    assert all(np.isfinite(losses[mixed]))
    np.testing.assert_allclose(losses[mixed][0], losses["float32"][0], rtol=first_rtol)
    np.testing.assert_allclose(losses[mixed], losses["float32"], rtol=0.05)
  assert losses["float32"][-1] < losses["float32"][0]


def _feed(trainer, batches, replicas=1):
  """Makes the trainer read `batches` (dicts of int32 arrays), each split over `replicas`."""
  if replicas == 1:
    trainer.iterator = iter([{k: tf.constant(v) for k, v in b.items()} for b in batches])
  else:
    halves = [{k: tf.constant(h) for k, h in zip(b, parts)}
              for b in batches for parts in zip(*[np.split(v, replicas) for v in b.values()])]
    trainer.iterator = iter(halves)


def _random_batch(rng, rows, src_len, tgt_len, cut=None):
  batch = {"inputs": rng.randint(2, 10, size=(rows, src_len)).astype("int32"),
           "targets": rng.randint(2, 10, size=(rows, tgt_len)).astype("int32")}
  if cut:
    batch["targets"][:, cut:] = 0
  return batch


def _pad_to(batch, length):
  return {k: np.pad(v, [(0, 0), (0, length - v.shape[1])]) for k, v in batch.items()}


def _weights(trainer):
  return [w.numpy() for w in trainer.model.trainable_weights]


def _init_like(trainer, reference):
  for v, w in zip(trainer.model.weights, reference.model.weights):
    v.assign(w)


@pytest.mark.heavy
# one_device in the slow tier: [xla] runs the same micro and apply steps on one device
# (compiled), [two_replicas] the same math without XLA, and
# test_resume_is_exact_under_xla_two_replicas_and_accumulation[accumulation] trains the
# one-device step without XLA.
@pytest.mark.parametrize("setup", [pytest.param("one_device", marks=pytest.mark.slow), "xla",
                                   "two_replicas"])
def test_accumulated_micro_batches_equal_one_batch_of_their_union(copy_data, tmp_path, setup,
                                                                 two_cpu_strategy):
  """2 micro-batches with different token counts == one batch of both: tokens weigh. Also
  under XLA (micro and apply steps compiled) and on 2 replicas (each accumulates its half
  of every micro-batch; the update divides by the tokens of all)."""
  rng = np.random.RandomState(1)
  a = _random_batch(rng, 4, 6, 5, cut=2)          # 8 target tokens
  b = _random_batch(rng, 6, 7, 7)                 # 42 target tokens
  union = {k: np.concatenate([_pad_to(a, 7)[k], b[k]]) for k in a}
  hp = tiny_hparams(layer_prepostprocess_dropout=0.0, clip_grad_norm=0.5)
  one = make_trainer(copy_data, tmp_path / "one", hp)
  replicas = 2 if setup == "two_replicas" else 1
  two = make_trainer(copy_data, tmp_path / "two", hp.replace(gradient_accumulation_steps=2),
                     use_xla=setup == "xla",
                     **({"strategy": two_cpu_strategy} if replicas == 2 else {}))
  _init_like(two, one)
  _feed(one, [union, union])
  _feed(two, [a, b, a, b], replicas)
  for _ in range(2):
    loss1, tokens1 = one.train_step()
    loss2, tokens2 = two.train_step()
    assert tokens1 == tokens2 == 50 and loss2 == pytest.approx(loss1, rel=1e-5)
  assert int(two.optimizer.iterations.numpy()) == 2  # the schedule counts updates, not micro-batches
  for x, y in zip(_weights(one), _weights(two)):
    np.testing.assert_allclose(x, y, atol=2e-6)


@pytest.mark.heavy
def test_two_replicas_clip_the_global_gradient_like_one_device(copy_data, tmp_path,
                                                             two_cpu_strategy):
  """Same global batch, both under XLA: one device and 2 replicas count the same tokens and
  give the same updated weights, clipping by the norm of the gradient summed over replicas
  (0.05: always active). (The two without XLA, with clipping and accumulation:
  test_accumulated_micro_batches_equal_one_batch_of_their_union[two_replicas].)"""
  clip = 0.05
  rng = np.random.RandomState(2)
  batch = _random_batch(rng, 8, 6, 5)
  batch["targets"][:4, 3:] = 0  # uneven token counts across the replicas
  hp = tiny_hparams(layer_prepostprocess_dropout=0.0, clip_grad_norm=clip)
  one = make_trainer(copy_data, tmp_path / "one", hp, strategy=make_strategy(), use_xla=True)
  two = make_trainer(copy_data, tmp_path / "two", hp, strategy=two_cpu_strategy, use_xla=True)
  unclipped = make_trainer(copy_data, tmp_path / "unclipped", hp.replace(clip_grad_norm=0.0))
  start, first = [w.numpy() for w in one.model.weights], _weights(one)
  for t, replicas in ((one, 1), (two, 2), (unclipped, 1)):
    assert t.strategy.num_replicas_in_sync == t.local_replicas == replicas
    for v, w in zip(t.model.weights, start):
      v.assign(w)
    _feed(t, [batch] * 3, replicas)
    for _ in range(3):
      _, tokens = t.train_step()
      assert tokens == float((batch["targets"] != 0).sum())
  assert max(np.abs(x - w).max() for x, w in zip(_weights(one), first)) > 1e-4
  for x, y in zip(_weights(one), _weights(two)):
    np.testing.assert_allclose(x, y, atol=1e-5)
  # Clipping changed the updates (Adam's first step moves by ~lr whatever the scale).
  changed = max(np.abs(x - y).max() for x, y in zip(_weights(one), _weights(unclipped)))
  assert changed > 1e-5


@pytest.mark.heavy
@pytest.mark.parametrize("precision,rtol,update_rtol", [("float32", 1e-5, 1e-4),
                                                        ("mixed_float16", 1e-3, 0.02)])
def test_xla_on_one_device_compiles_the_update_and_equals_the_plain_step(
    copy_data, tmp_path, precision, rtol, update_rtol):
  """use_xla on one device applies Adam (and clipping, 0.05: always active; under
  mixed_float16 the loss-scale optimizer) inside the compiled program; three updates
  equal the plain step's, and the schedule counts them.

  The updates (weights minus start) are compared relative to their own size: float16
  rounds each activation to 2^-11 relative, and XLA fuses differently, so a few 1e-3 of the
  loss and about 1% of Adam's early updates (~lr * sign, where signs of tiny gradients can
  flip) may differ; an update not applied, or applied twice, is off by 100%."""
  rng = np.random.RandomState(4)
  batch = _random_batch(rng, 8, 6, 5)
  batch["targets"][:4, 3:] = 0
  hp = tiny_hparams(layer_prepostprocess_dropout=0.0, clip_grad_norm=0.05, precision=precision)
  plain = make_trainer(copy_data, tmp_path / "plain", hp)
  fused = make_trainer(copy_data, tmp_path / "fused", hp, use_xla=True)
  accumulating = make_trainer(copy_data, tmp_path / "acc",
                              hp.replace(gradient_accumulation_steps=2), use_xla=True)
  assert (plain.step_fn.fused_apply, fused.step_fn.fused_apply,
          accumulating.step_fn.fused_apply) == (False, True, False)
  _init_like(fused, plain)
  start = _weights(plain)
  losses = {}
  for name, t in (("plain", plain), ("fused", fused)):
    _feed(t, [batch] * 3)
    losses[name] = [t.train_step()[0] for _ in range(3)]
    assert int(t.optimizer.iterations) == 3
  np.testing.assert_allclose(losses["fused"], losses["plain"], rtol=rtol)
  moved = np.concatenate([(x - w).ravel() for x, w in zip(_weights(plain), start)])
  differ = np.concatenate([(x - y).ravel() for x, y in zip(_weights(plain), _weights(fused))])
  assert np.linalg.norm(moved) > 1e-3
  assert np.linalg.norm(differ) <= update_rtol * np.linalg.norm(moved), (
      np.linalg.norm(differ) / np.linalg.norm(moved))


@pytest.mark.heavy
def test_float16_overflow_skips_the_update_and_halves_the_loss_scale(copy_data, tmp_path):
  """mixed_float16: a loss scale so large that the float16 gradients overflow leaves every
  weight as it was and halves the scale; at a sane scale the next update applies."""
  hp = tiny_hparams(layer_prepostprocess_dropout=0.0, precision="mixed_float16")
  t = make_trainer(copy_data, tmp_path / "fp16", hp)
  batch = _random_batch(np.random.RandomState(5), 8, 6, 5)
  _feed(t, [batch] * 2)
  scaler = t.step_fn.scaler
  t.train_step()  # builds the optimizer's variables
  start = _weights(t)
  scaler.dynamic_scale.assign(2.0 ** 40)  # loss * 2^40: float16 gradients become inf
  loss, _ = t.train_step()
  assert np.isfinite(loss)  # the reported loss is the unscaled one
  assert float(scaler.dynamic_scale.numpy()) == 2.0 ** 39
  for x, w in zip(_weights(t), start):
    np.testing.assert_array_equal(x, w)
  scaler.dynamic_scale.assign(2.0 ** 10)
  _feed(t, [batch])
  t.train_step()
  assert max(np.abs(x - w).max() for x, w in zip(_weights(t), start)) > 1e-5


@pytest.mark.heavy
def test_replicas_draw_different_dropout_masks(copy_data, tmp_path, two_cpu_strategy):
  hp = tiny_hparams(layer_prepostprocess_dropout=0.5)
  two = make_trainer(copy_data, tmp_path / "two", hp,
                     strategy=two_cpu_strategy)
  batch = _random_batch(np.random.RandomState(3), 2, 6, 5)
  same = two.strategy.experimental_distribute_values_from_function(
      lambda ctx: {k: tf.constant(v) for k, v in batch.items()})
  out = two.strategy.run(lambda b: two.model(b, training=True), args=(same,))
  first, second = [t.numpy() for t in two.strategy.experimental_local_results(out)]
  assert not np.allclose(first, second)
  # Without training the replicas agree: the difference is the dropout stream.
  out = two.strategy.run(lambda b: two.model(b, training=False), args=(same,))
  first, second = [t.numpy() for t in two.strategy.experimental_local_results(out)]
  np.testing.assert_allclose(first, second, atol=1e-6)


@pytest.mark.heavy
def test_auto_buckets_pair_only_where_one_trace_serves_every_shape(copy_data, tmp_path,
                                                                   two_cpu_strategy):
  """bucket_mode=auto (the default): "pair" on one device without XLA, else "max"."""
  hp = tiny_hparams()
  assert hp.bucket_mode == "auto"
  cases = [(dict(), "pair"), (dict(use_xla=True), "max"),
           (dict(strategy=two_cpu_strategy), "max")]
  for i, (kwargs, want) in enumerate(cases):
    assert make_trainer(copy_data, tmp_path / str(i), hp, **kwargs).bucket_mode == want
  fixed = make_trainer(copy_data, tmp_path / "max", tiny_hparams(bucket_mode="max"))
  assert fixed.bucket_mode == "max"
  # A resumed run keeps the batches its start chose (run.json), whatever it resumes with.
  make_trainer(copy_data, tmp_path / "0", hp).train(train_steps=1)
  with open(os.path.join(tmp_path / "0", "run.json")) as f:
    assert json.load(f)["bucket_mode"] == "pair"
  assert make_trainer(copy_data, tmp_path / "0", hp, use_xla=True).bucket_mode == "pair"


@pytest.mark.heavy
def test_an_unstable_recipe_warns_once_naming_step_lr_and_hparams(copy_data, tmp_path):
  """Post-norm at 60x transformer_tiny's learning-rate constant (peak 0.86 at step 150)
  blows up after warmup (the loss goes from about 2.2 to over 10); the trainer says so in one
  line. That a stable recipe stays quiet is test_main_job.py's (the default, 501 steps, no
  warning). Whether a diverged run falls back and climbs again (a second warning) is the
  trajectory's, which the CPU's rounding moves; one warning per climb is test_loss_guard's,
  on hand-made losses."""
  lines = []
  hp = tiny_hparams(norm_type="post", learning_rate_constant=60.0, learning_rate_warmup_steps=150)
  make_trainer(copy_data, tmp_path / "unstable", hp, save_every=1000, log_every=1000,
               log=lines.append).train(250)
  warnings = [line for line in lines if line.startswith("warning: step")]
  assert warnings, lines
  assert "the training loss is climbing" in warnings[0]
  assert ("the recipe is on the edge of stability: lower learning_rate_constant (now 60) or "
          "train pre-norm with norm_type=pre (now post)") in warnings[0]
  step = int(warnings[0].split()[2].rstrip(","))
  assert step > hp.learning_rate_warmup_steps


@pytest.mark.heavy
def test_non_finite_weights_are_never_saved(copy_data, tmp_path):
  """An update that leaves a NaN weight behind a finite loss: the save refuses, the last good
  checkpoint stays the newest."""
  out = tmp_path / "run"
  t = make_trainer(copy_data, out, save_every=2)
  t.train(2)
  t.model.trainable_variables[0].assign(t.model.trainable_variables[0] * np.nan)
  with pytest.raises(trainer_lib.NonFiniteLossError,
                     match=r"non-finite weights after step 2 .*not saved.*ckpt-2"):
    t.save()
  t.step.assign(3)
  with pytest.raises(trainer_lib.NonFiniteLossError, match=r"after step 3"):
    t.save()
  assert tf.train.latest_checkpoint(str(out)).endswith("ckpt-2")


@pytest.mark.heavy
def test_ctrl_c_saves_and_returns_interrupted(copy_data, tmp_path):
  """SIGINT (Ctrl-C) during training is recorded, not fatal: the step finishes, a checkpoint
  is saved and train returns interrupted; Python's own handler is back afterwards."""
  import signal
  lines = []

  def log(line):
    lines.append(line)
    if line.startswith("step ") and len(lines) < 100:
      os.kill(os.getpid(), signal.SIGINT)  # from inside the loop, as a terminal would

  before = signal.getsignal(signal.SIGINT)
  t = make_trainer(copy_data, tmp_path / "run", save_every=1000, log_every=2, log=log)
  s = t.train(50)
  assert s["interrupted"] and s["step"] == 2
  said = lines.index(f"signal {int(signal.SIGINT)} received at step 2: saved, exiting")
  assert lines[said - 1].startswith("saved ") and lines[said - 1].endswith("ckpt-2")
  assert t.manager.latest_checkpoint.endswith("ckpt-2")
  assert signal.getsignal(signal.SIGINT) is before


@pytest.mark.heavy
def test_time_based_saves_follow_the_clock(copy_data, tmp_path, monkeypatch):
  """save_every_minutes=1 with a clock at 25 s a step: a save once more than 60 s passed
  since the last, at steps 3, 6 and 9, and the final one at 10 (save_every far away)."""
  t = make_trainer(copy_data, tmp_path / "run", save_every=1000, save_every_minutes=1.0,
                   keep_checkpoints=10)
  monkeypatch.setattr(trainer_lib.time, "time", lambda: 25.0 * int(t.step.numpy()))
  t.train(10)
  assert [int(p.rsplit("-", 1)[1]) for p in t.manager.checkpoints] == [3, 6, 9, 10]


@pytest.mark.heavy
@pytest.mark.parametrize("setup", ["xla", "two_replicas", "accumulation"])
def test_resume_is_exact_under_xla_two_replicas_and_accumulation(copy_data, tmp_path, setup,
                                                                 two_cpu_strategy):
  """2 steps, then 2 more in the same Trainer, or in a new one resuming from a copy of the
  run at ckpt-2: the same weights and the same last loss, with dropout on (its generators'
  states, Adam's slots, the schedule's step and the input iterator all come back). One
  device under XLA and 2 replicas, both on packed rows (one batch shape: one trace and
  compile per trainer; bucketed batches, traced and compiled once per shape, took 98 and
  53 s), and 2 accumulated micro-batches per update."""
  hp = tiny_hparams(layer_prepostprocess_dropout=0.1, relu_dropout=0.1, attention_dropout=0.1)
  kwargs = {"xla": dict(use_xla=True), "two_replicas": dict(strategy=two_cpu_strategy),
            "accumulation": {}}[setup]
  if setup == "accumulation":
    hp = hp.replace(gradient_accumulation_steps=2)
  if setup != "accumulation":
    hp = hp.replace(packed_length=16)
  import shutil
  straight = make_trainer(copy_data, tmp_path / "straight", hp, save_every=2, **kwargs)
  straight.train(2)
  shutil.copytree(tmp_path / "straight", tmp_path / "resumed")
  end = straight.train(4)
  resumed = make_trainer(copy_data, tmp_path / "resumed", hp, save_every=2, **kwargs)
  again = resumed.train(4)
  assert (again["start_step"], again["step"]) == (2, 4)
  assert again["loss"] == pytest.approx(end["loss"], rel=1e-6, abs=1e-7)
  for x, y in zip(_weights(straight), _weights(resumed)):
    np.testing.assert_allclose(x, y, rtol=0, atol=1e-6)


@pytest.mark.heavy
def test_shuffle_buffer_and_input_streams_are_recorded_and_kept_on_resume(copy_data, tmp_path):
  """--shuffle_buffer and --input_streams reach the training stream and run.json; a resumed
  run keeps the recorded ones (its checkpointed iterator restores only into that pipeline)
  and says so."""
  out = tmp_path / "run"
  t = make_trainer(copy_data, out, shuffle_buffer=7, input_streams=2, save_every=2)
  assert (t.shuffle_buffer, t.input_streams) == (7, 2)
  t.train(2)
  info = json.load(open(out / "run.json"))
  assert (info["shuffle_buffer"], info["input_streams"]) == (7, 2)
  lines = []
  resumed = make_trainer(copy_data, out, shuffle_buffer=9, input_streams=1, save_every=2,
                         log=lines.append)
  assert (resumed.shuffle_buffer, resumed.input_streams) == (7, 2)
  assert ("warning: this run reads its training data with shuffle_buffer=7 (run.json) and "
          "keeps it; --shuffle_buffer=9 applies to new runs") in lines
  assert ("warning: this run reads its training data with input_streams=2 (run.json) and "
          "keeps it; --input_streams=1 applies to new runs") in lines
  assert resumed.train(4)["start_step"] == 2  # the two-stream iterator restored
  with pytest.raises(InputError, match=r"shuffle_buffer=0 \(--shuffle_buffer\): expected an "
                                       "int >= 1 or None"):
    make_trainer(copy_data, tmp_path / "bad", shuffle_buffer=0)
  with pytest.raises(InputError, match=r"input_streams=0 \(--input_streams\): expected an int "
                                       ">= 1 or None"):
    make_trainer(copy_data, tmp_path / "bad", input_streams=0)


@pytest.mark.heavy
def test_resume_elsewhere_with_a_relative_data_dir_says_where_to_resume(copy_data, tmp_path,
                                                                        monkeypatch):
  """A run trained with a relative data_dir, resumed from another working directory: its
  checkpoint's input position names data files that are not there, and the error says so
  in one line (TensorFlow's own is an iterator-restore NotFoundError)."""
  import shutil  # pylint: disable=import-outside-toplevel
  for place in ("started", "elsewhere"):
    (tmp_path / place).mkdir()
  shutil.copytree(copy_data, tmp_path / "started" / "data")
  monkeypatch.chdir(tmp_path / "started")
  make_trainer("data", str(tmp_path / "run"), tiny_hparams(), save_every=2).train(2)
  os.symlink(tmp_path / "started" / "data", tmp_path / "elsewhere" / "other")
  monkeypatch.chdir(tmp_path / "elsewhere")
  with pytest.raises(InputError, match=r"holds the input position of data files that are not "
                                       r"where it read them \(data/algorithmic_copy-train-"):
    make_trainer("other", str(tmp_path / "run"), tiny_hparams(), save_every=2).train(4)
