"""t2t-sweep: rows, resume, the result tables and the paper's findings; Table 3 at CPU scale."""

import csv
import json
import math
import os
import re
import signal
import subprocess
import sys
import time

import pytest
import tensorflow as tf

from t2t_keras import bin as t2t_bin
from t2t_keras import registry
from t2t_keras.bin import sweep as sweep_bin
from t2t_keras.data import datagen
from t2t_keras.errors import InputError
from t2t_keras.hparams import table3_cpu
from t2t_keras.hparams.transformer import TABLE3
from t2t_keras.tuning import sweep, sweep_report

PROBLEM = "algorithmic_copy"
PROBLEM_ARGS = dict(num_train=200, num_dev=12, num_test=12, max_length=5, num_symbols=5)
TINY = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "batch_size=128,max_length=8")


# Rows.

def test_parse_row():
  assert sweep.parse_row("transformer_tiny") == sweep.Row("transformer_tiny", "", 1)
  row = sweep.parse_row("transformer_tiny  relu_dropout=0.1,label_smoothing=0 seed=3")
  assert row == sweep.Row("transformer_tiny", "relu_dropout=0.1,label_smoothing=0", 3)
  assert row.id == "transformer_tiny-relu_dropout=0.1_label_smoothing=0-seed3"


@pytest.mark.parametrize("spec,expected", [
    ("", "expected 'HPARAMS_SET [key=value,...]'"),
    ("seed=2", "expected 'HPARAMS_SET [key=value,...]'"),
    ("transformer_tiny dropout", "'dropout' is not key=value"),
    ("transformer_tiny seed=two", "seed='two' is not an integer"),
])
def test_bad_rows_are_named(spec, expected):
  with pytest.raises(InputError, match=re.escape(expected)):
    sweep.parse_row(spec)


def test_rows_file_names_file_and_line(tmp_path):
  path = tmp_path / "rows.txt"
  path.write_text("# comment\ntransformer_tiny\n\ntransformer_tiny seed=2  # again\nbad row\n")
  with pytest.raises(InputError, match=r"rows.txt, line 5: .*'row' is not key=value"):
    sweep.read_rows_file(str(path))
  path.write_text("transformer_tiny\ntransformer_tiny seed=2  # again\n")
  assert [r.id for r in sweep.read_rows_file(str(path))] == [
      "transformer_tiny", "transformer_tiny-seed2"]


def test_check_rows_refuses_before_anything_runs():
  with pytest.raises(Exception, match="transformer_tiny"):  # unknown set: the known ones listed
    sweep.check_rows([sweep.parse_row("transformer_tinny")])
  with pytest.raises(Exception, match="hidden_sise"):
    sweep.check_rows([sweep.parse_row("transformer_tiny hidden_sise=8")])
  with pytest.raises(InputError, match="listed twice"):
    sweep.check_rows([sweep.parse_row("transformer_tiny")] * 2)
  with pytest.raises(InputError, match="no sweep rows"):
    sweep.check_rows([])


def test_training_minutes_counts_pauses_as_one_gap(tmp_path):
  times = [1000, 1060, 1120, 1180, 1180 + 3600, 1180 + 3660]  # a 1-hour pause, resumed
  with open(tmp_path / "metrics.jsonl", "w") as f:
    for i, t in enumerate(times):
      f.write(json.dumps({"step": 100 * (i + 1), "loss": 1.0, "time": t}) + "\n")
  assert sweep.training_minutes(str(tmp_path)) == pytest.approx(5.0)
  assert sweep.training_minutes(str(tmp_path / "none")) == 0.0


# A whole sweep: two rows, resume, skip.

@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("sweep_data"))
  datagen.generate(PROBLEM, path, log=None, **PROBLEM_ARGS)
  return path


