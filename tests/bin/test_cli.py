"""The binaries' flags as t2t users pass them, and a one-line error for every bad input.

The binaries run in this process (`t2t_keras.bin.run_in_process`: the same flag
parsing and error handling as the console scripts); test_t2t_walkthrough.py runs
them as processes.
"""

import gzip
import json
import math
import os

import pytest
import tensorflow as tf

from t2t_keras import bin as t2t_bin
from t2t_keras.bin import trainer as trainer_bin
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.bin import bleu as bleu_bin
from t2t_keras.bin import datagen as datagen_bin
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.data import datagen
from t2t_keras.decoding import translate, scoring
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras import launcher, runs
from t2t_keras.training import trainer as trainer_lib

PROBLEM = "algorithmic_copy"
PROBLEM_ARGS = dict(num_train=300, num_dev=20, num_test=20, max_length=6, num_symbols=5)
TINY = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "batch_size=256,max_length=8")
BINARIES = {"trainer": trainer_bin, "decoder": decoder_bin, "bleu": bleu_bin,
            "avg-all": avg_all_bin, "exporter": exporter_bin, "datagen": datagen_bin}


def run_binary(capsys, name, *args):
  """(exit code, stdout, stderr) of t2t-<name> with `args`, run in this process."""
  capsys.readouterr()
  code = t2t_bin.run_in_process(BINARIES[name], [f"t2t-{name}", *args])
  out = capsys.readouterr()
  return code, out.out, out.err


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("cli_data"))
  datagen.generate(PROBLEM, path, log=None, **PROBLEM_ARGS)
  return path


@pytest.fixture(scope="module")
def run_dir(data_dir, tmp_path_factory):
  """A trained run (steps 2 and 4 kept) made through the Python API."""
  out = str(tmp_path_factory.mktemp("cli_run"))
  trainer_lib.train(PROBLEM, "transformer_tiny", data_dir, out, hparams=TINY, train_steps=4,
                    save_every=2, eval_every=0, eval_bleu_sentences=0, use_xla=False,
                    log=lambda *a: None)
  return out


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  d = tmp_path_factory.mktemp("cli_files")
  paths = {}
  for name, text in {"in": "a b\nc d\n", "three": "a\nb\nc\n", "two": "a\nb\n",
                     "pairs": "a b\tb a\nno tab here\n", "empty": "",
                     "one": "a b\n"}.items():
    paths[name] = str(d / f"{name}.txt")
    with open(paths[name], "w") as f:
      f.write(text)
  paths["bad_utf8"] = str(d / "bad_utf8.txt")
  with open(paths["bad_utf8"], "wb") as f:
    f.write(b"fine\nbad \xff byte\n")
  paths["dir"] = str(d)
  return paths


