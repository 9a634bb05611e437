"""benchmarks/peer_compare.py and its sides, rounds and report (peer_sides.py, peer_rounds.py,
peer_report.py): parsing of the children's output, medians, ratio lines."""

import argparse
import sys

import pytest

from conftest import load_benchmark

pc = load_benchmark("peer_compare")
sides, rounds, report = pc.peer_sides, pc.peer_rounds, pc.peer_report

PEER_STEP_OUTPUT = (  # the lines model_garden_peer.py prints
    "tf 2.15.1 tf_keras 2.15.1\n"
    "first step (trace/compile) 14.2s loss 9.210\n"
    "params: 7569408\n"
    "TRAIN jit=False: median step 1575.3 ms (min 1501.0, max 1702.9) over 15 steps; "
    "2600 target tok/s (5200 src+tgt tok/s); loss 9.101\n"
    "decode first call 6.1s, outputs shape (32, 40)\n"
    "BEAM beam=4 batch=32 max_len=40: median 2.00s/batch -> 16.0 sent/s; decoded lengths "
    "mean 39.5 (random model, no early EOS)\n")


def test_cpu_model_is_the_first_model_name():
  text = "processor\t: 0\nmodel name\t: Intel(R) Xeon(R) CPU @ 2.20GHz\nprocessor\t: 1\n" \
         "model name\t: Other\n"
  assert sides.cpu_model(text) == "Intel(R) Xeon(R) CPU @ 2.20GHz"
  assert sides.cpu_model("flags: x\n") is None
  epyc = ("model name\t: AMD EPYC\ncpu family\t: 26\nmodel\t\t: 2\n"
          "flags\t\t: fpu avx2 avx512f avx512_bf16\nmodel name\t: AMD EPYC\n")
  assert sides.cpu_model(epyc) == "AMD EPYC (family 26, model 2; avx512f, avx512_bf16)"


def test_parse_peer_step():
  fig = sides.parse_peer_step(PEER_STEP_OUTPUT)
  assert fig == {"tf": "2.15.1", "tf_keras": "2.15.1", "jit": False,
                 "train_median_step_s": 1.5753, "train_target_tok_s": 2600.0,
                 "decode_median_s": 2.0, "decode_sent_s": 16.0, "decode_length_mean": 39.5}
  assert sides.parse_peer_step("tf 2.15.1 tf_keras 2.15.1\n") == {"tf": "2.15.1",
                                                                  "tf_keras": "2.15.1"}


def test_parse_step_bench_takes_the_last_result_line():
  text = "noise\nSTEP_BENCH_RESULT {\"a\": 1}\nSTEP_BENCH_RESULT {\"a\": 2, \"b\": 3.5}\n"
  assert sides.parse_step_bench(text) == {"a": 2, "b": 3.5}
  assert sides.parse_step_bench("TRAIN ...\n") is None


def test_parse_peer_multi30k_done():
  line = ("training done: 312 steps, 5.01 min, 0.34 epochs, median tgt tok/s 2607 "
          "(src+tgt 5120)")
  assert sides.parse_peer_multi30k_done(line) == {"steps": 312, "minutes": 5.01,
                                                  "tgt_tok_s": 2607.0}
  assert sides.parse_peer_multi30k_done("step    100 |   1.00 min | tgt tok/s    2600") is None


def test_parse_trainer_progress_and_start():
  line = "step     200  loss 6.1234  lr 1.250e-03  2,457 tgt tok/s  ETA 10:02:03  input wait 0.4%"
  assert sides.parse_trainer_progress(line) == (200, 2457.0)
  assert sides.parse_trainer_progress("step     200  dev loss 5.1  ppl 160.2  acc 0.1") is None
  assert sides.is_trainer_start("training translate_ende_multi30k with 7,569,408 parameters "
                                "on 1 replica(s), XLA off, pair buckets, steps 0 -> 100000")
  assert not sides.is_trainer_start("train split: 12 of 29000 pairs are longer than max_length")


def test_window_median_drops_the_first_window():
  assert sides.window_median([100.0, 3.0, 1.0, 2.0]) == 2.0
  assert sides.window_median([100.0, 3.0]) == 3.0
  assert sides.window_median([7.0]) == 7.0  # the peer's rule: all windows when only one
  assert sides.window_median([]) is None


def test_ratio_line():
  line = report.ratio_line("train_step_tok_s", 5800.0, 4500.0, "peer", 2, 2, "tok_s")
  assert line == ("RATIO train_step_tok_s         ours 5,800 / peer 4,500 = 1.29x   "
                  "(medians of 2 alternated runs each)")
  line = report.ratio_line("decode_sent_s", 25.25, None, "ct2_int8", 2, 0, "sent_s", "x")
  assert line.endswith("ours 25.2 / ct2_int8 n/a = n/a   (medians of ours 2 / ct2_int8 0 runs; x)")


