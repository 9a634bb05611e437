"""The main job: its default recipe learns on more than one seed, and its check fails loudly.

A post-norm transformer_tiny at learning-rate constant 2.0 climbed from a loss of 1.08 to 1.76
between steps 200 and 500 and ended at 0% exact match on some CPUs; this test trains the
registered default, as `run_main.sh` does, for STEPS steps and requires it to learn (dev token
accuracy above ACCURACY) with no climb of the windowed training loss after warmup (the
trainer's warning, `training/loss_guard.py`). Seed 1 runs by default; seed 2 in the slow tier
(T2T_SLOW_TESTS=1), where the two train side by side.
"""

import json
import os
import subprocess
import sys

import pytest

from conftest import load_benchmark, make_tiny_run
from t2t_keras import registry
from t2t_keras.data import datagen

# The full suite only (T2T_QUICK=1 leaves it out): see conftest.py.
pytestmark = pytest.mark.heavy

# One full loss window (100 steps) after the 400 warmup steps. Dev token accuracy at about
# this step: 0.9919 and 0.9961 (seeds 1, 2; Intel Xeon family 6 model 85, 2026-11-26),
# 0.996 (seed 1, run_main.sh's learning curve at step 500; AMD EPYC Zen 4, 2026-11-25);
# the post-norm default above stood at 0.73 at step 500.
STEPS = 501
ACCURACY = 0.95


ROOT = os.path.join(os.path.dirname(__file__), "..", "..")
numbers_ranges = load_benchmark("numbers_ranges", folder="recipes")


@pytest.fixture(scope="module")
def numbers_data(tmp_path_factory):
  data_dir = str(tmp_path_factory.mktemp("numbers"))
  datagen.generate("translate_ende_numbers", data_dir, log=None)
  return data_dir


SEEDS = (1, 2) if os.environ.get("T2T_SLOW_TESTS") == "1" else (1,)

# One seed's training in its own process with one TensorFlow thread, so the seeds train side
# by side on a 2-core machine (together about 0.6x the time of one after the other). Prints
# one RESULT line: the dev token accuracy at STEPS and every warning the trainer logged.
_TRAIN_ONE_SEED = """
import json, sys
import tensorflow as tf
tf.config.threading.set_intra_op_parallelism_threads(1)
tf.config.threading.set_inter_op_parallelism_threads(1)
import t2t_keras
data_dir, run_dir, steps, seed = sys.argv[1], sys.argv[2], int(sys.argv[3]), int(sys.argv[4])
lines = []
result = t2t_keras.train(output_dir=run_dir, data_dir=data_dir, train_steps=steps, seed=seed,
                         use_xla=False, save_every=steps, eval_every=steps, eval_steps=20,
                         eval_bleu_sentences=0, log=lines.append)
assert (result.step, result.start_step) == (steps, 0), result
print("RESULT " + json.dumps({"accuracy": result.dev["dev_accuracy"],
                              "warnings": [l for l in lines if l.startswith("warning")]}))
"""


def test_default_recipe_learns_without_a_loss_climb(numbers_data, tmp_path):
  hp = registry.hparams("transformer_tiny")
  assert STEPS > hp.learning_rate_warmup_steps + 100  # the guard sees a full window after warmup
  env = dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3")
  procs = {seed: subprocess.Popen(
      [sys.executable, "-c", _TRAIN_ONE_SEED, numbers_data, str(tmp_path / f"seed{seed}"),
       str(STEPS), str(seed)], stdout=subprocess.PIPE, stderr=subprocess.STDOUT, text=True,
      env=env) for seed in SEEDS}
  outputs = {seed: proc.communicate(timeout=1200)[0] for seed, proc in procs.items()}
  for seed, out in outputs.items():
    assert procs[seed].returncode == 0, out[-3000:]
    result = json.loads(out.split("RESULT ", 1)[1])
    print(f"seed {seed}: dev token accuracy {result['accuracy']:.4f} at step {STEPS} "
          f"(bound {ACCURACY}), {len(result['warnings'])} warnings")
    assert result["warnings"] == [], (seed, result)
    assert result["accuracy"] > ACCURACY, (seed, result)


@pytest.fixture(scope="module")
def split_references():
  from t2t_keras.decoding import files
  return files.split_pairs("translate_ende_numbers", split="test")[1]


def test_score_test_split_counts_exact_lines(tmp_path, split_references):
  path = tmp_path / "test.de"
  hyps = list(split_references)
  hyps[:3] = ["falsch"] * 3  # 3 of 500 wrong
  path.write_text("\n".join(hyps) + "\n", encoding="utf-8")
  assert numbers_ranges.score_test_split(str(path)) == (100.0 * 497 / 500, 497, 500)
  path.write_text("\n".join(split_references[:10]) + "\n", encoding="utf-8")
  with pytest.raises(SystemExit, match=r"test.de: 10 lines, but the test split of "
                                       r"translate_ende_numbers has 500 pairs"):
    numbers_ranges.score_test_split(str(path))


def test_a_model_that_did_not_learn_fails_the_main_job_in_one_line(tmp_path,
                                                                   split_references):
  """run_main.sh's check step on an untrained model: exit 1 and one FAILED line naming
  every figure."""
  (tmp_path / "run").mkdir()
  run = make_tiny_run(tmp_path / "run", num_encoder_layers=1, num_decoder_layers=1)
  translations = tmp_path / "decode_test.de"
  translations.write_text("eins\n" * len(split_references), encoding="utf-8")
  proc = subprocess.run(
      [sys.executable, os.path.join(ROOT, "recipes", "numbers_ranges.py"), str(run),
       f"--test_translations={translations}", "--per_range=4"],
      capture_output=True, text=True, timeout=300)
  assert proc.returncode == 1, proc.stdout + proc.stderr
  assert "RESULT test_exact_match 0.0" in proc.stdout
  last = proc.stderr.strip().splitlines()[-1]
  assert last.startswith("FAILED: the model did not learn translate_ende_numbers: "
                         "test_exact_match 0.0%, range_0-99 "), last
  assert last.endswith(f"< 90% exact match ({run})")
  assert "PASSED" not in proc.stdout