def _truncated_copy(run_dir, dest, keep_intact):
  """A copy of run_dir whose checkpoints after the first `keep_intact` are cut short."""
  import shutil
  shutil.copytree(run_dir, dest)
  state = tf.train.get_checkpoint_state(dest)
  for path in list(state.all_model_checkpoint_paths)[keep_intact:]:
    data = tf.io.gfile.glob(path + ".data-*")[0]
    with open(data, "r+b") as f:
      f.truncate(os.path.getsize(data) // 2)
  return dest


# (binary, args with {run} {data} {tmp} {files[...]} placeholders, expected stderr text)
BAD_INPUTS = [
    # t2t-trainer
    ("trainer", ["--output_dir={tmp}/t", "--problem=translate_nope"],
     "unknown problem 'translate_nope'"),
    ("trainer", ["--output_dir={tmp}/t", "--hparams_set=transformer_tinny"],
     "Closest match: 'transformer_tiny'"),
    ("trainer", ["--output_dir={tmp}/t", "--problem=" + PROBLEM, "--data_dir={data}",
                 "--hparams=hiden_size=3"], "unknown hparam 'hiden_size'"),
    ("trainer", ["--output_dir={tmp}/t", "--problem=" + PROBLEM, "--data_dir={data}",
                 "--hparams=hidden_size=big"], "hparam 'hidden_size': cannot parse 'big' as int"),
    ("trainer", ["--problem=" + PROBLEM], "--output_dir is required"),
    ("trainer", ["--output_dir={tmp}/t", "--use_tpu"],
     "--use_tpu cannot apply here: t2t-keras runs on CPUs and GPUs"),
    ("trainer", ["--output_dir={tmp}/t", "--cloud_mlengine"], "not on Cloud ML Engine"),
    ("trainer", ["--output_dir={tmp}/t", "--master=grpc://x:1"], "--master cannot apply here"),
    ("trainer", ["--output_dir={tmp}/t", "extra"], "unexpected arguments: extra"),
    ("trainer", ["--output_dir={run}", "--problem=algorithmic_reverse", "--data_dir={data}"],
     "--problem=algorithmic_reverse does not match the run"),
    ("trainer", ["--output_dir={run}", "--problem=" + PROBLEM, "--data_dir={data}",
                 "--hparams_set=transformer_small", "--hparams=" + TINY],
     "--hparams_set=transformer_small does not match the run"),
    ("trainer", ["--output_dir={run}", "--problem=" + PROBLEM, "--data_dir={data}",
                 "--hparams=" + TINY + ",num_heads=4"], "num_heads: saved 2 != new 4"),
    ("trainer", ["--output_dir={all_truncated}", "--problem=" + PROBLEM, "--data_dir={data}",
                 "--hparams=" + TINY], "no readable checkpoint in"),
    ("trainer", ["--output_dir={tmp}/t", "--problem=" + PROBLEM, "--data_dir={tmp}/nodata"],
     "{tmp}/nodata"),
    # t2t-decoder
    ("decoder", ["--output_dir={run}", "--decode_from_file={tmp}/missing.en"],
     "--decode_from_file={tmp}/missing.en: no such file"),
    ("decoder", ["--output_dir={run}"], "give exactly one of --decode_from_file"),
    ("decoder", ["--output_dir={run}", "--decode_split=test", "--decode_prefix_file={in}"],
     "--decode_prefix_file goes with --decode_from_file"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}",
                 "--decode_prefix_file={tmp}/missing.de"], "--decode_prefix_file="),
    ("decoder", ["--output_dir={run}", "--decode_split=test",
                 "--decode_terms_file={in}"],
     "--decode_terms_file goes with --decode_from_file"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--decode_prefix_file={in}",
                 "--decode_terms_file={in}"], "do not combine yet"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--decode_terms_file={in}",
                 "--decode_constraints_file={in}"],
     "give --decode_terms_file only (--decode_constraints_file is its old name)"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--decode_hparams=beam_sze=2"],
     "unknown hparam 'beam_sze'. Did you mean 'beam_size'?"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--decode_hparams=beam_size=0"],
     "decode hparam beam_size=0: must be >= 1"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--decode_hparams=alpha=-1"],
     "decode hparam alpha=-1.0: must be >= 0"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--problem=translate_ende_numbers"],
     "--problem=translate_ende_numbers does not match the run"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--model=universal_transformer"],
     "--model=universal_transformer does not match the run"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--hparams=num_heads=4"],
     "num_heads=4 (run: 2)"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--checkpoint_path={run}/ckpt-99"],
     "--checkpoint_path={run}/ckpt-99: no readable checkpoint there"),
    ("decoder", ["--output_dir={data}", "--decode_from_file={in}"],
     "{data}: nothing recognised in it; expected one of: a run directory (run.json)"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--decode_reference={three}"],
     "has 2 lines but {three} has 3"),
    ("decoder", ["--output_dir={run}", "--score_file={pairs}"], "--score_file needs --decode_to_file"),
    ("decoder", ["--output_dir={run}", "--score_file={pairs}", "--decode_to_file={tmp}/scores"],
     "{pairs}:2: expected 'source<TAB>target', found 0 tabs"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={bad_utf8}"], "{bad_utf8}:2: invalid UTF-8"),
    ("decoder", ["--output_dir={run}", "--decode_from_file={in}", "--cloud_tpu_name=x"],
     "--cloud_tpu_name cannot apply here"),
    # t2t-bleu
    ("bleu", ["--translation={two}", "--reference={three}"], "{two} has 2 lines but {three} has 3"),
    ("bleu", ["--translation={two}", "--reference={tmp}/nope.de"], "{tmp}/nope.de: no such file"),
    ("bleu", ["--translation={two}"], "--translation and --reference are required"),
    ("bleu", ["--tokenized", "--translation={two}", "--reference={two}",
              "--tokenized_reference={two}"], "--tokenized_reference is for detokenized"),
    # t2t-avg-all
    ("avg-all", ["--output_dir={tmp}/avg"], "--model_dir is required"),
    ("avg-all", ["--model_dir={no_ckpt}", "--output_dir={tmp}/avg"], "no checkpoints found in"),
    ("avg-all", ["--model_dir={data}", "--output_dir={tmp}/avg"], "is '{data}' a t2t-trainer output_dir"),
    ("avg-all", ["--model_dir={run}", "--output_dir={run}"], "--output_dir must differ from --model_dir"),
    ("avg-all", ["--model_dir={run}", "--output_dir={tmp}/avg", "--min_steps=100"],
     "no checkpoint in '{run}' between step 100 and the end"),
    ("avg-all", ["--model_dir={all_truncated}", "--output_dir={tmp}/avg"], "no readable checkpoint in"),
    # t2t-exporter
    ("exporter", ["--output_dir={run}", "--hparams_set=transformer_base"],
     "--hparams_set=transformer_base does not match the run"),
    ("exporter", ["--output_dir={run}", "--max_input_length=1", "--export_dir={tmp}/exp"],
     "max_input_length must be >= 2"),
    # t2t-datagen
    ("datagen", ["--problem=translate_parallel_text", "--data_dir={tmp}/pd",
                 "--parallel_train={empty},{empty}", "--parallel_dev={two},{two}",
                 "--parallel_test={two},{two}"], "the train split has no pair with both sides non-empty"),
    ("datagen", ["--problem=translate_parallel_text", "--data_dir={tmp}/pd",
                 "--parallel_train={two},{three}", "--parallel_dev={two},{two}",
                 "--parallel_test={two},{two}"], "{two} has 2 lines, {three} has 3 lines"),
    ("datagen", ["--problem=translate_parallel_text", "--data_dir={tmp}/pd",
                 "--parallel_train={tmp}/x.en,{tmp}/x.de", "--parallel_dev={two},{two}",
                 "--parallel_test={two},{two}"], "missing input file(s): {tmp}/x.en"),
    ("datagen", ["--problem=translate_parallel_text", "--data_dir={tmp}/pd",
                 "--parallel_train={bad_utf8},{bad_utf8}", "--parallel_dev={two},{two}",
                 "--parallel_test={two},{two}"], "{bad_utf8}:2: invalid UTF-8"),
]