def _args(**kw):
  base = dict(budget_min=5.0, quick=False, work_dir="/nonexistent", json="/nonexistent.json",
              size="small", batch=None, hparams="", ours_hparams="", raw_dir="/raw",
              precision="float32", gpus=[])
  base.update(kw)
  return argparse.Namespace(**base)


def test_summary_takes_medians_over_rounds():
  comp = rounds.Comparison(_args())
  runs = [("step", "peer", dict(train_target_tok_s=2000.0, decode_sent_s=10.0,
                                decode_length_mean=40.0, max_rss_mib=1000.0)),
          ("step", "ours", dict(train_target_tok_s=3000.0, decode_sent_s=20.0,
                                max_rss_mib=2000.0)),
          ("step", "ct2", dict(float32_sent_s=40.0, int8_sent_s=50.0, max_rss_mib=300.0)),
          ("step", "peer", dict(train_target_tok_s=2200.0, decode_sent_s=12.0,
                                decode_length_mean=38.5, max_rss_mib=1200.0)),
          ("step", "ours", dict(train_target_tok_s=3400.0, decode_sent_s=24.0,
                                max_rss_mib=2100.0)),
          ("step", "ct2", dict(float32_sent_s=44.0, int8_sent_s=54.0, max_rss_mib=300.0)),
          ("multi30k", "peer", dict(tgt_tok_s=2600.0)),
          ("multi30k", "ours", dict(tgt_tok_s=2400.0)),
          ("multi30k", "peer", dict(tgt_tok_s=2400.0)),
          ("multi30k", "ours", dict(tgt_tok_s=2600.0))]
  comp.runs.extend(dict(part=p, side=s, **fig) for p, s, fig in runs)
  lines = comp.summary(["train", "decode", "multi30k"], with_ct2=True)
  assert lines[0].startswith("RATIO train_step_tok_s         ours 3,200 / peer 2,100 = 1.52x")
  assert lines[1].startswith("RATIO decode_sent_s            ours 22.0 / peer 11.0 = 2.00x")
  assert "the peer's mean decoded length was 38.5" in lines[1]
  assert lines[2].startswith("RATIO decode_sent_s            ours 22.0 / ct2_float32 42.0 = 0.52x")
  assert lines[3].startswith("RATIO decode_sent_s            ours 22.0 / ct2_int8 52.0 = 0.42x")
  assert lines[4].startswith("RATIO multi30k_tok_s           ours 2,500 / peer 2,500 = 1.00x")
  assert lines[5].startswith("RATIO train_step_peak_rss_mib  ours 2,050 / peer 1,100 = 1.86x")
  ratios = [l for l in lines if l.startswith("RATIO")]
  assert len(ratios) == 6 and all("(medians of 2 alternated runs each" in l for l in ratios)
  assert lines[6].startswith("MFU model 0.") and len(lines) == 9  # the model, ours, the peer
  assert comp.report["ratios"][0]["ours_runs"] == [3000.0, 3400.0]


def test_child_measures_peak_rss_with_wait4(tmp_path):
  child = sides.Child("echo", [sys.executable, "-c", "print('hello'); print('world')"],
                      str(tmp_path / "logs" / "echo.log"))
  child.drain()
  assert child.reap(timeout=60) == 0
  assert child.lines == ["hello", "world"]
  assert child.max_rss_mib > 1
  run = child.record(max_rss_mib=1.0, figure=2)
  assert run["max_rss_mib"] == child.max_rss_mib and run["child_max_rss_mib"] == 1.0
  assert run["figure"] == 2 and run["rc"] == 0
  assert (tmp_path / "logs" / "echo.log").read_text() == "hello\nworld\n"


