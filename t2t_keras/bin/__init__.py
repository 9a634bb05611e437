"""Command-line binaries. They only parse flags and call library functions.

Importing this package imports TensorFlow quietly (`t2t_keras.tf_startup`), so
binaries print clean logs.
"""

import os

from t2t_keras import errors, tf_startup

tf_startup.import_tensorflow_quietly()


# t2t flags that cannot apply here: accepted by every binary so that t2t scripts
# parse, and refused with this reason when given.
UNSUPPORTED_FLAGS = {
    "use_tpu": ("bool", "TPUs"),
    "use_tpu_estimator": ("bool", "TPUs"),
    "tpu_num_shards": ("integer", "TPUs"),
    "cloud_tpu_name": ("string", "TPUs"),
    "cloud_mlengine": ("bool", "Cloud ML Engine"),
    "cloud_mlengine_master_type": ("string", "Cloud ML Engine"),
    "master": ("string", "TensorFlow 1 masters (use TF_CONFIG for several machines)"),
}


def check_unsupported_flags():
  """InputError for a given t2t flag that has no meaning here (TPU, Cloud ML Engine)."""
  from absl import flags
  from t2t_keras.errors import InputError
  for name, (_, what) in UNSUPPORTED_FLAGS.items():
    if name in flags.FLAGS and flags.FLAGS[name].present:
      raise InputError(f"--{name} cannot apply here: t2t-keras runs on CPUs and GPUs with "
                       f"tf.distribute, not on {what}")


def run_main(main, name, argv):
  """main(argv) after flag parsing, as every binary runs it; returns the exit status.

  --version prints `launcher.version_line(name)` and returns 0 (the console scripts
  answer it before importing TensorFlow; this serves run_in_process). A user error
  (bad flag value, bad file, missing checkpoint, ...) prints one line,
  `<name>: error: <message>`, and returns 1, as do a module that cannot be imported
  (`launcher.missing_module_message`) and a write that the file system refused
  (`errors.cannot_write`: no room, no permission) and memory running out
  (`errors.out_of_memory`); anything else is a bug and keeps its traceback.
  Parts of TensorFlow log through absl at INFO (e.g. "Sharding callback duration" at
  every checkpoint); app.run sets INFO, so this lowers it unless --verbosity is given.
  """
  import sys
  from absl import app, flags
  from absl import logging as absl_logging
  if not flags.FLAGS["verbosity"].present:
    absl_logging.set_verbosity(absl_logging.WARNING)
  if flags.FLAGS["version"].value:
    from t2t_keras import launcher
    print(launcher.version_line(name))
    return 0
  try:
    if len(argv) > 1:
      raise app.UsageError(f"unexpected arguments: {' '.join(argv[1:])}")
    check_unsupported_flags()
    _take_deprecated_flags(name)
    return main(argv) or 0
  except (app.UsageError,) + errors.user_errors() as e:
    print(f"{name}: error: {errors.permission_denied(e) or e}", file=sys.stderr)
    return 1
  except ModuleNotFoundError as e:  # a broken install: a part imported where it is used
    from t2t_keras import launcher
    if not launcher.is_broken_install(e):
      raise
    print(launcher.missing_module_message(name, e.name), file=sys.stderr)
    return 1
  except Exception as e:  # pylint: disable=broad-except  (one line where it can, else raised)
    message = errors.cannot_write(e) or errors.out_of_memory(e)
    if message is None:
      raise
    print(f"{name}: error: {message}", file=sys.stderr)
    return 1


HELP_FLAGS = ("-?", "--help", "--helpshort", "--helpfull", "--helpxml")  # absl's


def app_run(main, name):
  """absl.app.run for a binary: flags parsed from sys.argv, then `run_main`. A help flag
  exits 0 (absl exits 1 after printing the help; asking for it is not an error)."""
  import sys
  from absl import app
  declare_help_flags(main.__module__)
  try:
    app.run(lambda argv: run_main(main, name, argv))
  except SystemExit as e:
    given = sys.argv[1:sys.argv.index("--")] if "--" in sys.argv else sys.argv[1:]
    if e.code == 1 and any(arg in HELP_FLAGS for arg in given):
      raise SystemExit(0) from None
    raise


