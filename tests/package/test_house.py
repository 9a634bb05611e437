"""The walls between the packages (WORKSPACE.md), the length rule, one atomic write and
declared problem hooks, read from the source.

Each check parses every module under t2t_keras/ with `ast`; a new import across a
wall, or a long function without its reason, fails here with the file and line.
"""

import ast
import pathlib

import pytest

ROOT = pathlib.Path(__file__).resolve().parents[2] / "t2t_keras"
MAX_FUNCTION_LINES = 60
REASON = "Long:"  # the docstring's one line of why a function stays longer


_PACKAGES = sorted(p.stem if p.is_file() else p.name for p in ROOT.iterdir()
                   if (p.suffix == ".py" and p.stem != "__init__") or (p / "__init__.py").exists())


def _modules():
  return sorted(p for p in ROOT.rglob("*.py"))


def _installed_modules():
  """_modules() and the top-level problems/ and hparams/ (installed as t2t_keras.problems
  and t2t_keras.hparams)."""
  return _modules() + sorted(p for d in ("problems", "hparams")
                             for p in (ROOT.parent / d).rglob("*.py"))


def _rel(path):
  """A source's path as installed under t2t_keras/ ("training/step.py", "problems/wmt.py")."""
  return (path.relative_to(ROOT) if ROOT in path.parents
          else path.relative_to(ROOT.parent)).as_posix()


def _imports(path):
  """[(line, imported module name)] of a file, relative imports resolved."""
  package = ".".join(("t2t_keras",) + pathlib.PurePosixPath(_rel(path)).parent.parts)
  found = []
  for node in ast.walk(ast.parse(path.read_text())):
    if isinstance(node, ast.Import):
      found += [(node.lineno, a.name) for a in node.names]
    elif isinstance(node, ast.ImportFrom):
      base = node.module or ""
      if node.level:
        base = ".".join(package.split(".")[:len(package.split(".")) - node.level + 1]
                        + ([base] if base else []))
      found += [(node.lineno, f"{base}.{a.name}") for a in node.names] + [(node.lineno, base)]
  return found


def _crossings(sources, forbidden):
  """'file:line imports name' for every import from a `sources` file into `forbidden`."""
  bad = []
  for path in _installed_modules():
    rel = _rel(path)
    if not any(rel.startswith(s) for s in sources):
      continue
    for line, name in _imports(path):
      if any(name == f or name.startswith(f + ".") for f in forbidden):
        bad.append(f"{rel}:{line} imports {name}")
  return sorted(set(bad))


def test_the_crossing_finder_sees_an_import_across_a_wall():
  # bin/ imports training/ (a binary calling the library): the finder must report it.
  assert _crossings(["bin/trainer.py"], ["t2t_keras.training"])


