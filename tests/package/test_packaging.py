"""The package as a user installs it: the wheel and the sdist hold the whole program.

The distributions are built (`python -m build --no-isolation`: the venv's setuptools, no
network) from a copy of the source tree's files as git lists them (tracked, and new files
not ignored), so a stale build/ cannot hide a missing file. tests/package/test_installed.py runs
the built wheel outside the checkout.
"""

import ast
import configparser
import hashlib
import os
import re
import shutil
import subprocess
import sys
import tarfile
import zipfile

import pytest

ROOT = os.path.dirname(os.path.dirname(os.path.dirname(os.path.abspath(__file__))))
# source directory -> where its files install
INSTALLED_AT = {"t2t_keras": "t2t_keras", "problems": "t2t_keras/problems",
                "hparams": "t2t_keras/hparams"}


def source_files():
  """The repository's files as git lists them (tracked and untracked-not-ignored)."""
  if not os.path.exists(os.path.join(ROOT, ".git")):  # a directory, or a worktree's file
    pytest.skip("not a git checkout: the source tree's file list comes from git")
  out = subprocess.run(["git", "ls-files", "-co", "--exclude-standard", "-z"], cwd=ROOT,
                       capture_output=True, check=True).stdout.decode()
  return sorted(f for f in out.split("\0") if f and os.path.isfile(os.path.join(ROOT, f)))


def program_files():
  """{installed path: source path} of every module and data file of the program."""
  files = {}
  for path in source_files():
    top, _, rest = path.partition("/")
    if top in INSTALLED_AT and rest and not path.endswith((".pyc", ".pyo")):
      files[f"{INSTALLED_AT[top]}/{rest}"] = path
  return files


def build(source, out, *what):
  """`python -m build --no-isolation [what] --outdir out source`; the paths it made."""
  done = subprocess.run([sys.executable, "-m", "build", "--no-isolation", *what,
                         "--outdir", str(out), str(source)], capture_output=True, text=True,
                        timeout=600)
  assert done.returncode == 0, done.stdout[-3000:] + done.stderr[-3000:]
  return sorted(os.path.join(out, f) for f in os.listdir(out))


def copy_source(setup_py=None, into=None):
  """A copy of the source tree's files in `into` (setup.py replaced by `setup_py`)."""
  for path in source_files():
    os.makedirs(os.path.dirname(os.path.join(into, path)), exist_ok=True)
    shutil.copy2(os.path.join(ROOT, path), os.path.join(into, path))
  if setup_py is not None:
    with open(os.path.join(into, "setup.py"), "w") as f:
      f.write(setup_py)
  return into


@pytest.fixture(scope="module")
def dists(tmp_path_factory):
  """{"sdist", "wheel" (built from the sdist, as `python -m build` does), "direct" (a
  wheel built straight from the tree)}."""
  source = copy_source(into=tmp_path_factory.mktemp("source"))
  wheel, sdist = build(source, tmp_path_factory.mktemp("dist"))
  assert sdist.endswith(".tar.gz") and wheel.endswith(".whl"), (sdist, wheel)
  direct, = build(source, tmp_path_factory.mktemp("direct"), "--wheel")
  return {"sdist": sdist, "wheel": wheel, "direct": direct}


def wheel_contents(path):
  """{name: sha256} of a wheel's files."""
  with zipfile.ZipFile(path) as z:
    return {n: hashlib.sha256(z.read(n)).hexdigest() for n in z.namelist()}


def missing_from_wheel(wheel):
  """The program's files (installed paths) that the wheel does not hold."""
  names = set(wheel_contents(wheel))
  return sorted(set(program_files()) - names)


def test_the_wheel_holds_every_module_and_data_file(dists):
  files = program_files()
  assert "t2t_keras/importing/t2t_checkpoint.py" in files
  assert "t2t_keras/server/page.html" in files and "t2t_keras/problems/__init__.py" in files
  assert missing_from_wheel(dists["wheel"]) == []
  names = set(wheel_contents(dists["wheel"]))
  dist_info = {n for n in names if n.split("/")[0].endswith(".dist-info")}
  # Nothing else: no tests, recipes or top-level problems/ in site-packages.
  assert names - dist_info == {n for n in names - dist_info if n in files}


