"""Translating text with a trained model: batching, files, problem splits, BLEU.

    hp = decode_hparams("beam_size=4,alpha=0.6")
    model, _, info, _ = model_io.load_model("runs/tiny")
    vocab = SubwordVocabulary(info["vocab_path"])
    decode_lines(model, vocab, ["one hundred and five"], hp)   # -> ["einhundertfünf"]
    decode_file(model, vocab, "newstest.en", "newstest.de.decoded", hp, reference_path="newstest.de")
    decode_split(model, vocab, "translate_ende_numbers", "data", "test", hp)

Inputs are sorted by length (longest first) and cut into batches of
`batch_size`; each batch is padded to a multiple of `length_bucket` tokens and
to the full batch size, so XLA compiles one program per bucket. Outputs come
back in the input order.
"""

import collections
import os
import sys
import time

import numpy as np
import tensorflow as tf

from t2t_keras.decoding.beam_search import beam_search
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID
from t2t_keras.hparam import HParams, HParamsError


Hypothesis = collections.namedtuple("Hypothesis", ["text", "ids", "score"])


def decode_hparams(overrides=""):
  """The decoding HParams, with t2t-style "beam_size=4,alpha=0.6" overrides.

    beam_size        4 (the paper); 1 is greedy search.
    alpha            0.6, GNMT length penalty ((5 + len) / 6) ** alpha.
    extra_length     50: maximum output length = input length + extra_length.
    max_decode_length  0 = no cap beyond extra_length; else a hard cap.
    batch_size       sentences per batch.
    length_bucket    inputs are padded to a multiple of this (few XLA programs).
    jit              compile the search with XLA (faster on CPU; see the README).
    stop_early       t2t's early termination of beam search.
    return_beams     files get every beam: "hyp1<TAB>score1<TAB>hyp2<TAB>score2..."
    num_samples      decode only the first N inputs (-1: all).
    max_attention_plots  with an attention plot dir, plot at most N sentences (0: all).
    bleu_lang        target language for the Moses-tokenized BLEU variants.
  """
  hp = HParams(beam_size=4, alpha=0.6, extra_length=50, max_decode_length=0,
               batch_size=32, length_bucket=8, jit=True, stop_early=True,
               return_beams=False, num_samples=-1, max_attention_plots=0,
               bleu_lang="de").override(overrides)
  for key, low in _LOWER_BOUNDS.items():
    if hp.get(key) < low:
      raise HParamsError(f"decode hparam {key}={hp.get(key)!r}: must be >= {low}")
  return hp


_LOWER_BOUNDS = {"beam_size": 1, "alpha": 0.0, "extra_length": 0, "max_decode_length": 0,
                 "batch_size": 1, "length_bucket": 1, "num_samples": -1,
                 "max_attention_plots": 0}


def make_search_fn(model, hparams):
  """A tf.function: int32 [batch, len] source ids -> (ids [batch, beam, max_len], scores [batch, beam])."""

  def search(inputs):
    return beam_search(model, inputs, beam_size=hparams.beam_size, alpha=hparams.alpha,
                       extra_length=hparams.extra_length,
                       max_decode_length=hparams.max_decode_length or None,
                       stop_early=hparams.stop_early)

  # One trace for every shape; XLA still compiles one program per input shape.
  return tf.function(search, jit_compile=hparams.jit,
                     input_signature=[tf.TensorSpec([None, None], tf.int32)])


def _strip(ids):
  """Output ids up to (not including) the first EOS; without EOS, less the buffer's padding."""
  ids = [int(i) for i in ids]
  if EOS_ID in ids:
    return ids[:ids.index(EOS_ID)]
  while ids and ids[-1] == 0:
    ids.pop()
  return ids


def _progress(total, enabled):
  if not enabled:
    return None
  try:
    from tqdm import tqdm  # pylint: disable=import-outside-toplevel
  except ImportError:
    return None
  return tqdm(total=total, unit="sent", file=sys.stderr, dynamic_ncols=True)