@pytest.fixture(scope="module")
def places(run_dir, data_dir, files, tmp_path_factory):
  tmp = str(tmp_path_factory.mktemp("cli_tmp"))
  no_ckpt = os.path.join(tmp, "no_ckpt")
  os.makedirs(no_ckpt)
  for name in (runs.HPARAMS_FILE, runs.RUN_FILE):
    tf.io.gfile.copy(os.path.join(run_dir, name), os.path.join(no_ckpt, name))
  all_truncated = _truncated_copy(run_dir, os.path.join(tmp, "all_truncated"), keep_intact=0)
  return dict(files, run=run_dir, data=data_dir, tmp=tmp, no_ckpt=no_ckpt,
              all_truncated=all_truncated)


def test_every_binary_has_bad_inputs_in_the_table():
  assert {binary for binary, _, _ in BAD_INPUTS} == set(BINARIES)


@pytest.mark.heavy
@pytest.mark.parametrize("binary,args,expected", BAD_INPUTS,
                         ids=[f"{b}-{i}" for i, (b, _, _) in enumerate(BAD_INPUTS)])
def test_bad_input_is_one_clear_line(capsys, places, binary, args, expected):
  before = sorted(os.listdir(places["run"]))
  code, _, err = run_binary(capsys, binary, *[a.format(**places) for a in args])
  assert code == 1
  lines = [line for line in err.splitlines() if line.strip()]
  assert lines and lines[-1] == lines[0], err  # one line, no traceback
  assert lines[0].startswith(f"t2t-{binary}: error: "), err
  assert expected.format(**places) in lines[0]
  assert sorted(os.listdir(places["run"])) == before  # nothing written into the run


