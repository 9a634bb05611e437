"""A run's files damaged (cut short, overwritten): one line naming the file, or carrying on
from what is intact, and nothing lost.

    run.json, hparams.json, vocab.model damaged  -> the decoder, exporter and t2t-avg-all
                                                    exit 1 with one line naming the file
    the checkpoint index (`checkpoint`) damaged  -> readers use the ckpt-<step> files beside
                                                    it; the trainer writes it back and
                                                    resumes from the newest, not from step 0
    a checkpoint of another layout (hparams.json -> the decoder and exporter exit 1 with one
    changed, or another version's checkpoint)       line listing what differs, the extra
                                                    layers of a larger checkpoint included
    a train or dev TFRecord shard cut short or   -> the trainer exits 1 with one line naming
    bit-flipped                                     the shard and the record; after the
                                                    recovery it names, the run resumes and
                                                    ends where a run without the fault ends
"""

import glob
import json
import os
import shutil

import numpy as np
import pytest
import tensorflow as tf
from binaries import run_binary
from conftest import make_two_checkpoint_run

from t2t_keras import bin as t2t_bin
from t2t_keras import registry, runs
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.data import datagen

PROBLEM = "algorithmic_copy"
TINY = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "batch_size=256,max_length=8")


@pytest.fixture(scope="module")
def tiny_run(tmp_path_factory):
  """A run with checkpoints 7 and 9 (random weights)."""
  return make_two_checkpoint_run(tmp_path_factory.mktemp("run"))


@pytest.fixture(scope="module")
def source_file(tmp_path_factory):
  path = tmp_path_factory.mktemp("in") / "in.txt"
  path.write_text("one hundred and five\ntwenty-three\n")
  return str(path)


def damaged_copy(run, dest, name, content):
  """A copy of `run` whose file `name` holds `content` (bytes) instead."""
  shutil.copytree(run, dest)
  with open(os.path.join(dest, name), "wb") as f:
    f.write(content)
  return str(dest)


CUT_SHORT = {"run.json": b'{\n  "problem": "translate_ende_numbers",\n  "mod',
             "hparams.json": b'{"hidden_size": 16, "filter_si',
             "vocab.model": b"\x0a\x0f\x0a\x05\xe2\x96\x81one"}
MESSAGES = {"run.json": "is damaged: not valid JSON (Unterminated string starting at: line "
                        "3 column 3",
            "hparams.json": "is damaged: not valid JSON (Unterminated string starting at: "
                            "line 1 column 21",
            "vocab.model": "is damaged: not a sentencepiece model"}


@pytest.mark.parametrize("name", sorted(CUT_SHORT))
@pytest.mark.parametrize("binary", ["decoder", "exporter", "avg_all"])
def test_a_damaged_run_file_is_one_line_naming_it(capsys, tiny_run, source_file, tmp_path,
                                                  name, binary):
  run = damaged_copy(tiny_run, tmp_path / "run", name, CUT_SHORT[name])
  before = sorted(os.listdir(run))
  args = {"decoder": [f"--output_dir={run}", f"--decode_from_file={source_file}",
                      f"--decode_to_file={tmp_path}/out.txt", "--decode_hparams=jit=false"],
          "exporter": [f"--output_dir={run}"],
          "avg_all": [f"--model_dir={run}", f"--output_dir={tmp_path}/avg", "--n=2"]}[binary]
  module = {"decoder": decoder_bin, "exporter": exporter_bin, "avg_all": avg_all_bin}[binary]
  code, _, err = run_binary(capsys, module, *args)
  path = os.path.join(run, name)
  assert code == 1 and err.count("\n") == 1, err
  assert err.startswith(f"{module.NAME}: error: ") and path in err, err
  assert MESSAGES[name] in err, err
  assert sorted(os.listdir(run)) == before  # nothing written into the run
  assert not os.path.exists(f"{tmp_path}/out.txt") and not os.path.exists(f"{tmp_path}/avg")


@pytest.mark.heavy
@pytest.mark.parametrize("content", [b"", b'model_checkpoint_path: "ckpt-9"\nall_model_ch',
                                     b"\x00\x01 not a text proto"],
                         ids=["empty", "cut_short", "overwritten"])