def translate_ids(model, sources, hparams, search_fn=None, progress=False):
  """n-best lists for source id lists (EOS-terminated), in the input order.

  Returns a list (one per source) of lists of (ids without EOS, score), best first.
  """
  sources = [list(s) for s in sources]
  if not sources:
    return []
  search_fn = search_fn or make_search_fn(model, hparams)
  order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
  results = [None] * len(sources)
  bar = _progress(len(sources), progress)
  bucket, batch_size = max(1, hparams.length_bucket), hparams.batch_size
  for start in range(0, len(order), batch_size):
    index = order[start:start + batch_size]
    width = -(-max(len(sources[i]) for i in index) // bucket) * bucket
    batch = np.zeros([batch_size, width], np.int32)
    for row in range(batch_size):  # spare rows repeat the last sentence (same work)
      src = sources[index[min(row, len(index) - 1)]]
      batch[row, :len(src)] = src
    ids, scores = search_fn(tf.constant(batch))
    ids, scores = ids.numpy(), scores.numpy()
    for row, i in enumerate(index):
      results[i] = [(_strip(ids[row, k]), float(scores[row, k]))
                    for k in range(ids.shape[1]) if scores[row, k] > -1e6]
    if bar is not None:
      bar.update(len(index))
  if bar is not None:
    bar.close()
  return results


def encode_sources(vocab, lines):
  """Text lines -> EOS-terminated id lists, as the training data."""
  return [ids + [EOS_ID] for ids in vocab.encode_batch(lines)] if hasattr(
      vocab, "encode_batch") else [vocab.encode(line) + [EOS_ID] for line in lines]


def translate_lines(model, vocab, lines, hparams, search_fn=None, progress=False):
  """n-best `Hypothesis(text, ids, score)` lists for text lines, in input order."""
  nbest = translate_ids(model, encode_sources(vocab, lines), hparams, search_fn, progress)
  return [[Hypothesis(vocab.decode(ids), ids, score) for ids, score in hyps] for hyps in nbest]


def decode_lines(model, vocab, lines, hparams, search_fn=None, progress=False):
  """Best translation of each text line, in input order."""
  return [hyps[0].text for hyps in translate_lines(model, vocab, lines, hparams, search_fn,
                                                    progress)]


def _format(hyps, return_beams):
  if not return_beams:
    return hyps[0].text
  return "\t".join(f"{h.text}\t{h.score:.4f}" for h in hyps)


def _write_lines(path, lines):
  os.makedirs(os.path.dirname(os.path.abspath(path)), exist_ok=True)
  tmp = path + ".incomplete"
  with open(tmp, "w", encoding="utf-8") as f:
    for line in lines:
      f.write(line.replace("\n", " ") + "\n")
  os.replace(tmp, path)


def _read_lines(path):
  """Lines of a UTF-8 text file, plain or .gz."""
  from t2t_keras.metrics.bleu import read_lines  # pylint: disable=import-outside-toplevel
  return read_lines(path)


def translate_and_score(model, vocab, sources, hparams, references=None, output_path=None,
                        attention_plot_dir=None, progress=True, log=print):
  """Translates text lines; writes/scores/plots as asked. Returns a summary dict.

  The dict holds "translations" (best per line), "nbest", "seconds",
  "sentences_per_second", "output_path" and, with references, "bleu" (a
  `metrics.bleu.bleu_report`).
  """
  if hparams.num_samples >= 0:
    sources = sources[:hparams.num_samples]
    references = references[:hparams.num_samples] if references is not None else None
  start = time.time()
  nbest = translate_lines(model, vocab, sources, hparams, progress=progress)
  seconds = time.time() - start
  translations = [h[0].text for h in nbest]
  summary = {"translations": translations, "nbest": nbest, "seconds": seconds,
             "sentences_per_second": len(sources) / max(seconds, 1e-9),
             "output_path": output_path, "bleu": None}
  log(f"decoded {len(sources)} sentences in {seconds:.1f} s "
      f"({summary['sentences_per_second']:.1f} sentences/s, beam {hparams.beam_size}, "
      f"alpha {hparams.alpha})")
  if output_path:
    _write_lines(output_path, [_format(h, hparams.return_beams) for h in nbest])
    log(f"wrote {output_path}")
  if references is not None:
    from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
    summary["bleu"] = bleu.bleu_report(translations, references, lang=hparams.bleu_lang)
    log(bleu.format_report(summary["bleu"]))
  if attention_plot_dir:
    from t2t_keras.decoding import attention  # pylint: disable=import-outside-toplevel
    limit = hparams.max_attention_plots or len(sources)
    paths = attention.plot_translations(
        model, vocab, encode_sources(vocab, sources[:limit]),
        [h[0].ids for h in nbest[:limit]], attention_plot_dir)
    log(f"wrote {len(paths)} attention plots to {attention_plot_dir}")
  return summary


def decode_file(model, vocab, input_path, output_path=None, hparams=None, reference_path=None,
                attention_plot_dir=None, progress=True, log=print):
  """Translates a text file line by line (see `translate_and_score`).

  output_path defaults to "<input_path>.beam<k>.alpha<a>.decodes".
  """
  hparams = hparams or decode_hparams()
  if output_path is None:
    output_path = f"{input_path}.beam{hparams.beam_size}.alpha{hparams.alpha}.decodes"
  references = _read_lines(reference_path) if reference_path else None
  sources = _read_lines(input_path)
  if references is not None and len(references) != len(sources):
    raise InputError(f"{input_path} has {len(sources)} lines but {reference_path} has "
                     f"{len(references)}")
  return translate_and_score(model, vocab, sources, hparams, references, output_path,
                             attention_plot_dir, progress, log)


def split_pairs(problem, data_dir=None, split="test", tmp_dir=None, vocab=None):
  """(sources, references) text of a problem's split.

  Raw text from the problem's generator when it can produce it (always for
  generated problems; with tmp_dir for downloaded ones), else the ids in
  data_dir's TFRecords detokenized with `vocab` (references then carry
  sentencepiece's normalization).
  """
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  if isinstance(problem, str):
    problem = registry.problem(problem)
  try:
    pairs = [(s["inputs"].strip(), s["targets"].strip())
             for s in problem.generate_samples(split, tmp_dir)]
    pairs = [p for p in pairs if p[0] and p[1]]
    if pairs:
      return [p[0] for p in pairs], [p[1] for p in pairs]
  except (FileNotFoundError, OSError, ValueError, NotImplementedError):
    pass
  if data_dir is None or vocab is None:
    raise FileNotFoundError(f"no raw {split} data for {problem.name}: pass tmp_dir, or "
                            f"data_dir and vocab to read its TFRecords")
  sources, references = [], []
  for ex in problem.dataset(data_dir, split).as_numpy_iterator():
    sources.append(vocab.decode(ex["inputs"]))
    references.append(vocab.decode(ex["targets"]))
  return sources, references


def decode_split(model, vocab, problem, data_dir=None, split="test", hparams=None,
                 tmp_dir=None, output_path=None, attention_plot_dir=None, progress=True,
                 log=print):
  """Translates a problem's split and prints BLEU against its references (a summary dict)."""
  hparams = hparams or decode_hparams()
  sources, references = split_pairs(problem, data_dir, split, tmp_dir, vocab)
  return translate_and_score(model, vocab, sources, hparams, references, output_path,
                             attention_plot_dir, progress, log)


def decode_interactive(model, vocab, hparams, stream=None, log=print):
  """Reads lines from `stream` (stdin) and prints their n-best translations until EOF."""
  stream = stream or sys.stdin
  hparams = hparams.replace(batch_size=1)
  search_fn = make_search_fn(model, hparams)
  for line in stream:
    line = line.strip()
    if not line:
      continue
    for k, hyp in enumerate(translate_lines(model, vocab, [line], hparams, search_fn)[0]):
      log(f"{k}\t{hyp.score:.4f}\t{hyp.text}")
      if not hparams.return_beams:
        break
