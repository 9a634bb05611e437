"""Test session set-up: quiet TF, a session XLA cache, and the CPU split into 2 logical devices.

Two logical CPU devices let tests run `tf.distribute.MirroredStrategy` with two
replicas. Logical devices must be configured before TensorFlow initializes its
runtime, so this runs once, at collection time, before any test module imports
something that touches a device.
"""

import atexit
import os
import shutil
import tempfile

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")
# One TensorFlow thread per pool, here and in the binaries tests start: the suite runs three
# processes on two cores, and tiny models gain nothing from a second thread, while idle pool
# threads spin on a busy core (docs/notebook.md, "The suite's time").
os.environ.setdefault("TF_NUM_INTRAOP_THREADS", "1")
os.environ.setdefault("TF_NUM_INTEROP_THREADS", "1")
# Binaries started by tests keep their XLA programs (t2t_keras/xla_cache.py) in a
# directory of this session, never in the user's cache.
if "T2T_XLA_CACHE" not in os.environ:
  os.environ["T2T_XLA_CACHE"] = tempfile.mkdtemp(prefix="t2t_test_xla_cache_")
  atexit.register(shutil.rmtree, os.environ["T2T_XLA_CACHE"], ignore_errors=True)

import pytest  # noqa: E402
import tensorflow as tf  # noqa: E402

NUM_LOGICAL_CPUS = 2
_configured = False


def _split_cpu():
  global _configured
  if _configured:
    return
  cpu = tf.config.list_physical_devices("CPU")[0]
  try:
    if len(tf.config.get_logical_device_configuration(cpu) or []) < NUM_LOGICAL_CPUS:
      tf.config.set_logical_device_configuration(
          cpu, [tf.config.LogicalDeviceConfiguration()] * NUM_LOGICAL_CPUS)
  except RuntimeError:
    pass  # Runtime already initialized (e.g. configured elsewhere); keep what exists.
  _configured = True


_split_cpu()

SHARED_DATA = os.path.normpath(
    os.path.join(os.path.dirname(__file__), "..", "..", "shared", "data"))


def pytest_configure(config):
  config.addinivalue_line(
      "markers", "heavy: the full suite only, left out of the quick tier (T2T_QUICK=1): "
                 "a test of about 5 CPU-seconds or more on the slowest CPU seen, or a file "
                 "whose module fixtures build servers, exports, CTranslate2 models, worker "
                 "processes or trainings")
  config.addinivalue_line(
      "markers", "slow: a long test whose behaviour a faster default test also covers; "
                 "run with T2T_SLOW_TESTS=1 (e.g. T2T_SLOW_TESTS=1 ./run_tests.sh -k sigkill)")


# The longest test files (by `--durations`), longest first: `--dist loadfile` hands files
# to the workers in collection order, so these start early and the short files fill
# the end, instead of a long file starting last while the other worker idles.
# Measured on an Intel Xeon family 6 model 207, 2026-11-28 (docs/notebook.md).
LONGEST_FIRST = ("test_trainer.py", "test_server_operations.py", "test_trainer_processes.py",
                 "test_installed.py", "test_export.py", "test_main_job.py",
                 "test_t2t_walkthrough.py", "test_t2t_import_downstream.py",
                 "test_parsing_serving.py", "test_ensemble.py", "test_ctranslate2.py",
                 "test_litert.py", "test_marian_downstream.py", "test_hf_marian_downstream.py",
                 "test_gpu_check.py", "test_out_of_space.py", "test_hf_marian_import.py",
                 "test_hf_m2m100_import.py", "test_library.py",
                 "test_transformer.py", "test_damaged_files.py",
                 "test_target_language_serving.py", "test_cli.py", "test_server.py",
                 "test_multilingual.py", "test_kill_loop.py", "test_kills.py",
                 "test_remote_paths.py",
                 "test_model_gradient.py", "test_beam_search.py", "test_prefix.py")


def _rank(path):
  """A test file's place in the suite's order: LONGEST_FIRST's, then the rest."""
  rank = {name: i for i, name in enumerate(LONGEST_FIRST)}
  return rank.get(os.path.basename(str(path)), len(rank))


def pytest_collection_modifyitems(config, items):
  items.sort(key=lambda item: _rank(item.fspath))
  for item in items:  # cases of a module fixture's parameters, named in its SLOW_CASES
    if item.name in getattr(getattr(item, "module", None), "SLOW_CASES", ()):
      item.add_marker(pytest.mark.slow)
  if os.environ.get("T2T_QUICK") == "1":  # the inner loop's tier: heavy tests left out
    heavy = [item for item in items if item.get_closest_marker("heavy")]
    config.hook.pytest_deselected(items=heavy)
    items[:] = [item for item in items if not item.get_closest_marker("heavy")]
  if os.environ.get("T2T_SLOW_TESTS") == "1":
    return
  skip = pytest.mark.skip(reason="slow (a faster default test covers it); T2T_SLOW_TESTS=1 "
                                 "runs it")
  for item in items:
    if item.get_closest_marker("slow"):
      item.add_marker(skip)


