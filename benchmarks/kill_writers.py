"""The writers benchmarks/kill_loop.py kills: each one's inputs, command and verdict.

    python benchmarks/kill_writers.py prepare INPUTS_KIND DIR      # the tiny inputs, once
    python benchmarks/kill_writers.py compare WRITER REF_OUT OUT   # one JSON line

A writer is a binary at its smallest size (the tests' fixtures: tests/conftest.py's tiny
runs, the importers' random releases, datagen's and the trainer's flags): `args` builds its
command line (after `python -m`) from its inputs' directory and the output directory of one
run, `compare` lists how a run's output differs from the uninterrupted reference run's
(the trainer's final weights and losses, datagen's bytes, an export's translations, ...),
and `damaged` lists every file under a final name that does not read back. `refusal`
matches the rerun's one-line refusal where the killed run had already finished its output
(an exporter or importer asked for a directory that exists): the rerun's verdict is then
the output's. The loop runs `prepare` and `compare` in a child process (TensorFlow's
memory stays out of a long loop) or, for its test, in its own.
"""

import dataclasses
import json
import os
import re
import sys

HERE = os.path.dirname(os.path.abspath(__file__))
TESTS = os.path.join(os.path.dirname(HERE), "tests")

# Names of what a writer keeps only while it writes (fileio's `.incomplete`, the exports'
# and conversions' temporary directories, the average's `_incomplete` prefix, TensorFlow's
# checkpoint `_temp` directories and `.tempstate` files, the XLA cache's private runs).
TEMPORARY = re.compile(r"(^\.tmp-|^\.old-|^\.run-|\.incomplete$|_incomplete\b|_temp\b|"
                       r"_temp_|\.tempstate|^\.[A-Za-z0-9_]+-.+)")
SENTENCES = ["one hundred and five", "twenty-three", "nine", "seven thousand, four hundred"]
TRAINER_HPARAMS = ("hidden_size=32,filter_size=64,num_heads=2,num_encoder_layers=1,"
                   "num_decoder_layers=1,batch_size=256,max_length=16,"
                   "learning_rate_warmup_steps=50")
SWEEP_HPARAMS = ("hidden_size=16,filter_size=32,num_heads=2,num_encoder_layers=1,"
                 "num_decoder_layers=1,batch_size=128,max_length=8")
WORDS = "red green blue black white big small old new cat dog bird tree house".split()


def is_temporary(name):
  """True for a file or directory name a writer uses only while writing."""
  return bool(TEMPORARY.search(name))


def _tests_on_path():
  """tests/ importable (its conftest helpers and fixtures), XLA's cache off first."""
  os.environ.setdefault("T2T_XLA_CACHE", "")
  if TESTS not in sys.path:
    sys.path.insert(0, TESTS)


# Inputs: each kind written once into its own directory.

def _tiny_run(directory):
  import pathlib  # pylint: disable=import-outside-toplevel
  from conftest import make_two_checkpoint_run  # pylint: disable=import-outside-toplevel
  make_two_checkpoint_run(pathlib.Path(directory), num_encoder_layers=1, num_decoder_layers=1)


def _copy_data(directory, **sizes):
  from t2t_keras.data import datagen  # pylint: disable=import-outside-toplevel
  datagen.generate("algorithmic_copy", directory, log=None, **sizes)