def test_t2t_sweep_binary_refuses_a_bad_row_in_one_line(capsys, tmp_path):
  capsys.readouterr()
  code = t2t_bin.run_in_process(sweep_bin, [
      "t2t-sweep", f"--problem={PROBLEM}", f"--data_dir={tmp_path}", f"--output_dir={tmp_path}/s",
      "--train_steps=4", "--row=transformer_tiny", "--row=transformer_tiny hidden_size=x"])
  err = capsys.readouterr().err
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 1 and len(lines) == 1 and lines[0].startswith("t2t-sweep: error: "), err
  assert "hidden_size" in lines[0]
  assert not os.path.exists(tmp_path / "s")


@pytest.mark.heavy
def test_a_row_whose_trainer_refuses_its_input_is_named(tmp_path):
  with pytest.raises(InputError, match=r"sweep row transformer_tiny: train: .*no_data"):
    sweep.run_sweep([sweep.parse_row("transformer_tiny")], problem=PROBLEM,
                    data_dir=str(tmp_path / "no_data"), output_dir=str(tmp_path / "s"),
                    train_steps=2, hparams=TINY, log=lambda *a: None)


def test_trainer_flags_become_typed_keywords_and_unknown_ones_are_refused():
  assert sweep.parse_trainer_flags(["--save_every=400", "use_xla=false", "--model=transformer",
                                    "--save_every_minutes=2.5"]) == {
      "save_every": 400, "use_xla": False, "model_name": "transformer", "save_every_minutes": 2.5}
  with pytest.raises(InputError, match=r"'--save_evry=4'.*--save_every, "):
    sweep.parse_trainer_flags(["--save_evry=4"])
  with pytest.raises(InputError, match=r"--save_every=<int>"):
    sweep.parse_trainer_flags(["--save_every=many"])
  with pytest.raises(InputError, match=r"--use_xla=<bool>"):
    sweep.parse_trainer_flags(["--use_xla=maybe"])


# The report: the paper's figures, the seed spread, the findings.

def _result(hparams_set, bleu, ppl, seed=1):
  return {"row": f"{hparams_set}-{seed}", "hparams_set": hparams_set, "overrides": "",
          "seed": seed, "params": 2_000_000, "steps": 100, "minutes": 1.0,
          "dev_perplexity": ppl, "dev_bleu": bleu, "dev_tok_bleu": bleu}


def test_findings_against_the_base_seed_spread(tmp_path):
  results = [
      _result("transformer_table3_cpu", 30.0, 5.0), _result("transformer_table3_cpu", 30.4, 5.2, 2),
      _result("transformer_table3_cpu_a1", 29.0, 5.6),   # worse by more than the spread
      _result("transformer_table3_cpu_a4", 30.3, 5.1),   # within noise
      _result("transformer_table3_cpu_d1", 31.0, 4.0),   # better: the finding does not hold
      _result("transformer_table3_cpu_d3", 29.5, 4.8),   # lower ppl, lower BLEU: both hold
      _result("transformer_table3_cpu_e", 30.1, 5.1),
  ]
  got = {f: (v, d) for f, v, d in sweep_report.verdicts(results)}
  assert got["one head is worse (A1)"][0] == "reproduced"
  assert got["one head is worse (A1)"][1] == "A1 BLEU -1.20 (yes); A1 ppl +0.50 (yes)"
  assert got["too many heads are worse (A4, 32 heads)"][0] == "within noise"
  assert got["dropout helps (D1: none is worse)"][0] == "not reproduced"
  assert got["label smoothing hurts perplexity (D3: none is lower)"][0] == "reproduced"
  assert got["label smoothing helps BLEU (D3: none is worse)"][0] == "reproduced"
  assert got["smaller d_k hurts (B1, B2)"][0] == "not measured"
  assert got["learned and sinusoidal positions are nearly identical (E)"][0] == "reproduced"
  md = sweep_report.format_markdown(results, pending=["transformer_table3_cpu_c5"])
  assert "Base over 2 seeds: dev BLEU 30.20 (spread 0.40), perplexity 5.10 (spread 0.20)" in md
  assert "| transformer_table3_cpu_a1-1 | A1 | 2.00M | 100 | 1.0 | 5.60 | 5.29 | 29.00 | 24.9 |" in md
  assert "| transformer_table3_cpu_c5 | | | | | pending |" in md
  sweep_report.write_tables(str(tmp_path), results)
  assert open(tmp_path / "results.png", "rb").read(8) == b"\x89PNG\r\n\x1a\n"