@pytest.mark.heavy
def test_a_renamed_flag_works_for_one_release_with_a_warning(capsys, places):
  """--decode_constraints_file is --decode_terms_file's old name: its value moves there."""
  missing = f"{places['tmp']}/missing.jsonl"
  code, _, err = run_binary(capsys, "decoder", f"--output_dir={places['run']}",
                            f"--decode_from_file={places['in']}",
                            f"--decode_constraints_file={missing}")
  assert code == 1
  assert [line for line in err.splitlines() if line.strip()] == [
      "t2t-decoder: warning: --decode_constraints_file is now --decode_terms_file; the old "
      "name goes in the next release",
      f"t2t-decoder: error: --decode_terms_file={missing}: no such file"]


@pytest.mark.parametrize("args,expected", [
    (["--train_steps=-5"], "flag --train_steps=-5: -5 is not a positive integer"),
    (["--eval_steps=0"], "flag --eval_steps=0: 0 is not a positive integer"),
    (["--no_such_flag=1"], "Unknown command line flag 'no_such_flag'"),
])
def test_bad_flag_values_are_refused_while_parsing(capsys, args, expected):
  code, _, err = run_binary(capsys, "trainer", "--output_dir=unused", *args)
  assert code == 1 and expected in err


def test_no_output_file_on_failure(capsys, places):
  out = os.path.join(places["tmp"], "never.de")
  code, _, _ = run_binary(capsys, "decoder", f"--output_dir={places['run']}",
                          f"--decode_from_file={places['in']}", f"--decode_to_file={out}",
                          f"--decode_reference={places['three']}")
  assert code == 1 and not os.path.exists(out)
  assert not [f for f in os.listdir(places["tmp"]) if "incomplete" in f]


@pytest.mark.heavy
def test_truncated_newest_checkpoint_is_skipped_everywhere(capsys, places, data_dir, tmp_path):
  run = _truncated_copy(places["run"], str(tmp_path / "run"), keep_intact=1)  # ckpt-2 intact
  out = str(tmp_path / "out.txt")
  code, stdout, err = run_binary(capsys, "decoder", f"--output_dir={run}",
                                 f"--decode_from_file={places['in']}", f"--decode_to_file={out}",
                                 "--decode_hparams=jit=false")
  assert code == 0 and "warning: skipping" in err and "ckpt-4" in err
  assert f"loaded {run}/ckpt-2" in stdout and len(open(out).read().splitlines()) == 2
  code, stdout, err = run_binary(capsys, "avg-all", f"--model_dir={run}",
                                 f"--output_dir={tmp_path}/avg", "--n=2")
  assert code == 0 and "skipping" in err + stdout and "mean of ckpt-2\n" in stdout
  code, stdout, _ = run_binary(capsys, "trainer", f"--output_dir={run}", f"--problem={PROBLEM}",
                               f"--data_dir={data_dir}", f"--hparams={TINY}", "--train_steps=5",
                               "--eval_every=0", "--eval_bleu_sentences=0")
  assert code == 0
  assert f"resumed from {run}/ckpt-2 at step 2" in stdout and "steps 2 -> 5" in stdout
  assert tf.train.latest_checkpoint(run).endswith("ckpt-5")


