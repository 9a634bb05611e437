"""SIGKILL at any moment: what a killed CTranslate2 conversion or t2t-avg-all leaves is either whole
or not under its final name, and the same command run again completes.

Each binary runs as its own process and is killed after 5 seconds (during its TensorFlow
start or its writes, depending on the CPU; where it finished first, its output is checked
as whole). The verdict does not depend on when the kill
lands: either the final output is there and loads, or it is absent and a rerun makes it.
(The trainer's and datagen's kills: test_trainer_processes.py, test_datagen_scale.py.)
The importers are killed at one chosen point instead (just before run.json, the file that
makes a directory a run), simulated in-process.
"""

import os
import subprocess
import sys

import numpy as np
import pytest
import tensorflow as tf
from binaries import run_binary
from conftest import make_two_checkpoint_run

from t2t_keras import runs
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.bin import exporter as exporter_bin

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

KILL_AFTER_S = (5.0,)
QUIET = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A 1+1-layer run with checkpoints 7 and 9 (random weights; one layer each side keeps
  its exports short)."""
  return make_two_checkpoint_run(tmp_path_factory.mktemp("run"), num_encoder_layers=1,
                                 num_decoder_layers=1)


def killed(module, args, after_s):
  """Runs `python -m module args`, SIGKILLed after `after_s` seconds; True if it ended first."""
  proc = subprocess.Popen([sys.executable, "-m", module, *args], env=QUIET,
                          stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL)
  try:
    proc.wait(after_s)
    return True
  except subprocess.TimeoutExpired:
    proc.kill()
    proc.wait()
    return False


@pytest.mark.parametrize("after_s", KILL_AFTER_S)
def test_a_killed_conversion_leaves_no_partial_model(capsys, tiny_run, tmp_path, after_s):
  """t2t-exporter --format=ctranslate2 killed. The SavedModel export's kills are the kill
  loop's (`benchmarks/kill_loop.py`; its short mode in test_kill_loop.py kills it at a
  random time and compares the rerun's translations)."""
  pytest.importorskip("ctranslate2", reason="the [ctranslate2] extra is not installed")
  target = tmp_path / "ct2"
  args = [f"--output_dir={tiny_run}", f"--export_dir={target}", "--format=ctranslate2",
          "--decode_hparams=beam_size=1,jit=false"]
  killed("t2t_keras.bin.exporter", args, after_s)
  if not target.exists():  # killed before the rename: only a temporary directory, if any
    left = os.listdir(target.parent) if target.parent.exists() else []
    assert all(n.startswith((".tmp-", ".ct2-")) for n in left), left
    code, _, err = run_binary(capsys, exporter_bin, *args)
    assert code == 0, err
  import ctranslate2  # pylint: disable=import-outside-toplevel
  translator = ctranslate2.Translator(str(target))
  assert translator.translate_batch([["▁nine", "</s>"]], max_decoding_length=3)


@pytest.mark.parametrize("after_s", KILL_AFTER_S)
def test_a_killed_average_leaves_no_partial_checkpoint(capsys, tiny_run, tmp_path, after_s):
  args = [f"--model_dir={tiny_run}", f"--output_dir={tmp_path}/avg", "--n=2"]
  killed("t2t_keras.bin.avg_all", args, after_s)
  latest = tf.train.latest_checkpoint(str(tmp_path / "avg")) if (tmp_path / "avg").exists() \
      else None
  if latest is None:
    code, _, err = run_binary(capsys, avg_all_bin, *args)
    assert code == 0, err
    latest = tf.train.latest_checkpoint(str(tmp_path / "avg"))
  assert runs.checkpoint_is_readable(latest), latest
  run = runs.load(str(tmp_path / "avg"))  # the run's files are whole beside it
  assert run.checkpoint_path == latest


class Killed(BaseException):
  """Stands for SIGKILL at one chosen point: nothing after it runs (no except clause of
  the code under test catches a BaseException of its own)."""


def _die(*args, **kwargs):
  raise Killed()


@pytest.mark.parametrize("point", ["checkpoint", "run_json"])
@pytest.mark.parametrize("source", ["t2t", "marian", "hf"])
def test_a_killed_import_runs_again(monkeypatch, tmp_path, source, point):
  """An import writes its checkpoints first and run.json last (with the vocabulary before
  it): killed as it saves a checkpoint or just before run.json, it leaves a directory that
  is no run, which the same import accepts and completes. (Marian's import wrote run.json
  first: killed at the checkpoint, the rerun refused the directory, "already holds a
  run", and the directory held no model.)"""
  if source == "t2t":
    import t2t_checkpoint_writer as writer  # pylint: disable=import-outside-toplevel
    from t2t_keras.importing import t2t_checkpoint  # pylint: disable=import-outside-toplevel
    hp = dict(writer.BASE, hidden_size=8, filter_size=16, num_heads=2, num_hidden_layers=1,
              symbol_modality_num_shards=2)
    writer.write_t2t_dir(str(tmp_path / "t2t"), hp, np.random.default_rng(0), target_space=5)
    do_import = lambda: t2t_checkpoint.import_run(  # noqa: E731
        str(tmp_path / "t2t"), str(tmp_path / "run"), log=lambda *_: None)
  elif source == "marian":
    import marian_fixture  # pylint: disable=import-outside-toplevel
    from t2t_keras.importing import marian  # pylint: disable=import-outside-toplevel
    marian_fixture.write_release(str(tmp_path / "release"), "post_swish_tied_all", seed=2)
    do_import = lambda: marian.import_run(  # noqa: E731
        str(tmp_path / "release"), str(tmp_path / "run"), log=lambda *_: None)
  else:  # an OPUS-MT directory as the Hugging Face hub serves it
    import hf_marian_fixture  # pylint: disable=import-outside-toplevel
    from t2t_keras.importing import hf  # pylint: disable=import-outside-toplevel
    hf_marian_fixture.write_hf_dir(str(tmp_path / "hub"), seed=2)
    do_import = lambda: hf.import_run(  # noqa: E731
        str(tmp_path / "hub"), str(tmp_path / "run"), log=lambda *_: None)
  with monkeypatch.context() as patch:
    if point == "checkpoint":
      patch.setattr(tf.train.CheckpointManager, "save", _die)
    else:
      patch.setattr(runs, "save_run_info", _die)
    with pytest.raises(Killed):
      do_import()
  left = os.listdir(tmp_path / "run") if (tmp_path / "run").exists() else []
  assert runs.RUN_FILE not in left, left
  if point == "run_json":
    assert any(n.endswith(".index") for n in left), left
  do_import()
  run = runs.load(str(tmp_path / "run"))
  assert run.info["imported_from"] and runs.checkpoint_is_readable(run.checkpoint_path)
