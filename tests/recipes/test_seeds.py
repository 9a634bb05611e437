"""recipes/seeds.py: one run per seed, RESULT lines collected, min / median / max, failures named."""

import json
import sys

from conftest import load_benchmark

seeds = load_benchmark("seeds", folder="recipes")

# A stand-in recipe: reads T2T_SEED and T2T_RUN as run_main.sh does, prints two RESULT
# lines (accuracy = 90 + seed, loss = 1 / seed) and fails for seed 3.
RECIPE = """
import os, sys
seed = int(os.environ["T2T_SEED"])
assert os.path.isabs(os.environ["T2T_RUN"])
os.makedirs(os.environ["T2T_RUN"], exist_ok=True)
print("training...")
print(f"RESULT accuracy {90 + seed}")
print(f"RESULT loss {1 / seed}")
sys.exit(1 if seed == 3 else 0)
"""


def test_parse_results_reads_only_result_lines():
  assert seeds.parse_results(["RESULT a 1.5\n", "step 100 loss 2\n", "RESULT b x\n",
                              "RESULT a 2.5"]) == {"a": 2.5}


def test_runs_every_seed_collects_results_and_prints_the_spread(tmp_path, capsys):
  out = tmp_path / "seeds"
  code = seeds.main(["--seeds=1,2,4", f"--output_dir={out}", "--", sys.executable, "-c", RECIPE])
  assert code == 0
  assert sorted(p.name for p in out.iterdir()) == [
      "seed1", "seed1.json", "seed1.log", "seed2", "seed2.json", "seed2.log",
      "seed4", "seed4.json", "seed4.log", "seeds.md"]
  assert json.load(open(out / "seed4.json"))["results"] == {"accuracy": 94.0, "loss": 0.25}
  md = (out / "seeds.md").read_text()
  # accuracy 91, 92, 94: median 92; loss 1, 0.5, 0.25: median 0.5.
  assert "- accuracy: 91 / 92 / 94 (3 seeds)" in md
  assert "- loss: 0.25 / 0.5 / 1 (3 seeds)" in md
  assert "| 2 | 0 |" in md and "Over 3 seed(s)" in md
  # A second call reuses the finished seeds: their logs are not rewritten.
  (out / "seed1.log").write_text("kept")
  assert seeds.main(["--seeds=1", f"--output_dir={out}", "--", sys.executable, "-c", RECIPE]) == 0
  assert (out / "seed1.log").read_text() == "kept"


def test_a_failing_seed_is_named_and_the_others_still_run(tmp_path, capsys):
  out = tmp_path / "seeds"
  code = seeds.main(["--seeds=3,1", f"--output_dir={out}", "--", sys.executable, "-c", RECIPE])
  assert code == 1
  printed = capsys.readouterr().out
  assert f"FAILED: seed(s) 3 of 2 exited non-zero (logs in {out})" in printed
  assert (out / "seed1.json").exists() and not (out / "seed3.json").exists()
  assert "| 3 | 1 |" in (out / "seeds.md").read_text()


def test_bad_seeds_and_a_missing_command_are_refused(tmp_path, capsys):
  import pytest
  with pytest.raises(SystemExit):
    seeds.main(["--seeds=1,x", f"--output_dir={tmp_path}", "--", "true"])
  assert "--seeds='1,x': expected comma-separated integers" in capsys.readouterr().err
  with pytest.raises(SystemExit):
    seeds.main(["--seeds=1", f"--output_dir={tmp_path}"])
  assert "give the command after --" in capsys.readouterr().err