@pytest.mark.heavy
def test_t2t_trainer_flags_keep_their_meaning(capsys, data_dir, tmp_path):
  out = str(tmp_path / "run")
  code, stdout, _ = run_binary(
      capsys, "trainer", f"--output_dir={out}", f"--problem={PROBLEM}", "--model=transformer",
      "--hparams_set=transformer_tiny", f"--hparams={TINY}", f"--data_dir={data_dir}",
      "--train_steps=6", "--local_eval_frequency=2", "--keep_checkpoint_max=2",
      "--save_checkpoints_secs=0", "--random_seed=7", "--eval_steps=1",
      "--eval_bleu_sentences=0")
  assert code == 0, stdout
  kept = tf.train.get_checkpoint_state(out).all_model_checkpoint_paths
  assert [os.path.basename(p) for p in kept] == ["ckpt-4", "ckpt-6"]  # every 2 steps, keep 2
  assert stdout.count("dev loss") == 3  # evaluated at steps 2, 4 and 6
  flags = trainer_bin.FLAGS
  try:
    flags(["t2t-trainer", "--random_seed=7", "--keep_checkpoint_max=3"])
    assert flags.seed == 7 and flags.keep_checkpoints == 3  # t2t's names are aliases
  finally:
    flags.unparse_flags()
  info = runs.load_run_info(out)[1]
  assert info["hparams_set"] == "transformer_tiny" and info["problem"] == PROBLEM


@pytest.mark.heavy
def test_decoder_and_exporter_accept_agreeing_t2t_flags(capsys, places, tmp_path, monkeypatch):
  """Both binaries take t2t's flags where they agree with the run. The exporter's
  SavedModel write is left out (only export_info.json is written): what it saves is
  tests/exporting/'s, the flags are this test's."""
  run = places["run"]
  common = [f"--data_dir={places['data']}", f"--problem={PROBLEM}", "--model=transformer",
            "--hparams_set=transformer_tiny", f"--hparams={TINY}", f"--output_dir={run}"]
  out = str(tmp_path / "t.txt")
  code, _, err = run_binary(capsys, "decoder", *common,
                            "--decode_hparams=beam_size=2,alpha=0.6,jit=false",
                            f"--decode_from_file={places['in']}", f"--decode_to_file={out}")
  assert code == 0, err
  assert len(open(out).read().splitlines()) == 2
  from t2t_keras.exporting import export  # pylint: disable=import-outside-toplevel

  def save(translator, export_info, directory):
    del translator
    os.makedirs(os.path.join(directory, "assets"))
    with open(os.path.join(directory, "assets", "export_info.json"), "w") as f:
      json.dump(export_info, f, default=str)
  monkeypatch.setattr(export, "_save", save)
  code, stdout, err = run_binary(capsys, "exporter", *common, f"--export_dir={tmp_path}/exp",
                                 "--decode_hparams=beam_size=1,jit=false", "--export_version=5",
                                 "--max_input_length=6")
  assert code == 0, err
  path = stdout.strip().splitlines()[-1]
  assert path == os.path.join(str(tmp_path), "exp", "5")
  with open(os.path.join(path, "assets", "export_info.json")) as f:
    assert json.load(f)["max_input_length"] == 6