def _parallel_text(directory, n_train=400):
  """train/dev/test .src and .tgt: 2-7 random words, the target reversed (datagen's)."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  rng = np.random.RandomState(0)
  for split, n in (("train", n_train), ("dev", 10), ("test", 10)):
    src = [" ".join(rng.choice(WORDS, rng.randint(2, 8))) for _ in range(n)]
    for side, lines in (("src", src), ("tgt", [" ".join(reversed(s.split())) for s in src])):
      with open(os.path.join(directory, f"{split}.{side}"), "w", encoding="utf-8") as f:
        f.writelines(line + "\n" for line in lines)


def _t2t_dir(directory):
  import numpy as np  # pylint: disable=import-outside-toplevel
  import t2t_checkpoint_writer as writer  # pylint: disable=import-outside-toplevel
  hp = dict(writer.BASE, hidden_size=8, filter_size=16, num_heads=2, num_hidden_layers=1,
            symbol_modality_num_shards=2)
  writer.write_t2t_dir(directory, hp, np.random.default_rng(0), steps=(1000, 2000),
                       target_space=5)


def _marian_release(directory):
  import marian_fixture  # pylint: disable=import-outside-toplevel
  marian_fixture.write_release(directory, "post_swish_tied_all", seed=2)


def _hf_marian(directory):
  import hf_marian_fixture  # pylint: disable=import-outside-toplevel
  hf_marian_fixture.write_hf_dir(directory, seed=2)


def _hf_m2m100(directory, flavour):
  import hf_m2m100_fixture  # pylint: disable=import-outside-toplevel
  hf_m2m100_fixture.write_hf_dir(directory, seed=1, flavour=flavour)


INPUTS = {
    "tiny_run": _tiny_run,
    "copy_data": lambda d: _copy_data(d, num_train=1500, num_dev=100, num_test=100,
                                      max_length=8, num_symbols=6),
    "sweep_data": lambda d: _copy_data(d, num_train=200, num_dev=12, num_test=12,
                                       max_length=5, num_symbols=5),
    "parallel_text": _parallel_text,
    "t2t_dir": _t2t_dir,
    "marian_release": _marian_release,
    "hf_marian": _hf_marian,
    "hf_m2m100": lambda d: _hf_m2m100(d, "m2m100"),
    "hf_nllb": lambda d: _hf_m2m100(d, "nllb"),
}


def prepare(kind, directory):
  """Writes the inputs of `kind` into `directory` (made if missing)."""
  _tests_on_path()
  os.makedirs(directory, exist_ok=True)
  INPUTS[kind](directory)


# What every writer's output must be: each file under a final name reads back.

def _png_whole(path):
  with open(path, "rb") as f:
    data = f.read()
  return data.startswith(b"\x89PNG") and data.endswith(b"IEND\xaeB`\x82")


def _records_whole(path):
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  try:
    for _ in tf.data.TFRecordDataset(path):
      pass
    return True
  except tf.errors.DataLossError:
    return False


def _json_whole(path):
  try:
    with open(path, encoding="utf-8") as f:
      if path.endswith(".jsonl"):
        for line in f:
          if line.strip():
            json.loads(line)
      else:
        json.load(f)
    return True
  except (ValueError, UnicodeDecodeError):
    return False


def _checkpoints_damaged(directory, names):
  """Each checkpoint `directory`'s index lists and each ckpt-*.index there reads back."""
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  prefixes = set(runs.checkpoint_files(directory))
  if runs.CHECKPOINT_INDEX in names:
    prefixes |= set(runs.checkpoint_prefixes(directory, log=lambda _: None))
  return [f"{p}: unreadable checkpoint" for p in sorted(prefixes)
          if not runs.checkpoint_is_readable(p)]


def damaged(out):
  """Paths under `out` that do not read back (temporary names aside): checkpoints, JSON,
  PNG, TFRecord shards and run directories' files."""
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  bad = []
  for root, dirs, names in os.walk(out):
    dirs[:] = [d for d in dirs if not is_temporary(d)]
    names = [n for n in names if not is_temporary(n)]
    bad += _checkpoints_damaged(root, names)
    if runs.RUN_FILE in names:
      try:
        runs.check_run_files(root)
      except Exception as e:  # pylint: disable=broad-except  (any failure is the verdict)
        bad.append(f"{root}: run files: {e}")
    for name in names:
      path = os.path.join(root, name)
      checks = [(name.endswith((".json", ".jsonl")), _json_whole), (name.endswith(".png"),
                _png_whole), (".tfrecord" in name, _records_whole)]
      bad += [f"{path}: does not read back" for applies, check in checks
              if applies and not check(path)]
  return bad


# Comparisons with the reference run's output.

def _differ(what, a, b):
  return [] if a == b else [f"{what}: {_short(a)} != {_short(b)}"]


def _short(value):
  text = repr(value)
  return text if len(text) < 200 else text[:200] + "..."


def checkpoint_mismatches(ref, out, what):
  """'what: <key> ...' for each variable of checkpoint `out` not np.array_equal to
  checkpoint `ref`'s, and the keys only one has."""
  import numpy as np  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  a, b = tf.train.load_checkpoint(ref), tf.train.load_checkpoint(out)
  dtypes = a.get_variable_to_dtype_map()
  keys_a, keys_b = set(dtypes), set(b.get_variable_to_dtype_map())
  bad = [f"{what}: {k} only in the reference" for k in sorted(keys_a - keys_b)]
  bad += [f"{what}: {k} only in the rerun's" for k in sorted(keys_b - keys_a)]
  for key in sorted(keys_a & keys_b):
    if dtypes[key] == tf.variant:
      continue  # the data iterator's state: what it reads next shows in the losses
    if not np.array_equal(a.get_tensor(key), b.get_tensor(key)):
      bad.append(f"{what}: {key} differs")
  return bad


