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
  assert lines[4 + 4 + 2 + 3 + 2:] == [  # the rows, then the comparisons
      "", "* test sacreBLEU, student minus teacher: +0.00",
      "* multiply-adds per output token: 50% of the teacher's",
      "* LiteRT int8: the student's file is 200% of the teacher's; the teacher's batch-1 "
      "latency is 0.50x the student's"]
  # The decoding a run was chosen with, else beam 4, alpha 0.6.
  assert table_script.decoding(str(tmp_path)) == "beam_size=4,alpha=0.6"
  (tmp_path / "selection.json").write_text(json.dumps({"decode_hparams": "beam_size=6"}))
  assert table_script.decoding(str(tmp_path)) == "beam_size=6"


def test_the_reference_trained_student_is_a_third_column_and_the_gain_is_computed():
  """Its quality and cost beside the others, "(not measured)" where an engine's figures
  would be (it is not exported); the comparisons by hand: 38.20 - 39.00, 38.20 - 36.90,
  632,960 / 1,704,448, 1.0 / 2.5 MiB and 10.0 / 4.0 ms."""
  teacher, student, reference = _column("t", 1), _column("s", 1), _column("r", 1)
  student.update(macs_per_token=632960.0, test=dict(student["test"], sacrebleu=38.2))
  student["LiteRT int8"] = dict(student["LiteRT int8"], model_mib=1.0, batch1_ms=4.0)
  reference["test"] = dict(reference["test"], sacrebleu=36.9)
  for engine in table_script.ENGINES:
    del reference[engine]
  lines = table_script.table({"teacher": teacher, "student": student,
                              "reference_student": reference}, "HEAD").splitlines()
  assert lines[2:4] == ["| | teacher | student | the student on the references |",
                        "|---|---|---|---|"]
  assert ("| test: sacreBLEU / lc tok BLEU / chrF | 39.00 / 40.50 / 64.00 | "
          "38.20 / 40.50 / 64.00 | 36.90 / 40.50 / 64.00 |") in lines
  assert "| LiteRT int8 model file, MiB | 2.50 | 1.00 | (not measured) |" in lines
  assert sum("(not measured)" in line for line in lines) == 5  # each engine's rows
  assert lines[-5:] == ["",
      "* test sacreBLEU, student minus teacher: -0.80",
      "* test sacreBLEU, student minus the same student on the references: +1.30 (what "
      "distillation gained)",
      "* multiply-adds per output token: 37% of the teacher's",
      "* LiteRT int8: the student's file is 40% of the teacher's; the teacher's batch-1 "
      "latency is 2.50x the student's"]


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