@pytest.mark.parametrize("sources, forbidden", [
    # No flags below bin/: only binaries import binaries.
    ([p for p in ("layers/", "models/", "data/", "training/", "decoding/", "metrics/",
                  "exporting/", "tuning/", "importing/", "distill/", "runs.py", "registry.py", "hparams_lib.py",
                  "errors.py",
                  "tf_startup.py", "xla_cache.py", "usr_dir.py", "ids.py")],
     ["t2t_keras.bin"]),
    # Distillation uses the library, the exports and the data, not the loop or the binaries.
    (["distill/"], ["t2t_keras.training", "t2t_keras.tuning"]),
    # Exports ship without the training code.
    (["exporting/"], ["t2t_keras.training", "t2t_keras.tuning"]),
    # Training is the loop only: choosing among runs sits above it.
    (["training/", "decoding/", "data/", "models/", "layers/"], ["t2t_keras.tuning"]),
    # An importer writes a run; nothing below it reads another system's checkpoints.
    ([p for p in ("layers/", "models/", "data/", "training/", "decoding/", "exporting/",
                  "tuning/", "runs.py")], ["t2t_keras.importing"]),
    (["importing/"], ["t2t_keras.training", "t2t_keras.tuning", "t2t_keras.exporting"]),
    # Problems know their data, not the loop, the sweeps or the binaries; hparams sets are
    # values (docs/data.md).
    (["problems/"], ["t2t_keras.training", "t2t_keras.tuning", "t2t_keras.bin",
                     "t2t_keras.importing", "t2t_keras.runs"]),
    (["hparams/"], [f"t2t_keras.{p}" for p in _PACKAGES if p not in ("registry", "hparams_lib")]),
    # hparam.py is the deprecated name of hparams_lib.py, kept for users' --t2t_usr_dir code.
    (["", "problems/", "hparams/"], ["t2t_keras.hparam"]),
    # metrics/ is pure scoring: errors, and fileio to read files.
    (["metrics/"], [f"t2t_keras.{p}" for p in _PACKAGES
                    if p not in ("metrics", "errors", "fileio")]),
    # The two searches depend on search_common only, not on each other.
    (["decoding/beam_search.py"], ["t2t_keras.decoding.greedy"]),
    (["decoding/greedy.py"], ["t2t_keras.decoding.beam_search"]),
    # The server ships alone: TensorFlow, TF Text, Starlette, uvicorn and prometheus-client,
    # nothing of ours beyond itself (and, for its binary, bin/'s quiet start-up).
    (["server/"], [f"t2t_keras.{p}" for p in _PACKAGES if p != "server"]),
    (["bin/serve.py"], [f"t2t_keras.{p}" for p in _PACKAGES if p not in ("server", "bin")]),
])
def test_no_import_crosses_a_wall(sources, forbidden):
  assert _crossings(sources, forbidden) == []


def test_no_long_function_without_its_reason():
  long = []
  for path in _modules():
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
        lines = node.end_lineno - node.lineno + 1
        if lines > MAX_FUNCTION_LINES and REASON not in (ast.get_docstring(node) or ""):
          long.append(f"{path.relative_to(ROOT)}:{node.lineno} {node.name} ({lines} lines)")
  assert long == [], f"over {MAX_FUNCTION_LINES} lines without '{REASON} ...' in the docstring"


def test_training_holds_the_loop_only():
  names = {p.stem for p in (ROOT / "training").glob("*.py")} - {"__init__"}
  assert names <= {"adam", "checkpoints", "curves", "evaluation", "loss", "loss_guard",
                   "precision", "reporting", "schedule", "signals", "step", "strategy",
                   "trainer", "warm_start", "early_stopping", "config", "dev_monitor"}, names


# Renames outside fileio.atomic_open / write_atomic, each for a reason that function cannot
# serve: a directory put in place whole, a checkpoint's file set, or a cache file that
# several processes may write at once (a per-process temporary name).
_RENAMES_ALLOWED = {
    "exporting/export.py": "a SavedModel directory",
    "exporting/ct2_convert.py": "a converted model's directory (CTranslate2's, LiteRT's)",
    "tuning/averaging.py": "a checkpoint's data and index files",
    "tuning/selection.py": "a checkpoint's data and index files",
    "data/shards.py": "a TFRecord shard (TensorFlow's writer takes a path, not a file)",
    "xla_cache.py": "a cache file several processes may write",
}


def _renames(path):
  """Lines of `path` that call os / fileio / tf.io.gfile's replace or rename."""
  return [node.lineno for node in ast.walk(ast.parse(path.read_text()))
          if isinstance(node, ast.Call) and isinstance(node.func, ast.Attribute)
          and node.func.attr in ("replace", "rename")
          and ast.unparse(node.func.value) in ("os", "fileio", "gfile", "tf.io.gfile")]


def test_files_are_written_atomically_one_way():
  """fileio.atomic_open is the one write-then-rename; only _RENAMES_ALLOWED rename themselves."""
  bad = []
  for path in _installed_modules():
    rel = _rel(path)
    if rel == "fileio.py" or rel in _RENAMES_ALLOWED:
      continue
    bad += [f"{rel}:{line}" for line in _renames(path)]
  assert bad == [], "write through fileio.atomic_open or fileio.write_atomic"
  assert _renames(ROOT / "exporting" / "export.py")  # the finder sees a rename


_HOOKS = ("decode_defaults", "preprocess", "restore", "postprocess", "decode_constraint",
          "serving_preprocess", "serving_postprocess", "dev_score", "fold_first_letter")


