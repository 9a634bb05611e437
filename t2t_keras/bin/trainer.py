"""t2t-trainer: trains a registered model on a registered problem.

    t2t-trainer --problem=translate_ende_numbers --hparams_set=transformer_tiny \
        --data_dir=t2t_data --output_dir=t2t_train/numbers --generate_data

Re-running with the same --output_dir resumes from its last checkpoint.
Everything here is `t2t_keras.training.trainer.train(...)` in Python, the run's
settings a `TrainerConfig` made from these flags (`config_from_flags`).
"""

import t2t_keras.bin  # noqa: F401  (quiet TensorFlow start-up)
from absl import app, flags

from t2t_keras import registry
from t2t_keras.bin import problem_flags  # --raw_dir, --parallel_*, --vocab_size (datagen)
from t2t_keras.usr_dir import import_usr_dir

t2t_keras.bin.define_flag("string", "problem", "translate_ende_numbers", "Registered problem (`_rev` reverses).")
t2t_keras.bin.define_flag("string", "model", "transformer", "Registered model.")
t2t_keras.bin.define_flag("string", "hparams_set", "transformer_tiny",
                          "Registered hparams set (with --warm_start_from a run and no "
                          "--hparams_set: that run's hparams).")
t2t_keras.bin.define_flag("string", "hparams", "", 'Overrides, e.g. "hidden_size=256,norm_type=pre".')
t2t_keras.bin.define_flag("string", "data_dir", "t2t_data", "Where t2t-datagen wrote the problem's data.")
t2t_keras.bin.define_flag("string", "tmp_dir", "t2t_tmp", "Downloads and raw files (with --generate_data).")
t2t_keras.bin.define_flag("string", "output_dir", None, "Checkpoints, hparams, logs, curves.")
t2t_keras.bin.define_flag("integer", "train_steps", None, "Steps to train to (default: the hparams set's).",
                          lower_bound=1)
t2t_keras.bin.define_flag("integer", "eval_steps", 20, "Dev batches per evaluation.", lower_bound=1)
t2t_keras.bin.define_flag("integer", "eval_every", 500, "Evaluate every N steps (0: never).",
                          lower_bound=0)
t2t_keras.bin.define_flag("integer", "eval_bleu_sentences", 64,
                          "Greedy-decode this many dev sentences at each evaluation for BLEU "
                          "(0: off).", lower_bound=0)
t2t_keras.bin.define_flag("integer", "save_every", 500, "Checkpoint every N steps.", lower_bound=1)
t2t_keras.bin.define_flag("float", "save_every_minutes", 10.0,
                          "Also checkpoint every M minutes (0: by steps only).", lower_bound=0.0)
t2t_keras.bin.define_flag("integer", "local_eval_frequency", None,
                          "t2t's flag: checkpoint and evaluate every N steps (sets --save_every "
                          "and --eval_every).", lower_bound=1)
t2t_keras.bin.define_flag("integer", "save_checkpoints_secs", None,
                          "t2t's flag: also checkpoint every N seconds (--save_every_minutes "
                          "in seconds; 0: by steps only).", lower_bound=0)
t2t_keras.bin.define_flag("integer", "keep_checkpoints", 5, "How many recent checkpoints to keep.",
                          lower_bound=1)
t2t_keras.bin.define_flag("integer", "log_every", 50, "Progress line every N steps.", lower_bound=1)
t2t_keras.bin.define_flag("integer", "worker_gpu", None,
                          "GPUs to use on this machine (default: all visible).", lower_bound=0)
t2t_keras.bin.define_flag("boolean", "use_xla", None,
                          "XLA-compile the per-replica forward/backward (default: on with "
                          "GPUs, off on CPU, where it measured slower).")
t2t_keras.bin.define_flag("string", "t2t_usr_dir", None, "A directory of modules registering problems/hparams.")
t2t_keras.bin.define_flag("boolean", "generate_data", False, "Run datagen first (finished files are skipped).")
t2t_keras.bin.define_flag("boolean", "registry_help", False, "List registered problems, hparams sets, models.")
t2t_keras.bin.define_flag("string", "warm_start_from", None,
                          "Start a new run from the weights of a run directory, an averaged run "
                          "or a checkpoint prefix (same vocabulary file); fresh optimizer and "
                          "schedule unless --warm_start_optimizer.")
t2t_keras.bin.define_flag("boolean", "warm_start_optimizer", False,
                          "With --warm_start_from: also take its optimizer state (Adam's moments "
                          "and step count: the learning-rate schedule continues).")
t2t_keras.bin.define_flag("integer", "eval_early_stopping_steps", 0,
                          "Stop once this many steps passed without a better dev metric "
                          "(evaluated every --eval_every steps); the best checkpoint is kept "
                          "in output_dir/best/ (0: off).", lower_bound=0)
