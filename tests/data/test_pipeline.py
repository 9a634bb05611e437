import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.data import pipeline
from t2t_keras.problems import numbers

HP = registry.hparams("transformer_tiny").replace(batch_size=512, max_length=20)


@pytest.fixture(scope="module")
def data_dir(tmp_path_factory):
  d = str(tmp_path_factory.mktemp("numbers"))
  numbers.TranslateEndeNumbers(num_train=1500, num_dev=60, num_test=60).generate_data(d)
  return d


@pytest.fixture(scope="module")
def problem():
  return registry.problem("translate_ende_numbers")


def _lengths(problem, data_dir, split):
  return [max(len(ex["inputs"]), len(ex["targets"]))
          for ex in problem.dataset(data_dir, split).as_numpy_iterator()]


def test_bucket_boundaries():
  b = pipeline.bucket_boundaries(256)
  assert b[:10] == list(range(1, 11)) and b[-1] == 256
  assert all(y > x for x, y in zip(b, b[1:]))
  assert all(y / x <= 1.1 + 1 / x for x, y in zip(b, b[1:]))
  assert pipeline.bucket_boundaries(5) == [1, 2, 3, 4, 5]


def test_long_pairs_dropped_and_counted(problem, data_dir):
  lengths = _lengths(problem, data_dir, "train")
  limit = 12
  counted = pipeline.count_long_pairs(problem, data_dir, "train", limit)
  assert counted["total"] == len(lengths) == 1500
  assert counted["dropped"] == sum(n > limit for n in lengths) > 0
  ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                             pipeline.InputSettings(shuffle=False, seed=0, repeat=False,
                                                    max_length=limit))
  kept = 0
  for b in ds:
    kept += int(tf.reduce_sum(tf.cast(b["targets"][:, 0] != 0, tf.int32)))
    assert b["inputs"].shape[1] <= limit and b["targets"].shape[1] <= limit
  assert kept == counted["kept"]


@pytest.mark.parametrize("mode,max_padding", [("pair", 0.05), ("max", 0.20)])
def test_batches_respect_budget_dtype_and_padding(problem, data_dir, mode, max_padding):
  ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                             pipeline.InputSettings(shuffle=True, seed=3, repeat=True,
                                                    bucket_mode=mode))
  assert ds.element_spec["inputs"].dtype == tf.int32
  pads = total = 0
  for b in ds.take(60):
    assert b["inputs"].dtype == tf.int32 and b["targets"].dtype == tf.int32
    assert pipeline.batch_tokens(b) <= HP.batch_size
    assert b["inputs"].shape[1] in pipeline.bucket_boundaries(HP.max_length)
    # Full batches: a repeated stream emits only full windows, each the budget's rows for
    # its cell (padded widths S, T): budget // max(S, T), never fewer.
    rows, width = b["inputs"].shape[0], max(b["inputs"].shape[1], b["targets"].shape[1])
    assert rows == HP.batch_size // width, (rows, b["inputs"].shape, b["targets"].shape)
    size = int(tf.size(b["inputs"])) + int(tf.size(b["targets"]))
    pads += pipeline.padding_fraction(b) * size
    total += size
  assert pads / total <= max_padding


def test_one_epoch_sees_every_pair_once(problem, data_dir):
  ds = pipeline.make_dataset(problem, data_dir, "dev", HP,
                             pipeline.InputSettings(shuffle=True, seed=1, repeat=False,
                                                    max_length=256))
  seen = sorted(tuple(x[x != 0].tolist()) for b in ds.as_numpy_iterator() for x in b["targets"])
  expected = sorted(tuple(ex["targets"].tolist())
                    for ex in problem.dataset(data_dir, "dev").as_numpy_iterator())
  assert seen == expected


def test_deterministic_given_seed(problem, data_dir):
  def first(seed):
    ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                               pipeline.InputSettings(shuffle=True, seed=seed, repeat=True))
    return [b["inputs"].numpy().tolist() for b in ds.take(8)]
  assert first(5) == first(5)
  assert first(5) != first(6)


