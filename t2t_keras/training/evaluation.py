"""Dev-set evaluation during training: loss, perplexity, token accuracy, greedy BLEU.

    evaluator = Evaluator(problem, data_dir, hparams, strategy, model, vocab)
    evaluator.evaluate()  # {"dev_loss", "dev_perplexity", "dev_accuracy", "dev_tokens",
                          #  "dev_bleu", "dev_char_bleu"}

A multilingual run (its vocabulary holds target-language tags, `data/languages.py`) also
gets each language's figures, "dev_loss_de", "dev_accuracy_de", "dev_bleu_de", ...; its
"dev_loss" and "dev_accuracy" stay the token-weighted figures over all languages, while
"dev_bleu" and "dev_char_bleu" are the mean of the languages' (each decoded on its own
first `bleu_sentences` dev pairs), so early stopping and selection weigh every language
alike.
"""

import math

import tensorflow as tf

from t2t_keras.data import languages as languages_lib
from t2t_keras.data import pipeline
from t2t_keras.data.pipeline import make_dataset
from t2t_keras.training.loss import token_metrics


def language_masks(batch, tag_ids):
  """Which target tokens belong to each tag's sentences: float32 [len(tag_ids), B, T].

  batch: the pipeline's features; bucketed rows hold one pair each, packed rows several,
  told apart by "inputs_segmentation" / "targets_segmentation" (a pair's tokens share its
  segment id, its source holds its tag).
  """
  inputs, targets = batch["inputs"], batch["targets"]
  in_seg = batch.get("inputs_segmentation", tf.cast(tf.not_equal(inputs, 0), tf.int32))
  tgt_seg = batch.get("targets_segmentation", tf.cast(tf.not_equal(targets, 0), tf.int32))
  masks = []
  for tag_id in tag_ids:
    tagged = tf.where(tf.equal(inputs, tag_id), in_seg, 0)  # [B, S]: the tagged segments
    hit = tf.equal(tgt_seg[:, :, None], tagged[:, None, :]) & (tagged[:, None, :] > 0)
    masks.append(tf.cast(tf.reduce_any(hit, axis=-1), tf.float32))
  return tf.stack(masks)


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
    self._greedy = None  # (settings, search function, hooks): made once, then reused
    self.languages = languages_lib.languages_of(vocab) if vocab is not None else ()
    source_vocab = getattr(vocab, "source", vocab)
    self._tag_ids = [source_vocab.piece_to_id(languages_lib.tag(x)) for x in self.languages]

  def _make_step(self):
    model, tag_ids = self.model, self._tag_ids

    @tf.function(reduce_retracing=True, autograph=False)
    def eval_step(batch):
      def replica(batch):
        logits, targets = model(batch, training=False), batch["targets"]
        sums = list(token_metrics(logits, targets))
        if tag_ids:
          for mask in tf.unstack(language_masks(batch, tag_ids)):
            sums.extend(token_metrics(logits, targets * tf.cast(mask, targets.dtype)))
        return sums
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
    sums = [0.0] * (3 * (1 + len(self.languages)))
    try:
      for i, batch in enumerate(dataset):
        if i >= steps:
          break
        sums = [total + float(x) for total, x in zip(sums, self._step(batch))]
    except tf.errors.DataLossError as e:
      raise pipeline.damaged_shard_error(self.problem, self.data_dir, "dev", e) from None
    metrics = _token_figures(*sums[:3])
    for k, language in enumerate(self.languages):
      figures = _token_figures(*sums[3 * (k + 1):3 * (k + 2)])
      metrics.update({f"{key}_{language}": figures[key]
                      for key in ("dev_loss", "dev_accuracy", "dev_tokens")})
    if self.bleu_sentences:
      mine = self.dev_bleu(self.bleu_sentences) if self.chief else {}
      keys = ["dev_bleu", "dev_char_bleu"] + [f"dev_bleu_{x}" for x in self.languages]
      metrics.update(zip(keys, self.from_chief([mine.get(k, 0.0) for k in keys])))
    return metrics

  def dev_bleu(self, sentences):
    """Greedy-decodes the first `sentences` dev pairs (of each language) as t2t-decoder
    decodes with --decode_hparams=beam_size=1: {"dev_bleu",
    "dev_char_bleu"} (sacreBLEU; multilingual: the languages' mean, and "dev_bleu_de", ...)."""
    from t2t_keras.decoding import translate, files  # pylint: disable=import-outside-toplevel
    from t2t_keras.decoding.spec import DecodingSpec  # pylint: disable=import-outside-toplevel
    from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
    if self._dev_pairs is None:
      sources, references = files.split_pairs(self.problem, self.data_dir, "dev",
                                                vocab=self.vocab)
      self._dev_pairs = _first_of_each(sources, references, sentences, self.languages)
    sources, references, groups = self._dev_pairs
    if self._greedy is None:  # one tf.function for every evaluation: traced (and compiled)
      # once per shape, not every time; the problem's decoding (its defaults, output
      # constraint and the input limit, as t2t-decoder's), greedy.
      spec = DecodingSpec.for_run(self.problem.name, "beam_size=1", self.hparams)
      # Its text hooks too: a folding problem's sources folded, its outputs restored.
      self._greedy = spec.settings, spec.search_fn(self.model, self.vocab), spec.hooks
    settings, search_fn, hooks = self._greedy
    hyps = translate.decode_lines(self.model, self.vocab, sources, settings, search_fn,
                                  hooks=hooks)
    if not self.languages:
      report = bleu.bleu_report(hyps, references)
      return {"dev_bleu": report["bleu"], "dev_char_bleu": report["char_bleu"]}
    reports = {x: bleu.bleu_report([hyps[i] for i in rows], [references[i] for i in rows])
               for x, rows in groups.items()}
    out = {f"dev_bleu_{x}": r["bleu"] for x, r in reports.items()}
    out["dev_bleu"] = sum(r["bleu"] for r in reports.values()) / len(reports)
    out["dev_char_bleu"] = sum(r["char_bleu"] for r in reports.values()) / len(reports)
    return out


def _token_figures(xent, correct, tokens):
  """{"dev_loss", "dev_perplexity", "dev_accuracy", "dev_tokens"} of summed figures."""
  loss = xent / max(tokens, 1.0)
  return {"dev_loss": loss, "dev_perplexity": math.exp(min(loss, 50.0)),
          "dev_accuracy": correct / max(tokens, 1.0), "dev_tokens": tokens}


def _first_of_each(sources, references, n, languages):
  """(sources, references, {language: row numbers}): the first `n` pairs, or with
  `languages` the first `n` pairs of each language (known by the source's tag)."""
  if not languages:
    return sources[:n], references[:n], {}
  groups = {x: [] for x in languages}
  for i, source in enumerate(sources):
    rows = groups.get(languages_lib.language_of_line(source))
    if rows is not None and len(rows) < n:
      rows.append(i)
  keep = sorted(i for rows in groups.values() for i in rows)
  position = {i: k for k, i in enumerate(keep)}
  groups = {x: [position[i] for i in rows] for x, rows in groups.items() if rows}
  return [sources[i] for i in keep], [references[i] for i in keep], groups
