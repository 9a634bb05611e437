"""Which training precision is faster on this CPU: a matmul in float32 against bfloat16.

    python -m t2t_keras.training.precision      # prints float32 or mixed_bfloat16

A CPU flag does not settle it: CPUs that list avx512_bf16 ran bfloat16 matmuls
anywhere from about half to twice as fast as float32 (figures: docs/notebook.md).
So `recipes/multi30k.sh` measures: TensorFlow's own matmul
(oneDNN, as the training step runs it) on an FFN-sized product [4096, 256] x [256,
1024] in each dtype, best of 3 rounds, about 1.5 s; bfloat16 is chosen when it is
at least `MIN_SPEEDUP` times as fast.
"""

import os
import sys
import time

MIN_SPEEDUP = 1.2


def choose(float32_gflops, bfloat16_gflops, min_speedup=MIN_SPEEDUP):
  """"mixed_bfloat16" if bfloat16 matmuls are at least min_speedup x float32's, else "float32"."""
  if bfloat16_gflops >= min_speedup * float32_gflops:
    return "mixed_bfloat16"
  return "float32"


def matmul_gflops(dtype, m=4096, k=256, n=1024, reps=20, rounds=3):
  """GFLOP/s of tf.matmul [m, k] x [k, n] in `dtype`: best of `rounds` rounds of `reps`."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  a = tf.cast(tf.random.normal([m, k], seed=1), dtype)
  b = tf.cast(tf.random.normal([k, n], seed=2), dtype)
  product = tf.function(tf.matmul)
  product(a, b).numpy()
  best = float("inf")
  for _ in range(rounds):
    start = time.perf_counter()
    for _ in range(reps):
      c = product(a, b)
    c.numpy()
    best = min(best, (time.perf_counter() - start) / reps)
  return 2.0 * m * k * n / best / 1e9


def main():
  os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  f32, bf16 = matmul_gflops(tf.float32), matmul_gflops(tf.bfloat16)
  choice = choose(f32, bf16)
  print(f"matmul float32 {f32:.0f} GFLOP/s, bfloat16 {bf16:.0f} GFLOP/s "
        f"({bf16 / f32:.2f}x): {choice}", file=sys.stderr)
  print(choice)


if __name__ == "__main__":
  main()
