"""t2t_keras/distill: the refusals that come before any model is loaded (line counts, the
vocabulary a student can share, a work directory of other outputs) and the splits' raw
directory."""

import json

import pytest

from t2t_keras import registry, runs
from t2t_keras.data import marian_vocab
from t2t_keras.distill import distilled_data, teacher
from t2t_keras.distill.__main__ import main as distill_main
from t2t_keras.distill.progress import STATE_FILE, Progress
from t2t_keras.errors import InputError


@pytest.mark.parametrize("piece_lines, max_lines, message", [
    (0, None, r"^piece_lines=0: expected a whole number of lines, at least 1$"),
    (-3, None, r"^piece_lines=-3: expected"),
    (500, 0, r"^max_lines=0: expected a whole number of lines, at least 1 \(or none: every "
             r"line\)$"),
    (500, -1, r"^max_lines=-1: expected"),
])
def test_translate_refuses_line_counts_below_one(tmp_path, piece_lines, max_lines, message):
  """Refused before the teacher is looked at (a piece of 0 lines would loop for ever)."""
  with pytest.raises(InputError, match=message):
    teacher.translate_file(str(tmp_path / "no_teacher"), str(tmp_path / "no_input"),
                           str(tmp_path / "w"), piece_lines=piece_lines, max_lines=max_lines,
                           log=None)
  assert not (tmp_path / "w").exists()


@pytest.mark.parametrize("flag", ["--piece_lines=0", "--max_lines=0", "--max_lines=-2",
                                  "--piece_lines=x"])
def test_the_translate_step_refuses_line_counts_below_one(tmp_path, capsys, flag):
  with pytest.raises(SystemExit) as stop:
    distill_main(["translate", "--teacher=T", f"--input={tmp_path / 'in'}",
                  f"--work_dir={tmp_path / 'w'}", flag])
  assert stop.value.code == 2
  assert "expected a whole number of lines, at least 1" in capsys.readouterr().err


def test_splits_refuse_max_lines_below_one_and_pass_raw_dir_where_a_problem_reads_one(tmp_path):
  with pytest.raises(InputError, match=r"^max_lines=0: expected a whole number of pairs"):
    distilled_data.write_splits("translate_ende_numbers", str(tmp_path), max_lines=0, log=None)
  # A generated problem reads no raw files: the recipe's default RAW_DIR is not passed to it.
  paths = distilled_data.write_splits(
      "translate_ende_numbers", str(tmp_path / "n"), raw_dir=str(tmp_path / "none"),
      max_lines=3, problem_kwargs=dict(num_train=8, num_dev=2, num_test=2), log=None)
  assert len(open(paths["train"][0], encoding="utf-8").read().splitlines()) == 3
  assert distilled_data._takes_raw_dir("translate_ende_multi30k")  # pylint: disable=protected-access
  assert not distilled_data._takes_raw_dir("translate_ende_numbers")  # pylint: disable=protected-access


def _run_with_vocabulary(out, name, data):
  """A run directory whose vocabulary copy is `data` (bytes), as `name`."""
  out.mkdir()
  (out / name).write_bytes(data)
  runs.save_run_info(str(out), registry.hparams("transformer_tiny"), "translate_ende_numbers",
                     60, str(out / name))
  return str(out)


@pytest.mark.parametrize("kind, data", [
    ("a tensor2tensor .subwords vocabulary", b"'<pad>'\n'<EOS>'\n'a_'\n"),
    ("a Marian pair", None),
])
def test_only_one_sentencepiece_model_is_shared(tmp_path, kind, data):
  if data is None:
    marian_vocab.write_archive(str(tmp_path / "pair"), b"s", b"t", b"</s>: 0\n")
    data = (tmp_path / "pair").read_bytes()
  run_dir = _run_with_vocabulary(tmp_path / "run", "vocab.in", data)
  pair = (str(tmp_path / "s"), str(tmp_path / "t"))
  with pytest.raises(InputError, match=rf"vocab.model is {kind}.*: the student can share only "
                                       r"one sentencepiece model; train its own \(VOCAB=own"):
    distilled_data.generate(str(tmp_path / "data"), train=pair, dev=pair, test=pair,
                            vocab_from=run_dir, log=None)
  assert not (tmp_path / "data").exists()


def test_a_work_directory_of_other_outputs_is_refused(tmp_path):
  (tmp_path / STATE_FILE).write_text(json.dumps(
      {"key": {}, "lines_done": 3, "complete": False,
       "bytes": {"translations": 0, "scores": 0}}))
  with pytest.raises(InputError, match=r"records no truncated \(an older version wrote it\): "
                                       r"start again in a new work directory"):
    Progress.open(str(tmp_path), teacher.OUTPUTS, {})
  (tmp_path / STATE_FILE).write_text(json.dumps(
      {"key": {}, "lines_done": 3, "complete": True,
       "bytes": {"translations": 0, "scores": 0}}))
  with pytest.raises(InputError, match=r"has no truncated.txt \(an older version wrote it\)"):
    teacher.finished_outputs(str(tmp_path))
