"""The training stream through the tf.data service (data/service.py): `t2t-data-service`
processes on this host (a dispatcher and two workers), real gRPC; batches, their runs of one shape, the per-worker seeds,
the trainer's checkpoints without an input position, and resumes either way."""

import os
import socket
import subprocess
import sys

import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.data import pipeline
from t2t_keras.problems import numbers
from t2t_keras.training import checkpoints, trainer as trainer_lib
from t2t_keras.training.config import TrainerConfig

HP = registry.hparams("transformer_tiny").replace(batch_size=512, max_length=20)


@pytest.fixture(scope="module")
def problem():
  return numbers.TranslateEndeNumbers(num_train=600, num_dev=40, num_test=40)


@pytest.fixture(scope="module")
def data_dir(problem, tmp_path_factory):
  d = str(tmp_path_factory.mktemp("numbers"))
  problem.generate_data(d)
  return d


def _free_port():
  with socket.socket() as s:
    s.bind(("127.0.0.1", 0))
    return s.getsockname()[1]


@pytest.fixture(scope="module")
def dispatcher():
  """`t2t-data-service` as a user starts it: a dispatcher with a worker, then a second
  worker process; killed at the end (stopping a server waits for its jobs)."""
  port = _free_port()
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  procs = [subprocess.Popen([sys.executable, "-m", "t2t_keras.bin.data_service", f"--port={port}"],
                            stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True, env=env)]
  try:
    line = procs[0].stdout.readline()
    assert line.startswith(f"t2t-data-service: dispatcher localhost:{port}, worker "), line
    procs.append(subprocess.Popen(
        [sys.executable, "-m", "t2t_keras.bin.data_service", f"--dispatcher_address=localhost:{port}",
         f"--port={_free_port()}"], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
        env=env))
    line = procs[1].stdout.readline()
    assert line.startswith("t2t-data-service: worker localhost:"), line
    yield f"grpc://localhost:{port}"
  finally:
    for proc in procs:
      proc.kill()
      proc.wait()


@pytest.mark.heavy
def test_batches_come_in_runs_of_one_shape_from_workers_seeded_apart(problem, data_dir,
                                                                     dispatcher):
  """Two replicas fed by one pipeline: each step's two batches share a shape and the
  budget; every row is a pair of the split; two jobs (two trainers) start from different
  batches, as each worker seeds its shuffles from its clock (with the one --seed, every
  worker would make the same batches)."""
  ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                   num_replicas_in_sync=2)
  pairs = {tuple(ex["targets"].tolist()) for ex in problem.dataset(data_dir, "train")
           .as_numpy_iterator()}

  def take(n):
    ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                               pipeline.InputSettings(shuffle=True, seed=1, repeat=True,
                                                      data_service=dispatcher),
                               input_context=ctx)
    return [b for b, _ in zip(ds, range(n))]

  batches = take(12)
  for first, second in zip(batches[::2], batches[1::2]):
    assert first["inputs"].shape == second["inputs"].shape
    assert first["targets"].shape == second["targets"].shape
  for b in batches:
    assert pipeline.batch_tokens(b) <= HP.batch_size // 2
    assert {tuple(t[t != 0].tolist()) for t in b["targets"].numpy()} <= pairs
  assert take(1)[0]["targets"].numpy().tolist() != take(1)[0]["targets"].numpy().tolist()
  with pytest.raises(ValueError, match="repeated .training. streams only"):
    pipeline.make_dataset(problem, data_dir, "dev", HP,
                          pipeline.InputSettings(shuffle=False, seed=0, repeat=False,
                                                 data_service=dispatcher))


@pytest.mark.heavy
def test_trainer_through_the_service_saves_no_input_position_and_resumes(problem, data_dir,
                                                                         dispatcher, tmp_path):
  """Trained through the service, checkpoints hold the model but no iterator (input
  pipeline NO_INPUT_POSITION); resumed without the service the data order starts from
  --seed with a warning, resumed through it the stream starts afresh, saying so."""
  def trainer(service_address, lines):
    config = TrainerConfig(use_xla=False, eval_every=0, eval_bleu_sentences=0, save_every=2,
                           data_service_address=service_address)
    # 1+1 layers at width 32: what is checked is the checkpoints' content, not the model.
    hparams = HP.replace(train_steps=8, hidden_size=32, filter_size=64, num_heads=2,
                         num_encoder_layers=1, num_decoder_layers=1)
    return trainer_lib.Trainer(problem, hparams, data_dir, str(tmp_path), config,
                               log=lines.append)

  lines = []
  summary = trainer(dispatcher, lines).train(2)
  assert summary["step"] == 2 and summary["loss"] > 0
  assert any(f"buckets made by the tf.data service at {dispatcher}" in l for l in lines)
  reader = tf.train.load_checkpoint(summary["checkpoint"])
  assert checkpoints.input_pipeline_version(summary["checkpoint"]) == \
      checkpoints.NO_INPUT_POSITION
  assert not [k for k in reader.get_variable_to_shape_map() if k.startswith("iterator")]

  lines = []
  assert trainer(None, lines).train(4)["start_step"] == 2
  assert (f"warning: {tmp_path}/ckpt-2 was written reading through the tf.data service, "
          "which keeps no input position: the data order starts afresh from --seed=1") in lines
  assert [k for k in tf.train.load_checkpoint(f"{tmp_path}/ckpt-4").get_variable_to_shape_map()
          if k.startswith("iterator")]  # a local run saves its position again

  lines = []
  assert trainer(dispatcher, lines).train(6)["start_step"] == 4
  assert ("the tf.data service's training stream starts afresh at the resumed step (its "
          "position cannot be checkpointed)") in lines