def test_a_damaged_checkpoint_index_is_read_from_the_files(capsys, tiny_run, source_file,
                                                           tmp_path, content):
  run = damaged_copy(tiny_run, tmp_path / "run", "checkpoint", content)
  code, out, err = run_binary(capsys, decoder_bin, f"--output_dir={run}",
                              f"--decode_from_file={source_file}",
                              f"--decode_to_file={tmp_path}/out.txt", "--decode_hparams=jit=false")
  assert code == 0, err
  assert (f"warning: {run}/checkpoint is missing or damaged; using the checkpoint files "
          "beside it: ckpt-7, ckpt-9") in err
  assert f"loaded {run}/ckpt-9" in out
  assert len(open(f"{tmp_path}/out.txt").read().splitlines()) == 2
  code, out, err = run_binary(capsys, avg_all_bin, f"--model_dir={run}",
                              f"--output_dir={tmp_path}/avg", "--n=2")
  assert code == 0 and "mean of ckpt-7, ckpt-9" in out, out + err


@pytest.mark.heavy
def test_the_trainer_writes_a_damaged_index_back_and_resumes(capsys, tmp_path, clean_run):
  data, run = clean_run[0], str(tmp_path / "run")
  shutil.copytree(clean_run[1], run)  # ckpt-2, ckpt-4
  with open(os.path.join(run, "checkpoint"), "wb") as f:
    f.write(b'model_checkpoint_path: "ckpt-4"\nall_model_checkpoint_paths: "ck')  # cut short
  code, out, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *_train_flags(data),
                              "--train_steps=6")
  assert code == 0, err
  assert (f"warning: {run}/checkpoint was missing or damaged; written again from the "
          "checkpoint files: ckpt-2, ckpt-4") in out
  assert f"resumed from {run}/ckpt-4 at step 4" in out and "steps 4 -> 6" in out, out
  assert [os.path.basename(p) for p in tf.train.get_checkpoint_state(
      run).all_model_checkpoint_paths] == ["ckpt-2", "ckpt-4", "ckpt-6"]


def _weights(run, step):
  reader = tf.train.load_checkpoint(os.path.join(run, f"ckpt-{step}"))
  return {k: reader.get_tensor(k) for k, dtype in reader.get_variable_to_dtype_map().items()
          if dtype not in (tf.variant, tf.string)}  # the iterator's state, the object graph


def _generate(data):
  datagen.generate(PROBLEM, data, log=None, num_train=300, num_dev=20, num_test=20,
                   max_length=6, num_symbols=5)


def _train_flags(data):
  return [f"--problem={PROBLEM}", f"--data_dir={data}", f"--hparams={TINY}", "--seed=3",
          "--save_every=2", "--eval_every=2", "--eval_bleu_sentences=0"]