@pytest.mark.heavy
def test_score_file_equals_beam_score_of_the_same_output(capsys, places, tmp_path):
  """Scores are log p(target|source): beam search's own score of its output (alpha 0)."""
  model, vocab, *_ = runs.load(places["run"])
  extra = 3
  settings = parse_decode_hparams(f"beam_size=1,alpha=0,jit=false,extra_length={extra}")
  sources = translate.encode_sources(vocab, ["a b c", "d e", "e"])
  best = [hyps[0] for hyps in translate.translate_ids(model, sources, settings)]
  # A hypothesis shorter than its maximum length ended with EOS, which its score includes.
  targets = [ids + [decoder.EOS_ID] if len(ids) < len(src) + extra else ids
             for src, (ids, _) in zip(sources, best)]
  assert scoring.score_ids(model, sources, targets, batch_size=2) == pytest.approx(
      [score for _, score in best], abs=1e-4)
  # The binary: "source<TAB>target" lines, one score per line, batching and padding aside.
  pairs = str(tmp_path / "pairs.tsv")
  with open(pairs, "w") as f:
    f.write("a b c\td e\nd e\ta b c\n")
  out = str(tmp_path / "scores.txt")
  code, _, err = run_binary(capsys, "decoder", f"--output_dir={places['run']}",
                            f"--score_file={pairs}", f"--decode_to_file={out}",
                            "--decode_hparams=batch_size=1")
  assert code == 0, err
  scores = [float(x) for x in open(out).read().split()]
  expected = scoring.score_pairs(model, vocab, ["a b c", "d e"], ["d e", "a b c"], batch_size=2)
  assert scores == pytest.approx(expected, abs=1e-5) and all(s < 0 for s in scores)


def test_avg_all_writes_t2t_moving_averages_as_a_run_dir(capsys, places, tmp_path):
  avg = str(tmp_path / "avg")
  code, stdout, err = run_binary(capsys, "avg-all", f"--model_dir={places['run']}",
                                 f"--output_dir={avg}", "--n=1")
  assert code == 0, err
  # n=1: one "average" per checkpoint, equal to it; the run's files come along.
  assert sorted(os.path.basename(p) for p in
                tf.train.get_checkpoint_state(avg).all_model_checkpoint_paths) == ["ckpt-2", "ckpt-4"]
  for name in (runs.HPARAMS_FILE, runs.RUN_FILE, runs.VOCAB_FILE):
    assert os.path.exists(os.path.join(avg, name))
  original = tf.train.load_checkpoint(os.path.join(places["run"], "ckpt-4"))
  averaged = tf.train.load_checkpoint(os.path.join(avg, "ckpt-4"))
  for key in original.get_variable_to_shape_map():
    if key.startswith("model/") and original.get_variable_to_dtype_map()[key].is_floating:
      assert (original.get_tensor(key) == averaged.get_tensor(key)).all(), key
  # n=2: windows ending at each checkpoint with one older: only ckpt-4's.
  code, stdout, _ = run_binary(capsys, "avg-all", f"--model_dir={places['run']}",
                               f"--output_dir={avg}2", "--n=2")
  assert code == 0 and "wrote " in stdout and "mean of ckpt-2, ckpt-4" in stdout
  assert tf.train.latest_checkpoint(avg + "2").endswith("ckpt-4")
  # The averaged dir is a run: the decoder loads it as --output_dir.
  out = str(tmp_path / "avg.de")
  code, stdout, err = run_binary(capsys, "decoder", f"--output_dir={avg}2",
                                 f"--decode_from_file={places['in']}", f"--decode_to_file={out}",
                                 "--decode_hparams=jit=false")
  assert code == 0 and f"loaded {avg}2/ckpt-4" in stdout, err
  assert not [f for f in os.listdir(avg + "2") if "incomplete" in f]


def test_datagen_reads_relative_parallel_files_from_the_working_directory(
    capsys, tmp_path, monkeypatch):
  monkeypatch.chdir(tmp_path)
  for name, text in {"t.en": "one two\nthree\n" * 20, "t.de": "eins zwei\ndrei\n" * 20}.items():
    with gzip.open(name + ".gz", "wt") as f:
      f.write(text)
  code, stdout, err = run_binary(
      capsys, "datagen", "--problem=translate_parallel_text", "--data_dir=d", "--vocab_size=20",
      "--parallel_train=t.en.gz,t.de.gz", "--parallel_dev=t.en.gz,t.de.gz",
      "--parallel_test=t.en.gz,t.de.gz")
  assert code == 0, err
  assert "train: 40 pairs" in stdout