def test_max_mode_pads_both_sides_to_one_boundary(problem, data_dir):
  ds = pipeline.make_dataset(problem, data_dir, "train", HP,
                             pipeline.InputSettings(shuffle=True, seed=1, repeat=True,
                                                    bucket_mode="max"))
  for b in ds.take(10):
    assert b["inputs"].shape[1] == b["targets"].shape[1]
    assert pipeline.batch_tokens(b) <= HP.batch_size


def test_reversed_problem_swaps_features(data_dir):
  fwd = registry.problem("translate_ende_numbers").dataset(data_dir, "dev")
  rev = registry.problem("translate_ende_numbers_rev").dataset(data_dir, "dev")
  for a, b in zip(fwd.take(3).as_numpy_iterator(), rev.take(3).as_numpy_iterator()):
    assert a["inputs"].tolist() == b["targets"].tolist()


@pytest.mark.parametrize("name", ["translate_ende_numbers", "translate_ende_numbers_rev"])
def test_records_parsed_in_a_chunk_equal_parsed_one_by_one(data_dir, name):
  problem = registry.problem(name)
  records = problem.records(data_dir, "dev")
  chunk = problem.parse_records(next(iter(records.batch(7))))
  assert isinstance(chunk["inputs"], tf.RaggedTensor) and chunk["inputs"].shape[0] == 7
  for i, ex in enumerate(problem.dataset(data_dir, "dev").take(7).as_numpy_iterator()):
    assert chunk["inputs"][i].numpy().tolist() == ex["inputs"].tolist()
    assert chunk["targets"][i].numpy().tolist() == ex["targets"].tolist()


def test_missing_data_says_run_datagen(problem, tmp_path):
  with pytest.raises(FileNotFoundError, match="t2t-datagen --problem=translate_ende_numbers"):
    pipeline.make_dataset(problem, str(tmp_path), "train", HP,
                          pipeline.InputSettings(shuffle=False, seed=0, repeat=False))


def test_mirrored_strategy_two_replicas_equal_shapes_and_split_budget(problem, data_dir,
                                                                   two_cpu_strategy):
  strategy = two_cpu_strategy  # one per session (conftest): strategies made in turn can abort
  contexts = []

  def dataset_fn(ctx):
    contexts.append(ctx)
    return pipeline.make_dataset(problem, data_dir, "train", HP,
                                 pipeline.InputSettings(shuffle=True, seed=2, repeat=True),
                                 input_context=ctx)

  dist = strategy.distribute_datasets_from_function(dataset_fn)
  assert contexts[0].num_replicas_in_sync == 2
  it = iter(dist)
  for _ in range(6):
    batch = next(it)
    per_replica = [strategy.experimental_local_results(batch[k]) for k in ("inputs", "targets")]
    for values in per_replica:
      assert len(values) == 2
      assert values[0].shape == values[1].shape
    inputs = per_replica[0]
    assert inputs[0].numpy().tolist() != inputs[1].numpy().tolist()  # different data
    for inp, tgt in zip(*per_replica):
      b = {"inputs": inp, "targets": tgt}
      assert pipeline.batch_tokens(b) <= HP.batch_size // 2


def test_auto_bucket_mode_is_max_outside_the_trainer(problem, data_dir):
  """make_dataset reads "auto" as "max" (evaluation, tools); unknown modes are named."""
  hp = HP.replace(bucket_mode="auto")

  def shapes(mode):
    ds = pipeline.make_dataset(problem, data_dir, "train", hp,
                               pipeline.InputSettings(shuffle=False, seed=0, repeat=False,
                                                      bucket_mode=mode))
    return [(b["inputs"].shape[1], b["targets"].shape[1]) for b in ds.take(20)]

  auto = shapes(None)
  assert auto == shapes("max") and all(s == t for s, t in auto)
  assert any(s != t for s, t in shapes("pair"))
  with pytest.raises(ValueError, match="'pair', 'max' or 'auto', got 'best'"):
    pipeline.make_dataset(problem, data_dir, "train", hp,
                          pipeline.InputSettings(shuffle=False, seed=0, repeat=False,
                                                 bucket_mode="best"))


