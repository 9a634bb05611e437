"""benchmarks/run_all.py: the summary it prints from the three benchmarks' results."""

from conftest import load_benchmark

run_all = load_benchmark("run_all")
train_bench = load_benchmark("train_bench")


def _train(xla, warmup_seconds, warmup_steps, seconds):
  return {"xla": xla, "set": "transformer_multi30k", "params": 7.5e6, "batch_size": 4096,
          "problem": "translate_ende_multi30k", "target_tokens": 30000.0, "seconds": seconds,
          "gflops": 120.0, "peak_gflops": 240.0, "padding_fraction": 0.1,
          "max_rss_mib": 2048.0, "warmup_seconds": warmup_seconds,
          "warmup_steps": warmup_steps, "distinct_shapes": 12}


def test_compile_seconds_removes_tracing_time_scaled_by_steps():
  # XLA warm-up of 15 steps took 90 s; without XLA 10 steps took 20 s, so 15 take 30 s
  # of tracing and running: 60 s is compilation.
  on = _train(True, 90.0, 15, 10.0)
  off = _train(False, 20.0, 10, 10.0)
  assert train_bench.compile_seconds(on, off) == 60.0


def test_summary_lines():
  train = [_train(False, 20.0, 10, 10.0), _train(True, 90.0, 15, 12.5)]
  decode = {"config": {"beam": 4, "batch": 32, "length": 40},
            "sentences_per_s": {"cached-xla": 30.25, "cached": 26.0},
            "first_call_s": {"cached-xla": 9.0, "cached": 3.0}, "max_rss_mib": 1500.0}
  export = {"load_s": 1.25, "first_s": 2.5, "latency_median_s": 0.2, "latency_p90_s": 0.25,
            "batch": 32, "throughput_sentences_per_s": 14.75, "max_rss_mib": 1800.0}
  lines = run_all.summary(train, decode, export)
  assert lines[0].startswith("train   transformer_multi30k (7.5M params, batch 4096 tokens")
  assert "XLA off: 3,000 target tok/s, MFU 50.0% (120 of 240 GFLOP/s" in lines[0]
  assert "padding 10.0%, peak RSS 2,048 MiB" in lines[0]
  assert "XLA on : 2,400 target tok/s" in lines[1]
  assert lines[2] == ("train   XLA compile time 60.0 s for 12 batch shapes; "
                      "XLA on/off 0.80x")
  assert "cached-xla beam 4, batch 32, 40 tokens: 30.2 sentences/s (first call 9.0 s)" in lines[3]
  assert lines[5] == "decode  peak RSS 1,500 MiB"
  assert lines[6] == ("export  load 1.25 s, first translation 2.50 s, one sentence 200 ms "
                      "median (250 ms p90), batch 32: 14.8 sentences/s, peak RSS 1,800 MiB")
