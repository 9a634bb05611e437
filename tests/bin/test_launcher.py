"""t2t_keras/launcher.py: the console scripts' --version and their one line for a broken install."""

import importlib
import sys

import pytest

import t2t_keras
from t2t_keras import launcher


def test_version_answers_before_the_binary_is_imported(monkeypatch, capsys):
  monkeypatch.delitem(sys.modules, "t2t_keras.bin.sweep", raising=False)
  with pytest.raises(SystemExit) as e:
    launcher.launch("sweep", ["t2t-sweep", "--problem=x", "--version"])
  assert e.value.code == 0 and "t2t_keras.bin.sweep" not in sys.modules
  line = capsys.readouterr().out
  assert line == launcher.version_line("t2t-sweep") + "\n"
  assert line.startswith(f"t2t-sweep {t2t_keras.__version__} (t2t-keras; TensorFlow 2.")
  assert f"Keras {importlib.metadata.version('keras')}, Python {sys.version.split()[0]})" in line


REINSTALL = ("reinstall the package (`pip install --force-reinstall --no-deps .` in its "
             "source tree, or the same with its wheel)")


def test_a_binary_that_cannot_be_imported_is_one_line(monkeypatch):
  monkeypatch.setitem(sys.modules, "t2t_keras.bin.t2t_import", None)  # its import now fails
  with pytest.raises(SystemExit) as e:
    launcher.launch("t2t_import", ["t2t-import", "--help"])
  assert e.value.code == ("t2t-import: error: this installation of t2t-keras has no "
                          f"t2t_keras.bin.t2t_import: {REINSTALL}")


def test_a_part_imported_where_it_is_used_is_one_line(monkeypatch, capsys, tmp_path):
  import t2t_keras.importing
  from t2t_keras import bin as t2t_bin
  from t2t_keras.bin import t2t_import
  # Both: `from t2t_keras.importing import t2t_checkpoint` reads a loaded one off the package.
  monkeypatch.setitem(sys.modules, "t2t_keras.importing.t2t_checkpoint", None)
  monkeypatch.delattr(t2t_keras.importing, "t2t_checkpoint", raising=False)
  capsys.readouterr()
  code = t2t_bin.run_in_process(t2t_import, ["t2t-import", f"--t2t_dir={tmp_path}",
                                             f"--output_dir={tmp_path / 'out'}"])
  err = capsys.readouterr().err
  assert code == 1 and err == ("t2t-import: error: this installation of t2t-keras has no "
                               f"t2t_keras.importing.t2t_checkpoint: {REINSTALL}\n")
  assert not (tmp_path / "out").exists()


def test_a_missing_dependency_is_named_as_one():
  assert launcher.missing_module_message("t2t-import", "yaml") == (
      "t2t-import: error: yaml, which t2t-keras needs, is not installed: install t2t-keras's "
      "dependencies (`pip install -c requirements.lock .` in its source tree)")


def test_a_users_own_missing_module_keeps_its_traceback(monkeypatch, capsys, tmp_path):
  """A --t2t_usr_dir that imports something absent is the user's code, not a broken install."""
  from t2t_keras import bin as t2t_bin
  from t2t_keras.bin import datagen
  usr = tmp_path / "my_usr_dir"
  usr.mkdir()
  (usr / "__init__.py").write_text("import no_such_module_of_theirs\n")
  assert not launcher.is_broken_install(ModuleNotFoundError(name="no_such_module_of_theirs"))
  assert launcher.is_broken_install(ModuleNotFoundError(name="tensorflow_text.core"))
  with pytest.raises(ModuleNotFoundError, match="no_such_module_of_theirs"):
    t2t_bin.run_in_process(datagen, ["t2t-datagen", f"--t2t_usr_dir={usr}",
                                     "--problem=algorithmic_copy", f"--data_dir={tmp_path}"])


def test_every_binary_has_its_entry_point():
  for module, name in launcher.BINARIES.items():
    assert getattr(launcher, module).__name__ == module, name
    assert importlib.import_module(f"t2t_keras.bin.{module}").NAME == name


@pytest.mark.heavy  # a process that imports every binary's module and draws a plot
def test_a_binary_starts_without_the_libraries_only_some_jobs_draw_on(tmp_path):
  """TensorFlow's import as the binaries do it (tf_startup), every binary's module and every
  registered problem leave matplotlib (Keras imports it for its image plots) and nltk
  (read by the parsing problem's datagen) unimported (docs/notebook.md, the suite's time);
  the learning curves import matplotlib when they draw."""
  import subprocess
  script = (
      "import sys\n"
      "from t2t_keras import launcher, registry, tf_startup\n"
      "tf_startup.import_tensorflow_quietly()\n"
      "import importlib, keras\n"
      "for module in launcher.BINARIES:\n"
      "  importlib.import_module('t2t_keras.bin.' + module)\n"
      "names = registry.list_problems()\n"
      "[registry.problem(name) for name in names]\n"
      "print(len(names), sorted({m.split('.')[0] for m in sys.modules} & {'matplotlib', 'nltk'}))\n"
      "from t2t_keras.training import curves\n"
      "h = curves.History(sys.argv[1] + '/' + curves.HISTORY_FILE)\n"
      "h.add(100, loss=4.0, lr=1e-3, tokens_per_second=1.0)\n"
      "print(curves.plot(h.path, sys.argv[1]), 'matplotlib.pyplot' in sys.modules)\n")
  done = subprocess.run([sys.executable, "-c", script, str(tmp_path)], capture_output=True,
                        text=True, timeout=300)
  assert done.returncode == 0, done.stderr[-3000:]
  problems, drawn = done.stdout.splitlines()
  assert int(problems.split()[0]) > 10 and problems.endswith(" []"), problems
  assert drawn == f"{tmp_path}/learning_curves.png True", drawn
  with open(tmp_path / "learning_curves.png", "rb") as f:
    assert f.read(8) == b"\x89PNG\r\n\x1a\n"