def test_every_console_script_runs_a_module_the_wheel_holds(dists):
  names = set(wheel_contents(dists["wheel"]))
  entry_points, = [n for n in names if n.endswith(".dist-info/entry_points.txt")]
  with zipfile.ZipFile(dists["wheel"]) as z:
    parser = configparser.ConfigParser()
    parser.read_string(z.read(entry_points).decode())
    launcher = ast.parse(z.read("t2t_keras/launcher.py").decode())
  binaries, = [ast.literal_eval(n.value) for n in launcher.body if isinstance(n, ast.Assign)
               and getattr(n.targets[0], "id", None) == "BINARIES"]
  functions = {n.targets[0].id for n in launcher.body if isinstance(n, ast.Assign)}
  in_source = {f[:-3] for f in os.listdir(os.path.join(ROOT, "t2t_keras", "bin"))
               if f.endswith(".py") and f not in ("__init__.py", "problem_flags.py",
                                                  "run_flags.py")}
  assert set(binaries) == in_source and len(binaries) == 12
  assert dict(parser["console_scripts"]) == {
      name: f"t2t_keras.launcher:{module}" for module, name in binaries.items()}
  for module in binaries:
    assert module in functions and f"t2t_keras/bin/{module}.py" in names, module


def test_the_sdist_holds_the_program_and_its_build_files_only(dists):
  with tarfile.open(dists["sdist"]) as tar:
    names = {m.name.split("/", 1)[1] for m in tar.getmembers() if m.isfile()}
  sources = set(program_files().values())
  build = {"setup.py", "setup.cfg", "pyproject.toml", "MANIFEST.in", "README.md", "LICENSE",
           "PKG-INFO"}
  assert sources <= names
  assert {n for n in names - sources if not n.startswith("t2t_keras.egg-info/")} <= build


def test_the_sdist_builds_a_wheel_equal_in_contents(dists):
  from_sdist, direct = wheel_contents(dists["wheel"]), wheel_contents(dists["direct"])
  assert sorted(from_sdist) == sorted(direct)
  differ = [n for n in from_sdist if from_sdist[n] != direct[n]]
  assert differ == []


def test_one_version_a_licence_and_an_index_pages_metadata(dists):
  with open(os.path.join(ROOT, "t2t_keras", "__init__.py")) as f:
    version, = re.findall(r'^__version__ = "([^"]+)"$', f.read(), re.M)
  assert os.path.basename(dists["wheel"]).startswith(f"t2t_keras-{version}-py3-none-any")
  assert os.path.basename(dists["sdist"]) == f"t2t_keras-{version}.tar.gz"
  with zipfile.ZipFile(dists["wheel"]) as z:
    metadata_name, = [n for n in z.namelist() if n.endswith(".dist-info/METADATA")]
    metadata = z.read(metadata_name).decode()
    licence, = [n for n in z.namelist() if n.endswith(".dist-info/licenses/LICENSE")]
    assert z.read(licence) == open(os.path.join(ROOT, "LICENSE"), "rb").read()
  headers = metadata.split("\n\n", 1)[0]
  assert f"\nVersion: {version}\n" in headers
  assert "\nLicense-Expression: Apache-2.0\n" in headers
  assert "\nRequires-Python: >=3.10\n" in headers
  assert "\nProvides-Extra: ctranslate2\n" in headers and "\nProvides-Extra: test\n" in headers
  assert "\nRequires-Dist: tensorflow<2.22,>=2.21\n" in headers
  assert "\nDescription-Content-Type: text/markdown\n" in headers
  with open(os.path.join(ROOT, "README.md"), encoding="utf-8") as f:
    assert metadata.split("\n\n", 1)[1].strip() == f.read().strip()
  with open(os.path.join(ROOT, "LICENSE")) as f:
    assert "Apache License\n                           Version 2.0, January 2004" in f.read()


# The last setup.py that listed its subpackages by hand.
LISTED_SETUP_PY = "4081866:setup.py"


def test_the_listed_setup_py_of_before_fails_this_check(tmp_path):
  """What this module guards against: the setup.py that listed its subpackages by hand
  (SUBPACKAGES) made a wheel without t2t_keras/importing/, so t2t-import failed on its
  first import in every non-editable install. Built the same way, the check names it."""
  old = subprocess.run(["git", "show", LISTED_SETUP_PY], cwd=ROOT, capture_output=True,
                       text=True)
  if old.returncode != 0:
    pytest.skip(f"git show {LISTED_SETUP_PY} failed (a shallow clone?): {old.stderr.strip()}")
  assert "SUBPACKAGES = [" in old.stdout
  source = copy_source(old.stdout, into=tmp_path / "source")
  wheel, = build(source, tmp_path / "dist", "--wheel")
  missing = missing_from_wheel(wheel)
  # importing/ then; every subpackage added since too (the old list never knew them), and
  # none that it listed.
  listed = set(re.search(r"SUBPACKAGES = (\[.*?\])", old.stdout, re.S).group(1)
               .replace("[", "").replace("]", "").replace('"', "").replace(",", " ").split())
  names = {m.split("/")[1] for m in missing}
  assert {"importing", "exporting", "library"} <= names and not names & listed, missing
