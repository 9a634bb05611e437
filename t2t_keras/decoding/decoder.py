"""Translating text with a trained model: decoding hparams, batching, the search function.

    hp = decode_hparams("beam_size=4,alpha=0.6")
    model, vocab, *_ = runs.load("runs/tiny")
    decode_lines(model, vocab, ["one hundred and five"], hp)   # -> ["einhundertfünf"]

Files, problem splits, BLEU and the interactive mode are `decoding/files.py`;
scoring given translations is `decoding/scoring.py`.

Inputs are sorted by length (longest first) and cut into batches of
`batch_size`; each batch is padded to a multiple of `length_bucket` tokens and
to the full batch size, so XLA compiles one program per bucket. Outputs come
back in the input order.
"""

import collections
import sys

import numpy as np
import tensorflow as tf

from t2t_keras.decoding import search
from t2t_keras.decoding.sharding import shard_search_fn
from t2t_keras.ids import EOS_ID
from t2t_keras.hparam import HParams, HParamsError


Hypothesis = collections.namedtuple("Hypothesis", ["text", "ids", "score"])


def decode_hparams(overrides="", defaults=""):
  """The decoding HParams, with t2t-style "beam_size=4,alpha=0.6" overrides.

  `defaults` (a problem's `decode_defaults`, e.g. parsing's beam 21) apply
  first, then `overrides`.

    beam_size        4 (the paper); 1 is greedy search.
    alpha            0.6, GNMT length penalty ((5 + len) / 6) ** alpha.
    extra_length     50: maximum output length = input length + extra_length.
    max_decode_length  0 = no cap beyond extra_length; else a hard cap.
    batch_size       sentences per batch.
    length_bucket    inputs are padded to a multiple of this (few XLA programs).
    jit              compile the search with XLA (faster on CPU; docs/decoding.md).
    search_shards    search the batch as N slices at once (0: auto, 2 on a CPU
                     with 2+ cores, 1 with a GPU; `decoding/sharding.py`).
    constrain        apply the problem's output constraint where it has one
                     (`spec.DecodingSpec.constraint`; parsing with words as leaves: the
                     leaves copy the input).
    stop_early       t2t's early termination of beam search.
    sampling_method  "argmax" (beam or greedy search) or "random": sample each token
                     (`decoding/sampling.py`); beam_size samples per sentence, best first.
    sampling_temp    temperature of the samples (0: argmax).
    sampling_keep_top_k  sample among the k most probable tokens (-1 or 0: all).
    sampling_keep_top_p  nucleus sampling: among the most probable tokens whose
                     probabilities sum to p (1.0: all).
    sampling_seed    the samples are a function of this seed and the source sentence.
    return_beams     files get every beam: "hyp1<TAB>score1<TAB>hyp2<TAB>score2..."
    return_alignment  files also get <output>.align: Pharaoh "i-j" word pairs of each
                     best output (`decoding/alignment.py`).
    alignment_layer  the decoder layer whose attention aligns (-1: the last).
    num_samples      decode only the first N inputs (-1: all).
    max_attention_plots  with an attention plot dir, plot at most N sentences (0: all).
    bleu_lang        target language for the Moses-tokenized BLEU variants.
  """
  hp = HParams(beam_size=4, alpha=0.6, extra_length=50, max_decode_length=0,
               batch_size=32, length_bucket=8, jit=True, search_shards=0, constrain=True,
               stop_early=True, sampling_method="argmax", sampling_temp=1.0,
               sampling_keep_top_k=-1, sampling_keep_top_p=1.0, sampling_seed=1,
               return_beams=False, return_alignment=False, alignment_layer=-1, num_samples=-1, max_attention_plots=0,
               bleu_lang="de").override(defaults).override(overrides)
  for key, low in _LOWER_BOUNDS.items():
    if hp.get(key) < low:
      raise HParamsError(f"decode hparam {key}={hp.get(key)!r}: must be >= {low}")
  if hp.sampling_method not in SAMPLING_METHODS:
    raise HParamsError(f"decode hparam sampling_method={hp.sampling_method!r}: must be one of "
                       f"{', '.join(SAMPLING_METHODS)}")
  if not 0.0 < hp.sampling_keep_top_p <= 1.0:
    raise HParamsError(f"decode hparam sampling_keep_top_p={hp.sampling_keep_top_p!r}: must be "
                       "in (0, 1]")
  return hp


SAMPLING_METHODS = ("argmax", "random")
_LOWER_BOUNDS = {"beam_size": 1, "alpha": 0.0, "extra_length": 0, "max_decode_length": 0,
                 "batch_size": 1, "length_bucket": 1, "num_samples": -1,
                 "max_attention_plots": 0, "search_shards": 0, "sampling_temp": 0.0,
                 "sampling_keep_top_k": -1}


def pad_ids(rows):
  """int32 [len(rows), longest] of id lists, 0-padded (a tf constant)."""
  out = np.zeros([len(rows), max(len(r) for r in rows)], np.int32)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r
  return tf.constant(out)


def make_search_fn(model, hparams, constraint=None):
  """A tf.function: int32 [batch, len] source ids -> (ids [batch, beam, max_len], scores [batch, beam]).

  `constraint` (e.g. a problem's `decode_constraint`) limits the outputs the search builds.
  """

  # One trace for every shape; XLA still compiles one program per input shape.
  signature = [tf.TensorSpec([None, None], tf.int32)]
  search_fn = tf.function(search.from_hparams(model, hparams, constraint),
                          jit_compile=hparams.jit, autograph=False, input_signature=signature)
  return shard_search_fn(search_fn, hparams.search_shards, signature)


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

  `search_fn` maps int32 [batch, width] ids to (ids [batch, beam, length], scores
  [batch, beam]), tensors or arrays (default `make_search_fn`'s; the CTranslate2
  engine's is `Ct2Translator.search_ids`).

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
    ids, scores = np.asarray(ids), np.asarray(scores)
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