@pytest.mark.parametrize("packed_length", [0, 32])
def test_one_pass_on_two_replicas_keeps_every_pair(problem, data_dir, packed_length):
  """Evaluation's stream for 2 replicas of one pipeline: every dev pair appears once (its
  target tokens add up to the split's), each step's two batches share one shape, and the
  padding added to complete a step holds no tokens."""
  ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                   num_replicas_in_sync=2)
  batches = list(pipeline.make_dataset(problem, data_dir, "dev", HP,
                                       pipeline.InputSettings(shuffle=False, seed=0, repeat=False,
                                                              packed_length=packed_length),
                                       input_context=ctx))
  assert len(batches) % 2 == 0
  for first, second in zip(batches[::2], batches[1::2]):
    assert {k: v.shape for k, v in first.items()} == {k: v.shape for k, v in second.items()}
  tokens = sum(int(np.count_nonzero(b["targets"])) for b in batches)
  expected = sum(len(ex["targets"]) for ex in problem.dataset(data_dir, "dev").as_numpy_iterator()
                 if max(len(ex["inputs"]), len(ex["targets"])) <= HP.max_length)
  assert tokens == expected > 0


@pytest.mark.parametrize("packed_length", [0, 32])
def test_parallel_streams_keep_every_pair_in_runs_of_one_shape(problem, data_dir, packed_length):
  """streams=2 for 2 replicas of one pipeline, one pass: every pair kept appears once (the
  two streams shard the records), and each step's two batches (a run, interleaved whole)
  share one shape."""
  ctx = tf.distribute.InputContext(num_input_pipelines=1, input_pipeline_id=0,
                                   num_replicas_in_sync=2)
  batches = list(pipeline.make_dataset(problem, data_dir, "train", HP,
                                       pipeline.InputSettings(shuffle=True, seed=4, repeat=False,
                                                              packed_length=packed_length,
                                                              streams=2),
                                       input_context=ctx))
  for first, second in zip(batches[::2], batches[1::2]):
    assert {k: v.shape for k, v in first.items()} == {k: v.shape for k, v in second.items()}
  if packed_length:
    seen = [int(np.count_nonzero(b["targets"])) for b in batches]
    expected = [len(ex["targets"]) for ex in problem.dataset(data_dir, "train").as_numpy_iterator()
                if max(len(ex["inputs"]), len(ex["targets"])) <= HP.max_length]
    assert sum(seen) == sum(expected) > 0
    return
  seen = sorted(tuple(x[x != 0].tolist()) for b in batches for x in b["targets"].numpy()
                if np.any(x))
  expected = sorted(tuple(ex["targets"].tolist())
                    for ex in problem.dataset(data_dir, "train").as_numpy_iterator()
                    if max(len(ex["inputs"]), len(ex["targets"])) <= HP.max_length)
  assert seen == expected


def test_parallel_streams_resume_exactly_from_a_checkpointed_iterator(problem, data_dir,
                                                                      tmp_path):
  """The interleaved streams' iterator checkpoints mid-stream and restores to the same
  next batches; the order differs from one stream's."""
  def dataset(streams):
    return pipeline.make_dataset(problem, data_dir, "train", HP,
                                 pipeline.InputSettings(shuffle=True, seed=6, repeat=True,
                                                        streams=streams))
  it = iter(dataset(2))
  first = [next(it)["targets"].numpy().tolist() for _ in range(5)]
  checkpoint = tf.train.Checkpoint(iterator=it)
  path = checkpoint.save(str(tmp_path / "ckpt"))
  after = [next(it)["targets"].numpy().tolist() for _ in range(5)]
  checkpoint.restore(path)
  assert [next(it)["targets"].numpy().tolist() for _ in range(5)] == after
  one = iter(dataset(1))
  assert [next(one)["targets"].numpy().tolist() for _ in range(5)] != first
  with pytest.raises(ValueError, match="streams must be >= 1, got 0"):
    dataset(0)
