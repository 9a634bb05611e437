"""Lexically constrained beam search: each output contains every target phrase of its
sentence (terminology), by dynamic beam allocation (Post & Vilar, 2018) in the vectorized
form of Hu et al. (2019), in static shapes (XLA, the beam-folded cache).

    phrases = [[[17, 4]], [], [[9], [31, 32, 33]]]     # per sentence: target phrases (ids)
    c = term_tensors(phrases)
    ids, scores, met = constrained_beam_search(model, inputs, c, SearchOptions(beam_size=4))
    # ids [B, K, L], scores [B, K] as beam_search's; met bool [B]: False where no output
    # holding every phrase was found within the sentence's length limit

Each hypothesis carries, for each phrase, whether the output holds it and how many of
its tokens end the output (a KMP matcher: self-overlapping phrases such as "a a b" are
found wherever they occur). A step's candidates are t2t's 2K best extensions, each alive
beam's next token of each phrase it has not met (continuing or starting it), each beam's
best token, and EOS for each beam that holds every phrase; duplicates are dropped. Candidates are ranked within their *bank*
(phrase tokens met, partial matches included) and the K alive slots go round-robin over
the banks, the fullest first (Hu et al.'s allocation, with a short bank's slots going to
the others). EOS is allowed only to a hypothesis that holds every phrase, so every
finished hypothesis does; finished ones compete as in t2t's beam search (grow_finished).
"""

import collections

import numpy as np
import tensorflow as tf

from t2t_keras.decoding import beam_search as bs
from t2t_keras.decoding.search_common import SearchOptions, prepare, step_log_probs, write_at
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID, PAD_ID

INF = bs.INF

Terms = collections.namedtuple("Terms", ["tokens", "lengths", "fail"])
Terms.__doc__ = """Each sentence's target phrases as tensors (`term_tensors`).

  tokens: int32 [B, C, T], phrase c of sentence b, 0-padded (C phrases at most, T tokens).
  lengths: int32 [B, C], each phrase's length (0: an unused slot).
  fail: int32 [B, C, T], KMP's failure function: fail[..., j] is the length of the longest
    proper prefix of phrase[:j + 1] that is also its suffix.
"""


def _failure(phrase):
  """KMP's failure function of a token list."""
  fail, k = [0] * len(phrase), 0
  for j in range(1, len(phrase)):
    while k and phrase[j] != phrase[k]:
      k = fail[k - 1]
    if phrase[j] == phrase[k]:
      k += 1
    fail[j] = k
  return fail


def check_phrases(phrases):
  """InputError naming the sentence (0-based) of a phrase that is empty or holds PAD or EOS."""
  for b, sentence in enumerate(phrases):
    for phrase in sentence:
      if not len(phrase) or PAD_ID in phrase or EOS_ID in phrase:
        raise InputError(f"sentence {b}: a constraint must be a non-empty phrase without "
                         f"PAD or EOS ids, got {list(phrase)}")


def failure_links(tokens, lengths):
  """KMP's failure function in TF ops: int32 [..., T] of phrases tokens int32 [..., T]
  (static T) of `lengths` int32 [...], as `_failure` gives for each phrase (0 past its end).

  `_failure`'s loops as tf.while_loops: a graph of the same few ops whatever T (unrolled,
  thousands of ops at the export's T, each traced and XLA-compiled again in every export
  and server; docs/notebook.md, "The suite's time")."""
  width = tokens.shape[-1]
  phrases = tf.reshape(tokens, [-1, width])                                      # [N, T]
  at = lambda table, k: tf.gather(table, k, batch_dims=1)                        # [N]

  def link(j, fail):
    token = phrases[:, j]
    mismatch = lambda k: tf.logical_and(k > 0, tf.not_equal(at(phrases, k), token))
    k, = tf.while_loop(  # fall back while the next token differs
        lambda k: tf.reduce_any(mismatch(k)),
        lambda k: (tf.where(mismatch(k), at(fail, tf.maximum(k - 1, 0)), k),),
        (fail[:, j - 1],))
    k = tf.where(tf.equal(at(phrases, k), token), k + 1, k)
    return j + 1, fail + tf.one_hot(j, width, dtype=fail.dtype) * k[:, None]

  _, fail = tf.while_loop(lambda j, fail: j < width, link,
                          (tf.constant(1), tf.zeros_like(phrases)))
  fail = tf.reshape(fail, tf.shape(tokens))
  return tf.where(tf.range(width) < lengths[..., None], fail, 0)