def file_mismatches(ref_dir, out_dir, names):
  """'<name> differs' / 'is missing' for each of `names` that ref_dir holds."""
  bad = []
  for name in names:
    ref, out = os.path.join(ref_dir, name), os.path.join(out_dir, name)
    if not os.path.exists(ref):
      continue
    if not os.path.exists(out):
      bad.append(f"{out}: missing")
    else:
      with open(ref, "rb") as f, open(out, "rb") as g:
        if f.read() != g.read():
          bad.append(f"{out}: bytes differ from the reference's")
  return bad


def tree_bytes(directory):
  """{relative path: bytes} of every file under `directory`, temporary names aside."""
  out = {}
  for root, dirs, names in os.walk(directory):
    dirs[:] = [d for d in dirs if not is_temporary(d)]
    for name in names:
      if not is_temporary(name):
        path = os.path.join(root, name)
        with open(path, "rb") as f:
          out[os.path.relpath(path, directory)] = f.read()
  return out


def _prefix_names(directory):
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  return [os.path.basename(p) for p in runs.checkpoint_prefixes(directory, log=lambda _: None)]


def run_mismatches(ref, out, what):
  """A run directory (an import's, an average's): its checkpoints as the index lists
  them, each one's variables, and hparams.json, run.json and the vocabulary."""
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  names = _prefix_names(ref)
  bad = _differ(f"{what} checkpoints", names, _prefix_names(out))
  for name in set(names) & set(_prefix_names(out)):
    bad += checkpoint_mismatches(os.path.join(ref, name), os.path.join(out, name),
                                 f"{what}/{name}")
  return bad + file_mismatches(ref, out, [runs.HPARAMS_FILE, runs.RUN_FILE, runs.VOCAB_FILE])


def _losses(run_dir):
  """[(step, loss, lr)] of the run's metrics.jsonl progress records."""
  from t2t_keras.training import curves  # pylint: disable=import-outside-toplevel
  path = os.path.join(run_dir, curves.HISTORY_FILE)
  return [(r["step"], r["loss"], r["lr"]) for r in curves.read(path) if "loss" in r]


def training_mismatches(ref, out, what):
  """A trainer's output_dir: the final checkpoint's variables and the logged losses."""
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  final_ref, final_out = runs.latest_checkpoint(ref), runs.latest_checkpoint(out)
  bad = _differ(f"{what} final checkpoint", os.path.basename(final_ref),
                os.path.basename(final_out))
  return (bad + checkpoint_mismatches(final_ref, final_out, f"{what} final")
          + _differ(f"{what} losses", _losses(ref), _losses(out))
          + file_mismatches(ref, out, [runs.HPARAMS_FILE, runs.RUN_FILE]))


def trainer_mismatches(ref, out):
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  return (training_mismatches(ref, out, "trainer")
          + _differ("trainer kept checkpoints", _prefix_names(ref), _prefix_names(out))
          + file_mismatches(ref, out, [runs.VOCAB_FILE]))


def datagen_mismatches(ref, out):
  a, b = tree_bytes(ref), tree_bytes(out)
  bad = _differ("datagen files", sorted(a), sorted(b))
  return bad + [f"{name}: bytes differ from the reference's" for name in sorted(set(a) & set(b))
                if a[name] != b[name]]


def _as_json(value):
  """value as JSON gives it back (bytes decoded): what a reference's cache file holds."""
  return json.loads(json.dumps(value, default=lambda b: b.decode("utf-8", "replace")))


def translation_mismatches(ref, out, translations, what):
  """`translations(directory)` (JSON-able) of `out` against the reference's, which is
  computed once and kept beside it (ref.translations.json): one model loaded per cycle."""
  cache = ref.rstrip("/") + ".translations.json"
  if os.path.exists(cache):
    with open(cache, encoding="utf-8") as f:
      expected = json.load(f)
  else:
    expected = _as_json(translations(ref))
    with open(cache + ".incomplete", "w", encoding="utf-8") as f:
      json.dump(expected, f)
    os.replace(cache + ".incomplete", cache)
  got = _as_json(translations(out))
  if got == expected:
    return []
  keys = sorted(set(expected) | set(got))
  return [f"{what} {k}: {_short(got.get(k))} != the reference's {_short(expected.get(k))}"
          for k in keys if got.get(k) != expected.get(k)]


