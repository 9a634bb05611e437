"""One sweep row's two processes: training it, then its dev perplexity and beam-search BLEU.

    python -m t2t_keras.tuning.trial train '{"problem_name": ..., "output_dir": ..., ...}' [PID]
    python -m t2t_keras.tuning.trial evaluate '{"run_dir": ..., "data_dir": ..., ...}' [PID]

`sweep.run_sweep` starts each in its own process, so memory stays flat and a
crash stays in its row. The sweep's pid follows the JSON: on Linux the process gets
SIGTERM when that process dies, however it dies (a SIGKILLed sweep runs no handler), so a
trainer saves and stops instead of training on unseen beside the next sweep's. The JSON
object holds the keyword arguments of `training.trainer.train` or of `evaluate_run`.
The process prints its result as one line `TRIAL_RESULT {json}`; input a user can fix
(missing data, a bad value) prints `TRIAL_ERROR <message>` and exits 1; anything else
keeps its traceback.

`evaluate_run` uses the newest checkpoint, without averaging, as the paper's
Table 3: params, dev_loss, dev_perplexity (plain cross-entropy per target
subword over the whole dev split, no label smoothing), dev_bleu (cased
sacreBLEU), dev_tok_bleu (tokenized BLEU, the paper's kind), dev_sentences.
"""

import json
import os
import sys

from t2t_keras.processes import stop_with_parent

RESULT_TAG = "TRIAL_RESULT "
ERROR_TAG = "TRIAL_ERROR "


def train(**kwargs):
  """`training.trainer.train(**kwargs)`'s summary, with only JSON values."""
  from t2t_keras.training import trainer  # pylint: disable=import-outside-toplevel
  summary = trainer.train(**kwargs)
  return {k: v for k, v in summary.items() if isinstance(v, (int, float, str, bool, type(None)))}


def evaluate_run(run_dir, data_dir, raw_dir=None, decode_overrides="beam_size=4,alpha=0.6"):
  """Dev figures of the newest checkpoint of run_dir (the module docstring lists them)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_keras import registry, runs  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding import translate, files  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.spec import DecodingSpec  # pylint: disable=import-outside-toplevel
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  from t2t_keras.training.evaluation import Evaluator  # pylint: disable=import-outside-toplevel

  model, vocab, hparams, info, path = runs.load(run_dir)
  problem = registry.problem(info["problem"])
  evaluator = Evaluator(problem, data_dir, hparams, tf.distribute.get_strategy(), model, vocab,
                        eval_steps=10**9, bleu_sentences=0)
  metrics = evaluator.evaluate()
  if raw_dir:  # raw text references, as BLEU is usually reported
    sources, references = files.split_pairs(problem, data_dir, "dev", raw_dir, vocab)
  else:  # the generated dev split itself (what the perplexity is measured on)
    sources, references = files.record_pairs(problem, data_dir, "dev", vocab)
  decoding = DecodingSpec.for_run(info["problem"], decode_overrides, hparams)
  settings = decoding.settings
  hyps = translate.decode_lines(model, vocab, sources, settings,
                                decoding.search_fn(model, vocab), hooks=decoding.hooks)
  report = bleu.bleu_report(hyps, references, lang=settings.evaluation.bleu_lang)
  return {"params": int(model.count_params()), "dev_loss": metrics["dev_loss"],
          "dev_perplexity": metrics["dev_perplexity"], "dev_tokens": metrics["dev_tokens"],
          "dev_bleu": report["bleu"], "dev_tok_bleu": report["tokenized_bleu"],
          "bleu_signature": report["bleu_signature"], "dev_sentences": len(sources),
          "decode_hparams": decode_overrides, "checkpoint": path}


JOBS = {"train": train, "evaluate": evaluate_run}


def command(job, kwargs):
  """The argv that runs `job` ("train" or "evaluate") with kwargs in a new Python process."""
  if job not in JOBS:
    raise ValueError(f"unknown trial job {job!r}; known: {', '.join(JOBS)}")
  return [sys.executable, "-m", __name__, job, json.dumps(kwargs), str(os.getpid())]


def main(argv):
  """Runs argv[1] (a job name) with the JSON kwargs argv[2] for the sweep whose pid is
  argv[3] (optional); returns the exit status."""
  if len(argv) > 3:
    stop_with_parent(int(argv[3]))
  from t2t_keras import tf_startup  # pylint: disable=import-outside-toplevel
  from t2t_keras.errors import user_errors  # pylint: disable=import-outside-toplevel
  tf_startup.import_tensorflow_quietly()
  job, kwargs = argv[1], json.loads(argv[2])
  try:
    result = JOBS[job](**kwargs)
  except user_errors() as e:
    print(ERROR_TAG + str(e).replace("\n", " "), flush=True)
    return 1
  print(RESULT_TAG + json.dumps(result), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