def test_problem_hooks_are_declared_and_never_looked_up_by_name():
  """The hooks are methods or attributes of Text2TextProblem (data/problem.py), reached
  as attributes of `problem.hooks(name)`, never through getattr or hasattr with a string."""
  from t2t_keras.data.problem import Text2TextProblem  # pylint: disable=import-outside-toplevel
  assert all(hasattr(Text2TextProblem, h) for h in _HOOKS)
  bad = []
  for path in _installed_modules():
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Call) and isinstance(node.func, ast.Name) \
          and node.func.id in ("getattr", "hasattr") and len(node.args) > 1 \
          and isinstance(node.args[1], ast.Constant) and node.args[1].value in _HOOKS:
        bad.append(f"{_rel(path)}:{node.lineno}")
  assert bad == []


def test_a_runs_decoding_is_built_in_one_place():
  """Only decoding/spec.py reads a problem's decode_defaults or constraint (the decoder,
  the exporter, the CTranslate2 converter and selection get a DecodingSpec)."""
  bad = []
  for path in _modules():
    rel = path.relative_to(ROOT).as_posix()
    if rel in ("decoding/spec.py", "data/problem.py"):
      continue
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.Attribute) and node.attr in ("decode_defaults",
                                                          "decode_constraint"):
        bad.append(f"{rel}:{node.lineno} .{node.attr}")
  assert bad == []


# Who may call what, for a search to be built in one place: the strategies' constructors
# only in decoding/builder.py, the builder only in decoding/spec.py.
_BUILDERS = {"from_settings": ("decoding/builder.py",),
             "constrained_from_settings": ("decoding/builder.py",),
             "shard_search_fn": ("decoding/builder.py",),
             "compile_search": ("decoding/spec.py",),
             "make_searcher": ("decoding/spec.py", "decoding/builder.py")}


def _build_calls(source, rel):
  """'file:line name' for each call of a `_BUILDERS` name outside its one caller."""
  bad = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, ast.Call):
      name = getattr(node.func, "attr", getattr(node.func, "id", None))
      options = getattr(getattr(node.func, "value", None), "id", None) == "SearchOptions"
      if name in _BUILDERS and rel not in _BUILDERS[name] and not options:
        bad.append(f"{rel}:{node.lineno} {name}")
  return bad


def test_a_search_is_built_in_one_place():
  """Every search is built by decoding/builder.py, asked by a DecodingSpec (spec.search_fn,
  spec.searcher): the decoder, the library, dev BLEU, the SavedModel and LiteRT alike."""
  bad = []
  for path in _modules():
    bad += _build_calls(path.read_text(), path.relative_to(ROOT).as_posix())
  assert bad == []
  assert _build_calls("fn = builder.compile_search(m, s)\nsearch.from_settings(m, s)\n"
                      "SearchOptions.from_settings(s)\n", "exporting/export.py") == [
                          "exporting/export.py:1 compile_search",
                          "exporting/export.py:2 from_settings"]


MAX_MODULE_LINES = 500


def test_no_module_is_over_500_lines():
  """A module over MAX_MODULE_LINES is split by concern (the export's graph batching apart
  from its signatures; the trainer's loop, checkpoints and evaluation apart)."""
  long = {_rel(p): n for p in _modules() if (n := len(p.read_text().splitlines()))
          > MAX_MODULE_LINES}
  assert long == {}


def _module_name(path):
  parts = ("t2t_keras",) + path.relative_to(ROOT).with_suffix("").parts
  return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _module_imports(path):
  """`_imports` less the package of a `from package import module` (importing the module
  runs the package's __init__ first either way: no edge of its own)."""
  found = _imports(path)
  return [(line, name) for line, name in found
          if not any(ln == line and other.rsplit(".", 1)[0] == name and _is_module(other)
                     for ln, other in found)]


def _is_module(name):
  parts = name.split(".")[1:]
  return (ROOT.joinpath(*parts).with_suffix(".py").exists()
          or ROOT.joinpath(*parts, "__init__.py").exists())