def term_tensors(phrases, min_phrases=1, min_tokens=1):
  """Per-sentence lists of phrases (lists of ids, no PAD or EOS) -> `Terms`.

  Shapes are at least [B, min_phrases, min_tokens] (fixed shapes: fewer XLA programs).
  """
  check_phrases(phrases)
  c = max([min_phrases] + [len(s) for s in phrases])
  t = max([min_tokens] + [len(p) for s in phrases for p in s])
  tokens = np.zeros([len(phrases), c, t], np.int32)
  lengths = np.zeros([len(phrases), c], np.int32)
  fail = np.zeros([len(phrases), c, t], np.int32)
  for b, sentence in enumerate(phrases):
    for i, phrase in enumerate(sentence):
      tokens[b, i, :len(phrase)] = phrase
      lengths[b, i] = len(phrase)
      fail[b, i, :len(phrase)] = _failure(list(phrase))
  return Terms(tf.constant(tokens), tf.constant(lengths), tf.constant(fail))


def advance(c, met, progress, tokens):
  """Each hypothesis's phrase state after it emits `tokens`.

  Args:
    c: `Terms` with its batch axis already matching (tokens [N, C, T], ...).
    met: bool [N, C], the phrases the output holds; progress: int32 [N, C], how many of
      each phrase's tokens end the output (KMP's state; 0 once met); tokens: int32 [N].
  Returns:
    (met, progress) after the token.
  """
  t = tokens[:, None]                                                            # [N, 1]
  width = c.tokens.shape[-1]
  p = progress
  for _ in range(width):  # fall back along the failure links while the next token differs
    at = tf.gather(c.tokens, p, axis=2, batch_dims=2)                             # [N, C]
    back = tf.gather(c.fail, tf.maximum(p - 1, 0), axis=2, batch_dims=2)          # [N, C]
    p = tf.where(tf.logical_and(p > 0, tf.not_equal(at, t)), back, p)
  p = tf.where(tf.equal(tf.gather(c.tokens, p, axis=2, batch_dims=2), t), p + 1, p)
  used = c.lengths > 0
  met = tf.logical_or(met, tf.logical_and(tf.equal(p, c.lengths), used))
  return met, tf.where(tf.logical_or(met, tf.logical_not(used)), 0, p)


def _bank(c, met, progress):
  """int32 [...]: phrase tokens met, partial matches included."""
  return tf.reduce_sum(tf.where(met, c.lengths, progress), axis=-1)


def _allocate(log_probs, banks, num_banks, beam_size):
  """Indices int32 [B, K] of the alive slots: round-robin over the banks, fullest first,
  each bank's candidates best first (Hu et al.'s bank allocation); invalid candidates
  (log prob <= -INF / 2) last.

  log_probs float32 [B, N], banks int32 [B, N].
  """
  n = log_probs.shape[1]
  valid = log_probs > -INF / 2
  same = tf.equal(banks[:, :, None], banks[:, None, :])                          # [B, N, N]
  order = tf.range(n)
  better = tf.logical_or(log_probs[:, None, :] > log_probs[:, :, None],
                         tf.logical_and(tf.equal(log_probs[:, None, :], log_probs[:, :, None]),
                                        order[None, None, :] < order[None, :, None]))
  rank = tf.reduce_sum(tf.cast(tf.logical_and(tf.logical_and(same, better), valid[:, None, :]),
                               tf.int32), axis=2)                                # [B, N]
  key = rank * num_banks + (num_banks - 1 - banks)
  key = tf.where(valid, key, n * num_banks + num_banks)
  _, index = tf.math.top_k(-key, k=beam_size)
  return index


State = collections.namedtuple("State", bs.BeamState._fields + ("met", "progress"))


def holds_all(lengths, met):
  """bool [...]: every used phrase slot is met (met bool [..., C]; lengths int32 [..., C],
  broadcastable, 0 for an unused slot)."""
  return tf.reduce_all(tf.logical_or(met, lengths <= 0), axis=-1)