def declare_help_flags(module_name):
  """Makes `--help` list the binary's own flags with their help text.

  absl's --help prints the key flags of the main module, which it names by
  sys.argv[0]; a console script (`t2t-trainer`) defines none itself, so its
  --help said only "Try --helpfull". This declares, for sys.argv[0], every flag
  the binary's module defines (shared ones included) and those of the flag
  modules it imports (`run_flags`), and --version; not t2t's refused TPU / Cloud flags.
  """
  import sys
  from absl import flags
  names = ["version"]
  for source in _flag_sources(sys.modules[module_name]):
    names += [n for n in _OWN_DEFAULTS[source] if n not in names and n not in UNSUPPORTED_FLAGS]
  for flag_name in names:
    flags.FLAGS.register_key_flag_for_module(sys.argv[0], flags.FLAGS[flag_name])
  return names


def run_in_process(module, argv):
  """Runs a binary module (`t2t_keras.bin.decoder`, ...) on argv in this process.

  For tests and notebooks: the same flag parsing and error handling as the
  console script (a flag parsing error prints absl's "FATAL Flags parsing
  error" line), flags reset before and after. Returns the exit status.
  """
  import sys
  from absl import flags
  flags.FLAGS.unparse_flags()
  # Shared flag names keep the first importer's default; this binary gets its own.
  for source in _flag_sources(module):
    for name, default in _OWN_DEFAULTS[source].items():
      flags.FLAGS.set_default(name, default)
  try:
    try:
      argv = flags.FLAGS(list(argv))
    except flags.Error as e:
      print(f"FATAL Flags parsing error: {e}", file=sys.stderr)
      return 1
    return run_main(module.main, module.NAME, argv)
  finally:
    flags.FLAGS.unparse_flags()


_OWN_DEFAULTS = {}  # module name -> {flag name: the default that module defined}


def _flag_sources(module):
  """Modules whose flag defaults `module` runs with: the flag modules it imports
  (run_flags), then its own."""
  imported = [m.__name__ for m in vars(module).values()
              if type(m) is type(os) and m.__name__ in _OWN_DEFAULTS and m is not module]
  return imported + ([module.__name__] if module.__name__ in _OWN_DEFAULTS else [])


def define_flag(kind, name, default, help_text, **kwargs):
  """flags.DEFINE_<kind> unless another binary imported in this process defined `name`.

  The binaries share flag names (--problem, --output_dir, --t2t_usr_dir, ...);
  absl refuses a second definition, which breaks importing two binaries in one
  process (notebooks, tests). The first definition is absl's; each module's own
  default is recorded, and `run_in_process` restores the binary's defaults (the
  trainer's --hparams_set=transformer_tiny even after the decoder defined it None).
  """
  import sys
  from absl import flags
  module = sys._getframe(1).f_globals.get("__name__", "")  # pylint: disable=protected-access
  _OWN_DEFAULTS.setdefault(module, {})[name] = default
  if name not in flags.FLAGS and kind == "enum":  # DEFINE_enum(name, default, values, help)
    flags.DEFINE_enum(name, default, kwargs.pop("enum_values"), help_text, **kwargs)
  elif name not in flags.FLAGS:
    getattr(flags, f"DEFINE_{kind}")(name, default, help_text, **kwargs)


_RENAMED = {}  # a flag's old name -> its new one (kept for one release)


def define_renamed_flag(old, new):
  """--old as a deprecated name of the string flag --new, for one release: its value goes
  to --new with a warning (`_take_deprecated_flags`). Define --new first."""
  _RENAMED[old] = new
  define_flag("string", old, None, f"Deprecated: the old name of --{new} (one release).")


def _take_deprecated_flags(name):
  """Moves each given renamed flag's value to its new name, with a warning on stderr;
  UsageError where both names are given."""
  import sys
  from absl import app, flags
  for old, new in _RENAMED.items():
    if old in flags.FLAGS and flags.FLAGS[old].present:
      if flags.FLAGS[new].present:
        raise app.UsageError(f"give --{new} only (--{old} is its old name)")
      print(f"{name}: warning: --{old} is now --{new}; the old name goes in the next "
            "release", file=sys.stderr)
      flags.FLAGS[new].value = flags.FLAGS[old].value


define_flag("bool", "version", False, "Print the version of t2t-keras (and of TensorFlow, "
            "Keras and Python) and exit.")
for _flag, (_kind, _what) in UNSUPPORTED_FLAGS.items():
  define_flag(_kind, _flag, None, f"t2t's flag; cannot apply here ({_what}).")
