"""Every path of a run on a tf.io.gfile filesystem: TensorFlow's in-process `ram://`
stands in for gs://, s3:// and HDFS (no directory rename, no local path).

The binaries run in this process (`t2t_keras.bin.run_in_process`), as in test_cli.py:
ram:// lives only as long as the process.
"""

import gzip
import json
import re

import numpy as np
import pytest
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers the SavedModel's tokenizer ops)

from t2t_keras import bin as t2t_bin
from t2t_keras import fileio
from t2t_keras.bin import avg_all as avg_all_bin
from t2t_keras.bin import datagen as datagen_bin
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.bin import exporter as exporter_bin
from t2t_keras.bin import trainer as trainer_bin

BINARIES = {"trainer": trainer_bin, "decoder": decoder_bin, "avg-all": avg_all_bin,
            "exporter": exporter_bin, "datagen": datagen_bin}
TINY = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,num_decoder_layers=1,"
        "batch_size=256,max_length=12")
WORDS = "red green blue black white big small old new cat dog bird".split()


def run_binary(capsys, name, *args):
  capsys.readouterr()
  code = t2t_bin.run_in_process(BINARIES[name], [f"t2t-{name}", *args])
  out = capsys.readouterr()
  assert code == 0, f"t2t-{name} exited {code}: {out.err[-2000:]}"
  return out.out


def write_corpus(root, n_train=400):
  """Source: 2-5 random words; target: the same words reversed. train.src is gzipped."""
  rng = np.random.RandomState(0)
  files = {}
  for split, n in (("train", n_train), ("dev", 12), ("test", 8)):
    src = [" ".join(rng.choice(WORDS, rng.randint(2, 6))) for _ in range(n)]
    tgt = [" ".join(reversed(s.split())) for s in src]
    for side, lines in (("src", src), ("tgt", tgt)):
      text = "".join(line + "\n" for line in lines).encode("utf-8")
      path = f"{root}/raw/{split}.{side}" + (".gz" if (split, side) == ("train", "src") else "")
      fileio.makedirs(fileio.dirname(path))
      with fileio.open(path, "wb") as f:
        f.write(gzip.compress(text) if path.endswith(".gz") else text)
      files[split, side] = path
  return files


@pytest.mark.heavy
def test_whole_run_under_ram_filesystem(capsys, tmp_path, monkeypatch):
  """datagen, training with evaluation (dev BLEU) and early stopping, a resume, t2t-avg-all,
  t2t-decoder and t2t-exporter with every path under ram://: the run writes its files
  (run.json, best/, metrics, curves, TensorBoard events), resumes from its checkpoint,
  the exported SavedModel (loaded from ram://) translates the test file as the decoder
  did, and nothing is written to the working directory."""
  monkeypatch.chdir(tmp_path)
  root = "ram://t2t_whole_run"
  files = write_corpus(root)
  data, run, avg, exp = (f"{root}/{d}" for d in ("data", "run", "avg", "export"))

  run_binary(capsys, "datagen", "--problem=translate_parallel_text", f"--data_dir={data}",
             "--vocab_size=60",
             *(f"--parallel_{split}={files[split, 'src']},{files[split, 'tgt']}"
               for split in ("train", "dev", "test")))
  names = fileio.listdir(data)
  assert "vocab.translate_parallel_text.model" in names
  assert "translate_parallel_text-train-00000-of-00001.tfrecord" in names
  stats = json.loads(fileio.read_text(f"{data}/translate_parallel_text-train.stats.json"))
  assert stats["pairs"] == 400

  train = ["--problem=translate_parallel_text", f"--data_dir={data}", f"--output_dir={run}",
           "--hparams_set=transformer_tiny", f"--hparams={TINY}", "--use_xla=false",
           "--save_every=2", "--eval_every=2", "--eval_steps=1", "--eval_bleu_sentences=4",
           "--eval_early_stopping_steps=100", "--log_every=2"]
  first = run_binary(capsys, "trainer", *train, "--train_steps=4")
  assert re.search(r"train split: \d+ of 400 pairs are longer than max_length=12", first)
  again = run_binary(capsys, "trainer", *train, "--train_steps=6")
  assert f"resumed from {run}/ckpt-4 at step 4" in again
  assert tf.train.latest_checkpoint(run) == f"{run}/ckpt-6"
  history = [json.loads(line) for line in fileio.read_text(f"{run}/metrics.jsonl").splitlines()]
  assert [r["step"] for r in history if "dev_loss" in r] == [2, 4, 6]
  progress = [r for r in history if "loss" in r]
  assert [r["step"] for r in progress] == [2, 4, 6]
  assert all(0 < r["input_wait"] < 1 for r in progress)  # the measured share of wall time
  info = json.loads(fileio.read_text(f"{run}/run.json"))
  assert info["best"]["checkpoint"].startswith(f"{run}/best/ckpt-")
  assert {"hparams.json", "run.json", "vocab.model"} <= set(fileio.listdir(f"{run}/best"))
  assert fileio.exists(f"{run}/learning_curves.png")
  assert fileio.listdir(f"{run}/train")  # TensorBoard events

  run_binary(capsys, "avg-all", f"--model_dir={run}", f"--output_dir={avg}", "--n=2")
  assert tf.train.latest_checkpoint(avg) == f"{avg}/ckpt-6"

  out_file = f"{root}/out/test.tgt"
  no_xla = "--decode_hparams=jit=false"  # the same search, without compiling it twice
  run_binary(capsys, "decoder", f"--output_dir={avg}", f"--decode_from_file={files['test', 'src']}",
             f"--decode_to_file={out_file}", f"--decode_reference={files['test', 'tgt']}", no_xla)
  decoded = fileio.read_text(out_file).splitlines()
  assert len(decoded) == 8

  run_binary(capsys, "exporter", f"--output_dir={avg}", f"--export_dir={exp}", no_xla)
  assert fileio.listdir(exp) == ["6"]
  served = tf.saved_model.load(f"{exp}/6").signatures["serving_default"]
  sources = fileio.read_text(files["test", "src"]).splitlines()
  outputs = served(inputs=tf.constant(sources))["outputs"].numpy()
  assert [o.decode("utf-8") for o in outputs] == decoded

  assert list(tmp_path.iterdir()) == []