def candidate_ids(s, cand, constraints, eos_id):
  """A step's candidates as flat ids beam * V + token, int32 [B, N], N = 4K + K * C; -1
  for none, a copy of an earlier candidate also -1.

  t2t's 2K best of cand float32 [B, K, V] (alive log prob + next-token log prob), each
  beam's next token of every phrase it has not met, each beam's best token, and EOS for
  each beam that holds every phrase in a sentence that has some (its output may end there
  whatever EOS's rank: a weak model seldom ranks it high).
  """
  batch, k, vocab = tf.shape(cand)[0], cand.shape[1], cand.shape[2] or tf.shape(cand)[2]
  num_phrases = constraints.lengths.shape[1]
  _, top_ids = bs.top_k(tf.reshape(cand, [batch, k * vocab]), 2 * k)            # [B, 2K]
  per_beam = lambda x: tf.repeat(x[:, None], k, axis=1)  # noqa: E731  [B, ...] -> [B, K, ...]
  next_tokens = tf.gather(per_beam(constraints.tokens), s.progress, axis=3,
                          batch_dims=3)                                          # [B, K, C]
  wanted = tf.logical_and(tf.logical_not(s.met), per_beam(constraints.lengths) > 0)
  beam_base = tf.range(k)[None, :] * vocab                                       # [1, K]
  phrase_ids = tf.where(wanted, beam_base[:, :, None] + next_tokens, -1)
  best_ids = beam_base + tf.argmax(cand, axis=2, output_type=tf.int32)
  has_phrases = tf.reduce_any(constraints.lengths > 0, axis=1)                   # [B]
  eos_ids = tf.where(tf.logical_and(holds_all(constraints.lengths[:, None], s.met),
                                    has_phrases[:, None]), beam_base + eos_id, -1)
  ids = tf.concat([top_ids, tf.reshape(phrase_ids, [batch, k * num_phrases]), best_ids,
                   eos_ids], axis=1)
  n = 4 * k + k * num_phrases
  earlier_copy = tf.reduce_any(tf.logical_and(
      tf.equal(ids[:, :, None], ids[:, None, :]),
      tf.range(n)[None, :, None] < tf.range(n)[None, None, :]), axis=1)           # [B, N]
  return tf.where(earlier_copy, -1, ids)


def candidate_states(s, ids, flat, vocab):
  """(beams, tokens int32 [B, N]; met bool, progress int32 [B, N, C]) of candidates `ids`
  (-1: none, read as beam 0's PAD); `flat`: the constraints of each candidate, [B * N, ...]
  (made once per search, not per step)."""
  safe = tf.maximum(ids, 0)
  beams, tokens = safe // vocab, safe % vocab
  n, num_phrases = ids.shape[1], flat.lengths.shape[1]
  met = tf.gather(s.met, beams, axis=1, batch_dims=1)                            # [B, N, C]
  progress = tf.gather(s.progress, beams, axis=1, batch_dims=1)
  met, progress = advance(flat, tf.reshape(met, [-1, num_phrases]),
                          tf.reshape(progress, [-1, num_phrases]), tf.reshape(tokens, [-1]))
  shape = tf.stack([tf.shape(ids)[0], n, num_phrases])
  return beams, tokens, tf.reshape(met, shape), tf.reshape(progress, shape)


def constrained_beam_search_loop(p, constraints, options):
  """`beam_search.beam_search_loop` (p.force unused: no prefixes here) where every
  finished output holds its sentence's phrases (`constraints`, [B, C, T], C, T static).

  Returns (ids int32 [B, K, max_length], scores float32 [B, K], met bool [B], steps): a
  sentence with no finished hypothesis returns its alive beams (those holding every
  phrase first, as t2t returns alive beams when none ended); met is False where no
  returned hypothesis holds every phrase (they did not fit the length limit, or the beam
  never completed them).
  """
  symbols_to_logits_fn, batch_size, max_length = p.fn, p.batch_size, p.length
  decode_lengths = tf.cast(p.decode_lengths, tf.int32)
  max_penalty = options.length_penalty(decode_lengths)                           # [B]
  k, num_phrases = options.beam_size, constraints.lengths.shape[1]
  num_banks, n = num_phrases * constraints.tokens.shape[2] + 1, 4 * k + k * num_phrases
  per_candidate = Terms(*(tf.repeat(x[:, None], n, axis=1) for x in constraints))
  flat = Terms(*(tf.repeat(x, n, axis=0) for x in constraints))            # [B * N, ...]

  def cond(s):
    return tf.logical_and(s.i < max_length, tf.logical_not(tf.reduce_all(s.done)))

  def body(s):
    flat_ids = tf.reshape(s.alive_seq, [batch_size * k, -1])                     # [B*K, L]
    logits, cache = symbols_to_logits_fn(flat_ids, s.i, s.cache)
    log_probs = step_log_probs(logits)                                           # [B*K, V]
    vocab = log_probs.shape[-1] or tf.shape(log_probs)[-1]
    log_probs = tf.reshape(log_probs, [batch_size, k, vocab])
    is_eos = tf.equal(tf.range(vocab), options.eos_id)
    barred = tf.logical_and(is_eos, tf.logical_not(
        holds_all(constraints.lengths[:, None], s.met))[:, :, None])
    log_probs = tf.where(barred, -INF, log_probs)  # EOS only once every phrase is held
    cand = s.alive_log_probs[:, :, None] + log_probs                             # [B, K, V]
    ids = candidate_ids(s, cand, constraints, options.eos_id)                            # [B, N]
    beams, tokens, met, progress = candidate_states(s, ids, flat, vocab)
    lp = tf.where(ids >= 0, tf.gather(tf.reshape(cand, [batch_size, -1]), tf.maximum(ids, 0),
                                      axis=1, batch_dims=1), -INF)               # [B, N]
    seq = write_at(tf.gather(s.alive_seq, beams, axis=1, batch_dims=1), s.i + 1, tokens)
    ended = tf.logical_and(tf.equal(tokens, options.eos_id), lp > -INF / 2)
    candidates = bs.Candidates(seq, lp, lp / options.length_penalty(s.i + 1), beams, ended)
    # Alive: the bank allocation over the candidates that did not end.
    alive_lp = tf.where(ended, -INF, lp)
    index = _allocate(alive_lp, _bank(per_candidate, met, progress), num_banks, k)
    pick = lambda x: tf.gather(x, index, axis=1, batch_dims=1)  # noqa: E731
    cache = bs.reorder_cache(cache, s.cache, pick(beams), batch_size, k, p.reordered_keys)
    finished_seq, finished_scores, finished_flags = bs.grow_finished(s, candidates, k)
    keep = lambda new, old: tf.where(  # noqa: E731  sentences already done keep their state
        tf.reshape(tf.logical_not(s.done), [-1] + [1] * (new.shape.rank - 1)), new, old)
    s = State(s.i + 1, keep(pick(seq), s.alive_seq), keep(pick(alive_lp), s.alive_log_probs),
              keep(finished_seq, s.finished_seq), keep(finished_scores, s.finished_scores),
              keep(finished_flags, s.finished_flags), s.done, cache,
              keep(pick(met), s.met), keep(pick(progress), s.progress))
    best_alive = s._replace(alive_log_probs=tf.reduce_max(s.alive_log_probs, 1, keepdims=True))
    return (s._replace(done=bs.is_done(best_alive, decode_lengths, max_penalty,
                                       options.stop_early)),)

  start = bs.initial_state(batch_size, k, max_length, p.state)
  start = State(*start, met=tf.zeros([batch_size, k, num_phrases], tf.bool),
                progress=tf.zeros([batch_size, k, num_phrases], tf.int32))
  s, = tf.while_loop(cond, body, (start,))
  return _result(s, constraints, max_penalty) + (s.i,)