def test_no_import_circles():
  """No modules import each other in a loop, lazy imports (inside functions) included."""
  names = {_module_name(p): p for p in _modules()}
  graph = {name: sorted({i for _, i in _module_imports(path) if i in names and i != name})
           for name, path in names.items()}
  circles, state = [], {}

  def visit(node, stack):
    state[node] = "open"
    for nxt in graph[node]:
      if state.get(nxt) == "open":
        circles.append(" -> ".join(stack[stack.index(nxt):] + [nxt]))
      elif nxt not in state:
        visit(nxt, stack + [nxt])
    state[node] = "done"

  for name in sorted(graph):
    if name not in state:
      visit(name, [name])
  assert circles == []


def _only_refused_writes(handler):
  """True for a handler that prints only a refused write's error and re-raises the rest: it
  calls errors.cannot_write and holds a bare `raise`."""
  calls = {ast.unparse(n.func) for n in ast.walk(handler) if isinstance(n, ast.Call)}
  reraises = any(isinstance(n, ast.Raise) and n.exc is None for n in ast.walk(handler))
  return "errors.cannot_write" in calls and reraises


def test_binaries_turn_only_user_errors_into_one_line():
  """No binary catches OSError, TypeError or Exception to print it as a user error: a
  library raises InputError (errors.py) for input a user can fix; anything else is a bug
  and keeps its traceback. The one broad handler allowed prints a write the file system
  refused (`errors.cannot_write`: a full disk or a read-only directory, from Python or
  TensorFlow) and re-raises the rest."""
  broad = {"OSError", "TypeError", "Exception", "BaseException", "IOError"}
  bad = []
  for path in sorted((ROOT / "bin").glob("*.py")):
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ExceptHandler) and node.type is not None:
        names = {n.id for n in ast.walk(node.type) if isinstance(n, ast.Name)}
        if names & broad and not _only_refused_writes(node):
          bad.append(f"bin/{path.name}:{node.lineno}")
  assert bad == []
  printing_all = ast.parse("try:\n  f()\nexcept Exception as e:\n  print(e)\n").body[0]
  assert not _only_refused_writes(printing_all.handlers[0])


def test_layers_and_models_do_no_file_io():
  """layers/ and models/ compute: no open(), os, fileio or tf.io.gfile (runs.py reads runs)."""
  bad = []
  for path in _modules():
    rel = _rel(path)
    if not rel.startswith(("layers/", "models/")):
      continue
    bad += [f"{rel}:{line} imports {name}" for line, name in _imports(path)
            if name.split(".")[0] in ("os", "shutil") or name == "t2t_keras.fileio"]
    bad += [f"{rel}:{node.lineno} calls {ast.unparse(node.func)}"
            for node in ast.walk(ast.parse(path.read_text())) if isinstance(node, ast.Call)
            and (ast.unparse(node.func) == "open" or "gfile" in ast.unparse(node.func))]
  assert bad == []


# The environment below bin/: only TensorFlow's and the OS's own conventions, each for its
# reason; everything else a user sets is a flag (bin/problem_flags.py reads the deprecated
# T2T_PARALLEL_* and raw-dir variables in their place).
_ENVIRONMENT_ALLOWED = {
    "training/strategy.py": "TF_CONFIG, tf.distribute's own description of the cluster",
    "xla_cache.py": "TF_XLA_FLAGS (XLA's own) and XDG_CACHE_HOME (the OS's cache directory), "
                    "and T2T_XLA_CACHE: set before TensorFlow starts, in every process of a run",
    "tf_startup.py": "sets TF_CPP_MIN_LOG_LEVEL before TensorFlow starts; T2T_VERBOSE_TF "
                     "shows TensorFlow's start-up output",
    "training/precision.py": "sets TF_CPP_MIN_LOG_LEVEL before its child process imports "
                             "TensorFlow",
    "data/shards.py": "sets TF_CPP_MIN_LOG_LEVEL in a spawned shard writer before TensorFlow",
    "exporting/translate_saved_model.py": "a stand-alone client script: sets "
                                        "TF_CPP_MIN_LOG_LEVEL before TensorFlow",
}
_ENVIRONMENT_NAMES = ("environ", "environb", "getenv", "getenvb", "putenv", "unsetenv")


