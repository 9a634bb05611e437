"""t2t_keras/distill: a teacher's translations and length-normalised scores of a file, written
piece by piece; a run cut short goes on with no line lost or doubled; a changed teacher or
input is refused in one line; the chain on the numbers problem, teacher to student."""

import json
import shutil

import numpy as np
import pytest
import tensorflow as tf

import t2t_keras
from conftest import make_tiny_run
from t2t_keras import runs
from t2t_keras.distill import distilled_data, filtering, teacher
from t2t_keras.distill.__main__ import main as distill_main
from t2t_keras.distill.progress import STATE_FILE
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID

# The full suite only (T2T_QUICK=1 leaves it out): a teacher's search traced, a student trained.
pytestmark = pytest.mark.heavy

DECODE = "beam_size=2,extra_length=8,jit=false"
PIECE = 3  # lines per piece: three pieces of one shape


class Stop(Exception):
  """Raised after a piece, as a kill would stop the run there."""


def _stop_after(k):
  def after_piece(pieces):
    if pieces == k:
      raise Stop
  return after_piece


def _translate(run_dir, source, work, **kwargs):
  return teacher.translate_file(run_dir, str(source), str(work), decode_hparams=DECODE,
                                piece_lines=PIECE, log=None, **kwargs)


@pytest.fixture(scope="module")
def splits(tmp_path_factory):
  """{split: (source, target)} files of the numbers problem (8 train pairs, 4 dev, 4 test),
  train's sources with an empty line put in third."""
  base = tmp_path_factory.mktemp("numbers")
  paths = distilled_data.write_splits("translate_ende_numbers", str(base), log=None,
                                      problem_kwargs=dict(num_train=8, num_dev=4, num_test=4))
  lines = open(paths["train"][0], encoding="utf-8").read().splitlines()
  with open(paths["train"][0], "w", encoding="utf-8") as f:
    f.write("".join(f"{line}\n" for line in lines[:2] + [""] + lines[2:]))
  return paths


@pytest.fixture(scope="module")
def reference(tmp_path_factory, splits):
  """(teacher run, input file, the uninterrupted run's work directory): a random tiny run
  (conftest.make_tiny_run) translating the 9 train sources in 3 pieces."""
  base = tmp_path_factory.mktemp("teacher")
  (base / "run").mkdir()
  run_dir = make_tiny_run(base / "run", max_length=24)
  summary = _translate(run_dir, splits["train"][0], base / "work")
  assert (summary["lines"], summary["resumed_from"]) == (9, 0)
  return run_dir, splits["train"][0], base / "work"


def _outputs(work):
  return [(work / f"{name}.txt").read_text(encoding="utf-8") for name in teacher.OUTPUTS]


def test_the_scores_are_each_outputs_mean_log_probability_per_piece(reference):
  """scores.txt against a hand computation: the model's log-softmax at each target piece
  and at EOS, summed and divided by their number."""
  run_dir, source, work = reference
  lines = open(source, encoding="utf-8").read().splitlines()
  translations, scores, truncated = (text.splitlines() for text in _outputs(work))
  assert len(translations) == len(scores) == len(lines) == 9
  # The last source is 26 ids long: cut at the input limit (24), marked, scored whole.
  assert truncated == ["0"] * 8 + ["1"]
  run = runs.load(run_dir)
  inputs = [run.vocab.encode(line) + [EOS_ID] for line in lines]
  targets = [run.vocab.encode(output) + [EOS_ID] for output in translations]
  pad = lambda rows: tf.ragged.constant(rows).to_tensor()  # noqa: E731
  logits = run.model({"inputs": pad(inputs), "targets": pad(targets)},
                     training=False).numpy().astype(np.float64)
  top = logits.max(-1, keepdims=True)
  log_probs = logits - top - np.log(np.exp(logits - top).sum(-1, keepdims=True))
  for row, (ids, score) in enumerate(zip(targets, scores)):
    by_hand = sum(log_probs[row, i, t] for i, t in enumerate(ids)) / len(ids)
    assert float(score) == pytest.approx(by_hand, abs=2e-5), (lines[row], translations[row])
  assert translations[2] == ""  # an empty line: an empty output, EOS alone scored


