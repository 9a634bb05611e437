import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.data import packing, pipeline
from t2t_keras.problems import numbers

HP = registry.hparams("transformer_tiny").replace(batch_size=512, max_length=20)


def _pairs_ds(pairs):
  """A checkpointable dataset of {"inputs": int32 [n], "targets": int32 [m]}."""
  width = max(1, max(max(len(a), len(b)) for a, b in pairs))
  pad = lambda x: list(x) + [0] * (width - len(x))  # noqa: E731
  ins = np.array([pad(a) for a, _ in pairs], np.int32)
  tgs = np.array([pad(b) for _, b in pairs], np.int32)
  n = np.array([len(a) for a, _ in pairs], np.int32)
  m = np.array([len(b) for _, b in pairs], np.int32)
  ds = tf.data.Dataset.from_tensor_slices((ins, n, tgs, m))
  return ds.map(lambda x, i, y, j: {"inputs": x[:i], "targets": y[:j]})


def _tagged_pairs(lengths):
  """Pair i has inputs [i + 1] * n and targets [i + 1] * m: its tokens name it."""
  return [([i + 1] * n, [i + 1] * m) for i, (n, m) in enumerate(lengths)]


def _multi30k_like(count, seed=0):
  """Lengths like Multi30k's: mean ~18, std ~7, max 100, sides correlated ~0.9."""
  r = np.random.default_rng(seed)
  a = np.clip(np.round(r.normal(18, 7, count)), 2, 100).astype(int)
  b = np.clip(a + np.round(r.normal(0, 3.5, count)), 2, 100).astype(int)
  return list(zip(a.tolist(), b.tolist()))


def _unpack(row):
  """[(inputs, targets)] of a row, by segment id, checking ids/segments/positions."""
  out = []
  for side in ("inputs", "targets"):
    seg = row[side + "_segmentation"]
    used = int((seg > 0).sum())
    assert (seg[used:] == 0).all() and (row[side][used:] == 0).all()  # pad only at the end
    assert (row[side + "_position"][used:] == 0).all()
    assert (np.diff(seg[:used]) >= 0).all()  # segments contiguous, in order
  num = max(row["inputs_segmentation"].max(), row["targets_segmentation"].max())
  for s in range(1, num + 1):
    pair = []
    for side in ("inputs", "targets"):
      mask = row[side + "_segmentation"] == s
      assert (row[side + "_position"][mask] == np.arange(mask.sum())).all()
      pair.append(tuple(row[side][mask].tolist()))
    out.append(tuple(pair))
  return out


def test_hand_made_rows():
  pairs = [([5, 1], [7, 8, 1]), ([6, 1], [9, 1]), ([3, 3, 3, 1], [4, 1]), ([2, 1], [2, 2, 2, 2, 1])]
  rows = list(packing.pack_dataset(_pairs_ds(pairs), 6, num_open_rows=2).as_numpy_iterator())
  assert len(rows) == 3
  first = {k: v.tolist() for k, v in rows[0].items()}
  assert first == {
      "inputs": [5, 1, 6, 1, 0, 0], "targets": [7, 8, 1, 9, 1, 0],
      "inputs_segmentation": [1, 1, 2, 2, 0, 0], "targets_segmentation": [1, 1, 1, 2, 2, 0],
      "inputs_position": [0, 1, 0, 1, 0, 0], "targets_position": [0, 1, 2, 0, 1, 0]}
  # Pair 4 fits in no open row: the fuller row (pairs 1, 2) is emitted and pair 4
  # starts it again; the flush then emits the fuller row (pair 4) first.
  assert _unpack(rows[1]) == [((2, 1), (2, 2, 2, 2, 1))]
  assert _unpack(rows[2]) == [((3, 3, 3, 1), (4, 1))]
  for row in rows:
    assert set(row) == set(packing.FEATURES)
    assert all(v.dtype == np.int32 and v.shape == (6,) for v in row.values())


def test_every_pair_once_same_segment_both_sides():
  r = np.random.default_rng(1)
  pairs = _tagged_pairs(zip(r.integers(1, 17, 300).tolist(), r.integers(1, 17, 300).tolist()))
  rows = list(packing.pack_dataset(_pairs_ds(pairs), 16, num_open_rows=4).as_numpy_iterator())
  out = [p for row in rows for p in _unpack(row)]
  for inputs, targets in out:  # both sides of a segment come from one pair
    assert len(set(inputs) | set(targets)) == 1
  assert sorted(out) == sorted((tuple(a), tuple(b)) for a, b in pairs)
  assert all(len(v) == 16 for row in rows for v in row.values())


def test_one_sided_and_empty_pairs():
  pairs = [([], [4, 1]), ([5, 1], []), ([], []), ([6, 1], [7, 1])]
  rows = list(packing.pack_dataset(_pairs_ds(pairs), 4).as_numpy_iterator())
  out = [p for row in rows for p in _unpack(row)]
  assert out == [((), (4, 1)), ((5, 1), ()), ((6, 1), (7, 1))]  # the empty pair is dropped


def test_first_fit_fills_earlier_rows():
  lengths = [(6, 6), (6, 6), (3, 3), (1, 1), (5, 5), (2, 2)]
  pairs = _tagged_pairs(lengths)
  rows = list(packing.pack_dataset(_pairs_ds(pairs), 10, num_open_rows=2).as_numpy_iterator())
  tags = [[p[0][0] for p in _unpack(row)] for row in rows]
  # 3 and 4 fill row 0 (not row 1, which also has room for 3); 5 fits nowhere, so
  # full row 0 goes out and 5 starts it; 6 fits in row 0 next to 5.
  assert tags == [[1, 3, 4], [5, 6], [2]]