def _result(s, constraints, max_penalty):
  """(ids [B, K, L - 1], scores [B, K], met [B]) of the final state: the finished
  hypotheses, or where none finished the alive beams, those holding every phrase first."""
  finished = tf.reduce_any(s.finished_flags, axis=1)                             # [B]
  holding = holds_all(constraints.lengths[:, None], s.met)                       # [B, K]
  alive = s.alive_log_probs > -INF / 2
  alive_scores = tf.where(alive, s.alive_log_probs / max_penalty[:, None], -INF)
  order = tf.argsort(alive_scores + tf.where(holding, 0.0, -2 * INF), axis=1,
                     direction="DESCENDING", stable=True)
  alive_seq = tf.gather(s.alive_seq, order, axis=1, batch_dims=1)
  alive_scores = tf.gather(alive_scores, order, axis=1, batch_dims=1)
  ids = tf.where(finished[:, None, None], s.finished_seq, alive_seq)[:, :, 1:]
  scores = tf.where(finished[:, None], s.finished_scores, alive_scores)
  met = tf.logical_or(finished, tf.reduce_any(tf.logical_and(holding, alive), axis=1))
  return ids, scores, met


def constrained_beam_search(model, inputs, constraints, options=SearchOptions()):
  """Beam search (`SearchOptions`; sampling and prefixes aside) whose outputs contain each
  sentence's phrases (`term_tensors`).

  Returns (ids int32 [B, K, max_len], scores float32 [B, K], met bool [B]), as
  `beam_search.beam_search` plus met: False where no output holding every phrase was found.
  """
  ids, scores, met, _ = constrained_beam_search_with_steps(model, inputs, constraints, options)
  return ids, scores, met


def constrained_beam_search_with_steps(model, inputs, constraints, options):
  """`constrained_beam_search` that also returns the number of decoder steps run."""
  return constrained_beam_search_loop(prepare(model, inputs, options), constraints, options)


_OLD_NAMES = {"Constraints": "Terms", "constraint_tensors": "term_tensors"}


def __getattr__(name):
  """The old names of `Terms` and `term_tensors` ("constraint" alone named a problem's
  output constraint too), kept for one release with a DeprecationWarning."""
  if name in _OLD_NAMES:
    import warnings  # pylint: disable=import-outside-toplevel
    warnings.warn(f"lexical.{name} is now lexical.{_OLD_NAMES[name]}", DeprecationWarning,
                  stacklevel=2)
    return globals()[_OLD_NAMES[name]]
  raise AttributeError(f"module {__name__!r} has no attribute {name!r}")