def test_a_run_cut_short_resumes_with_no_line_lost_or_doubled(reference, tmp_path):
  """Stopped after its first piece, then the next piece's lines appended without their
  record (a kill between the two writes): the resumed run cuts them off and ends with the
  uninterrupted run's files, byte for byte."""
  run_dir, source, work = reference
  with pytest.raises(Stop):
    _translate(run_dir, source, tmp_path / "w", after_piece=_stop_after(1))
  assert (tmp_path / "w" / "translations.txt.partial").read_text().count("\n") == PIECE
  with pytest.raises(InputError, match=r"not finished \(3 lines done\): run the translate"):
    teacher.finished_outputs(str(tmp_path / "w"))
  for name, torn in (("translations", "half a pie"), ("scores", "-1.2")):
    with open(tmp_path / "w" / f"{name}.txt.partial", "a", encoding="utf-8") as f:
      f.write(f"{torn}\nline\n")
  summary = _translate(run_dir, source, tmp_path / "w")
  assert (summary["lines"], summary["resumed_from"]) == (9, PIECE)
  assert _outputs(tmp_path / "w") == _outputs(work)
  assert sorted(p.name for p in (tmp_path / "w").iterdir()) == [
      "scores.txt", STATE_FILE, "translations.txt", "truncated.txt"]
  assert _translate(run_dir, source, tmp_path / "w")["resumed_from"] == 9  # done


def test_a_changed_teacher_or_input_is_refused_in_one_line(reference, tmp_path, capsys):
  run_dir, source, _ = reference
  moved = shutil.copytree(run_dir, tmp_path / "moved")  # moved whole: the same teacher
  copy = shutil.copy(source, tmp_path / "train.en")
  with pytest.raises(Stop):
    _translate(str(moved), copy, tmp_path / "w", after_piece=_stop_after(1))
  shutil.copy(moved / "ckpt-7.index", moved / "ckpt-9.index")  # the teacher trained on
  for data in moved.glob("ckpt-7.data-*"):
    shutil.copy(data, moved / data.name.replace("ckpt-7", "ckpt-9"))
  runs.write_checkpoint_index(str(moved / "ckpt-7"), str(moved / "ckpt-9"))
  with pytest.raises(InputError, match=r"started with another teacher \(.*moved: checkpoint "
                                       r"ckpt-7 -> ckpt-9\): give that teacher, or start"):
    _translate(str(moved), copy, tmp_path / "w")
  # The same with its checkpoint named, then the input changed: refused by the binary.
  flags = ["translate", f"--teacher={moved}", "--checkpoint_path=" + str(moved / "ckpt-7"),
           f"--input={copy}", f"--work_dir={tmp_path / 'w'}", f"--decode_hparams={DECODE}",
           f"--piece_lines={PIECE}"]
  with open(copy, "a", encoding="utf-8") as f:
    f.write("one more line\n")
  capsys.readouterr()
  assert distill_main(flags) == 1
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith(
      "python -m t2t_keras.distill: error: ") and "was started with another input (" in err
  assert "ckpt-9" not in (tmp_path / "w" / STATE_FILE).read_text()


def test_lines_cut_at_the_input_limit_are_counted_and_dropped_by_the_filter(reference, tmp_path):
  """At an input limit of 4 ids (EOS included) the sources of more than 3 pieces are cut:
  truncated.txt marks exactly those, the summary and the log count them, and the filter
  drops them before its other tests."""
  run_dir, source, _ = reference
  lines = open(source, encoding="utf-8").read().splitlines()
  vocab = runs.load(run_dir).vocab
  expected = ["1" if len(vocab.encode(line)) + 1 > 4 else "0" for line in lines]
  assert 0 < expected.count("1") < len(lines), expected
  logged = []
  summary = teacher.translate_file(run_dir, str(source), str(tmp_path / "w"),
                                   decode_hparams=DECODE + ",max_input_size=4",
                                   piece_lines=PIECE, log=logged.append)
  assert (tmp_path / "w" / "truncated.txt").read_text().splitlines() == expected
  assert summary["lines_truncated"] == expected.count("1")
  assert f"; {expected.count('1')} cut at the input limit)" in logged[-1]
  outputs = teacher.finished_outputs(str(tmp_path / "w"))
  counts = filtering.filter_pairs(source, outputs["translations"], outputs["scores"],
                                  str(tmp_path / "f"), truncated_path=outputs["truncated"],
                                  log=None)
  assert (counts["dropped_truncated"], counts["kept"]) == (
      expected.count("1"), expected.count("0"))
  kept = (tmp_path / "f" / filtering.SOURCE_FILE).read_text(encoding="utf-8").splitlines()
  assert kept == [line for line, cut in zip(lines, expected) if cut == "0"]