def test_fileio_local_and_remote_agree(tmp_path):
  """The same calls on a local directory and on ram:// give the same listing and bytes;
  write_atomic leaves no temporary file, and an error inside atomic_open none either, with
  the old file kept; upload_tree copies nested directories."""
  for root in (str(tmp_path / "local"), "ram://t2t_fileio"):
    fileio.makedirs(f"{root}/a/b")
    fileio.write_atomic(f"{root}/a/x.json", '{"k": 1}')
    fileio.write_atomic(f"{root}/a/b/y.bin", b"\x00\x01")
    fileio.copy_atomic(f"{root}/a/x.json", f"{root}/a/z.json")
    assert fileio.listdir(f"{root}/a") == ["b", "x.json", "z.json"]
    assert fileio.read_bytes(f"{root}/a/b/y.bin") == b"\x00\x01"
    assert fileio.same_content(f"{root}/a/x.json", f"{root}/a/z.json")
    assert fileio.isdir(f"{root}/a/b") and fileio.isfile(f"{root}/a/x.json")
    assert not fileio.isfile(f"{root}/a/b")
    fileio.replace(f"{root}/a/z.json", f"{root}/a/x.json")
    assert fileio.listdir(f"{root}/a") == ["b", "x.json"]
    assert fileio.glob(f"{root}/a/*.json") == [f"{root}/a/x.json"]
    with pytest.raises(ZeroDivisionError):  # an error while writing keeps the old file
      with fileio.atomic_open(f"{root}/a/x.json", "w") as f:
        f.write("half")
        assert fileio.exists(f"{root}/a/x.json{fileio.TMP_SUFFIX}")
        1 / 0  # pylint: disable=pointless-statement
    assert fileio.listdir(f"{root}/a") == ["b", "x.json"]
    assert fileio.read_text(f"{root}/a/x.json") == '{"k": 1}'
    fileio.remove(f"{root}/a/x.json")
    fileio.remove(f"{root}/a/x.json")  # missing: fine
    assert not fileio.exists(f"{root}/a/x.json")
  local = tmp_path / "tree"
  (local / "variables").mkdir(parents=True)
  (local / "saved_model.pb").write_bytes(b"pb")
  (local / "variables" / "v.index").write_bytes(b"ix")
  fileio.upload_tree(str(local), "ram://t2t_fileio/up/1")
  assert fileio.listdir("ram://t2t_fileio/up/1") == ["saved_model.pb", "variables"]
  assert fileio.read_bytes("ram://t2t_fileio/up/1/variables/v.index") == b"ix"
  assert fileio.abspath("ram://x/y") == "ram://x/y"
  assert fileio.abspath("rel") == str(tmp_path.cwd() / "rel")


@pytest.mark.parametrize("path", ["gs://b/x", "ram://x", "s3://b/k"])
def test_remote_paths_are_not_made_local(path):
  assert fileio.is_remote(path) and fileio.abspath(path) == path
