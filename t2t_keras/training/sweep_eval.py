"""One sweep row's dev figures, in its own process: perplexity and beam-search BLEU.

    python -m t2t_keras.training.sweep_eval RUN_DIR DATA_DIR RAW_DIR DECODE_HPARAMS

Prints one line `SWEEP_RESULT {json}` with params, dev_loss, dev_perplexity
(plain cross-entropy per target subword over the whole dev split, no label
smoothing), dev_bleu (cased sacreBLEU), dev_tok_bleu (tokenized BLEU, the
paper's kind), dev_sentences and the checkpoint. The newest checkpoint is used,
without averaging, as the paper's Table 3.
"""

import json
import sys

import t2t_keras.bin  # noqa: F401  (first: quiet TensorFlow start-up)


def evaluate_run(run_dir, data_dir, raw_dir=None, decode_overrides="beam_size=4,alpha=0.6"):
  """The dict `main` prints, for the newest checkpoint of run_dir."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding import decoder, files  # pylint: disable=import-outside-toplevel
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
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
  hp = decoder.decode_hparams(decode_overrides)
  hyps = decoder.decode_lines(model, vocab, sources, hp)
  report = bleu.bleu_report(hyps, references, lang=hp.bleu_lang)
  return {"params": int(model.count_params()), "dev_loss": metrics["dev_loss"],
          "dev_perplexity": metrics["dev_perplexity"], "dev_tokens": metrics["dev_tokens"],
          "dev_bleu": report["bleu"], "dev_tok_bleu": report["tokenized_bleu"],
          "bleu_signature": report["bleu_signature"], "dev_sentences": len(sources),
          "decode_hparams": decode_overrides, "checkpoint": path}


def main(argv):
  from t2t_keras.training import sweep_report  # pylint: disable=import-outside-toplevel
  run_dir, data_dir, raw_dir, decode_overrides = argv[1:5]
  result = evaluate_run(run_dir, data_dir, raw_dir, decode_overrides)
  print(sweep_report.RESULT_TAG + json.dumps(result), flush=True)
  return 0


if __name__ == "__main__":
  sys.exit(main(sys.argv))