def savedmodel_translations(export_dir):
  """{"<version> <output>": values} of serving_default on SENTENCES (the exports' search
  is greedy: the nbest signature's one hypothesis is the same)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
  found = {}
  for version in sorted(n for n in os.listdir(export_dir) if n.isdigit()):
    loaded = tf.saved_model.load(os.path.join(export_dir, version))
    outputs = loaded.signatures["serving_default"](inputs=tf.constant(SENTENCES))
    found.update({f"{version} {k}": v.numpy().tolist() for k, v in outputs.items()})
  return found


def savedmodel_mismatches(ref, out):
  """Each version's translations (serving_default), export_info.json and the vocabulary."""
  versions = sorted(n for n in os.listdir(ref) if n.isdigit())
  bad = _differ("export versions", versions, sorted(n for n in os.listdir(out) if n.isdigit()))
  for version in versions:
    bad += file_mismatches(os.path.join(ref, version, "assets"),
                           os.path.join(out, version, "assets"), ["export_info.json",
                                                                  "vocab.model"])
  return bad + translation_mismatches(ref, out, savedmodel_translations, "export")


def ct2_translations(model_dir):
  """{"nbest": ctranslate2.Translator's n-best lists ranked by Ct2Translator (t2t's)}."""
  from t2t_keras.exporting import ct2_translate  # pylint: disable=import-outside-toplevel
  translator = ct2_translate.Ct2Translator(model_dir, intra_threads=1)
  return {"nbest": translator.translate(SENTENCES, nbest=True)}


def ct2_mismatches(ref, out):
  return (translation_mismatches(ref, out, ct2_translations, "ctranslate2")
          + file_mismatches(ref, out, ["t2t_decoding.json", "config.json"]))


def litert_translations(model_dir):
  """{"nbest": the project's LiteRT client's n-best lists}."""
  from t2t_keras.exporting import litert_translate  # pylint: disable=import-outside-toplevel
  translator = litert_translate.LiteRTTranslator(model_dir, num_threads=1)
  return {"nbest": translator.translate(SENTENCES, nbest=True)}


def litert_mismatches(ref, out):
  from t2t_keras.exporting import litert_translate  # pylint: disable=import-outside-toplevel
  return (translation_mismatches(ref, out, litert_translations, "litert")
          + file_mismatches(ref, out, [litert_translate.INFO_FILE]))


def sweep_mismatches(ref, out):
  """results.csv's rows (minutes aside); each row's result, final weights and losses."""
  import csv  # pylint: disable=import-outside-toplevel

  def table(directory):
    with open(os.path.join(directory, "results.csv"), encoding="utf-8") as f:
      return [{k: v for k, v in r.items() if k != "minutes"} for r in csv.DictReader(f)]

  def result(row_dir):
    with open(os.path.join(row_dir, "sweep_result.json"), encoding="utf-8") as f:
      r = json.load(f)
    return dict(r, minutes=None, checkpoint=os.path.basename(r["checkpoint"]))

  rows = table(ref)
  bad = _differ("sweep table", rows, table(out))
  for row in [r["row"] for r in rows]:
    a, b = os.path.join(ref, row), os.path.join(out, row)
    bad += _differ(f"sweep {row} result", result(a), result(b))
    bad += training_mismatches(a, b, f"sweep {row}")
  return bad


@dataclasses.dataclass(frozen=True)
class Writer:
  """A binary killed by the loop: its module, inputs, command and verdict.

  args(inputs, out) -> argv after `python -m module`; output(out) -> the directory the
  reference's and a rerun's `compare(ref, out)` take; refusal: the regex of a rerun's
  refusal that means "already written" (None: every rerun must exit 0)."""
  name: str
  module: str
  inputs: str
  args: object
  output: object
  compare: object
  refusal: str = None


def _exporter(name, fmt, compare):
  return Writer(
      name, "t2t_keras.bin.exporter", "tiny_run",
      lambda i, o: [f"--output_dir={i}", f"--export_dir={o}/export", f"--format={fmt}",
                    "--decode_hparams=beam_size=1,jit=false"],
      lambda o: os.path.join(o, "export"), compare, refusal=r"exists: pass")


