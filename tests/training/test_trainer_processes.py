"""Trainer runs in real processes: SIGKILL + resume is exact, SIGTERM saves, multi-worker agrees."""

import json
import os
import shutil
import signal
import socket
import subprocess
import sys
import time

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.data import datagen
from t2t_keras.data.pipeline import InputSettings, make_dataset
from t2t_keras import runs
from t2t_keras.training import trainer as trainer_lib
from t2t_keras.training.config import TrainerConfig

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

PROBLEM_ARGS = dict(num_train=1500, num_dev=100, num_test=100, max_length=8, num_symbols=6)
HPARAMS = ("hidden_size=32,filter_size=64,num_heads=2,num_encoder_layers=1,"
           "num_decoder_layers=1,batch_size=256,max_length=16,learning_rate_warmup_steps=50")


@pytest.fixture(scope="module")
def copy_data(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("copy_data_proc"))
  datagen.generate("algorithmic_copy", data_dir, log=None, **PROBLEM_ARGS)
  return data_dir


def trainer_cmd(data_dir, output_dir, *extra, hparams=HPARAMS):
  return [sys.executable, "-m", "t2t_keras.bin.trainer", "--problem=algorithmic_copy",
          "--hparams_set=transformer_tiny", f"--hparams={hparams}", f"--data_dir={data_dir}",
          f"--output_dir={output_dir}", "--nouse_xla", "--eval_every=0", "--log_every=1",
          "--deterministic", "--seed=3", *extra]


def env(**extra):
  e = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", PYTHONUNBUFFERED="1", **extra)
  e.pop("TF_CONFIG", None)
  e.update(extra)
  return e


def model_weights(checkpoint, output_dir):
  model, _, _, _ = runs.load_model(str(output_dir), checkpoint)
  # Keyed by path within the model (a second model in one process is "transformer_1").
  return {w.path.split("/", 1)[1]: w.numpy() for w in model.weights}


def wait_for(predicate, proc, timeout, what):
  deadline = time.time() + timeout
  while time.time() < deadline:
    if predicate():
      return
    if proc.poll() is not None:
      raise AssertionError(f"process ended (rc {proc.returncode}) before {what}:\n"
                           + proc.stdout.read())
    time.sleep(0.2)
  proc.kill()
  raise AssertionError(f"timed out waiting for {what}")


@pytest.mark.parametrize("packing", [
    "", pytest.param(",packed_length=32", marks=pytest.mark.slow)], ids=["buckets", "packed"])