@pytest.mark.heavy
@pytest.mark.parametrize("name", ["run.json", "hparams.json"])
def test_a_damaged_run_file_stops_the_trainer_resuming_with_one_line(capsys, tmp_path, name,
                                                                     clean_run):
  data, run = clean_run[0], str(tmp_path / "run")
  shutil.copytree(clean_run[1], run)  # ckpt-2, ckpt-4
  train = [f"--output_dir={run}", *_train_flags(data)]
  path = os.path.join(run, name)
  with open(path, "rb") as f:
    whole = f.read()
  with open(path, "wb") as f:
    f.write(whole[:len(whole) // 2])
  before = {n: os.path.getmtime(os.path.join(run, n)) for n in os.listdir(run)}
  code, _, err = run_binary(capsys, trainer_bin, *train, "--train_steps=6")
  assert code == 1 and err.count("\n") == 1, err
  assert err.startswith(f"t2t-trainer: error: {path} is damaged: not valid JSON ("), err
  after = {n: os.path.getmtime(os.path.join(run, n)) for n in os.listdir(run)}
  assert after == before  # nothing written, nothing removed
  if name != "run.json":  # the resume below is the same run's whichever file was cut
    return
  with open(path, "wb") as f:  # restored, as the line says: the run resumes
    f.write(whole)
  code, out, err = run_binary(capsys, trainer_bin, *train, "--train_steps=6")
  assert code == 0 and f"resumed from {run}/ckpt-4 at step 4" in out, out + err


def _damage(data, split, damage):
  """(the split's shard, its new bytes): cut in half ("cut") or a bit flipped mid-way."""
  shard, = glob.glob(os.path.join(data, f"*-{split}-*.tfrecord"))
  with open(shard, "rb") as f:
    content = bytearray(f.read())
  if damage == "cut":
    content = content[:len(content) // 2]
  else:
    content[len(content) // 2] ^= 0x10
  with open(shard, "wb") as f:
    f.write(content)
  return shard, content


@pytest.fixture(scope="module")
def clean_run(tmp_path_factory):
  """(data dir, a 4-step run on it that never met a fault), made once for the cases."""
  base = tmp_path_factory.mktemp("clean")
  data, clean = str(base / "data"), str(base / "clean")
  _generate(data)
  code = t2t_bin.run_in_process(trainer_bin, ["t2t-trainer", f"--output_dir={clean}",
                                              *_train_flags(data), "--train_steps=4"])
  assert code == 0
  return data, clean


@pytest.mark.heavy
@pytest.mark.parametrize("split,damage", [("train", "cut"), ("dev", "flip")])
def test_a_damaged_shard_is_named_and_the_run_recovers(capsys, tmp_path, clean_run, split,
                                                       damage):
  """A shard cut short (train) or with one byte flipped (dev, read by the evaluation): one
  line naming the shard and the record, the checkpoints kept; removing the shard and the
  split's stats file and running datagen again, as the line says, lets the run resume
  and end with the weights of the run that never met the fault (datagen writes the same
  files again: the clean run's data is a copy of these)."""
  data, clean = str(tmp_path / "data"), clean_run[1]
  shutil.copytree(clean_run[0], data)
  train, run = _train_flags(data), str(tmp_path / "run")
  code, _, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                            "--train_steps=2")
  assert code == 0, err

  shard, content = _damage(data, split, damage)
  code, _, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                            "--train_steps=4")
  assert code == 1 and err.count("\n") == 1, err
  if damage == "cut":  # tf.data alone would read it as a shorter shard
    assert err.startswith(f"t2t-trainer: error: {shard} holds {len(content):,} bytes, where "
                          "t2t-datagen wrote "), err
  else:  # the evaluation at step 2 reads it: a record's checksum fails
    assert err.startswith(f"t2t-trainer: error: {shard}: record "), err
    assert "cannot be read (" in err and "corrupted record at" in err, err
  stats = registry.problem(PROBLEM).stats_path(data, split)
  assert f"Remove it and {stats}, then run t2t-datagen again with the same flags" in err, err
  assert os.path.exists(os.path.join(run, "ckpt-2.index"))

  os.remove(shard)
  os.remove(stats)
  _generate(data)
  code, out, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                              "--train_steps=4")
  assert code == 0, err
  assert f"resumed from {run}/ckpt-2 at step 2" in out, out
  ours, theirs = _weights(run, 4), _weights(clean, 4)
  assert sorted(ours) == sorted(theirs) and len(ours) > 10
  for name, value in theirs.items():
    np.testing.assert_array_equal(ours[name], value, err_msg=name)


@pytest.mark.heavy
def test_a_train_record_flipped_mid_run_is_named_and_the_run_goes_on(capsys, tmp_path,
                                                                      clean_run):
  """A train record flipped after step 2 is met in the next pass over the shard (the shuffle
  buffer took the whole shard at step 1), steps later: one line naming the shard and the
  record. tf.data saves what it has read ahead with each checkpoint, a read error included,
  and bucketing reads ahead by steps: a checkpoint written after the read-ahead met the
  record meets the error again once resumed, though datagen has written the shard again.
  The line then says so and names the way on, --reset_input_position (the model, optimizer
  and step resume, the data order starts afresh: a run that never met the fault is not
  reproduced then). Where the newest checkpoint was written before the read-ahead met the
  record, the run resumes with its data order and ends with the clean run's weights."""
  data, clean = str(tmp_path / "data"), str(tmp_path / "clean")
  shutil.copytree(clean_run[0], data)
  # No evaluation (every 2 steps in _train_flags, for the dev shard's case): up to 40 steps
  # a run here, and evaluating changes no weight.
  train, run = _train_flags(data) + ["--eval_every=0"], str(tmp_path / "run")
  code, _, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                            "--train_steps=2")
  assert code == 0, err
  shard, _ = _damage(data, "train", "flip")
  code, _, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                            "--train_steps=40")
  assert code == 1 and err.count("\n") == 1, err
  assert err.startswith(f"t2t-trainer: error: {shard}: record "), err
  assert "corrupted record at" in err and "The run keeps its checkpoints" in err, err
  kept = tf.train.latest_checkpoint(run)
  step = int(kept.rsplit("-", 1)[1])
  assert step > 2 and runs.checkpoint_is_readable(kept), kept

  os.remove(shard)
  os.remove(registry.problem(PROBLEM).stats_path(data, "train"))
  _generate(data)
  with open(kept + ".data-00000-of-00001", "rb") as f:  # tf.data's saved state, as bytes
    holds_error = b"corrupted record" in f.read()
  code, out, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                              "--train_steps=40")
  assert f"resumed from {kept} at step {step}" in out, out
  if holds_error:
    assert code == 1 and err.count("\n") == 1, err
    assert "though each reads to its end now" in err, err
    assert f"or {kept}, which this run resumed from, holds it" in err, err
    assert "Train again with --reset_input_position" in err, err
    code, out, err = run_binary(capsys, trainer_bin, f"--output_dir={run}", *train,
                                "--train_steps=40", "--reset_input_position")
    assert code == 0, err
    assert (f"warning: --reset_input_position: the model, optimizer and step resume from "
            f"{kept}; the data order starts afresh from --seed=3") in out, out
    assert f"resumed from {kept} at step {step}" in out and f"steps {step} -> 40" in out, out
    assert runs.checkpoint_is_readable(os.path.join(run, "ckpt-40"))
    return
  assert code == 0, err
  shutil.copytree(clean_run[1], clean)  # the run that never met the fault, on to step 40
  code, _, err = run_binary(capsys, trainer_bin, f"--output_dir={clean}", *train,
                            "--train_steps=40")
  assert code == 0, err
  ours, theirs = _weights(run, 40), _weights(clean, 40)
  for name, value in theirs.items():
    np.testing.assert_array_equal(ours[name], value, err_msg=name)


