"""t2t_keras.training.precision: the float32 / bfloat16 choice that recipes/multi30k.sh makes."""

import pytest

from t2t_keras.training import precision


def test_choose_takes_bfloat16_only_when_clearly_faster():
  assert precision.choose(451.0, 834.0) == "mixed_bfloat16"   # the Zen 5's figures
  assert precision.choose(298.0, 164.0) == "float32"          # the Xeon's
  assert precision.choose(100.0, 119.0) == "float32"
  assert precision.choose(100.0, 120.0) == "mixed_bfloat16"
  assert precision.choose(100.0, 150.0, min_speedup=2.0) == "float32"


def test_matmul_gflops_counts_two_flops_per_multiply_add(monkeypatch):
  ticks = iter(range(100))
  monkeypatch.setattr(precision.time, "perf_counter", lambda: float(next(ticks)))
  # Every round reads 1 s for its reps: the rate is 2*m*k*n / (1 s / reps).
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  rate = precision.matmul_gflops(tf.float32, m=8, k=4, n=2, reps=5, rounds=2)
  assert abs(rate - 2 * 8 * 4 * 2 * 5 / 1e9) < 1e-15


@pytest.mark.heavy
def test_the_command_prints_one_choice_and_the_measured_rates(capsys):
  precision.main()  # `python -m t2t_keras.training.precision`, in this process
  out, err = capsys.readouterr()
  assert out.strip() in ("float32", "mixed_bfloat16")
  assert "GFLOP/s" in err and out.strip() in err.splitlines()[-1]
