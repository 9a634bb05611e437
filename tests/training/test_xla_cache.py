"""The persistent XLA cache of the binaries (t2t_keras/xla_cache.py)."""

import os
import subprocess
import sys

import pytest

from t2t_keras import xla_cache

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))


def test_cache_dir_per_host_and_off_when_empty(tmp_path, monkeypatch):
  monkeypatch.setattr(xla_cache, "_cpu_description", lambda: "x86_64|Xeon|avx512f")
  key = xla_cache.host_key()
  assert key.startswith("tf") and xla_cache.host_key() == key
  assert xla_cache.cache_dir({xla_cache.ENV: str(tmp_path)}) == os.path.join(str(tmp_path), key)
  assert xla_cache.cache_dir({xla_cache.ENV: ""}) is None
  monkeypatch.setenv("XDG_CACHE_HOME", str(tmp_path / "home_cache"))
  assert xla_cache.cache_dir({}) == os.path.join(str(tmp_path), "home_cache", "t2t-keras", "xla",
                                                 key)
  # Another CPU (here: without AVX-512) never sees these programs.
  monkeypatch.setattr(xla_cache, "_cpu_description", lambda: "x86_64|EPYC|avx2")
  assert xla_cache.host_key() != key


def test_configure_respects_a_given_directory_and_keeps_other_flags(tmp_path):
  given = {"TF_XLA_FLAGS": f"{xla_cache.FLAG}=/somewhere", xla_cache.ENV: str(tmp_path)}
  assert xla_cache.configure(given) is None
  assert given["TF_XLA_FLAGS"] == f"{xla_cache.FLAG}=/somewhere"
  env = {"TF_XLA_FLAGS": "--tf_xla_enable_lazy_compilation=false", xla_cache.ENV: str(tmp_path)}
  private = xla_cache.configure(env)
  assert env["TF_XLA_FLAGS"] == (
      f"--tf_xla_enable_lazy_compilation=false {xla_cache.FLAG}={private}")
  xla_cache.publish(private, os.path.dirname(private))
  off = {xla_cache.ENV: ""}
  assert xla_cache.configure(off) is None and "TF_XLA_FLAGS" not in off


def test_runs_see_finished_entries_and_publish_new_ones(tmp_path):
  env = {xla_cache.ENV: str(tmp_path)}
  shared = xla_cache.cache_dir(env)
  os.makedirs(shared)
  with open(os.path.join(shared, "old.pb"), "wb") as f:
    f.write(b"old")
  dead = os.path.join(shared, f"{xla_cache._run_prefix()}{2 ** 22 + 7}-abc")  # no such pid
  alive = os.path.join(shared, f"{xla_cache._run_prefix()}{os.getpid()}-abc")
  os.makedirs(dead)
  os.makedirs(alive)
  private = xla_cache.configure(env)
  assert os.path.dirname(private) == shared
  assert not os.path.exists(dead) and os.path.exists(alive)
  assert sorted(os.listdir(private)) == ["old.pb"]
  with open(os.path.join(private, "new.pb"), "wb") as f:
    f.write(b"new")
  assert sorted(n for n in os.listdir(shared) if n.endswith(".pb")) == ["old.pb"]  # not yet
  xla_cache.publish(private, shared)
  assert not os.path.exists(private)
  with open(os.path.join(shared, "new.pb"), "rb") as f:
    assert f.read() == b"new"
  assert sorted(n for n in os.listdir(shared) if not n.startswith(".")) == ["new.pb", "old.pb"]


@pytest.mark.heavy
@pytest.mark.parametrize("setting", ["dir", "off"])
def test_a_binary_saves_then_loads_a_compiled_program(tmp_path, setting):
  """Two processes importing t2t_keras.bin: the first compiles and saves, the
  second loads (TensorFlow's own log lines say which); off: one process, which writes no
  cache (no directory, no "saving" line), so a later one has nothing to load."""
  base = str(tmp_path / "cache")
  env = dict(os.environ, PYTHONPATH=ROOT, TF_CPP_MIN_LOG_LEVEL="0", TF_CPP_MAX_VLOG_LEVEL="1",
             **{xla_cache.ENV: base if setting == "dir" else ""})
  env.pop("TF_XLA_FLAGS", None)
  code = ("import t2t_keras.bin\nimport tensorflow as tf\n"
          "f = tf.function(lambda x: x * 2.0 + 1.0, jit_compile=True)\n"
          "print('RESULT', f(tf.ones([3])).numpy().tolist())\n")
  logs = []
  for _ in range(2 if setting == "dir" else 1):
    out = subprocess.run([sys.executable, "-c", code], env=env, capture_output=True, text=True,
                         timeout=300, check=True)
    assert "RESULT [3.0, 3.0, 3.0]" in out.stdout
    logs.append(out.stderr)
  if setting == "off":
    assert not os.path.exists(base)
    assert "Serializing and saving cache entry" not in logs[0]
    return
  shared = [os.path.join(base, d) for d in os.listdir(base)]
  assert len(shared) == 1
  entries = os.listdir(shared[0])
  assert len(entries) == 1 and entries[0].endswith(".pb"), entries  # no private dirs left
  assert "Serializing and saving cache entry" in logs[0]
  assert "Loading cached entry" not in logs[0]
  assert "Loading cached entry" in logs[1]