@pytest.hookimpl(hookwrapper=True)
def pytest_runtest_protocol(item, nextitem):
  """With T2T_TEST_CPU_LOG=FILE, appends "<CPU-s>\t<wall-s>\t<test id>" per test to FILE: the
  user+sys time of this process and of the children it waited for (set-up, call and
  tear-down), what the suite's budget is counted in (docs/notebook.md, the suite's time)."""
  path = os.environ.get("T2T_TEST_CPU_LOG")
  if not path:
    yield
    return
  import resource
  import time
  def cpu():
    return sum(u.ru_utime + u.ru_stime for u in (resource.getrusage(resource.RUSAGE_SELF),
                                                 resource.getrusage(resource.RUSAGE_CHILDREN)))
  start_cpu, start_wall = cpu(), time.monotonic()
  yield
  line = f"{cpu() - start_cpu:.2f}\t{time.monotonic() - start_wall:.2f}\t{item.nodeid}\n"
  # One short append per test: the workers' lines interleave whole.
  with open(path, "a", encoding="utf-8") as f:
    f.write(line)


@pytest.fixture(scope="session")
def two_cpu_strategy():
  """One MirroredStrategy over the 2 logical CPUs for the whole session: strategies made one
  after another in a process can reuse collective instance keys and abort."""
  from t2t_keras.training.strategy import make_strategy
  return make_strategy(devices=["/cpu:0", "/cpu:1"])


def load_benchmark(name, folder="benchmarks"):
  """<folder>/<name>.py as a module (benchmarks and recipes are scripts, not packages)."""
  import importlib.util
  path = os.path.join(os.path.dirname(__file__), "..", folder, f"{name}.py")
  spec = importlib.util.spec_from_file_location(f"{folder}_{name}", path)
  module = importlib.util.module_from_spec(spec)
  spec.loader.exec_module(module)
  return module


TINY_SENTENCES = ["one hundred and five", "twenty-three", "seven thousand, four hundred",
                  "nine", "eighty-eight thousand and one", "six hundred and twelve"]


def tiny_model(vocab_size, seed, **hparams):
  """A built transformer_tiny at hidden 16, filter 32, 2 heads (then `hparams`), weights
  from `seed`."""
  from t2t_keras import registry
  from t2t_keras.models.transformer import Transformer
  tf.keras.utils.set_random_seed(seed)
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32,
                                                    num_heads=2).replace(**hparams)
  model = Transformer(vocab_size, hp)
  model.build_for_ids()
  return model


def make_tiny_run(out, max_length=12, step=7, seed=3, user_defined_symbols=(), **hparams):
  """A tiny 'training run' in `out`: vocab, hparams, run.json and a random-weight checkpoint
  ckpt-<step> (transformer_tiny at hidden 16, filter 32, 2 heads, then `hparams`; weights
  from `seed`); returns str(out). `user_defined_symbols`: pieces the vocabulary keeps whole
  (target-language tags: a multilingual run's)."""
  from t2t_keras import registry, runs
  from t2t_keras.data import vocabulary
  from t2t_keras.models.transformer import Transformer
  corpus = TINY_SENTENCES * 20 + ["einhundertfünf", "dreiundzwanzig", "neun"] * 20
  vocab = vocabulary.train_sentencepiece(corpus, str(out / "spm.model"), 60, num_threads=1,
                                         user_defined_symbols=user_defined_symbols)
  tf.keras.utils.set_random_seed(seed)
  hp = registry.hparams("transformer_tiny").replace(
      hidden_size=16, filter_size=32, num_heads=2, max_length=max_length).replace(**hparams)
  model = Transformer(vocab.vocab_size, hp)
  model.build_for_ids()
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(out), 2).save(
      checkpoint_number=step)
  runs.save_run_info(str(out), hp, "translate_ende_numbers", vocab.vocab_size,
                     str(out / "spm.model"))
  return str(out)


def custom_gradient_ops(saved_model_dir):
  """(function, node) names of the custom-gradient ops in a SavedModel's functions (a load
  warns once for each function holding one: their gradients are not saved)."""
  from tensorflow.core.protobuf import saved_model_pb2  # pylint: disable=no-name-in-module
  proto = saved_model_pb2.SavedModel()
  with open(os.path.join(saved_model_dir, "saved_model.pb"), "rb") as f:
    proto.ParseFromString(f.read())
  functions = proto.meta_graphs[0].graph_def.library.function
  assert len(functions) > 5, "no search in this SavedModel: the check would check nothing"
  return [(f.signature.name, n.name) for f in functions for n in f.node_def
          if "_gradient_op_type" in n.attr]


def make_two_checkpoint_run(out, **hparams):
  """`make_tiny_run` in `out` (its `hparams`) with checkpoints 7 and 9 (random weights);
  returns str(out)."""
  from t2t_keras import runs
  out = make_tiny_run(out, step=7, **hparams)
  model = runs.load_model(out)[0]
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), out, 2).save(checkpoint_number=9)
  return out
