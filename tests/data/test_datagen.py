import gzip
import os
import textwrap

import pytest

from t2t_keras import registry
from t2t_keras.data import datagen
from t2t_keras.data import vocabulary as vocab_lib
from t2t_keras.problems import numbers
from t2t_keras.problems.parallel_text import TranslateParallelText
from conftest import SHARED_DATA

MULTI30K = os.path.join(SHARED_DATA, "multi30k")
SMALL = dict(num_train=600, num_dev=40, num_test=40)


def _listing(d):
  return {f: os.stat(os.path.join(d, f)).st_mtime_ns for f in sorted(os.listdir(d))}


def _decoded(problem, data_dir, split):
  vocab = problem.get_vocabulary(data_dir)
  return [(vocab.decode(ex["inputs"]), vocab.decode(ex["targets"]))
          for ex in problem.dataset(data_dir, split).as_numpy_iterator()]


def test_numbers_datagen_is_idempotent_and_readable(tmp_path):
  data_dir = str(tmp_path / "data")
  p = numbers.TranslateEndeNumbers(**SMALL)
  first = p.generate_data(data_dir)
  assert first["vocab_trained"]
  assert {s: v["pairs"] for s, v in first["splits"].items()} == {"train": 600, "dev": 40, "test": 40}
  files = _listing(data_dir)
  assert set(files) == {
      "vocab.translate_ende_numbers.model",
      "translate_ende_numbers-train-00000-of-00001.tfrecord",
      "translate_ende_numbers-dev-00000-of-00001.tfrecord",
      "translate_ende_numbers-test-00000-of-00001.tfrecord",
      "translate_ende_numbers-train.stats.json",
      "translate_ende_numbers-dev.stats.json",
      "translate_ende_numbers-test.stats.json"}
  second = numbers.TranslateEndeNumbers(**SMALL).generate_data(data_dir)
  assert not second["vocab_trained"]
  assert all(s["reused"] for s in second["splits"].values())
  assert {s: v["pairs"] for s, v in second["splits"].items()} == {"train": 600, "dev": 40, "test": 40}
  assert _listing(data_dir) == files  # nothing rewritten
  # Records are ids with EOS appended; decoding gives the raw text back.
  ex = next(p.dataset(data_dir, "dev").as_numpy_iterator())
  assert ex["inputs"].dtype.name == "int32" and ex["inputs"][-1] == vocab_lib.EOS
  assert ex["targets"][-1] == vocab_lib.EOS
  assert _decoded(p, data_dir, "dev") == [(s["inputs"], s["targets"])
                                         for s in p.generate_samples("dev")]
  # The reversed problem reads the same files, swapped.
  rev = registry.problem("translate_ende_numbers_rev")
  assert _decoded(rev, data_dir, "dev") == [(t, i) for i, t in _decoded(p, data_dir, "dev")]


class _FailsInDev(numbers.TranslateEndeNumbers):
  registered_name = "translate_ende_numbers"

  def generate_forward_samples(self, split, tmp_dir=None):
    for i, s in enumerate(super().generate_forward_samples(split, tmp_dir)):
      if split == "dev" and i == 20:
        raise RuntimeError("boom in dev")
      yield s


def test_failed_run_leaves_no_finished_looking_files(tmp_path):
  data_dir = str(tmp_path)
  with pytest.raises(RuntimeError, match="boom in dev"):
    _FailsInDev(**SMALL).generate_data(data_dir)
  names = set(os.listdir(data_dir))
  assert not any(n.endswith(".incomplete") for n in names)
  assert not any("-dev" in n or "-test" in n for n in names)
  assert "translate_ende_numbers-train-00000-of-00001.tfrecord" in names  # complete, kept
  before = _listing(data_dir)
  summary = numbers.TranslateEndeNumbers(**SMALL).generate_data(data_dir)
  assert summary["splits"]["train"]["reused"] and not summary["splits"]["dev"]["reused"]
  after = _listing(data_dir)
  assert {k: after[k] for k in before} == before  # finished files untouched
  assert summary["splits"]["dev"]["pairs"] == 40


def _write(path, lines, gz=False, raw=None):
  data = raw if raw is not None else "".join(l + "\n" for l in lines).encode("utf-8")
  if gz:
    with gzip.open(path, "wb") as f:
      f.write(data)
  else:
    with open(path, "wb") as f:
      f.write(data)
  return str(path)


