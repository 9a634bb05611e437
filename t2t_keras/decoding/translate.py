"""Translating text with a trained model: batching and the search function.

    settings = parse_decode_hparams("beam_size=4,alpha=0.6")   # decoding/settings.py
    model, vocab, *_ = runs.load("runs/tiny")
    decode_lines(model, vocab, ["one hundred and five"], settings)   # -> ["einhundertfünf"]

Files, problem splits, BLEU and the interactive mode are `decoding/files.py`;
scoring given translations is `decoding/scoring.py`.

Inputs are sorted by length (longest first) and cut into batches of
`batch_size` (settings.batching); each batch is padded to a multiple of `length_bucket` tokens and
to the full batch size, so XLA compiles one program per bucket. Outputs come
back in the input order.
"""

import collections
import sys

import numpy as np
import tensorflow as tf

from t2t_keras.data import problem as problem_lib
from t2t_keras.data import vocabulary
from t2t_keras.decoding import lexical
from t2t_keras.decoding.search_common import (NO_HYPOTHESIS, output_limit, position_cap,
                                              prefix_width)
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID


Hypothesis = collections.namedtuple("Hypothesis", ["text", "ids", "score"])


class NBest(list):
  """translate_ids' result: one n-best list per source; `unmet`: the indices of the sources
  whose terminology constraints no output holds (their best outputs are returned anyway);
  `truncated`: the indices of the sources cut to the settings' max_input_size."""
  unmet = ()
  truncated = ()


def cut_sources(sources, limit):
  """(sources with at most `limit` ids each, the indices of those cut): a longer one keeps
  its first limit - 1 ids, then EOS (t2t's max_input_size; the SavedModel's cut). `limit`
  0 or None: none is cut. sources: EOS-terminated id lists."""
  if not limit:
    return sources, []
  cut = [i for i, s in enumerate(sources) if len(s) > limit]
  for i in cut:
    sources[i] = sources[i][:limit - 1] + [EOS_ID]
  return sources, cut