def test_the_filter_step_takes_only_the_input_the_teacher_translated(reference, tmp_path,
                                                                     capsys):
  run_dir, source, work = reference
  other = tmp_path / "other.en"
  other.write_text(open(source, encoding="utf-8").read().replace("\n\n", "\nzwei\n", 1),
                   encoding="utf-8")
  flags = [f"--work_dir={work}", f"--output_dir={tmp_path / 'f'}", "--max_ratio=100"]
  capsys.readouterr()
  assert distill_main(["filter", f"--sources={other}"] + flags) == 1
  err = capsys.readouterr().err
  assert err.count("\n") == 1 and err.startswith(
      f"python -m t2t_keras.distill: error: {other} is not the input the teacher translated "
      f"in {work} (sha256:"), err
  assert not (tmp_path / "f").exists()
  assert distill_main(["filter", f"--sources={source}"] + flags) == 0
  assert '"dropped_truncated": 1' in capsys.readouterr().out


def test_a_source_language_is_carried_to_the_teacher(reference, tmp_path):
  """--source_language goes into the work directory's key and to the teacher's calls: this
  teacher has no language tokens, so its translate refuses it (its own line)."""
  run_dir, source, _ = reference
  with pytest.raises(InputError, match="a source language is for models whose vocabulary "
                                       "has language tokens"):
    _translate(run_dir, source, tmp_path / "w", source_language="en")
  state = json.loads((tmp_path / "w" / STATE_FILE).read_text())
  assert state["key"]["decoding"]["source_language"] == "en" and state["lines_done"] == 0


def test_a_multilingual_teacher_needs_its_target_language(tmp_path):
  (tmp_path / "multi").mkdir()
  run_dir = make_tiny_run(tmp_path / "multi", user_defined_symbols=("<2de>", "<2fr>"))
  with pytest.raises(InputError, match=r"is multilingual \(it writes de, fr\): give the "
                                       r"language to distil into \(--target_language\)$"):
    teacher.load_teacher(run_dir)
  assert teacher.load_teacher(run_dir, target_language="fr").target_languages == ("de", "fr")


def test_the_chain_on_the_numbers_problem_from_teacher_to_a_decoding_student(
    reference, splits, tmp_path):
  """The teacher's outputs filtered (the line cut at the input limit dropped, the empty line
  dropped by ratio), the distilled problem's data with the teacher's vocabulary, a student
  trained two steps on it, and translating."""
  run_dir, source, work = reference
  outputs = teacher.finished_outputs(str(work))
  summary = filtering.filter_pairs(source, outputs["translations"], outputs["scores"],
                                   str(tmp_path / "filtered"), max_ratio=100.0,
                                   truncated_path=outputs["truncated"], log=None)
  assert (summary["kept"], summary["dropped_truncated"], summary["dropped_score"],
          summary["dropped_ratio"]) == (7, 1, 0, 1)
  data = distilled_data.generate(
      str(tmp_path / "data"), train=[str(tmp_path / "filtered" / n) for n in (
          filtering.SOURCE_FILE, filtering.TARGET_FILE)],
      dev=splits["dev"], test=splits["test"], vocab_from=run_dir, log=None)
  assert not data["vocab_trained"] and data["splits"]["train"]["pairs"] == 7
  # The data directory refuses other train files, or another vocabulary, before datagen.
  with pytest.raises(InputError, match=r"data was generated from other data \(train's files "
                                       r"changed since\): datagen would reuse its shards"):
    distilled_data.generate(str(tmp_path / "data"), train=splits["dev"], dev=splits["dev"],
                            test=splits["test"], vocab_from=run_dir, log=None)
  with pytest.raises(InputError, match=r"\(the vocabulary \(the teacher's -> its own, 8000 "
                                       r"pieces\) changed since\)"):
    distilled_data.generate(
        str(tmp_path / "data"), train=[str(tmp_path / "filtered" / n) for n in (
            filtering.SOURCE_FILE, filtering.TARGET_FILE)],
        dev=splits["dev"], test=splits["test"], log=None)
  student = t2t_keras.train(
      output_dir=str(tmp_path / "student"), problem=distilled_data.PROBLEM,
      data_dir=str(tmp_path / "data"), hparams_set="transformer_tiny", train_steps=2,
      hparams="hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,"
              "num_decoder_layers=1,batch_size=256,max_length=24",
      eval_every=0, save_every=2, use_xla=False, log=lambda message: None)
  assert student.step == 2
  assert runs.load_run_info(student.output_dir)[1]["problem"] == "translate_parallel_text"
  assert (tmp_path / "student" / runs.VOCAB_FILE).read_bytes() == open(
      runs.load_run_info(run_dir)[1]["vocab_path"], "rb").read()
  result = t2t_keras.load(student.output_dir, decode_hparams=DECODE).translate("nine")
  assert isinstance(result.text, str) and result.score < 0