def _importer(name, inputs, *flags):
  return Writer(name, "t2t_keras.bin.t2t_import", inputs,
                lambda i, o: [*(f.format(i) for f in flags), f"--output_dir={o}/run"],
                lambda o: os.path.join(o, "run"),
                lambda r, o: run_mismatches(r, o, name), refusal=r"already holds a run")


def _datagen_args(inputs, out):
  files = {s: f"{inputs}/{s}.src,{inputs}/{s}.tgt" for s in ("train", "dev", "test")}
  return ["--problem=translate_parallel_text", f"--data_dir={out}/data", "--vocab_size=80",
          "--num_train_shards=4", "--num_concurrent_processes=2",
          *(f"--parallel_{split}={paths}" for split, paths in files.items())]


WRITERS = {w.name: w for w in [
    Writer("trainer", "t2t_keras.bin.trainer", "copy_data",
           lambda i, o: ["--problem=algorithmic_copy", "--hparams_set=transformer_tiny",
                         f"--hparams={TRAINER_HPARAMS}", f"--data_dir={i}",
                         f"--output_dir={o}/run", "--nouse_xla", "--eval_every=0",
                         "--log_every=1", "--deterministic", "--seed=3", "--train_steps=16",
                         "--save_every=4"],
           lambda o: os.path.join(o, "run"), trainer_mismatches),
    Writer("datagen", "t2t_keras.bin.datagen", "parallel_text", _datagen_args,
           lambda o: os.path.join(o, "data"), datagen_mismatches),
    _exporter("exporter-savedmodel", "savedmodel", savedmodel_mismatches),
    _exporter("exporter-ctranslate2", "ctranslate2", ct2_mismatches),
    _exporter("exporter-litert", "litert", litert_mismatches),
    Writer("avg-all", "t2t_keras.bin.avg_all", "tiny_run",
           lambda i, o: [f"--model_dir={i}", f"--output_dir={o}/avg", "--n=2"],
           lambda o: os.path.join(o, "avg"), lambda r, o: run_mismatches(r, o, "avg-all")),
    _importer("import-t2t", "t2t_dir", "--t2t_dir={}", "--all_checkpoints"),
    _importer("import-marian", "marian_release", "--from=marian", "--marian_dir={}"),
    _importer("import-hf-marian", "hf_marian", "--from=hf", "--hf_dir={}"),
    _importer("import-hf-m2m100", "hf_m2m100", "--from=hf", "--hf_dir={}"),
    _importer("import-hf-nllb", "hf_nllb", "--from=hf", "--hf_dir={}"),
    Writer("sweep", "t2t_keras.bin.sweep", "sweep_data",
           lambda i, o: ["--problem=algorithmic_copy", f"--data_dir={i}",
                         f"--output_dir={o}/sweep", f"--hparams={SWEEP_HPARAMS}",
                         "--row=transformer_tiny", "--row=transformer_tiny seed=2",
                         "--train_steps=6", "--trainer_flag=--save_every=2",
                         "--trainer_flag=--eval_every=0",
                         "--trainer_flag=--eval_bleu_sentences=0",
                         "--trainer_flag=--log_every=1", "--trainer_flag=--use_xla=false",
                         "--decode_hparams=beam_size=1,jit=false"],
           lambda o: os.path.join(o, "sweep"), sweep_mismatches),
]}


def verdict(writer_name, ref, out):
  """{"mismatches": [...], "damaged": [...]} of `out` (a writer's output directory) against
  the reference run's `ref`."""
  _tests_on_path()
  if not os.path.isdir(out):
    return {"mismatches": [f"{out}: missing"], "damaged": []}
  try:
    mismatches = WRITERS[writer_name].compare(ref, out)
  except Exception as e:  # pylint: disable=broad-except  (reported as the cycle's verdict)
    mismatches = [f"comparison failed: {type(e).__name__}: {e}"]
  return {"mismatches": mismatches, "damaged": damaged(out)}


def main(argv):
  if len(argv) == 4 and argv[1] == "prepare":
    prepare(argv[2], argv[3])
    return 0
  if len(argv) == 5 and argv[1] == "compare":
    print(json.dumps(verdict(*argv[2:])))
    return 0
  print(__doc__.split("\n\n")[1], file=sys.stderr)
  return 2


if __name__ == "__main__":
  sys.exit(main(sys.argv))