def test_sigkill_then_resume_equals_uninterrupted_run(copy_data, tmp_path, packing):
  """Also with packed rows (slow: the kill and resume are the buckets case's, and the
  packer's scan state in the checkpointed iterator is test_packing.py's
  test_make_dataset_packed_checkpoint)."""
  cmd = lambda *a: trainer_cmd(*a, hparams=HPARAMS + packing)
  straight, killed = tmp_path / "straight", tmp_path / "killed"
  subprocess.run(cmd(copy_data, straight, "--train_steps=16", "--save_every=4"),
                 env=env(), check=True, timeout=300, capture_output=True)
  proc = subprocess.Popen(cmd(copy_data, killed, "--train_steps=100000",
                                      "--save_every=4"),
                          env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  wait_for(lambda: os.path.exists(killed / "ckpt-8.index"), proc, 300, "ckpt-8")
  proc.send_signal(signal.SIGKILL)
  proc.wait(timeout=30)
  assert proc.returncode == -signal.SIGKILL
  done = subprocess.run(cmd(copy_data, killed, "--train_steps=16", "--save_every=4"),
                        env=env(), timeout=300, capture_output=True, text=True)
  assert done.returncode == 0, done.stderr
  assert "resumed from" in done.stdout
  a = model_weights(str(straight / "ckpt-16"), straight)
  b = model_weights(str(killed / "ckpt-16"), killed)
  assert a.keys() == b.keys() and len(a) > 10
  for name in a:
    np.testing.assert_array_equal(a[name], b[name], err_msg=name)


@pytest.mark.slow
def test_sigterm_saves_and_exits_cleanly(copy_data, tmp_path):
  """Slow: test_two_workers_equal_one_process_and_stop_together_on_one_workers_signal
  sends SIGTERM to real t2t-trainer processes (both save at the step and exit 0), and
  test_trainer.py's test_ctrl_c_saves_and_returns_interrupted takes the same handler
  (StopSignals: SIGTERM and SIGINT alike) through the save at the step."""
  out = tmp_path / "run"
  proc = subprocess.Popen(trainer_cmd(copy_data, out, "--train_steps=100000", "--save_every=100000"),
                          env=env(), stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True)
  wait_for(lambda: os.path.exists(out / "metrics.jsonl")
           and os.path.getsize(out / "metrics.jsonl") > 0, proc, 300, "first step")
  proc.send_signal(signal.SIGTERM)
  output, _ = proc.communicate(timeout=120)
  assert proc.returncode == 0, output
  assert "signal 15 received" in output
  step = int(output.split("signal 15 received at step ")[1].split(":")[0])
  assert tf.train.latest_checkpoint(str(out)).endswith(f"ckpt-{step}")


def _free_ports(n):
  socks = [socket.socket() for _ in range(n)]
  for s in socks:
    s.bind(("127.0.0.1", 0))
  ports = [s.getsockname()[1] for s in socks]
  for s in socks:
    s.close()
  return ports


BIND_FAILURE = "Could not start gRPC server"


def start_workers(data_dir, tmp_path, args, hparams=HPARAMS, attempts=3,
                  wait_for="training algorithmic_copy"):
  """Two MultiWorkerMirrored trainer processes (worker i logs to tmp_path/worker<i>.log),
  once they have connected and the chief logged `wait_for` (by default: started training).

  Free ports cannot be held until the workers bind them (TF's gRPC server turns
  SO_REUSEPORT off), so another process may take one in between: the worker then exits
  with BIND_FAILURE and both start again on new ports, up to `attempts` times.
  """
  for attempt in range(attempts):
    ports = _free_ports(2)
    workers = [f"127.0.0.1:{p}" for p in ports]
    logs = [tmp_path / f"worker{i}.log" for i in range(2)]
    procs = [subprocess.Popen(
        trainer_cmd(data_dir, tmp_path / "run", *args, hparams=hparams),
        env=env(TF_CONFIG=json.dumps({"cluster": {"worker": workers},
                                      "task": {"type": "worker", "index": i}})),
        stdout=open(logs[i], "w"), stderr=subprocess.STDOUT, text=True) for i in range(2)]
    deadline = time.time() + 240
    while wait_for not in logs[0].read_text():  # (only the chief logs)
      if any(BIND_FAILURE in log.read_text() for log in logs):
        break
      if time.time() > deadline or any(p.poll() not in (None, 0) for p in procs):
        for p in procs:
          p.kill()
        raise AssertionError("\n".join(log.read_text()[-3000:] for log in logs))
      time.sleep(0.2)
    else:
      return procs, logs, attempt
    for p in procs:
      p.kill()
      p.wait()
  raise AssertionError(f"{attempts} attempts at free ports: {BIND_FAILURE}")


def _wait_for_files(paths, procs, log, timeout=240):
  deadline = time.time() + timeout
  while not all(os.path.exists(p) for p in paths):
    assert time.time() < deadline and all(p.poll() is None for p in procs), log.read_text()
    time.sleep(0.2)


def test_two_workers_equal_one_process_and_stop_together_on_one_workers_signal(
    copy_data, tmp_path, two_cpu_strategy):
  """Two MultiWorkerMirrored workers, dropout on, evaluating every 2 steps and saving every
  2 steps and every 0.3 s on the chief's clock (--save_every_minutes=0.005):

  - SIGTERM on the non-chief worker: both save at the same step and exit 0, none hangs;
    they saved at the same steps (the chief decides the time-based saves; an all-reduce
    tells the other) and end at the same weights.
  - From their step-2 state, one process with 2 logical CPUs fed the workers' batches
    (replica i <- worker i's shard) ends at the weights the workers reach at step 4: each
    dropout mask depends only on the seed generators' state, the shape and the global
    replica id. (This once ran with dropout 0 because the two differed by 6e-3 at step
    4: the dropout generators' states, which the trainer checkpoints beside the model as
    "rng_states", were not restored, so the one process drew step 1 and 2's masks again.)
  - The chief writes one metrics line per evaluation; the dev loss over the dev set
    sharded across the workers is one process's over all of it.
  - A resume where one worker's state is missing fails on both, in one line, at once.
  """
  out = tmp_path / "run"
  hparams = HPARAMS + ",layer_prepostprocess_dropout=0.1,relu_dropout=0.1,attention_dropout=0.1"
  evaluation = ["--eval_every=2", "--eval_steps=1000", "--eval_bleu_sentences=4"]
  procs, logs, _ = start_workers(copy_data, tmp_path, [
      "--train_steps=100000", "--save_every=2", "--save_every_minutes=0.005",
      "--keep_checkpoints=1000", *evaluation], hparams)
  try:
    _wait_for_files([out / "ckpt-4.index", out / "worker_tmp_1" / "ckpt-4.index"], procs,
                    logs[0])
    procs[1].send_signal(signal.SIGTERM)
    codes = [p.wait(timeout=120) for p in procs]
  finally:
    for p in procs:
      if p.poll() is None:
        p.kill()
  outputs = [log.read_text() for log in logs]
  assert codes == [0, 0], outputs
  assert "on 2 replica(s)" in outputs[0]
  assert "another worker was stopped at step" in outputs[0]  # (only the chief logs)
  saved = [[int(p.rsplit("-", 1)[1]) for p in tf.train.get_checkpoint_state(
      str(d)).all_model_checkpoint_paths] for d in (out, out / "worker_tmp_1")]
  assert saved[0] == saved[1] and {2, 4} < set(saved[0]), saved  # together, and more
  stop = saved[0][-1]
  last = [model_weights(str(d / f"ckpt-{stop}"), out) for d in (out, out / "worker_tmp_1")]
  for name in last[0]:
    np.testing.assert_allclose(last[0][name], last[1][name], atol=1e-6, err_msg=name)

  hp = registry.hparams("transformer_tiny").override(hparams)
  problem = datagen.make_problem("algorithmic_copy", **PROBLEM_ARGS)
  one = trainer_lib.Trainer(problem, hp, copy_data, str(tmp_path / "one"),
                            TrainerConfig(use_xla=False, seed=3, eval_every=0,
                                          eval_bleu_sentences=0),
                            strategy=two_cpu_strategy, log=lambda *a: None)
  rng_states = [v for v in one.model.variables if "seed_generator_state" in v.path]
  assert rng_states
  state = tf.train.Checkpoint(model=one.model, optimizer=one.optimizer, step=one.step,
                              rng_states=rng_states)
  state.restore(str(out / "ckpt-2")).expect_partial()
  iterators = []
  for i, path in enumerate([out / "ckpt-2", out / "worker_tmp_1" / "ckpt-2"]):
    ctx = tf.distribute.InputContext(num_input_pipelines=2, input_pipeline_id=i,
                                     num_replicas_in_sync=2)
    it = iter(make_dataset(problem, copy_data, "train", hp,
                           InputSettings(shuffle=True, seed=3, repeat=True), input_context=ctx))
    tf.train.Checkpoint(iterator=it).restore(str(path)).expect_partial()
    iterators.append(it)
  one.iterator = (next(it) for _ in range(1000) for it in iterators)
  one.train_step()
  one.train_step()
  workers_at_4 = model_weights(str(out / "ckpt-4"), out)
  mine = {w.path.split("/", 1)[1]: w.numpy() for w in one.model.weights}
  for name, value in workers_at_4.items():
    if "seed_generator" not in name:
      np.testing.assert_allclose(mine[name], value, atol=2e-5, err_msg=name)

  records = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
  dev = [r for r in records if "dev_loss" in r]
  assert [r["step"] for r in dev][:2] == [2, 4] and all("dev_bleu" in r for r in dev)
  assert outputs[0].count("BLEU") == len(dev) and "BLEU" not in outputs[1]
  one_dev = one.evaluate(steps=1000)
  assert one_dev["dev_tokens"] == dev[1]["dev_tokens"]
  np.testing.assert_allclose(dev[1]["dev_loss"], one_dev["dev_loss"], rtol=1e-4)

  shutil.rmtree(out / "worker_tmp_1")
  procs, logs, _ = start_workers(copy_data, tmp_path, [f"--train_steps={stop + 2}",
                                                       "--save_every=2", *evaluation],
                                 hparams, wait_for="resumed from")
  codes = [p.wait(timeout=300) for p in procs]
  texts = [log.read_text() for log in logs]
  assert codes == [1, 1], texts
  last_line = texts[0].strip().splitlines()[-1]
  assert last_line == (
      f"t2t-trainer: error: 1 worker(s) restored another step than the chief's {stop} "
      f"(this worker: {stop}): their state in {out}/worker_tmp_<i> is missing or from "
      "another point of the run; put it back, or start the run afresh in a new "
      "--output_dir"), texts[0][-2000:]
