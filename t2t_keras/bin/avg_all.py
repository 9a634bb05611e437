"""t2t-avg-all: moving averages of a run's checkpoints, with t2t's flags and their meaning.

    t2t-avg-all --model_dir=runs/base --output_dir=runs/base_avg --n=5
    t2t-decoder --output_dir=runs/base_avg --decode_from_file=... # the newest average

For every checkpoint of --model_dir that has --n - 1 older ones (and at least
--min_steps steps), writes --output_dir/ckpt-<step>: the mean of those --n
checkpoints' model weights (everything else copied from the newest). Fewer
than --n checkpoints: one average of all of them, with a note. --output_dir
also gets the run's hparams, run info and vocabulary, so t2t-decoder and
t2t-exporter take it as --output_dir; its latest checkpoint is the newest
average. Averages already there are kept (re-runs are cheap); truncated
checkpoints are skipped with a warning. The paper averages the last 5 (base)
or 20 (big) checkpoints written at 10-minute intervals: keep that many with the
trainer's --keep_checkpoints.

Automatic selection (none of t2t, OpenNMT-tf or fairseq has it): with dev data,
every window of --select_windows checkpoints ending at --select_ends points is
averaged and scored on it (beam search with --select_decode_hparams after the
problem's decoding defaults; cased sacreBLEU, or the problem's own dev score:
EVALB F1 of the trees for parsing, with the gold trees as --select_reference);
the best goes to --output_dir, with selection.json / selection.md saying what
was tried and why it was chosen. With --select_decode_grid, the chosen average
then decodes dev once per entry (each over --select_decode_hparams) and the
best decoding is printed and kept in selection.json's "decode_hparams":

    t2t-avg-all --model_dir=runs/m30k --output_dir=runs/m30k/selected \
        --select_from_file=val.en.gz --select_reference=val.de.gz \
        --select_windows=1,5,10,20 --select_ends=3 \
        --select_decode_grid="alpha=1.0;beam_size=8;beam_size=8,alpha=1.0"
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.tuning import averaging

_define = t2t_keras.bin.define_flag
_define("string", "model_dir", None, "The trainer's output_dir: the checkpoints to average.")
_define("string", "output_dir", None,
        "Where the averages go (default: <model_dir>/averaged); a run directory "
        "t2t-decoder and t2t-exporter accept.")
_define("integer", "n", 8, "How many checkpoints each average spans (t2t's default 8).",
        lower_bound=1)
_define("integer", "min_steps", 0, "Ignore checkpoints with fewer steps.", lower_bound=0)
_define("integer", "max_step", None,
        "Ignore checkpoints with more steps (e.g. the average a shorter run would have "
        "ended with).", lower_bound=0)
_define("float", "wait_minutes", 0.0,
        "Wait up to this many minutes for new checkpoints, averaging them as they come.",
        lower_bound=0.0)
_define("string", "select_from_file", None,
        "Dev sources: choose the averaging window by the problem's dev score on them "
        "(sacreBLEU; parsing: EVALB F1) against --select_reference.")
_define("string", "select_reference", None,
        "Dev references for --select_from_file (parsing: gold trees, one per line).")
_define("list", "select_windows", ["1", "5", "10", "20"],
        "With --select_from_file: candidate numbers of consecutive checkpoints to average.")
_define("integer", "select_ends", 1,
        "With --select_from_file: windows end at the newest checkpoint and at this many "
        "minus one earlier ones, spread over the newer half of the run.", lower_bound=1)
_define("string", "select_decode_hparams", "",
        "With --select_from_file: the decoding the candidates are compared with, over "
        "the problem's presets as t2t-decoder applies them (default: those presets, "
        "else beam 4, alpha 0.6).")
_define("string", "select_decode_grid", "",
        "With --select_from_file: ';'-separated decodings (each over "
        "--select_decode_hparams, e.g. \"alpha=1.0;beam_size=8\") the chosen average is "
        "also scored with; the best is printed and written to selection.json.")
NAME = "t2t-avg-all"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.model_dir:
    raise app.UsageError("--model_dir is required: the run whose checkpoints are averaged "
                         "(t2t's meaning; --output_dir is where the averages go)")
  import os  # pylint: disable=import-outside-toplevel
  output_dir = FLAGS.output_dir or os.path.join(FLAGS.model_dir, averaging.AVERAGED_DIR)
  if FLAGS.select_from_file or FLAGS.select_reference:
    return _select(output_dir)
  if FLAGS.select_decode_grid:
    from t2t_keras.errors import InputError  # pylint: disable=import-outside-toplevel
    raise InputError("--select_decode_grid needs dev data: --select_from_file and "
                     "--select_reference")
  written = averaging.average_all(FLAGS.model_dir, output_dir, n=FLAGS.n,
                                  min_steps=FLAGS.min_steps, max_step=FLAGS.max_step,
                                  wait_minutes=FLAGS.wait_minutes)
  print(f"{len(written)} average(s) in {output_dir}; newest: {written[-1]}")
  print(f"decode with: t2t-decoder --output_dir={output_dir} ...")
  return 0


def _select(output_dir):
  from t2t_keras import fileio  # pylint: disable=import-outside-toplevel
  from t2t_keras.errors import InputError  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  from t2t_keras.tuning import selection  # pylint: disable=import-outside-toplevel
  if not (FLAGS.select_from_file and FLAGS.select_reference):
    raise InputError("--select_from_file and --select_reference go together (dev sources "
                     "and their references)")
  for flag, path in (("--select_from_file", FLAGS.select_from_file),
                     ("--select_reference", FLAGS.select_reference)):
    if not fileio.isfile(path):
      raise InputError(f"{flag}={path}: no such file")
  try:
    windows = sorted({int(w) for w in FLAGS.select_windows})
  except ValueError:
    raise InputError(f"--select_windows={','.join(FLAGS.select_windows)}: expected "
                     "positive integers, e.g. 1,5,10,20") from None
  if not windows or windows[0] < 1:
    raise InputError(f"--select_windows={','.join(FLAGS.select_windows)}: expected "
                     "positive integers, e.g. 1,5,10,20")
  sources, references = read_lines(FLAGS.select_from_file), read_lines(FLAGS.select_reference)
  if len(sources) != len(references):
    raise InputError(f"{FLAGS.select_from_file} has {len(sources)} lines but "
                     f"{FLAGS.select_reference} has {len(references)}")
  result = selection.select_average(
      FLAGS.model_dir, output_dir, sources, references, windows=windows,
      ends=FLAGS.select_ends, decode_overrides=FLAGS.select_decode_hparams,
      max_step=FLAGS.max_step, dev_name=fileio.basename(FLAGS.select_from_file),
      decode_grid=[g.strip() for g in FLAGS.select_decode_grid.split(";") if g.strip()])
  overrides = f" --decode_hparams={result['decode_hparams']}" if result["decode_hparams"] else ""
  print(f"decode with: t2t-decoder --output_dir={output_dir}{overrides} ...")
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
