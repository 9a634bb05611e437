"""benchmarks/gpu_check.sh at the tiny size, on this machine's CPU: the script a GPU visit
runs works the day a GPU comes (our step and search at a size, peer_compare.py's entry,
MirroredStrategy over 4 logical devices equal to one device; over 2:
test_trainer.py's test_two_replicas_clip_the_global_gradient_like_one_device)."""

import json
import os
import subprocess
import sys

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


@pytest.mark.heavy
def test_gpu_check_tiny_runs_every_step(tmp_path):
  out = tmp_path / "out"
  env = dict(os.environ, PYTHON=sys.executable, PEER_PYTHON=sys.executable,
             TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "gpu_check.sh"), "--tiny",
                         str(out)], capture_output=True, text=True, env=env, check=False,
                        timeout=900)
  assert proc.returncode == 0, proc.stdout[-3000:] + proc.stderr[-3000:]
  text = proc.stdout

  # Our step and search at the tiny size: 16 x 16 target tokens a step, 40 output tokens.
  result = [l for l in (out / "tiny_ours.log").read_text().splitlines()
            if l.startswith("STEP_BENCH_RESULT ")]
  fig = json.loads(result[-1].split(" ", 1)[1])
  assert (fig["size"], fig["tokens_per_step"], fig["vocab_size"]) == ("tiny", 256, 1000)
  assert fig["decode_output_length"] == 40 and fig["train_median_step_s"] > 0
  assert fig["flops_per_step"] > 0

  # The venv has no Model Garden: peer_compare.py says so and compares nothing.
  assert "peer not installed" in (out / "tiny_float32.log").read_text()

  # 4 replicas against one device, within the bound, named in the summary.
  multi = json.loads((out / "multi_device_tiny.json").read_text())
  assert [f["n"] for f in multi] == [1, 4]
  for fig in multi[1:]:
    assert fig["pass"] and fig["grad_rel_diff"] < 1e-3 and fig["loss_rel_diff"] < 1e-3
    assert fig["kind"] == "CPU" and len(fig["devices"]) == 4
  done = text.index("gpu_check: done")  # then the script repeats every verdict line
  assert text[:done].count(") PASS") == 1 and text[done:].count(") PASS") == 1
  assert "MULTI_DEVICE N=4 CPU" in text[done:]


@pytest.mark.heavy
def test_gpu_check_without_a_gpu_refuses_to_measure(tmp_path):
  env = dict(os.environ, PYTHON=sys.executable, TF_CPP_MIN_LOG_LEVEL="3")
  proc = subprocess.run(["bash", os.path.join(ROOT, "benchmarks", "gpu_check.sh"),
                         str(tmp_path / "out")], capture_output=True, text=True, env=env,
                        check=False, timeout=300)
  assert proc.returncode == 2
  assert "TensorFlow sees no GPU: nothing measured (--tiny runs on a CPU)" in proc.stderr


def test_relative_difference_is_against_the_references_largest_value():
  from conftest import load_benchmark
  import numpy as np
  check = load_benchmark("multi_device_check")
  diffs = check.relative_differences(
      [np.array([1.0, 2.001]), np.array([[0.0, -4.0]])],
      [np.array([1.0, 2.0]), np.array([[0.5, -4.0]])])
  np.testing.assert_allclose(diffs, [0.001 / 2.0, 0.5 / 4.0])