def test_no_peer_says_so_and_exits_0(tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(sys, "argv", ["peer_compare.py", f"--peer_python={tmp_path}/nope",
                                    f"--work_dir={tmp_path}/work"])
  assert pc.main() == 0
  out = capsys.readouterr().out
  assert "peer not installed" in out and "pip install -q tf-models-official" in out
  assert not (tmp_path / "work").exists()


def test_missing_bench_scripts_fail_clearly(tmp_path, capsys, monkeypatch):
  monkeypatch.setattr(sides, "package_versions", lambda python, dists: {d: "1.0" for d in dists})
  monkeypatch.setattr(sys, "argv", ["peer_compare.py", f"--peer_python={sys.executable}",
                                    f"--ct2_python={tmp_path}/no_ct2",
                                    f"--bench_dir={tmp_path}", f"--work_dir={tmp_path}/work"])
  assert pc.main() == 2
  err = capsys.readouterr().err
  assert "model_garden_peer.py" in err and "model_garden_multi30k.py" in err
  assert "--bench_dir" in err


def test_peer_argv_sets_the_policy_before_the_unchanged_script_runs(tmp_path):
  """The wrapper sets tf_keras's global policy, then runs the script as __main__ with its
  own arguments and __file__ (a stand-in tf_keras records the call)."""
  import os
  import subprocess
  fake = tmp_path / "tf_keras"
  (fake / "mixed_precision").mkdir(parents=True)
  (fake / "__init__.py").write_text("from tf_keras import mixed_precision\n")
  (fake / "mixed_precision" / "__init__.py").write_text(
      "POLICY = ['float32']\ndef set_global_policy(name):\n  POLICY[0] = name\n")
  script = tmp_path / "peer_script.py"
  script.write_text("import os, sys, tf_keras\n"
                    "print(__name__, os.path.basename(__file__), sys.argv[1:], "
                    "tf_keras.mixed_precision.POLICY[0])\n")
  assert sides.peer_argv("py", str(script), "float32", ["--a=1"]) == ["py", str(script), "--a=1"]
  argv = sides.peer_argv(sys.executable, str(script), "mixed_bfloat16", ["--a=1", "b"])
  out = subprocess.run(argv, capture_output=True, text=True, check=True,
                       env=dict(os.environ, PYTHONPATH=str(tmp_path))).stdout
  assert out.strip() == "__main__ peer_script.py ['--a=1', 'b'] mixed_bfloat16"


def test_ours_overrides_add_the_precision():
  assert sides.ours_overrides("float32", "") == ""
  assert sides.ours_overrides("float32", "a=1") == "a=1"
  assert sides.ours_overrides("mixed_bfloat16", "") == "precision=mixed_bfloat16"
  assert sides.ours_overrides("mixed_bfloat16", "a=1") == "a=1,precision=mixed_bfloat16"
  assert sides.ours_overrides("mixed_bfloat16", "a=1,b=2", "", "c=3") == (
      "a=1,b=2,c=3,precision=mixed_bfloat16")


def test_precision_line_says_our_search_stays_float32():
  assert report.precision_line("float32") == "precision float32 on both sides"
  line = report.precision_line("mixed_bfloat16")
  assert line.startswith("precision mixed_bfloat16 on both sides, except our beam search: float32")


def test_gpu_names_reads_the_probe_and_is_empty_on_failure(tmp_path):
  fake = tmp_path / "fake_python"
  fake.write_text("#!/bin/sh\necho 'start-up noise'\necho '[\"NVIDIA H100 80GB HBM3\"]'\n")
  fake.chmod(0o755)
  assert sides.gpu_names(str(fake)) == ["NVIDIA H100 80GB HBM3"]
  broken = tmp_path / "broken_python"
  broken.write_text("#!/bin/sh\necho 'Traceback: no tensorflow' >&2\nexit 1\n")
  broken.chmod(0o755)
  assert sides.gpu_names(str(broken)) == []
  assert sides.gpu_names(str(tmp_path / "missing")) == []


@pytest.mark.parametrize("gpus,jit", [([], "0"), (["NVIDIA H100 80GB HBM3"], "1")])
def test_peer_compiles_with_xla_exactly_where_our_trainer_does(gpus, jit, monkeypatch):
  comp = rounds.Comparison(_args(gpus=gpus, quick=True, peer_python="peer-python",
                                 bench_dir="/bench", precision="float32"))
  envs = []

  class Stop(Exception):
    pass

  def first_child(label, argv, env=None):
    envs.append((label, argv, env))
    raise Stop

  monkeypatch.setattr(comp, "child", first_child)
  with pytest.raises(Stop):
    comp.step_round(1, with_ct2=False, decode=True)
  label, argv, env = envs[0]
  assert label == "peer step+beam r1" and argv[:2] == ["peer-python", "/bench/model_garden_peer.py"]
  assert env["JIT"] == jit


class _Done:
  returncode = 0

  def drain(self):
    pass

  def reap(self, timeout=None):
    return 0

  def output(self):
    return ""


def _children(comp, monkeypatch):
  """The (label, argv, env) of every child a round starts (none of them run)."""
  started = []

  def child(label, argv, env=None):
    started.append((label, argv, env))
    return _Done()

  monkeypatch.setattr(comp, "child", child)
  monkeypatch.setattr(comp, "finish", lambda *a, **k: None)
  return started


def test_base_size_builds_the_peer_from_our_hparams(monkeypatch):
  """At --size base the peer is model_garden_sized.py with the paper's transformer_base:
  post-norm, P_drop 0.1, no attention/ReLU dropout, a 37k vocabulary, [64, 64] batches;
  ours gets the same size; train only: no search on either side."""
  comp = rounds.Comparison(_args(size="base", peer_python="peer-python", bench_dir="/bench"))
  started = _children(comp, monkeypatch)
  comp.step_round(1, with_ct2=True, decode=False)
  (peer_label, peer, peer_env), (ours_label, ours, ours_env) = started
  assert peer_label == "peer step r1" and ours_label == "ours step r1"
  assert peer[:2] == ["peer-python", sides.SIZED_PEER]
  assert peer[2:] == ["--vocab=37000", "--layers=6", "--d_model=512", "--heads=8",
                      "--d_ff=2048", "--norm_first=0", "--dropout=0.1",
                      "--attention_dropout=0", "--relu_dropout=0", "--batch=64",
                      "--length=64", "--label_smoothing=0.1"]
  assert peer_env["DSTEPS"] == "0"
  assert "--size=base" in ours and "--decode_steps=0" in ours and "--hparams=" in ours
  assert len(started) == 2  # no CTranslate2 without a search


def test_both_sides_take_hparams_and_batch_and_bf16(monkeypatch):
  comp = rounds.Comparison(_args(size="big", peer_python="peer-python", bench_dir="/bench",
                                 hparams="norm_type=pre", batch=256,
                                 precision="mixed_bfloat16", ours_hparams="bucket_mode=max"))
  started = _children(comp, monkeypatch)
  comp.step_round(2, with_ct2=False, decode=True)
  (_, peer, peer_env), (_, ours, _) = started
  assert peer[:3] == ["peer-python", "-c", sides.PEER_POLICY_CODE]
  assert peer[3:5] == ["mixed_bfloat16", sides.SIZED_PEER]
  assert {"--d_model=1024", "--heads=16", "--d_ff=4096", "--norm_first=1", "--dropout=0.3",
          "--batch=256"} <= set(peer)
  assert peer_env["DSTEPS"] == "5"
  assert "--batch=256" in ours
  assert "--hparams=norm_type=pre,bucket_mode=max,precision=mixed_bfloat16" in ours


def test_gpu_peaks_and_mfu_lines():
  assert report.gpu_peak_tflops("NVIDIA H100 80GB HBM3", "mixed_bfloat16") == 989.4
  assert report.gpu_peak_tflops("NVIDIA H100 PCIe", "float32") == 378.0
  assert report.gpu_peak_tflops("NVIDIA H200", "float32") == 494.7
  assert report.gpu_peak_tflops("Tesla T4", "float32") is None
  assert report.mfu_line("ours", 176.33, 989.4, "H200 peak") == (
      "MFU ours       176.33 TFLOP/s = 17.8% of H200 peak 989.40 TFLOP/s")
  assert report.mfu_line("peer", None, 1.0, "x") == "MFU peer       n/a (x: not measured)"


def test_summary_mfu_is_model_flops_over_each_sides_step(monkeypatch):
  from flops import train_step_flops
  import bench_sizes
  comp = rounds.Comparison(_args(size="base", gpus=["NVIDIA H200"], precision="float32"))
  comp.peak_gflops = 250.0
  comp.runs.extend([dict(part="step", side="ours", train_target_tok_s=1.0,
                         train_median_step_s=2.0),
                    dict(part="step", side="peer", train_target_tok_s=1.0,
                         train_median_step_s=4.0)])
  lines = comp.summary(["train"], with_ct2=False)
  flops = train_step_flops(bench_sizes.hparams(bench_sizes.get("base")), 37000,
                           [(64, 64, 64)])
  ours = flops / 2.0 / 1e12
  assert report.mfu_line("peer", ours / 2, 494.7, "NVIDIA H200 dense float32 peak") in lines
  assert report.mfu_line("ours", ours, 494.7, "NVIDIA H200 dense float32 peak") in lines
  assert not any("measured" in line for line in lines)  # a GPU: the data sheet's peak only
  assert comp.report["mfu"]["flops_per_step"] == flops
  comp.args.gpus = []  # a CPU: the measured peak
  lines = comp.summary(["train"], with_ct2=False)
  assert report.mfu_line("ours", ours, 0.25, "measured float32 matmul peak") in lines


@pytest.mark.parametrize("argv, message", [
    (["--size=base", "--parts=multi30k"], "measures the small size's recipe only"),
    (["--hparams=norm_type=pre"], "--hparams builds the peer from the overrides"),
])
def test_size_errors(argv, message, monkeypatch, capsys):
  monkeypatch.setattr(sys, "argv", ["peer_compare.py", *argv])
  with pytest.raises(SystemExit):
    pc.main()
  assert message in capsys.readouterr().err