def test_deterministic():
  pairs = _tagged_pairs(_multi30k_like(300, seed=2))
  def rows():
    ds = packing.pack_dataset(_pairs_ds(pairs), 64)
    return [r["inputs"].tolist() for r in ds.as_numpy_iterator()]
  assert rows() == rows()


def _assert_restores(ds, tmp_path, skip, check):
  """A checkpointed iterator of ds, restored, yields the same next `check` rows."""
  it = iter(ds)
  for _ in range(skip):
    next(it)
  ckpt = tf.train.Checkpoint(iterator=it)
  path = ckpt.save(str(tmp_path / "ckpt"))
  expected = [next(it)["targets"].numpy().tolist() for _ in range(check)]
  ckpt.restore(path)
  assert [next(it)["targets"].numpy().tolist() for _ in range(check)] == expected


def test_checkpoint_restores_iterator(tmp_path):
  pairs = _tagged_pairs(_multi30k_like(200, seed=3))
  ds = packing.pack_dataset(_pairs_ds(pairs).shuffle(50, seed=1).repeat(), 64)
  _assert_restores(ds, tmp_path, skip=7, check=10)


def test_too_long_example_fails_clearly():
  ds = packing.pack_dataset(_pairs_ds([([1] * 3, [1] * 9)]), 8)
  with pytest.raises(tf.errors.InvalidArgumentError, match="longer than the row length 8"):
    list(ds)
  with pytest.raises(ValueError, match="length must be >= 1"):
    packing.pack_dataset(_pairs_ds([([1], [1])]), 0)


@pytest.mark.parametrize("length,max_padding", [(256, 0.03), (128, 0.05)])
def test_padding_on_multi30k_like_lengths(length, max_padding):
  pairs = _tagged_pairs(_multi30k_like(2000))
  ds = packing.pack_dataset(_pairs_ds(pairs).repeat(), length).take(150).batch(150)
  batch = next(iter(ds))
  frac = pipeline.padding_fraction(batch)
  ids_frac = float(np.mean([(batch[k].numpy() == 0).mean() for k in ("inputs", "targets")]))
  assert frac == pytest.approx(ids_frac)
  assert frac <= max_padding, frac


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("numbers"))
  numbers.TranslateEndeNumbers(num_train=300, num_dev=60, num_test=10).generate_data(d)
  return d


@pytest.fixture(scope="module")
def problem():
  return registry.problem("translate_ende_numbers")


def test_make_dataset_packed_static_shapes(problem, data_dir):
  ds = pipeline.make_dataset(problem, data_dir, "train", HP.replace(packed_length=32),
                             pipeline.InputSettings(shuffle=True, seed=1, repeat=True))
  rows = HP.batch_size // 32
  for key in packing.FEATURES:
    assert ds.element_spec[key].shape.as_list() == [rows, 32]
    assert ds.element_spec[key].dtype == tf.int32
  for b in ds.take(3):
    assert pipeline.batch_tokens(b) == rows * 32 <= HP.batch_size
    assert pipeline.padding_fraction(b) < 0.25
  # The setting wins over hparams; a budget below one row still gives one row.
  ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                             pipeline.InputSettings(shuffle=False, seed=0, repeat=True,
                                                    batch_size=16, max_length=16, packed_length=24))
  assert ds.element_spec["inputs"].shape.as_list() == [1, 24]


def test_make_dataset_packed_one_epoch_sees_every_pair_once(problem, data_dir):
  ds = pipeline.make_dataset(problem, data_dir, "dev", HP,
                             pipeline.InputSettings(shuffle=True, seed=1, repeat=False,
                                                    packed_length=40))
  seen = sorted(p for b in ds.as_numpy_iterator() for i in range(len(b["inputs"]))
                for p in _unpack({k: v[i] for k, v in b.items()}))
  expected = sorted((tuple(ex["inputs"].tolist()), tuple(ex["targets"].tolist()))
                    for ex in problem.dataset(data_dir, "dev").as_numpy_iterator()
                    if max(len(ex["inputs"]), len(ex["targets"])) <= HP.max_length)
  assert seen == expected


def test_make_dataset_packed_length_below_max_length(problem, data_dir):
  with pytest.raises(ValueError, match="packed_length 16 is shorter than the length limit 20"):
    pipeline.make_dataset(problem, data_dir, "train", HP,
                          pipeline.InputSettings(shuffle=False, seed=0, repeat=True,
                                                 packed_length=16))


def test_make_dataset_packed_two_replicas_equal_shapes(problem, data_dir, two_cpu_strategy):
  strategy = two_cpu_strategy  # one per session (conftest): strategies made in turn can abort
  dist = strategy.distribute_datasets_from_function(
      lambda ctx: pipeline.make_dataset(
          problem, data_dir, "train", HP,
          pipeline.InputSettings(shuffle=True, seed=2, repeat=True, packed_length=32),
          input_context=ctx))
  batch = next(iter(dist))
  for key in packing.FEATURES:
    values = strategy.experimental_local_results(batch[key])
    assert [v.shape.as_list() for v in values] == [[8, 32], [8, 32]]


def test_make_dataset_packed_checkpoint(problem, data_dir, tmp_path):
  ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                             pipeline.InputSettings(shuffle=True, seed=4, repeat=True,
                                                    packed_length=24))
  _assert_restores(ds, tmp_path, skip=3, check=4)