def _parallel(tmp_path, train_src, train_tgt, **kw):
  src = _write(tmp_path / "train.src.gz", train_src, gz=True, raw=kw.get("raw_src"))
  tgt = _write(tmp_path / "train.tgt", train_tgt)
  dev = (_write(tmp_path / "dev.src", ["hello world"]), _write(tmp_path / "dev.tgt", ["hallo welt"]))
  test = (_write(tmp_path / "test.src", ["good day"]), _write(tmp_path / "test.tgt", ["guten tag"]))
  return TranslateParallelText(train=(src, tgt), dev=dev, test=test, vocab_size=60)


SRC = ["the house is small", "the dog is big", "", "a cat", "the tree is green", "x"]
TGT = ["das haus ist klein", "der hund ist gross", "leer", "eine katze", "", ""]


def test_parallel_text_skips_empty_lines_and_counts_them(tmp_path):
  p = _parallel(tmp_path, SRC, TGT)
  summary = p.generate_data(str(tmp_path / "data"))
  train = summary["splits"]["train"]
  assert train["pairs"] == 3
  assert train["skipped"] == {"empty_inputs": 1, "empty_targets": 2}
  assert "2 empty_targets" in datagen.format_summary(summary)
  assert _decoded(p, str(tmp_path / "data"), "train")[1] == ("the dog is big", "der hund ist gross")


def test_parallel_text_line_count_mismatch_names_both_files(tmp_path):
  p = _parallel(tmp_path, SRC + ["one more", "and more"], TGT)
  with pytest.raises(ValueError) as e:
    p.generate_data(str(tmp_path / "data"))
  msg = str(e.value)
  assert "train.src.gz has 8 lines" in msg and "train.tgt has 6 lines" in msg
  assert not os.path.exists(tmp_path / "data" / "vocab.translate_parallel_text.model")
  assert not [n for n in os.listdir(tmp_path / "data") if n != "dev" and "tfrecord" in n]


def test_parallel_text_invalid_utf8_names_file_and_line(tmp_path):
  raw = b"good line\nsecond line\nbad \xff\xfe line\nfourth\n"
  p = _parallel(tmp_path, None, ["a", "b", "c", "d"], raw_src=raw)
  with pytest.raises(ValueError, match=r"train\.src\.gz:3: invalid UTF-8"):
    p.generate_data(str(tmp_path / "data"))
  assert os.listdir(tmp_path / "data") == []


def test_parallel_text_missing_file_names_its_path(tmp_path):
  p = _parallel(tmp_path, SRC, TGT)
  os.remove(tmp_path / "test.tgt")
  with pytest.raises(FileNotFoundError, match=str(tmp_path / "test.tgt")):
    p.generate_data(str(tmp_path / "data"))
  assert os.listdir(tmp_path / "data") == []


def test_parallel_text_needs_files():
  with pytest.raises(ValueError, match="--parallel_train"):
    TranslateParallelText().check_inputs(None)


def test_deprecated_environment_is_read_by_the_binaries_only(tmp_path, monkeypatch):
  """T2T_PARALLEL_* and a problem's raw_dir_env stand in for missing flags in bin/ (with a
  warning), never in the library."""
  from absl import flags
  from t2t_keras.bin import problem_flags
  p = _parallel(tmp_path, SRC, TGT)
  for split in ("train", "dev", "test"):
    monkeypatch.setenv(f"T2T_PARALLEL_{split.upper()}", ",".join(p.files[split]))
  monkeypatch.setenv("T2T_PARALLEL_VOCAB_SIZE", "77")
  monkeypatch.setenv("T2T_MULTI30K_DIR", str(tmp_path / "m30k"))
  assert registry.problem("translate_parallel_text").files == {}
  assert registry.problem("translate_ende_multi30k").resolve_raw_dir(None) is None
  flags.FLAGS(["t2t-datagen", "--parallel_test=a.en,a.de"])
  warnings = []
  try:
    kwargs = problem_flags.problem_kwargs("translate_parallel_text_rev", warnings.append)
    multi30k = problem_flags.problem_kwargs("translate_ende_multi30k", warnings.append)
  finally:
    flags.FLAGS.unparse_flags()
  assert kwargs == {"raw_dir": None, "vocab_size": "77", "train": ",".join(p.files["train"]),
                    "dev": ",".join(p.files["dev"]), "test": "a.en,a.de",
                    "target_languages": None, "language_temperature": None}
  assert multi30k["raw_dir"] == str(tmp_path / "m30k") and multi30k["train"] is None
  assert warnings == [f"warning: ${v} is deprecated; pass --{f} instead" for v, f in (
      ("T2T_PARALLEL_TRAIN", "parallel_train"), ("T2T_PARALLEL_DEV", "parallel_dev"),
      ("T2T_PARALLEL_VOCAB_SIZE", "vocab_size"), ("T2T_MULTI30K_DIR", "raw_dir"))]
  q = datagen.make_problem("translate_parallel_text_rev",
                           **dict(kwargs, test=",".join(p.files["test"])))
  assert q.files == p.files and q.vocab_size == 77 and q.was_reversed
  assert list(q.generate_samples("dev")) == [{"inputs": "hallo welt", "targets": "hello world"}]


