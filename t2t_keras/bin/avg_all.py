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
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.training import averaging

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
NAME = "t2t-avg-all"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.model_dir:
    raise app.UsageError("--model_dir is required: the run whose checkpoints are averaged "
                         "(t2t's meaning; --output_dir is where the averages go)")
  import os  # pylint: disable=import-outside-toplevel
  output_dir = FLAGS.output_dir or os.path.join(FLAGS.model_dir, averaging.AVERAGED_DIR)
  written = averaging.average_all(FLAGS.model_dir, output_dir, n=FLAGS.n,
                                  min_steps=FLAGS.min_steps, max_step=FLAGS.max_step,
                                  wait_minutes=FLAGS.wait_minutes)
  print(f"{len(written)} average(s) in {output_dir}; newest: {written[-1]}")
  print(f"decode with: t2t-decoder --output_dir={output_dir} ...")
  return 0


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