def test_each_binary_runs_with_its_own_flag_defaults(monkeypatch):
  """Shared flag names keep the first importer's default in absl; run_in_process gives
  each binary its own (the trainer's --hparams_set=transformer_tiny, the decoder's None),
  whichever binary a process imported first."""
  from absl import flags  # pylint: disable=import-outside-toplevel
  seen = []

  def spy(argv):
    del argv
    seen.append((flags.FLAGS.hparams_set, flags.FLAGS.problem, flags.FLAGS.data_dir))

  for module in (decoder_bin, trainer_bin, decoder_bin):
    monkeypatch.setattr(module, "main", spy)
    assert t2t_bin.run_in_process(module, ["t2t-x"]) == 0
  assert seen == [(None, None, None), ("transformer_tiny", "translate_ende_numbers", "t2t_data"),
                  (None, None, None)]


# Each binary's --help lists these of its own flags (absl's key flags of sys.argv[0]).
HELP_FLAGS = {
    "datagen": ["problem", "data_dir", "tmp_dir", "raw_dir", "parallel_train", "vocab_size"],
    "trainer": ["problem", "hparams_set", "hparams", "seed", "train_steps", "output_dir",
                "raw_dir", "parallel_train"],
    "decoder": ["output_dir", "checkpoint_path", "decode_hparams", "decode_from_file"],
    "exporter": ["output_dir", "decode_hparams"],
    "avg_all": ["model_dir", "output_dir", "n"],
    "bleu": ["translation", "reference", "tokenized_reference"],
    "evalb": ["gold_file", "test_file"],
    "param_table": [],
    "sweep": ["problem", "rows_file", "train_steps"],
    "data_service": ["port", "dispatcher_address"],
    "serve": ["export_dir", "model_name", "port", "max_batch_size", "batch_timeout_ms",
              "max_queued_sentences", "max_request_bytes", "max_instances",
              "max_sentence_chars"],
}


@pytest.mark.parametrize("module", sorted(HELP_FLAGS))
def test_help_lists_the_binarys_own_flags_with_their_text(module):
  import importlib
  import sys
  from absl import flags
  binary = importlib.import_module(f"t2t_keras.bin.{module}")
  names = t2t_bin.declare_help_flags(binary.__name__)
  assert set(HELP_FLAGS[module]) | {"version"} <= set(names)
  assert not set(names) & set(t2t_bin.UNSUPPORTED_FLAGS)
  text = flags.FLAGS.module_help(sys.argv[0])
  for name in HELP_FLAGS[module]:
    assert f"--{name}: {flags.FLAGS[name].help}"[:60] in " ".join(text.split()), name


@pytest.mark.parametrize("module", sorted(launcher.BINARIES))
def test_version_in_process(module, capsys):
  """--version through absl's flags (the console scripts answer it before importing)."""
  import importlib
  binary = importlib.import_module(f"t2t_keras.bin.{module}")
  capsys.readouterr()
  code = t2t_bin.run_in_process(binary, [binary.NAME, "--version"])
  out = capsys.readouterr()
  assert (code, out.out, out.err) == (0, launcher.version_line(binary.NAME) + "\n", "")


@pytest.mark.heavy
def test_trainer_help_as_a_process():
  """The console script, as a user types it: the help and exit 0 (absl's own is 1)."""
  import subprocess
  import sys
  script = os.path.join(os.path.dirname(sys.executable), "t2t-trainer")
  proc = subprocess.run([script, "--help"], capture_output=True, text=True, timeout=120)
  assert proc.returncode == 0 and not proc.stderr, proc.stderr
  assert ("--hparams_set: Registered hparams set (with --warm_start_from a run and no\n"
          "    --hparams_set: that run's hparams).\n    (default: 'transformer_tiny')"
          in proc.stdout)
  assert "--seed: Seed for model init, dropout and data order." in proc.stdout
  assert "--use_tpu" not in proc.stdout