def _environment_uses(path):
  """Lines of `path` that touch the process environment (os.environ, os.getenv, ...)."""
  tree = ast.parse(path.read_text())
  return sorted(
      [node.lineno for node in ast.walk(tree) if isinstance(node, ast.Attribute)
       and node.attr in _ENVIRONMENT_NAMES and ast.unparse(node.value) == "os"]
      + [node.lineno for node in ast.walk(tree) if isinstance(node, ast.ImportFrom)
         and node.module == "os" and {a.name for a in node.names} & set(_ENVIRONMENT_NAMES)])


def test_no_environment_read_below_bin():
  """Settings come from flags: no module under t2t_keras/ (problems/ and hparams/ included)
  outside bin/ touches the environment, but those _ENVIRONMENT_ALLOWED names, for its
  reason; each allowed file still does (the list stays current)."""
  bad = []
  for path in _installed_modules():
    rel = _rel(path)
    if not rel.startswith("bin/") and rel not in _ENVIRONMENT_ALLOWED:
      bad += [f"{rel}:{line}" for line in _environment_uses(path)]
  assert bad == [], "read a flag in bin/ and pass the value down"
  assert [f for f in _ENVIRONMENT_ALLOWED if not _environment_uses(ROOT / f)] == []
  assert _environment_uses(ROOT / "bin" / "problem_flags.py")  # the finder sees a read


MAX_PARAMETERS = 8


@pytest.mark.parametrize("module, name", [("t2t_keras.training.trainer", "Trainer.__init__"),
                                          ("t2t_keras.data.pipeline", "make_dataset")])
def test_the_trainer_and_the_pipeline_take_settings_objects(module, name):
  """Trainer(problem, hparams, data_dir, output_dir, TrainerConfig, ...) and make_dataset(...,
  InputSettings, ...): a few parameters each, the settings grouped in a frozen object."""
  import importlib  # pylint: disable=import-outside-toplevel
  import inspect  # pylint: disable=import-outside-toplevel
  function = importlib.import_module(module)
  for part in name.split("."):
    function = getattr(function, part)
  parameters = list(inspect.signature(function).parameters)
  assert len(parameters) <= MAX_PARAMETERS, f"{module}.{name}{tuple(parameters)}"


def test_no_module_imports_another_modules_private_names():
  """`from t2t_keras.x import _name` reaches behind a module's interface: what another
  module needs is public there (e.g. fused_residual uses dropout's `kept`)."""
  bad = []
  for path in _installed_modules():
    for node in ast.walk(ast.parse(path.read_text())):
      if isinstance(node, ast.ImportFrom) and (node.level or (node.module or "").startswith(
          "t2t_keras")):
        bad += [f"{_rel(path)}:{node.lineno} imports {a.name}" for a in node.names
                if a.name.startswith("_") and not a.name.startswith("__")]
  assert bad == []


# Arguments of a fast path (a decoding cache, a fused kernel's bias or hand-off, a second
# output on request): they belong beside the layers, not in a layer's `call`.
FAST_PATH_ARGUMENTS = {"cache", "cache_index", "beams", "memory_kv", "return_weights",
                       "bias", "output_bias", "h", "next_norm"}


def _layer_call_faults(layers_dir):
  """["file: Class.call takes cache", "file:line: Class.call returns 3 values", ...] for
  the Keras layers' `call` methods in `layers_dir`."""
  bad = []
  for path in sorted(layers_dir.glob("*.py")):
    classes = [node for node in ast.parse(path.read_text()).body
               if isinstance(node, ast.ClassDef)]
    for cls in classes:
      for call in [node for node in cls.body
                   if isinstance(node, ast.FunctionDef) and node.name == "call"]:
        args = {a.arg for a in call.args.args + call.args.kwonlyargs}
        bad += [f"{path.name}: {cls.name}.call takes {arg}"
                for arg in sorted(args & FAST_PATH_ARGUMENTS)]
        bad += [f"{path.name}:{r.lineno}: {cls.name}.call returns {len(r.value.elts)} values"
                for r in ast.walk(call)
                if isinstance(r, ast.Return) and isinstance(r.value, ast.Tuple)]
  return bad