t2t_keras.bin.define_flag("enum", "eval_early_stopping_metric", "loss",
                          "The dev metric of --eval_early_stopping_steps (loss: lower is "
                          "better; the others higher).",
                          enum_values=["loss", "accuracy", "bleu", "char_bleu"])
t2t_keras.bin.define_flag("integer", "shuffle_buffer", None,
                          "Records in the training stream's shuffle buffer (default 10,000; "
                          "more for big corpora, about 1 KB of memory each; a resumed run "
                          "keeps the buffer it started with).", lower_bound=1)
t2t_keras.bin.define_flag("integer", "input_streams", None,
                          "Batching streams of the training pipeline, run in parallel (each "
                          "on a shard of the files; bucketing and packing use one core per "
                          "stream). Default 1; raise it when the progress line's input wait "
                          "climbs and cores are free. A resumed run keeps its own.",
                          lower_bound=1)
t2t_keras.bin.define_flag("string", "data_service_address", None,
                          "A tf.data service dispatcher (grpc://HOST:PORT, see "
                          "t2t-data-service) whose workers make the training batches; "
                          "checkpoints then keep no input position.")
t2t_keras.bin.define_flag("boolean", "reset_input_position", False,
                          "Resume the model, optimizer and step of the newest checkpoint, but "
                          "start the data order afresh from --seed: for a checkpoint that holds "
                          "a read error of a shard written again since (the trainer's error "
                          "line says when).")
t2t_keras.bin.define_flag("integer", "seed", 1, "Seed for model init, dropout and data order.")
t2t_keras.bin.define_flag("boolean", "deterministic", False, "Enable TensorFlow op determinism (slower).")
for _alias, _name in (("keep_checkpoint_max", "keep_checkpoints"), ("random_seed", "seed")):
  if _alias not in flags.FLAGS:
    flags.DEFINE_alias(_alias, _name)  # t2t's names, same meaning
NAME = "t2t-trainer"
FLAGS = flags.FLAGS


def main(argv):
  del argv
  if FLAGS.t2t_usr_dir:
    import_usr_dir(FLAGS.t2t_usr_dir)
  if FLAGS.registry_help:
    print(registry.help_string())
    return 0
  if not FLAGS.output_dir:
    raise app.UsageError("--output_dir is required")
  from t2t_keras.training import trainer  # pylint: disable=import-outside-toplevel
  if FLAGS.deterministic:
    import tensorflow as tf
    tf.config.experimental.enable_op_determinism()
  if FLAGS.warm_start_optimizer and not FLAGS.warm_start_from:
    raise app.UsageError("--warm_start_optimizer needs --warm_start_from")
  hparams_set = FLAGS.hparams_set
  if FLAGS.warm_start_from and not FLAGS["hparams_set"].present:
    hparams_set = None  # the source run's hparams
  trainer.train(
      FLAGS.problem, hparams_set, FLAGS.data_dir, FLAGS.output_dir,
      hparams=FLAGS.hparams or "", train_steps=FLAGS.train_steps,
      generate_data=FLAGS.generate_data, tmp_dir=FLAGS.tmp_dir,
      problem_kwargs=problem_flags.problem_kwargs(FLAGS.problem),
      config=config_from_flags(), strategy=_strategy())
  return 0


def config_from_flags():
  """The run's TrainerConfig from the flags (t2t's --local_eval_frequency and
  --save_checkpoints_secs included); its hparams_set is train()'s to fill."""
  from t2t_keras.training.config import TrainerConfig  # pylint: disable=import-outside-toplevel
  save_every, eval_every = FLAGS.save_every, FLAGS.eval_every
  if FLAGS.local_eval_frequency:
    save_every = eval_every = FLAGS.local_eval_frequency
  save_every_minutes = FLAGS.save_every_minutes
  if FLAGS["save_checkpoints_secs"].present:
    save_every_minutes = FLAGS.save_checkpoints_secs / 60.0
  return TrainerConfig(
      model_name=FLAGS.model, use_xla=FLAGS.use_xla, seed=FLAGS.seed,
      save_every=save_every, save_every_minutes=save_every_minutes,
      keep_checkpoints=FLAGS.keep_checkpoints, eval_every=eval_every,
      eval_steps=FLAGS.eval_steps, eval_bleu_sentences=FLAGS.eval_bleu_sentences,
      log_every=FLAGS.log_every, warm_start_from=FLAGS.warm_start_from,
      warm_start_optimizer=FLAGS.warm_start_optimizer,
      early_stopping_steps=FLAGS.eval_early_stopping_steps,
      early_stopping_metric=FLAGS.eval_early_stopping_metric,
      shuffle_buffer=FLAGS.shuffle_buffer, input_streams=FLAGS.input_streams,
      data_service_address=FLAGS.data_service_address,
      reset_input_position=FLAGS.reset_input_position)


def _strategy():
  from t2t_keras.training.strategy import make_strategy
  return make_strategy(FLAGS.worker_gpu)


def run():
  t2t_keras.bin.app_run(main, NAME)


if __name__ == "__main__":
  run()
