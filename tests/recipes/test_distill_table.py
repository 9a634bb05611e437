"""recipes/distill_table.py: the teacher / student table's rows from two columns of figures
(recipes/distill.sh runs the rest of it; docs/recipes.md, "Distillation")."""

import json

from conftest import load_benchmark

table_script = load_benchmark("distill_table", "recipes")


def _column(run, scale):
  engines = {e: {"batch1_ms": 10.0 * scale, "sentences_per_s": 100.0 / scale,
                 "dev_sacrebleu": 30.0, "model_mib": 2.5 * scale}
             for e in table_script.ENGINES}
  return {"run": run, "decode_hparams": "beam_size=4,alpha=0.6",
          "parameters": 2343424 // scale, "macs_per_token": 1704448.0 / scale,
          "dev": {"sacrebleu": 40.0, "lc_tok_bleu": 41.0, "chrf": 65.0},
          "test": {"sacrebleu": 39.0, "lc_tok_bleu": 40.5, "chrf": 64.0}, **engines}


def test_the_table_has_a_row_per_figure_and_a_column_per_model(tmp_path):
  text = table_script.table({"teacher": _column("t", 1), "student": _column("s", 2)}, "HEAD")
  lines = text.splitlines()
  assert lines[:4] == ["HEAD", "", "| | teacher | student |", "|---|---|---|"]
  assert "| multiply-adds per output token | 1,704,448 | 852,224 |" in lines
  assert "| parameters | 2,343,424 | 1,171,712 |" in lines
  assert "| test: sacreBLEU / lc tok BLEU / chrF | 39.00 / 40.50 / 64.00 | 39.00 / 40.50 / 64.00 |" in lines
  assert ("| CTranslate2 int8: batch-1 ms (median) / sentences/s / dev sacreBLEU | "
          "10.0 / 100.0 / 30.00 | 20.0 / 50.0 / 30.00 |") in lines
  assert "| LiteRT int8 model file, MiB | 2.50 | 5.00 |" in lines
  assert not any("t2t-keras float32 model file" in line for line in lines)
  assert len(lines) == 4 + 4 + 2 + 3 + 2
  # The decoding a run was chosen with, else beam 4, alpha 0.6.
  assert table_script.decoding(str(tmp_path)) == "beam_size=4,alpha=0.6"
  (tmp_path / "selection.json").write_text(json.dumps({"decode_hparams": "beam_size=6"}))
  assert table_script.decoding(str(tmp_path)) == "beam_size=6"


def test_each_measurement_follows_a_warm_up_of_its_own_shape():
  """speed(): a pass in batches, then the latency inputs one at a time, both unmeasured;
  then the measured batch-1 calls, then the measured batches."""
  calls = []

  def translate(lines):
    calls.append(len(lines))
    return [line.upper() for line in lines]

  sources = [f"s{i}" for i in range(7)]
  outputs, rate, latency = table_script.speed(translate, sources, latency_inputs=3, batch=4)
  assert calls == [4, 3] + [1, 1, 1] + [1, 1, 1] + [4, 3]
  assert outputs == [s.upper() for s in sources] and rate > 0 and latency >= 0