def pad_ids(rows, multiple=1, min_width=1):
  """int32 [len(rows), width] of id lists, 0-padded (a tf constant); width: the longest
  row's length or `min_width`, whichever is more, rounded up to a multiple of `multiple`."""
  width = max(1, -(-max([min_width] + [len(r) for r in rows]) // multiple) * multiple)
  out = np.zeros([len(rows), width], np.int32)
  for i, r in enumerate(rows):
    out[i, :len(r)] = r
  return tf.constant(out)


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


def translate_ids(model, sources, settings, search_fn=None, progress=False, prefixes=None,
                  phrases=None):
  """n-best lists for source id lists (EOS-terminated), in the input order.

  settings: a `DecodeSettings` (its batching; its search where `search_fn` is None);
  `search_fn` maps int32 [batch, width] ids to (ids [batch, beam, length], scores
  [batch, beam]), tensors or arrays (default: a `DecodingSpec` of `settings` without a
  problem builds it, `DecodingSpec.search_fn`; the CTranslate2
  engine's is `Ct2Translator.search_ids`). `prefixes`: optional target id lists (no
  EOS; empty: none), one per source: each output starts with its prefix, and
  `search_fn` then also takes the padded prefixes (`search_fn(..., takes="prefix")`).

  `phrases`: optional terminology constraints, per source a list of target phrases (id
  lists) that each output must contain (`lexical.py`; a given `search_fn` then takes
  the phrases' pieces and lengths padded to the most phrases and tokens of any source,
  as `takes="phrases"`, and returns met too).

  A source longer than settings.batching.max_input_size ids (where not 0) is cut to it
  (`cut_sources`) and named in the result's `truncated`. A source of EOS alone (an empty
  line) gets [([], 0.0)] without a search, whatever its prefix. Returns an `NBest` list (one
  per source) of lists of (ids without EOS, score), best first; a score is the model's log
  prob of the whole output, prefix included, / length penalty. With phrases, its `unmet`
  names the sources no output of which holds them all.
  """
  sources, truncated = cut_sources([list(s) for s in sources],
                                   settings.batching.max_input_size)
  if not sources:
    return NBest()
  _check_per_source(len(sources), prefixes, phrases)
  search_fn, shape = _search_and_shape(model, settings, search_fn, prefixes, phrases)
  results, unmet = _empty_results(sources, phrases)
  order = sorted((i for i, r in enumerate(results) if r is None),
                 key=lambda i: -len(sources[i]))
  bar = _progress(len(sources), progress)
  if bar is not None:
    bar.update(len(sources) - len(order))
  for start in range(0, len(order), settings.batching.batch_size):
    index = order[start:start + settings.batching.batch_size]
    rows = [index[min(row, len(index) - 1)]  # spare rows repeat the last sentence
            for row in range(settings.batching.batch_size)]
    ids, scores, met = _search_batch(model, search_fn, settings, [sources[i] for i in rows],
                                     None if prefixes is None else [prefixes[i] for i in rows],
                                     None if phrases is None else [phrases[i] for i in rows],
                                     shape)
    unmet += [i for row, i in enumerate(index) if not met[row]]
    for row, i in enumerate(index):
      results[i] = [(_strip(ids[row, k]), float(scores[row, k]))
                    for k in range(ids.shape[1]) if scores[row, k] > NO_HYPOTHESIS]
    if bar is not None:
      bar.update(len(index))
  if bar is not None:
    bar.close()
  results = NBest(results)
  results.unmet = sorted(unmet)
  results.truncated = truncated
  return results


def _check_per_source(count, prefixes, phrases):
  """ValueError unless the prefixes and phrases given are one per source; InputError for
  both (a search takes one or the other)."""
  for name, given in (("target prefixes", prefixes), ("constraint lists", phrases)):
    if given is not None and len(given) != count:
      raise ValueError(f"{len(given)} {name} for {count} sources")
  if prefixes is not None and phrases is not None:
    raise InputError("terminology constraints cannot be combined with target prefixes yet: "
                     "give one")


def _search_and_shape(model, settings, search_fn, prefixes, phrases):
  """(`search_fn`, else one built from settings.search for the prefixes or phrases given;
  the (phrases, tokens) every batch's constraints are padded to, None without phrases)."""
  shape = None
  if phrases is not None:  # every batch padded to the most phrases and tokens of any line
    lexical.check_phrases(phrases)
    shape = (max([1] + [len(c) for c in phrases]),
             max([1] + [len(p) for c in phrases for p in c]))
  if search_fn is None:
    takes = "phrases" if shape else "prefix" if prefixes is not None else "ids"
    search_fn = DecodingSpec(None, settings).search_fn(model, None, takes, shape)
  return search_fn, shape


def _empty_results(sources, phrases):
  """(results, unmet): [([], 0.0)] for each source of EOS alone (an empty or whitespace-only
  line: "" with score 0 and no search, as the SavedModel answers), None for the others;
  the empty sources that have terminology constraints, which "" cannot hold."""
  results = [[([], 0.0)] if len(s) <= 1 else None for s in sources]
  unmet = [i for i, r in enumerate(results) if r and phrases is not None and phrases[i]]
  return results, unmet


def _search_batch(model, search_fn, settings, sources, prefixes, phrases, shape):
  """One batch through `search_fn`: (ids [rows, beam, len], scores [rows, beam], met bool
  [rows]) as arrays, the sources padded as the batching (and any prefix) asks."""
  bucket = max(1, settings.batching.length_bucket)
  width = max(len(s) for s in sources)
  if phrases is not None:
    _check_phrases_fit(phrases, width, settings.search, _max_positions(model))
    tensors = lexical.term_tensors(phrases, *shape)
    ids, scores, met = search_fn(pad_ids(sources, bucket), tensors.tokens, tensors.lengths)
    return np.asarray(ids), np.asarray(scores), np.asarray(met)
  if prefixes is None:
    ids, scores = search_fn(pad_ids(sources, bucket))
  else:
    width = source_width(width, max(len(p) for p in prefixes), settings.search,
                         _max_positions(model))
    ids, scores = search_fn(pad_ids(sources, bucket, width), pad_ids(prefixes, bucket))
  return np.asarray(ids), np.asarray(scores), np.ones(len(sources), bool)


def _check_phrases_fit(rows, width, search_settings, max_positions=None):
  """InputError for a phrase longer than the output limit of sources `width` ids wide."""
  limit = output_limit(width, search_settings.extra_length, search_settings.max_decode_length,
                       max_positions) - 1  # room for EOS
  longest = max([0] + [len(p) for phrases in rows for p in phrases])
  if longest > limit:
    raise InputError(f"a terminology constraint of {longest} ids is longer than the output "
                     f"limit of {limit} ids before EOS (extra_length / max_decode_length)")


def source_width(width, longest_prefix, search_settings, max_positions=None):
  """The width to pad a batch's sources to (at least `width`) so that its output buffer
  (width + extra_length, or max_decode_length) holds its longest target prefix and EOS;
  InputError where a fixed limit (max_decode_length, learned positions' max_positions)
  cannot hold the prefix."""
  for limit, name in ((search_settings.max_decode_length, "max_decode_length"),
                      (max_positions, "the model's max_positions")):
    if limit and longest_prefix > limit:
      raise InputError(f"a target prefix of {longest_prefix} ids is longer than the output "
                       f"limit of {limit} ids ({name})")
  return prefix_width(width, longest_prefix, search_settings.extra_length,
                      search_settings.max_decode_length)


def _max_positions(model):
  """The most target positions of a model with learned positions, else None."""
  return position_cap(getattr(model, "hparams", None))


def encode_sources(vocab, lines):
  """Text lines -> EOS-terminated id lists, as the training data."""
  return [ids + [EOS_ID] for ids in vocab.encode_batch(lines)] if hasattr(
      vocab, "encode_batch") else [vocab.encode(line) + [EOS_ID] for line in lines]


def translate_lines(model, vocab, lines, settings, search_fn=None, progress=False,
                    prefixes=None, constraints=None):
  """n-best `Hypothesis(text, ids, score)` lists for text lines, in input order
  (settings: a `DecodeSettings`); `prefixes`: optional target text, one per line ("":
  none), with which each output starts; `constraints`: optional lists of target phrases
  (text), one list per line, that each output must contain. The result's `unmet` names
  the lines no output of which holds all their phrases, its `truncated` those cut to
  settings.batching.max_input_size (`NBest`)."""
  target = vocabulary.target_side(vocab)
  prefix_ids = None if prefixes is None else [target.encode(p) if p else [] for p in prefixes]
  phrase_ids = None if constraints is None else [[target.encode(p) for p in c]
                                                 for c in constraints]
  nbest = translate_ids(model, encode_sources(vocab, lines), settings, search_fn, progress,
                        prefix_ids, phrase_ids)
  out = NBest([[Hypothesis(vocab.decode(ids), ids, score) for ids, score in hyps]
               for hyps in nbest])
  out.unmet, out.truncated = nbest.unmet, nbest.truncated
  return out


def decode_lines(model, vocab, lines, settings, search_fn=None, progress=False, hooks=None):
  """Best translation of each text line, in input order (settings: a `DecodeSettings`).
  hooks: a problem's (`DecodingSpec.hooks`): each line goes through its `preprocess`, each
  translation through its `restore` (the run's text, as dev scores compare it); None: the
  defaults', which leave text alone."""
  hooks = hooks or problem_lib.hooks(None)
  nbest = translate_lines(model, vocab, [hooks.preprocess(line) for line in lines], settings,
                          search_fn, progress)
  return [hooks.restore(line, hyps[0].text) for line, hyps in zip(lines, nbest)]