def test_bleu_binary_scores_a_hand_worked_pair(capsys, tmp_path):
  """t2t-bleu's success path: one 7-word translation of a 6-word reference that it contains
  matches 6/7 unigrams, 5/6 bigrams, 4/5 trigrams and 3/4 4-grams, brevity penalty 1, so
  sacreBLEU = 100 * (6/7 * 5/6 * 4/5 * 3/4) ** (1/4) = 100 * (3/7) ** (1/4) = 80.91."""
  hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.de"
  hyp.write_text("the cat sat on the mat today\n", encoding="utf-8")
  ref.write_text("the cat sat on the mat\n", encoding="utf-8")
  code, out, err = run_binary(capsys, "bleu", f"--translation={hyp}", f"--reference={ref}")
  assert code == 0, err
  sacre = [line for line in out.splitlines() if "sacreBLEU" in line]
  assert sacre and f"{100 * (3 / 7) ** 0.25:.2f}" in sacre[0], out
  code, out, _ = run_binary(capsys, "bleu", f"--translation={ref}", f"--reference={ref}")
  assert code == 0 and "100.00" in [l for l in out.splitlines() if "sacreBLEU" in l][0], out


def test_bleu_binary_scores_tokenized_text_as_it_is(capsys, tmp_path):
  """t2t-bleu --tokenized (translate_ende_multi30k_tok's outputs against a tok/ reference):
  a 10-token translation of an 11-token line, "der" missing, matches 10/10, 8/9, 6/8 and
  4/7 n-grams, brevity penalty exp(1 - 11/10): 64.09; the XML escapes stay tokens."""
  hyp, ref = tmp_path / "hyp.de", tmp_path / "ref.lc.norm.tok.de"
  hyp.write_text("ein kind mit nummer &quot; 93 &quot; fährt ski .\n", encoding="utf-8")
  ref.write_text("ein kind mit der nummer &quot; 93 &quot; fährt ski .\n", encoding="utf-8")
  code, out, err = run_binary(capsys, "bleu", "--tokenized", f"--translation={hyp}",
                              f"--reference={ref}")
  by_hand = 100 * math.exp(1 - 11 / 10) * (10 / 10 * 8 / 9 * 6 / 8 * 4 / 7) ** 0.25
  assert code == 0, err
  assert out.splitlines()[0].endswith(f"against {ref}: {by_hand:.2f}"), out
  assert "sacreBLEU" not in out


@pytest.mark.heavy
def test_trainer_generate_data_then_trains_and_skips_it_on_resume(capsys, tmp_path):
  """t2t's --generate_data: datagen into an empty --data_dir, then training; a second
  run (resuming) finds the files finished and leaves them as they are."""
  data, out = tmp_path / "data", tmp_path / "run"
  args = ["--generate_data", f"--problem={PROBLEM}", f"--data_dir={data}",
          f"--output_dir={out}", "--hparams_set=transformer_tiny", f"--hparams={TINY}",
          "--eval_every=0", "--use_xla=false", "--save_every=2"]
  code, out_text, err = run_binary(capsys, "trainer", *args, "--train_steps=2")
  assert code == 0, err
  written = {p.name: p.stat().st_mtime_ns for p in data.iterdir()}
  assert {f"{PROBLEM}-{split}-00000-of-00001.tfrecord" for split in ("train", "dev", "test")} \
      <= set(written)
  assert (out / "ckpt-2.index").exists()
  code, _, err = run_binary(capsys, "trainer", *args, "--train_steps=4")
  assert code == 0, err
  assert {p.name: p.stat().st_mtime_ns for p in data.iterdir()} == written
  assert (out / "ckpt-4.index").exists()
