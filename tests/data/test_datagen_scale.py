"""Datagen at corpus scale: shards as contiguous ranges, written by several processes,
resumed shard by shard; the vocabulary's bounded sample; the long-pair count from
datagen's length histogram; the chief generating while other workers wait."""

import collections
import json
import os
import signal
import subprocess
import sys
import threading
import time

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import bin as t2t_bin
from t2t_keras.bin import datagen as datagen_bin
from t2t_keras.data import datagen, pipeline, shards
from t2t_keras.data import vocabulary as vocab_lib
from t2t_keras.errors import InputError
from t2t_keras.problems.parallel_text import TranslateParallelText

WORDS = "red green blue black white big small old new cat dog bird tree house".split()


def _corpus(directory, n_train=400):
  """{split: (src path, tgt path)}: 2-7 random words, the target reversed; line 7 of train
  has an empty target (skipped and counted)."""
  rng = np.random.RandomState(0)
  os.makedirs(directory, exist_ok=True)
  out = {}
  for split, n in (("train", n_train), ("dev", 10), ("test", 10)):
    src = [" ".join(rng.choice(WORDS, rng.randint(2, 8))) for _ in range(n)]
    tgt = [" ".join(reversed(s.split())) for s in src]
    if split == "train":
      tgt[7] = ""
    paths = []
    for side, lines in (("src", src), ("tgt", tgt)):
      paths.append(os.path.join(directory, f"{split}.{side}"))
      with open(paths[-1], "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)
    out[split] = tuple(paths)
  return out


def _problem(files, **kwargs):
  return TranslateParallelText(train=",".join(files["train"]), dev=",".join(files["dev"]),
                               test=",".join(files["test"]), vocab_size=80, **kwargs)


def _records(path):
  return [r for r in tf.data.TFRecordDataset(path).as_numpy_iterator()]


def _bytes(data_dir):
  return {n: open(os.path.join(data_dir, n), "rb").read() for n in sorted(os.listdir(data_dir))}


@pytest.fixture(scope="module")
def files(tmp_path_factory):
  return _corpus(str(tmp_path_factory.mktemp("raw")))


def test_train_shards_hold_contiguous_ranges_with_length_histograms(files, tmp_path):
  problem = _problem(files, num_train_shards=4)
  summary = problem.generate_data(str(tmp_path))
  vocab = problem.get_vocabulary(str(tmp_path))
  src = open(files["train"][0], encoding="utf-8").read().splitlines()
  paths = problem.shard_paths(str(tmp_path), "train")
  assert len(paths) == 4 and all(p.endswith(f"-of-00004.tfrecord") for p in paths)
  for i, path in enumerate(paths):
    expected = [s for k, s in enumerate(src) if i * 100 <= k < (i + 1) * 100 and k != 7]
    decoded = [vocab.decode(problem.parse_records(tf.constant(r))["inputs"].numpy())
               for r in _records(path)]
    assert decoded == expected
  train = summary["splits"]["train"]
  assert train["pairs"] == 399 and train["skipped"] == {"empty_targets": 1}
  assert sum(train["lengths"].values()) == 399
  assert not any(n.endswith(".stats.json") and "-of-" in n for n in os.listdir(tmp_path))
  # The trainer's long-pair count reads the histogram, and agrees with a pass over the data.
  counted = pipeline.count_long_pairs(problem, str(tmp_path), "train", 6)
  stats_path = problem.stats_path(str(tmp_path), "train")
  stats = json.load(open(stats_path))
  del stats["lengths"]
  json.dump(stats, open(stats_path, "w"))
  assert pipeline.count_long_pairs(problem, str(tmp_path), "train", 6) == counted
  assert 0 < counted["dropped"] < counted["total"] == 399


class _Killed(Exception):
  pass


def test_killed_mid_split_resumes_without_redoing_finished_shards(files, tmp_path):
  """A datagen that dies at raw pair 250 keeps train shards 0 and 1 (pairs 0-199); the
  rerun writes only shards 2 and 3, and the files equal an uninterrupted run's."""
  data, fresh = str(tmp_path / "data"), str(tmp_path / "fresh")
  problem = _problem(files, num_train_shards=4)
  original = problem.raw_samples

  def dies(split, tmp_dir=None):
    for k, sample in enumerate(original(split, tmp_dir)):
      if split == "train" and k == 250 and os.path.exists(problem.vocab_path(data)):
        raise _Killed()  # in the shards' pass, not the vocabulary's
      yield sample

  problem.raw_samples = dies
  with pytest.raises(_Killed):
    problem.generate_data(data)
  names = set(os.listdir(data))
  paths = problem.shard_paths(data, "train")
  assert {os.path.basename(p) for p in paths[:2]} <= names
  assert not any(n.endswith(".incomplete") for n in names)
  assert os.path.basename(paths[2]) not in names
  finished = {p: os.stat(p).st_mtime_ns for p in paths[:2]}

  lines = []
  rerun = _problem(files, num_train_shards=4)
  rerun.generate_data(data, log=lines.append)
  assert "train: 2 of 4 shards finished earlier; writing the other 2" in lines
  assert {p: os.stat(p).st_mtime_ns for p in paths[:2]} == finished
  _problem(files, num_train_shards=4).generate_data(fresh)
  assert _bytes(data) == _bytes(fresh)


@pytest.mark.heavy
def test_processes_write_the_same_files_as_one(files, tmp_path, capsys):
  """t2t-datagen --num_concurrent_processes=2 (spawned workers) writes byte-identical
  shards and stats to one process."""
  results = []
  for workers in (1, 2):
    data = str(tmp_path / f"w{workers}")
    capsys.readouterr()
    code = t2t_bin.run_in_process(datagen_bin, [
        "t2t-datagen", "--problem=translate_parallel_text", f"--data_dir={data}",
        "--vocab_size=80", "--num_train_shards=4", f"--num_concurrent_processes={workers}",
        *(f"--parallel_{split}={','.join(files[split])}" for split in ("train", "dev", "test"))])
    out = capsys.readouterr()
    assert code == 0, out.err
    results.append(_bytes(data))
    if workers == 2:
      assert "train: 4/4 shards written by 2 processes" in out.out
  assert results[0] == results[1]


def _workers(pid):
  """The pids of pid's live multiprocessing children (spawned shard writers; Linux: /proc)."""
  found = []
  for entry in os.listdir("/proc"):
    try:
      with open(f"/proc/{entry}/stat") as f:
        fields = f.read().rsplit(")", 1)[1].split()
      with open(f"/proc/{entry}/cmdline", "rb") as f:
        spawned = b"spawn_main" in f.read()
    except (OSError, ValueError):
      continue
    if fields[0] != "Z" and int(fields[1]) == pid and spawned:
      found.append(int(entry))
  return found


@pytest.mark.heavy
@pytest.mark.skipif(not sys.platform.startswith("linux"), reason="reads /proc")
def test_a_killed_datagen_takes_its_shard_writers_with_it(files, tmp_path):
  """SIGKILL to t2t-datagen (no handler runs) once its two shard writers are started: the
  writers end with it (PR_SET_PDEATHSIG). Before, they went on writing their shards
  beside the rerun's writers of the same shards, then waited for work forever (found by
  benchmarks/kill_loop.py: alive two minutes after the kill)."""
  proc = subprocess.Popen(
      [sys.executable, "-m", "t2t_keras.bin.datagen", "--problem=translate_parallel_text",
       f"--data_dir={tmp_path}", "--vocab_size=80", "--num_train_shards=4",
       "--num_concurrent_processes=2",
       *(f"--parallel_{split}={','.join(files[split])}" for split in ("train", "dev", "test"))],
      stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL,
      env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  workers, deadline = [], time.time() + 120
  while len(workers) < 2:
    assert proc.poll() is None and time.time() < deadline, "no two shard writers started"
    time.sleep(0.05)
    workers = _workers(proc.pid)
  proc.kill()
  proc.wait()
  deadline = time.time() + 20
  while _alive(workers) and time.time() < deadline:
    time.sleep(0.1)
  left = _alive(workers)
  for pid in left:
    os.kill(pid, signal.SIGKILL)
  assert left == [], "the killed datagen's shard writers live on"


def _alive(pids):
  """Those of `pids` that are live processes (not zombies)."""
  alive = []
  for pid in pids:
    try:
      with open(f"/proc/{pid}/stat") as f:
        if f.read().rsplit(")", 1)[1].split()[0] != "Z":
          alive.append(pid)
    except OSError:
      pass
  return alive


def test_another_shard_count_in_the_same_data_dir_is_refused(files, tmp_path):
  _problem(files).generate_data(str(tmp_path))
  for name in os.listdir(tmp_path):
    if name.startswith("translate_parallel_text-train.stats"):
      os.remove(tmp_path / name)  # the split unfinished: datagen would write it again
  with pytest.raises(InputError, match=r"holds train files of another shard count "
                                       r"\(translate_parallel_text-train-00000-of-00001"):
    _problem(files, num_train_shards=3).generate_data(str(tmp_path))


@pytest.mark.parametrize("counted,message", [(300, "more than the 300 samples counted"),
                                              (500, "400 samples, but 500 were counted")])
def test_a_wrong_count_fails_instead_of_dropping_pairs(files, tmp_path, counted, message):
  problem = _problem(files, num_train_shards=2)
  problem.count_forward_samples = lambda split, tmp_dir=None, limit=None: counted
  with pytest.raises(ValueError, match=message):
    problem.generate_data(str(tmp_path))
  assert not any(n.endswith(".incomplete") for n in os.listdir(tmp_path))


def test_a_capped_split_is_counted_without_reading_past_the_cap():
  """--max_pairs=4 on a problem without a cheap count: the count is 4 and the samples
  after the fourth are never read (a pass over a WMT-size split otherwise)."""
  problem = datagen.make_problem("algorithmic_copy", max_pairs=4)

  def samples(split, tmp_dir=None):
    del split, tmp_dir
    yield from ({"inputs": "1 2", "targets": "1 2"} for _ in range(4))
    raise AssertionError("read past max_pairs")

  problem.generate_forward_samples = samples
  assert problem.count_raw_samples("train") == 4


def test_sample_in_order_is_uniform_ordered_and_seeded():
  items = list(range(20))
  assert vocab_lib.sample_in_order(iter(items), 50, 1) == (items, 20)
  assert vocab_lib.sample_in_order(iter(items), 0, 1) == (items, 20)
  sample, total = vocab_lib.sample_in_order(iter(items), 5, 1)
  assert total == 20 and len(sample) == 5 and sample == sorted(sample)
  assert vocab_lib.sample_in_order(iter(items), 5, 1)[0] == sample
  # Each item is kept with probability 5/20: 4,000 seeds, chi-square over 20 cells (19
  # degrees of freedom; 43.8 is the 0.999 quantile).
  counts = collections.Counter(x for seed in range(4000)
                               for x in vocab_lib.sample_in_order(iter(items), 5, seed)[0])
  expected = 4000 * 5 / 20
  chi2 = sum((counts[i] - expected) ** 2 / expected for i in items)
  assert chi2 < 43.8, chi2


def test_vocabulary_trains_on_a_seeded_sample(files, tmp_path):
  lines = []
  full = _problem(files)
  full.generate_data(str(tmp_path / "all"), log=lines.append)
  assert "training a 80-piece BPE vocabulary on both sides of all 399 train pairs" in lines
  lines.clear()
  _problem(files).generate_data(str(tmp_path / "s1"), vocab_sample_pairs=50,
                                vocab_sample_seed=3, log=lines.append)
  assert any("a sample of 50 of 399 train pairs (seed 3" in line for line in lines)
  _problem(files).generate_data(str(tmp_path / "s2"), vocab_sample_pairs=50,
                                vocab_sample_seed=3)
  model = "vocab.translate_parallel_text.model"
  assert _bytes(tmp_path / "s1")[model] == _bytes(tmp_path / "s2")[model]


def test_non_chief_waits_for_the_chiefs_datagen(files, tmp_path):
  data = str(tmp_path)
  with pytest.raises(TimeoutError, match="were not finished after 0 s"):
    datagen.wait_for("translate_parallel_text", data, log=None, timeout_s=0, poll_s=0.01)
  chief = threading.Thread(target=lambda: (time.sleep(0.5), _problem(files).generate_data(data)))
  chief.start()
  lines = []
  datagen.wait_for("translate_parallel_text", data, log=lines.append, poll_s=0.05)
  chief.join()
  assert lines == [f"waiting for the chief to generate translate_parallel_text in {data}"]
  assert datagen.is_generated(_problem(files), data)