def test_a_row_with_overrides_is_not_the_paper_row():
  r = dict(_result("transformer_table3_cpu_a1", 29.0, 5.6), overrides="label_smoothing=0")
  assert sweep_report.with_paper(r)["paper_row"] is None


# Table 3 at CPU scale.

def test_cpu_rows_scale_the_paper_rows_in_proportion():
  rows = table3_cpu.CPU_ROWS
  assert set(rows) == set(TABLE3) and len(rows) == 18
  assert rows["a1"] == dict(num_heads=1, attention_key_channels=256, attention_value_channels=256)
  assert rows["a4"] == dict(num_heads=32, attention_key_channels=8, attention_value_channels=8)
  for row in ("a1", "a2", "a3", "a4"):  # h x d_k constant: the base's 8 x 32
    assert rows[row]["num_heads"] * rows[row]["attention_key_channels"] == 256
  assert rows["b1"] == dict(attention_key_channels=8)
  assert [rows[r]["num_encoder_layers"] for r in ("c1", "c2", "c3")] == [1, 2, 4]
  assert rows["c5"] == dict(hidden_size=512, attention_key_channels=64,
                            attention_value_channels=64)
  assert rows["c6"] == dict(filter_size=512) and rows["c7"] == dict(filter_size=2048)
  assert rows["d4"] == dict(label_smoothing=0.2) and rows["e"] == dict(pos="emb")
  base = registry.hparams("transformer_table3_cpu")
  assert (base.num_encoder_layers, base.hidden_size, base.filter_size, base.num_heads,
          base.norm_type) == (3, 256, 1024, 8, "post")
  assert registry.hparams("transformer_table3_cpu_c5").hidden_size == 512
  assert registry.hparams("transformer_table3_cpu_c5").num_encoder_layers == 3


@pytest.mark.parametrize("name,row", [
    ("transformer_table3_cpu", "base"), ("transformer_base", "base"),
    ("transformer_table3_cpu_a1", "a1"), ("transformer_table3_c5", "c5"),
    ("transformer_table3_cpu_e", "e"), ("transformer_tiny", None)])
def test_paper_row(name, row):
  assert table3_cpu.paper_row(name) == row


@pytest.mark.parametrize("signum", [signal.SIGTERM, signal.SIGINT])
def test_signals_to_the_sweep_reach_its_running_trial(signum):
  """A trial runs in its own session (a terminal's Ctrl-C does not reach it), so the sweep
  passes SIGTERM / SIGINT on: the child gets the signal, the sweep records it, and the
  sweep's own handlers are back afterwards."""
  child = ("import signal, sys, time\n"
           "def handler(s, f):\n"
           "  print('child got', s, flush=True)\n"
           "  sys.exit(3)\n"
           "signal.signal(signal.SIGTERM, handler)\n"
           "signal.signal(signal.SIGINT, handler)\n"
           "print('ready', flush=True)\n"
           "time.sleep(60)\n")
  before = signal.getsignal(signum)

  def log(line):
    if line.strip() == "ready":
      os.kill(os.getpid(), signum)

  with sweep._Forward() as forward:  # pylint: disable=protected-access
    rc, output = forward.run([sys.executable, "-c", child], log)
  assert forward.received == signum
  assert (rc, output.splitlines()) == (3, ["ready", f"child got {int(signum)}"])
  assert signal.getsignal(signum) is before


def _children(pid):
  """The pids whose parent is `pid` (Linux: /proc)."""
  found = []
  for entry in os.listdir("/proc"):
    if entry.isdigit():
      try:
        with open(f"/proc/{entry}/stat") as f:
          stat = f.read()
      except OSError:
        continue
      if int(stat.rsplit(")", 1)[1].split()[1]) == pid:
        found.append(int(entry))
  return found