def test_the_paper_layers_call_takes_no_fast_path_and_returns_one_thing():
  """Each layer's `call` takes the paper's inputs (and `training`) and returns one tensor,
  reading in the paper's order: the fused training path (layers/residual_chain.py) and
  the cached decoding step (layers/cached_decoder.py) live beside the layers."""
  assert _layer_call_faults(ROOT / "layers") == []


MAX_README_CELL = 200  # characters of a README table cell, markdown included


def _long_cells(text):
  """[(line number, length)] of the table cells of a markdown text over MAX_README_CELL."""
  return [(number, len(cell.strip())) for number, line in enumerate(text.splitlines(), 1)
          if line.startswith("|") for cell in line.strip().strip("|").split("|")
          if len(cell.strip()) > MAX_README_CELL]


def test_readme_table_cells_stay_short():
  """The README is the front door: a table cell says one thing (details go to docs/)."""
  assert _long_cells((ROOT.parent / "README.md").read_text(encoding="utf-8")) == []
  assert _long_cells("| a | " + "x" * 201 + " |") == [(1, 201)]


MAX_BINARY_LINES = 100  # lines of functions in one bin/ module (flags and docstring aside)


def _binary_logic(source):
  """'what' for each way a bin/ module's source holds more than flag parsing, calling the
  library and printing: a class, or functions of more than MAX_BINARY_LINES lines in all."""
  tree = ast.parse(source)
  found = [f"class {n.name}" for n in tree.body if isinstance(n, ast.ClassDef)]
  lines = sum(n.end_lineno - n.lineno + 1 for n in tree.body
              if isinstance(n, (ast.FunctionDef, ast.AsyncFunctionDef)))
  if lines > MAX_BINARY_LINES:
    found.append(f"{lines} lines of functions")
  return found


def test_binaries_are_thin():
  """A binary parses its flags, calls the library and prints: warm-up, draining, engine
  rules and the like live in their rooms (server/launch.py, exporting/ct2_engine.py).
  bin/__init__.py is every binary's shared start-up, not a binary."""
  thick = {p.name: _binary_logic(p.read_text()) for p in (ROOT / "bin").glob("*.py")
           if p.name != "__init__.py"}
  assert {name: what for name, what in thick.items() if what} == {}
  long_main = "def main():\n" + "  pass\n" * MAX_BINARY_LINES
  assert _binary_logic("class Server:\n  pass\n" + long_main) == [
      "class Server", f"{MAX_BINARY_LINES + 1} lines of functions"]


MAX_DECODING_PARAMETERS = 8  # a search takes its settings group whole, not field by field


def _parameter_counts(source, most):
  """'name (n)' for each function of `source` taking more than `most` parameters (self and
  cls aside)."""
  found = []
  for node in ast.walk(ast.parse(source)):
    if isinstance(node, (ast.FunctionDef, ast.AsyncFunctionDef)):
      a = node.args
      names = [x.arg for x in a.posonlyargs + a.args + a.kwonlyargs + [a.vararg, a.kwarg] if x]
      n = len([x for x in names if x not in ("self", "cls")])
      if n > most:
        found.append(f"{node.name} ({n})")
  return found


def test_decoding_functions_take_few_parameters():
  """The searches take `SearchOptions` (search_common.py), the file functions their
  `Lines`, `InputFiles`, `Split` and `Outputs` (files.py): one object per concern."""
  wide = {p.name: _parameter_counts(p.read_text(), MAX_DECODING_PARAMETERS)
          for p in (ROOT / "decoding").glob("*.py")}
  assert {name: found for name, found in wide.items() if found} == {}
  many = ", ".join(f"a{i}" for i in range(MAX_DECODING_PARAMETERS + 1))
  assert _parameter_counts(f"def search(self, {many}):\n  pass\n",
                           MAX_DECODING_PARAMETERS) == [f"search ({MAX_DECODING_PARAMETERS + 1})"]
