"""t2t-avg-all: average the model weights of a run's last N checkpoints.

    t2t-avg-all --output_dir=runs/base --num_last=5
    t2t-decoder --output_dir=runs/base --checkpoint_path=runs/base/averaged/ckpt-100000 ...

Writes output_dir/averaged/ckpt-<newest step> (or --averaged_path): the
model's float variables averaged, everything else copied from the newest
checkpoint. The paper averages the last 5 (base) or 20 (big) checkpoints,
written at 10-minute intervals: keep that many with the trainer's
--keep_checkpoints.
"""

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)

from absl import app, flags

from t2t_keras.training import averaging

t2t_keras.bin.define_flag("string", "output_dir", None, "The trainer's output_dir.")
t2t_keras.bin.define_flag("integer", "num_last", 5, "Average this many of the newest kept checkpoints.")
t2t_keras.bin.define_flag("string", "averaged_path", None,
                    "Checkpoint prefix to write (default output_dir/averaged/ckpt-<step>).")
t2t_keras.bin.define_flag("integer", "max_step", None,
                          "Average the newest checkpoints at or before this step (e.g. the "
                          "average a shorter run would have ended with).")
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if not FLAGS.output_dir:
    raise app.UsageError("--output_dir is required")
  path, used = averaging.average_checkpoints(FLAGS.output_dir, FLAGS.num_last,
                                             output_path=FLAGS.averaged_path,
                                             max_step=FLAGS.max_step)
  print(f"averaged {len(used)} checkpoints:")
  for p in used:
    print(f"  {p}")
  print(f"wrote {path}")
  print(f"decode with: t2t-decoder --output_dir={FLAGS.output_dir} --checkpoint_path={path}")


def run():
  t2t_keras.bin.app_run(main)


if __name__ == "__main__":
  run()