def _gone(pid, timeout_s):
  deadline = time.time() + timeout_s
  while time.time() < deadline:
    try:
      with open(f"/proc/{pid}/stat") as f:
        if f.read().rsplit(")", 1)[1].split()[0] == "Z":  # a zombie: exited
          return True
    except OSError:
      return True
    time.sleep(0.1)
  return False


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_sweep_stops_its_trainer_and_runs_again(data_dir, tmp_path):
  """SIGKILL to t2t-sweep (no handler runs): its running row's trainer, a child process,
  is told by the kernel (PR_SET_PDEATHSIG: SIGTERM), saves and exits, instead of training
  on unseen (it saves and prints nothing for 100,000 steps here) beside the next sweep's
  trainer of the same row; the same command then resumes the row from the checkpoint that
  SIGTERM saved, trains and evaluates both rows, and writes their tables; run again, it
  retrains nothing."""
  out = tmp_path / "sweep"
  args = [sys.executable, "-m", "t2t_keras.bin.sweep", f"--problem={PROBLEM}",
          f"--data_dir={data_dir}", f"--output_dir={out}", f"--hparams={TINY}",
          "--row=transformer_tiny", "--row=transformer_tiny seed=2",
          "--trainer_flag=--save_every=100000", "--trainer_flag=--eval_every=0",
          "--trainer_flag=--eval_bleu_sentences=0", "--trainer_flag=--log_every=100000",
          "--trainer_flag=--use_xla=false", "--decode_hparams=beam_size=1,jit=false"]
  proc = subprocess.Popen([*args, "--train_steps=100000"], stdout=subprocess.DEVNULL,
                          stderr=subprocess.DEVNULL,
                          env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  row = out / "transformer_tiny"
  try:
    deadline = time.time() + 180
    while not (row / "train").exists():  # TensorBoard's directory: the trainer is training
      assert proc.poll() is None and time.time() < deadline, "the row never started"
      time.sleep(0.1)
    trainer, = _children(proc.pid)
    proc.kill()
    proc.wait()
    assert _gone(trainer, 60), "the killed sweep's trainer trains on"
  finally:
    proc.kill()
    for pid in _children(proc.pid) + ([trainer] if "trainer" in locals() else []):
      if not _gone(pid, 0):
        os.kill(pid, signal.SIGKILL)
  saved = int(tf.train.latest_checkpoint(str(row)).rsplit("-", 1)[1])
  result = subprocess.run([*args, f"--train_steps={saved + 2}"], capture_output=True,
                          text=True, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"),
                          check=False)
  assert result.returncode == 0, result.stdout + result.stderr
  assert f"resumed from {row}/ckpt-{saved} at step {saved}" in result.stdout, result.stdout
  rows = [sweep.parse_row("transformer_tiny"), sweep.parse_row("transformer_tiny seed=2")]
  with open(out / "results.csv") as f:
    table = list(csv.DictReader(f))
  assert [t["row"] for t in table] == [r.id for r in rows] == ["transformer_tiny",
                                                               "transformer_tiny-seed2"]
  assert "| transformer_tiny-seed2 |" in (out / "results.md").read_text()

  # The same sweep again, in this process: nothing is retrained; the rows' results.
  lines = []
  results = sweep.run_sweep(rows, problem=PROBLEM, data_dir=data_dir, output_dir=str(out),
                            train_steps=saved + 2, hparams=TINY, log=lines.append)
  assert sum(f"done earlier (step {saved + 2}), skipped" in line for line in lines) == 2
  assert [r["row"] for r in results] == [t["row"] for t in table]
  for r, t in zip(results, table):
    assert r["steps"] == saved + 2 and r["seed"] in (1, 2) and r["dev_sentences"] == 12
    assert math.isfinite(r["dev_perplexity"]) and r["dev_perplexity"] > 1.0
    assert math.isclose(r["dev_perplexity"], math.exp(r["dev_loss"]), rel_tol=1e-9)
    assert float(t["dev_perplexity"]) == pytest.approx(r["dev_perplexity"])
    assert 0.0 <= r["dev_bleu"] <= 100.0 and r["params"] > 0
    assert r["checkpoint"].endswith(f"ckpt-{saved + 2}")
  assert results[0]["dev_loss"] != results[1]["dev_loss"]  # different seeds, different models
