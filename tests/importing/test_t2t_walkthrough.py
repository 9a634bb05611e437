"""tensor2tensor's README walkthrough runs unchanged against the installed binaries."""

import os
import shutil
import subprocess

import pytest
import tensorflow as tf

SCRIPT = os.path.join(os.path.dirname(__file__), "..", "t2t_walkthrough.sh")


@pytest.mark.slow
@pytest.mark.skipif(shutil.which("t2t-trainer") is None,
                    reason="the console scripts are not installed (pip install -e .)")
def test_t2t_walkthrough_runs_verbatim(tmp_path):
  """Slow (about 170 s: ten processes, each importing TensorFlow). Faster default tests
  cover it: test_remote_paths.py runs the same chain (datagen, trainer, t2t-avg-all,
  t2t-decoder, t2t-exporter) through the binaries' own flag parsing, and test_cli.py each
  binary with t2t's flags (t2t-bleu and --registry_help included)."""
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3", TRAIN_STEPS="30")
  done = subprocess.run(["bash", SCRIPT], cwd=tmp_path, env=env, capture_output=True,
                        text=True, timeout=900)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  train_dir = tmp_path / "t2t_train" / "translate_ende_numbers" / "transformer-transformer_tiny"
  assert tf.train.latest_checkpoint(str(train_dir)).endswith("ckpt-30")
  for name in ("translation.en", "translation_avg.en"):
    assert len((tmp_path / name).read_text().splitlines()) == 2
  assert "sacreBLEU" in done.stdout and "exact match" in done.stdout
  assert tf.train.latest_checkpoint(str(train_dir / "avg")).endswith("ckpt-30")
  assert os.path.isdir(train_dir / "export" / "30")