def test_trainer_generate_data_takes_the_problem_flags(tmp_path, monkeypatch):
  """t2t-trainer --generate_data hands --parallel_* and --vocab_size to datagen and to the
  training problem, as t2t-datagen does; its other flags make the TrainerConfig (the
  Trainer itself is replaced here: the trainer's tests train)."""
  from t2t_keras import bin as t2t_bin
  from t2t_keras.bin import trainer as trainer_bin
  from t2t_keras.training import trainer as trainer_lib
  p = _parallel(tmp_path, SRC, TGT)
  seen = {}

  class Recorder:
    def __init__(self, problem, hparams, data_dir, output_dir, config, **kwargs):
      seen.update(problem=problem, config=config)

    def train(self, steps):
      return {"step": steps}

  monkeypatch.setattr(trainer_lib, "Trainer", Recorder)
  code = t2t_bin.run_in_process(trainer_bin, [
      "t2t-trainer", "--generate_data", "--problem=translate_parallel_text",
      f"--data_dir={tmp_path / 'data'}", f"--output_dir={tmp_path / 'run'}",
      "--vocab_size=60", "--seed=3", "--local_eval_frequency=7"]
      + [f"--parallel_{s}={','.join(p.files[s])}" for s in ("train", "dev", "test")])
  assert code == 0
  assert (tmp_path / "data" / "vocab.translate_parallel_text.model").exists()
  assert seen["problem"].files == p.files and seen["problem"].vocab_size == 60
  config = seen["config"]
  assert (config.seed, config.save_every, config.eval_every, config.hparams_set) == \
      (3, 7, 7, "transformer_tiny")


def test_usr_dir_parallel_text_problem_in_a_few_lines(tmp_path):
  raw = tmp_path / "raw"
  raw.mkdir()
  for split in ("train", "dev", "test"):
    _write(raw / f"{split}.en", ["one two three", "four five"])
    _write(raw / f"{split}.fr", ["un deux trois", "quatre cinq"])
  usr = tmp_path / "my_corpus_usr"
  usr.mkdir()
  (usr / "__init__.py").write_text(textwrap.dedent("""
      from t2t_keras import registry
      from t2t_keras.problems.parallel_text import ParallelTextProblem

      @registry.register_problem
      class TranslateEnfrTestCorpus(ParallelTextProblem):
        vocab_size = 50
        files = {s: (f"{s}.en", f"{s}.fr") for s in ("train", "dev", "test")}
  """))
  summary = datagen.generate("translate_enfr_test_corpus", str(tmp_path / "data"),
                             str(raw), t2t_usr_dir=str(usr), log=None)
  assert summary["splits"]["test"]["pairs"] == 2
  assert os.path.exists(tmp_path / "data" / "translate_enfr_test_corpus-test-00000-of-00001.tfrecord")


def test_datagen_binary_flags(tmp_path, capsys):
  from absl import flags
  from t2t_keras.bin import datagen as datagen_bin
  flags.FLAGS(["t2t-datagen", "--registry_help"])
  try:
    datagen_bin.main(["t2t-datagen"])
    assert "translate_ende_numbers" in capsys.readouterr().out
    flags.FLAGS(["t2t-datagen", "--problem=algorithmic_copy_rev", f"--data_dir={tmp_path}",
                 "--max_pairs=50", "--registry_help=false"])
    datagen_bin.main(["t2t-datagen"])
    out = capsys.readouterr().out
    assert "train: 50 pairs" in out and "vocabulary vocab.algorithmic_copy.model" in out
  finally:
    flags.FLAGS.unparse_flags()


@pytest.mark.skipif(not os.path.exists(os.path.join(MULTI30K, "train.en.gz")),
                    reason=f"Multi30k not found at {MULTI30K}")
def test_multi30k_datagen_from_shared_data(tmp_path):
  summary = datagen.generate("translate_ende_multi30k", str(tmp_path), max_pairs=1500,
                             vocab_size=1000, raw_dir=MULTI30K, log=None)
  assert {s: v["pairs"] for s, v in summary["splits"].items()} == {
      "train": 1500, "dev": 1014, "test": 1000}
  assert 500 < summary["vocab_size"] <= 1000
  p = registry.problem("translate_ende_multi30k")
  with gzip.open(os.path.join(MULTI30K, "val.de.gz"), "rt", encoding="utf-8") as f:
    first_de = f.readline().strip()
  with gzip.open(os.path.join(MULTI30K, "val.en.gz"), "rt", encoding="utf-8") as f:
    first_en = f.readline().strip()
  assert _decoded(p, str(tmp_path), "dev")[0] == (first_en, first_de)