LAYOUTS = {  # a change to the run's hparams.json -> what the one line must say
    "num_decoder_layers=3": "18 variable(s) not in the checkpoint (model/decoder_layer_2/",
    "num_decoder_layers=1": "18 variable(s) only in the checkpoint (model/decoder_layer_1/",
    "filter_size=64": "12 variable(s) of another shape (model/encoder_layer_0/ffn/filter_dense/"
                      "_kernel [16, 32] in the checkpoint, [16, 64] in the model",
}


@pytest.mark.parametrize("change", sorted(LAYOUTS))
@pytest.mark.parametrize("binary", ["decoder", "exporter"])
def test_a_checkpoint_of_another_layout_is_one_line_listing_what_differs(
    capsys, tiny_run, source_file, tmp_path, change, binary):
  """TensorFlow's restore alone fills a 1-layer decoder from a 2-layer checkpoint without a
  word (`expect_partial`); the check before it names what differs, either way."""
  key, value = change.split("=")
  with open(os.path.join(tiny_run, "hparams.json")) as f:
    hparams = json.load(f)
  assert hparams[key] != int(value)
  run = damaged_copy(tiny_run, tmp_path / "run", "hparams.json",
                     json.dumps(dict(hparams, **{key: int(value)})).encode())
  args = {"decoder": [f"--output_dir={run}", f"--decode_from_file={source_file}",
                      f"--decode_to_file={tmp_path}/out.txt", "--decode_hparams=jit=false"],
          "exporter": [f"--output_dir={run}"]}[binary]
  module = {"decoder": decoder_bin, "exporter": exporter_bin}[binary]
  code, _, err = run_binary(capsys, module, *args)
  assert code == 1 and err.count("\n") == 1, err
  assert err.startswith(f"{module.NAME}: error: {run}/ckpt-9 holds another model than "
                        f"{run}'s hparams.json builds: "), err
  assert LAYOUTS[change] in err and "decode it with the hparams it was trained with" in err
  assert not os.path.exists(f"{tmp_path}/out.txt") and not os.path.exists(f"{run}/export")
