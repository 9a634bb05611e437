"""Dev-set evaluation during training: loss, perplexity, token accuracy, greedy BLEU.

    evaluator = Evaluator(problem, data_dir, hparams, strategy, model, vocab)
    evaluator.evaluate()  # {"dev_loss", "dev_perplexity", "dev_accuracy", "dev_tokens",
                          #  "dev_bleu", "dev_char_bleu"}
"""

import math

import tensorflow as tf

from t2t_keras.data.pipeline import make_dataset
from t2t_keras.training.loss import token_metrics


class Evaluator:
  """Evaluates `model` on the first batches of the problem's dev split.

  Args:
    problem, data_dir, hparams: where the dev TFRecords are and how to batch them.
    strategy: the run's tf.distribute strategy (dev batches are distributed).
    model, vocab: what is evaluated; the vocabulary detokenizes greedy outputs.
    eval_steps: dev batches per evaluation.
    bleu_sentences: also greedy-decode the first N dev sentences for sacreBLEU
      (word and character level); 0: off.
    chief, from_chief: with several workers the dev loss is computed over the dev set
      sharded across them (each worker's pipeline reads its shard; the sums are
      all-reduced), and dev BLEU is decoded by the chief alone, its values passed to the
      others by `from_chief` (`signals.WorkerAgreement.from_chief`: every worker then
      decides early stopping alike).
  """

  def __init__(self, problem, data_dir, hparams, strategy, model, vocab, *, eval_steps=20,
               bleu_sentences=64, chief=True, from_chief=None):
    self.problem, self.data_dir, self.hparams = problem, data_dir, hparams
    self.strategy, self.model, self.vocab = strategy, model, vocab
    self.eval_steps = eval_steps
    self.bleu_sentences = bleu_sentences
    self.chief, self.from_chief = chief, from_chief or (lambda values: values)
    self._step = None
    self._dev_pairs = None

  def _make_step(self):
    model = self.model

    @tf.function(reduce_retracing=True, autograph=False)
    def eval_step(batch):
      def replica(batch):
        return token_metrics(model(batch, training=False), batch["targets"])
      sums = self.strategy.run(replica, args=(batch,))
      return [self.strategy.reduce(tf.distribute.ReduceOp.SUM, s, axis=None) for s in sums]

    return eval_step

  def evaluate(self, steps=None):
    """Dev loss (plain cross-entropy per token), perplexity and token accuracy (a dict)."""
    steps = steps or self.eval_steps
    if self._step is None:
      self._step = self._make_step()
    dataset = self.strategy.distribute_datasets_from_function(
        lambda ctx: make_dataset(self.problem, self.data_dir, "dev", self.hparams,
                                 input_context=ctx))  # one pass, in file order
    xent = correct = tokens = 0.0
    for i, batch in enumerate(dataset):
      if i >= steps:
        break
      x, c, n = self._step(batch)
      xent, correct, tokens = xent + float(x), correct + float(c), tokens + float(n)
    loss = xent / max(tokens, 1.0)
    metrics = {"dev_loss": loss, "dev_perplexity": math.exp(min(loss, 50.0)),
               "dev_accuracy": correct / max(tokens, 1.0), "dev_tokens": tokens}
    if self.bleu_sentences:
      mine = self.dev_bleu(self.bleu_sentences) if self.chief else {}
      keys = ("dev_bleu", "dev_char_bleu")
      metrics.update(zip(keys, self.from_chief([mine.get(k, 0.0) for k in keys])))
    return metrics

  def dev_bleu(self, sentences):
    """Greedy-decodes the first `sentences` dev pairs: {"dev_bleu", "dev_char_bleu"} (sacreBLEU)."""
    from t2t_keras.decoding import translate, files  # pylint: disable=import-outside-toplevel
    from t2t_keras.decoding.settings import (  # pylint: disable=import-outside-toplevel
        parse_decode_hparams)
    from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
    if self._dev_pairs is None:
      sources, references = files.split_pairs(self.problem, self.data_dir, "dev",
                                                vocab=self.vocab)
      self._dev_pairs = sources[:sentences], references[:sentences]
    sources, references = self._dev_pairs
    hyps = translate.decode_lines(self.model, self.vocab, sources,
                                parse_decode_hparams("beam_size=1"))
    report = bleu.bleu_report(hyps, references)
    return {"dev_bleu": report["bleu"], "dev_char_bleu": report["char_bleu"]}