@pytest.mark.skipif(not os.path.exists(os.path.join(MULTI30K, "tok", "train.lc.norm.tok.en.gz")),
                    reason=f"Multi30k's tokenized files not found in {MULTI30K}/tok")
def test_multi30k_tok_datagen_reads_the_tok_files(tmp_path):
  """translate_ende_multi30k_tok from tok/: the pairs as written there (XML escapes kept),
  back from the shards unchanged."""
  summary = datagen.generate("translate_ende_multi30k_tok", str(tmp_path), max_pairs=1000,
                             vocab_size=1000, raw_dir=MULTI30K, log=None)
  assert {s: v["pairs"] for s, v in summary["splits"].items()} == {
      "train": 1000, "dev": 1000, "test": 1000}
  p = registry.problem("translate_ende_multi30k_tok")
  tok = os.path.join(MULTI30K, "tok", "test_2016_flickr.lc.norm.tok.")
  with gzip.open(tok + "en.gz", "rt", encoding="utf-8") as en, \
       gzip.open(tok + "de.gz", "rt", encoding="utf-8") as de:
    pairs = [(e.rstrip("\n"), d.rstrip("\n")) for e, d in zip(en, de)]
  vocab = p.get_vocabulary(str(tmp_path))
  written = [(list(ex["inputs"]), list(ex["targets"]))
             for ex in p.dataset(str(tmp_path), "test").as_numpy_iterator()]
  assert written == [(vocab.encode(e) + [vocab_lib.EOS], vocab.encode(d) + [vocab_lib.EOS])
                     for e, d in pairs]
  # Decoding gives the tokens back (a line with a character unseen in 1,000 pairs aside).
  known = [i for i, (e, d) in enumerate(written) if vocab_lib.UNK not in e + d]
  assert len(known) > 900 and any("&quot;" in pairs[i][1] for i in known)
  assert all((vocab.decode(written[i][0]), vocab.decode(written[i][1])) == pairs[i]
             for i in known)


@pytest.mark.skipif(not os.path.exists(os.path.join(MULTI30K, "tok", "train.lc.norm.tok.en.gz")),
                    reason=f"Multi30k's tokenized files not found in {MULTI30K}/tok")
def test_multi30k_tok_vocabulary_has_about_the_anchors_10k_types(tmp_path):
  """The problem's BPE on all 29,000 tok/ train pairs, both sides: 10,000 pieces, of which
  between 9,500 and 10,000 occur in the segmented train text (the anchor's subword-nmt BPE,
  10k merges: 9,708 types)."""
  p = registry.problem("translate_ende_multi30k_tok")
  lines = [side for s in p.generate_forward_samples("train", MULTI30K)
           for side in (s["inputs"], s["targets"])]
  vocab = vocab_lib.train_sentencepiece(lines, str(tmp_path / "v.model"), p.vocab_size)
  used = {i for ids in vocab.encode_batch(lines) for i in ids}
  assert len(lines) == 58000 and vocab.vocab_size == 10000
  assert 9500 <= len(used) <= 10000, len(used)


def test_multi30k_without_directory_says_how_to_set_it(monkeypatch):
  monkeypatch.setenv("T2T_MULTI30K_DIR", "/elsewhere")  # deprecated: the library ignores it
  with pytest.raises(ValueError, match="set --raw_dir or --tmp_dir"):
    registry.problem("translate_ende_multi30k").check_inputs(None)


@pytest.mark.parametrize("name,lang", [("translate_ende_wmt32k", "de"),
                                       ("translate_enfr_wmt32k", "fr")])
def test_wmt14_with_mocked_tfds(tmp_path, name, lang):
  import tensorflow_datasets as tfds
  p = registry.problem(name)
  p = type(p)(vocab_size=40)
  p.num_shards = {"train": 3, "dev": 1, "test": 1}
  with tfds.testing.mock_data(num_examples=12):
    samples = list(p.generate_samples("dev", str(tmp_path / "tmp")))
    assert len(samples) == 12 and set(samples[0]) == {"inputs", "targets"}
    summary = p.generate_data(str(tmp_path / "data"), str(tmp_path / "tmp"))
  assert p.tfds_name == f"wmt14_translate/{lang}-en"
  assert sum(v["pairs"] + sum(v["skipped"].values()) for v in summary["splits"].values()) == 36
  assert len(summary["splits"]["train"]["files"]) == 3
