"""Beam search with GNMT's length penalty and t2t's early stopping, in static shapes.

The paper (section 6.1): beam size 4, length penalty alpha = 0.6, maximum output
length = input length + 50, terminate early when possible. This follows
tensor2tensor's `beam_search.py`:

  * score = log P(y) / lp(y),  lp(y) = ((5 + |y|) / 6) ** alpha  (Wu et al., 2016;
    length_penalty_kind="length": |y| ** alpha, fairseq's);
  * each step keeps the 2k best extensions of the k alive beams, so that k of
    them do not end in EOS; those ending in EOS compete for the k finished slots;
  * a sentence is done when no alive beam can still beat its worst finished
    hypothesis: alive log prob / lp(max length) < min finished score
    (t2t's `_is_finished`), or when it reaches its maximum length.

Unlike t2t, every tensor keeps one shape for the whole loop (sequences live in a
buffer of the maximum length, the cache is preallocated), so the loop compiles
with XLA, and each sentence's state is frozen once it is done, so a sentence's
result does not depend on the other sentences of its batch.

    ids, scores = beam_search(model, inputs, SearchOptions(beam_size=4, alpha=0.6))
    # ids int32 [batch, beam, max_len] (best first, 0 after EOS); scores float32 [batch, beam]

Beam size 1 is greedy search, as in t2t: `decoding.search` chooses between the
two; this module is beam search only. The loop's body reads top to bottom as
t2t's: extend every alive beam by one token, keep the K best that did not end
(`grow_alive`), merge those that did into the finished (`grow_finished`), test
whether each sentence is done. Shapes: B sentences, K beams, V the vocabulary,
L = max_length + 1 (the output buffer, the start symbol at position 0).

Everything is graph-only TensorFlow: usable in a `tf.function`, under XLA and
inside a SavedModel signature.
"""

import collections

import tensorflow as tf

from t2t_keras.decoding.search_common import (  # noqa: F401  (bs.length_penalty)
    NEG_INF, SearchOptions, length_penalty, prepare, step_log_probs, write_at)

INF = -NEG_INF  # t2t's "infinity": large but finite, so INF * 0 stays 0.

BeamState = collections.namedtuple("BeamState", [
    "i",                # int32 []: the step; tokens 1..i of the buffers are written
    "alive_seq",        # int32 [B, K, L]: the K best hypotheses not ended by EOS
    "alive_log_probs",  # float32 [B, K]: their log probs (-INF: an empty slot)
    "finished_seq",     # int32 [B, K, L]: the K best hypotheses ended by EOS
    "finished_scores",  # float32 [B, K]: their log prob / length penalty (-INF: empty)
    "finished_flags",   # bool [B, K]: the finished slots that hold a hypothesis
    "done",             # bool [B]: sentences whose search stopped (their state frozen)
    "cache",            # the next-token function's state, B * K leading
])

Candidates = collections.namedtuple("Candidates", [
    "seq",        # int32 [B, 2K, L]: the alive beams, each extended by one token
    "log_probs",  # float32 [B, 2K]
    "scores",     # float32 [B, 2K]: log prob / length penalty of the new length
    "beams",      # int32 [B, 2K]: the alive beam each extends
    "finished",   # bool [B, 2K]: ends in EOS (and is a real hypothesis)
])


def top_k(scores, k):
  """tf.math.top_k(scores, k) over the last axis (sorted), exact, in two small stages.

  The k best of [batch, n] lie in the k blocks with the highest maxima (each
  block holding one of them has a maximum at least as high as the k-th best,
  and at most k blocks do), so: block maxima, top k blocks, top k of their
  k * block entries. Under XLA on CPU a full top_k was a visible share of a step
  (docs/notebook.md); sorting k * block and n / block entries instead of n is cheaper. Ties may come out in another order than tf's.

  Args:
    scores: float [batch, n] with a static n.
    k: int.
  Returns:
    (values [batch, k], indices int32 [batch, k]).
  """
  n = scores.shape[-1]
  block = next((b for b in range(int(n ** 0.5), 1, -1) if n % b == 0), 1) if n else 1
  if n is None or n < 1024 or block * k >= n // 2 or block < 8:
    return tf.math.top_k(scores, k)
  blocks = tf.reshape(scores, [-1, n // block, block])
  _, best_blocks = tf.math.top_k(tf.reduce_max(blocks, axis=-1), k)
  candidates = tf.gather(blocks, best_blocks, axis=1, batch_dims=1)  # [batch, k, block]
  values, at = tf.math.top_k(tf.reshape(candidates, [-1, k * block]), k)
  indices = tf.gather(best_blocks, at // block, batch_dims=1) * block + at % block
  return values, indices


def _gather_beams(x, indices, batch_size, beam_size):
  """x [batch * beam, ...] -> rows `indices` [batch, beam] of each sentence's beams."""
  shape = tf.shape(x)
  split = tf.reshape(x, tf.concat([[batch_size, beam_size], shape[1:]], 0))
  gathered = tf.gather(split, indices, axis=1, batch_dims=1)
  return tf.reshape(gathered, shape)


def initial_state(batch_size, beam_size, max_length, cache):
  """One live beam per sentence (the start symbol), K - 1 empty ones, nothing finished."""
  seq = tf.zeros([batch_size, beam_size, max_length + 1], tf.int32)             # [B, K, L]
  alive_log_probs = tf.tile(
      tf.constant([[0.0] + [-INF] * (beam_size - 1)], tf.float32), [batch_size, 1])  # [B, K]
  return BeamState(i=tf.constant(0), alive_seq=seq, alive_log_probs=alive_log_probs,
                   finished_seq=seq, finished_scores=tf.fill([batch_size, beam_size], -INF),
                   finished_flags=tf.zeros([batch_size, beam_size], tf.bool),
                   done=tf.zeros([batch_size], tf.bool), cache=cache)


def extend(s, log_probs, batch_size, penalty, eos_id):
  """The 2K best one-token extensions of the alive beams, by length-normalized score.

  2K, so that K of them do not end in EOS. Args: s a BeamState; log_probs
  float32 [B, K, V], each alive beam's next-token log probs; batch_size B (an int
  or a scalar tensor); penalty: the length penalty of a length (`SearchOptions.length_penalty`).
  Returns Candidates.
  """
  beam_size, vocab_size = log_probs.shape[1], log_probs.shape[2] or tf.shape(log_probs)[2]
  candidates = s.alive_log_probs[:, :, None] + log_probs                         # [B, K, V]
  penalty = penalty(s.i + 1)                                                     # []
  flat_scores = tf.reshape(candidates / penalty, [batch_size, beam_size * vocab_size])
  topk_scores, topk_ids = top_k(flat_scores, 2 * beam_size)                      # [B, 2K]
  topk_log_probs = topk_scores * penalty                                         # [B, 2K]
  topk_beams = topk_ids // vocab_size                                            # [B, 2K]
  topk_tokens = topk_ids % vocab_size                                            # [B, 2K]
  topk_seq = tf.gather(s.alive_seq, topk_beams, axis=1, batch_dims=1)            # [B, 2K, L]
  topk_seq = write_at(topk_seq, s.i + 1, topk_tokens)                            # [B, 2K, L]
  # An extension of a dead (-INF) beam, or a token a constraint forbade (-INF log
  # prob), never counts as finished; the test is on the log prob, before the length
  # penalty (over 2 after 8 tokens at alpha 1) shrinks it.
  finished = tf.logical_and(tf.equal(topk_tokens, eos_id), topk_log_probs > -INF / 2)
  return Candidates(topk_seq, topk_log_probs, topk_scores, topk_beams, finished)


def grow_alive(c, beam_size):
  """The K best candidates not ended by EOS: (seq [B, K, L], log_probs [B, K],
  source beams int32 [B, K], the alive beam each came from)."""
  alive_candidates = c.log_probs + tf.cast(c.finished, tf.float32) * -INF         # [B, 2K]
  log_probs, index = tf.math.top_k(alive_candidates, k=beam_size)                 # [B, K]
  seq = tf.gather(c.seq, index, axis=1, batch_dims=1)                             # [B, K, L]
  source_beams = tf.gather(c.beams, index, axis=1, batch_dims=1)                  # [B, K]
  return seq, log_probs, source_beams


def grow_finished(s, c, beam_size):
  """The K best of the finished and the candidates ending in EOS: (seq [B, K, L],
  scores [B, K], flags [B, K])."""
  finished_candidates = c.scores + (1.0 - tf.cast(c.finished, tf.float32)) * -INF  # [B, 2K]
  all_seq = tf.concat([s.finished_seq, c.seq], axis=1)                            # [B, 3K, L]
  all_scores = tf.concat([s.finished_scores, finished_candidates], axis=1)        # [B, 3K]
  all_flags = tf.concat([s.finished_flags, c.finished], axis=1)                   # [B, 3K]
  scores, index = tf.math.top_k(all_scores, k=beam_size)                          # [B, K]
  return (tf.gather(all_seq, index, axis=1, batch_dims=1), scores,
          tf.gather(all_flags, index, axis=1, batch_dims=1))


def reorder_cache(new_cache, old_cache, source_beams, batch_size, beam_size, reordered_keys):
  """The next-token function's state following the beams' new histories.

  Leaves the function returned unchanged (the same tensor) are equal across a
  sentence's beams and stay; with `reordered_keys`, only those top-level keys move.
  """
  reorder = lambda new, old: new if new is old else _gather_beams(
      new, source_beams, batch_size, beam_size)
  if reordered_keys is None:
    return tf.nest.map_structure(reorder, new_cache, old_cache)
  return {key: tf.nest.map_structure(reorder, value, old_cache[key])
          if key in reordered_keys else value for key, value in new_cache.items()}


def is_done(s, decode_lengths, max_penalty, stop_early):
  """bool [B]: done before, at its maximum length, or (stop_early, t2t's _is_finished)
  no alive beam can beat the worst finished hypothesis even at the largest penalty."""
  done = tf.logical_or(s.done, s.i >= decode_lengths)
  if not stop_early:
    return done
  best_possible_alive = s.alive_log_probs[:, 0] / max_penalty                     # [B]
  worst_finished = tf.reduce_min(
      s.finished_scores * tf.cast(s.finished_flags, tf.float32), axis=1)          # [B]
  worst_finished += (1.0 - tf.cast(tf.reduce_any(s.finished_flags, 1), tf.float32)) * -INF
  return tf.logical_or(done, worst_finished > best_possible_alive)


def beam_search_loop(p, options):
  """The beam search loop over any next-token function.

  Args:
    p: a `search_common.Prepared` (its fields documented there): fn (ids int32
      [B * K, L], i, state) -> (logits [B * K, V], state), ids[:, 0] the start symbol 0
      and ids[:, i] the latest token, the logits for token i + 1; state (B * K leading;
      `reorder_cache`); batch_size B; length, the buffer's (L - 1); decode_lengths [B];
      reordered_keys; force (after each softmax, `prefix_forcing`).
    options: `SearchOptions`: beam_size K (an int, >= 2), alpha and length_penalty_kind
      (the length penalty, `SearchOptions.length_penalty`), eos_id (an id never
      emitted, e.g. -1, forces max length) and
      stop_early (stop a sentence once no alive beam can beat its worst finished one).
  Returns:
    (ids int32 [B, K, max_length] best first, 0 after EOS; scores float32 [B, K]
     log prob / length penalty (-INF for empty slots); steps int32, decoder steps run).
    A sentence with no finished hypothesis returns its alive beams, scored with
    the penalty of its maximum length.
  """
  symbols_to_logits_fn, batch_size, max_length = p.fn, p.batch_size, p.length
  beam_size, eos_id = options.beam_size, options.eos_id
  decode_lengths = tf.cast(p.decode_lengths, tf.int32)
  force = p.force or (lambda log_probs, i: log_probs)
  max_penalty = options.length_penalty(decode_lengths)                           # [B]

  def cond(s):
    return tf.logical_and(s.i < max_length, tf.logical_not(tf.reduce_all(s.done)))

  def body(s):
    flat_ids = tf.reshape(s.alive_seq, [batch_size * beam_size, -1])            # [B*K, L]
    logits, cache = symbols_to_logits_fn(flat_ids, s.i, s.cache)                # [B*K, V]
    log_probs = force(step_log_probs(logits), s.i)                               # [B*K, V]
    vocab_size = log_probs.shape[-1] or tf.shape(log_probs)[-1]  # static: blocked top_k
    c = extend(s, tf.reshape(log_probs, [batch_size, beam_size, vocab_size]), batch_size,
               options.length_penalty, eos_id)
    alive_seq, alive_log_probs, source_beams = grow_alive(c, beam_size)
    cache = reorder_cache(cache, s.cache, source_beams, batch_size, beam_size,
                          p.reordered_keys)
    finished_seq, finished_scores, finished_flags = grow_finished(s, c, beam_size)
    keep = lambda new, old: tf.where(  # sentences already done keep their state
        tf.reshape(tf.logical_not(s.done), [-1] + [1] * (new.shape.rank - 1)), new, old)
    s = BeamState(s.i + 1, keep(alive_seq, s.alive_seq),
                  keep(alive_log_probs, s.alive_log_probs), keep(finished_seq, s.finished_seq),
                  keep(finished_scores, s.finished_scores),
                  keep(finished_flags, s.finished_flags), s.done, cache)
    return (s._replace(done=is_done(s, decode_lengths, max_penalty, options.stop_early)),)

  s, = tf.while_loop(cond, body,
                     (initial_state(batch_size, beam_size, max_length, p.state),))
  any_finished = tf.reduce_any(s.finished_flags, axis=1)                         # [B]
  alive_scores = tf.where(s.alive_log_probs > -INF / 2,
                          s.alive_log_probs / max_penalty[:, None], -INF)        # [B, K]
  ids = tf.where(any_finished[:, None, None], s.finished_seq, s.alive_seq)[:, :, 1:]
  scores = tf.where(any_finished[:, None], s.finished_scores, alive_scores)     # [B, K]
  return ids, scores, s.i


def beam_search(model, inputs, options=SearchOptions(), constraint=None, prefix=None):
  """Beam search translation of a batch of source ids (options.beam_size >= 2).

  Args:
    model: a Transformer (encode / init_cache / decode).
    inputs: int32 [B, src_len] source ids (EOS-terminated, 0-padded).
    options: `SearchOptions`: beam_size and alpha (the paper's 4 and 0.6; for 1, greedy
      search as in t2t, use `decoding.search.search`), extra_length and
      max_decode_length (maximum output length = non-pad input length + extra_length,
      capped), eos_id, stop_early (t2t's early termination), cached (False re-runs the
      full decoder over the output buffer at every step: the reference).
    constraint: optional; its `wrap(fn, inputs)` forbids tokens at each step
      (`decoding/output_constraint.py`, e.g. parse trees whose leaves copy the input).
    prefix: optional int32 [B, P] target prefixes, 0-padded: each output starts with
      its prefix (`search_common.prefix_forcing`); scores include the prefix's log probs.
  Returns:
    (ids int32 [B, K, max_len], best first, 0 after EOS;
     scores float32 [B, K] = log prob / length penalty: ((5 + len) / 6) ** alpha, or
     len ** alpha with length_penalty_kind="length").
  """
  ids, scores, _ = beam_search_with_steps(model, inputs, options, constraint, prefix)
  return ids, scores


def beam_search_with_steps(model, inputs, options, constraint=None, prefix=None):
  """`beam_search` that also returns the number of decoder steps run (int32)."""
  if options.beam_size < 2:
    raise ValueError(f"beam_search needs beam_size >= 2, got {options.beam_size}; "
                     "decoding.search.search runs greedy search for beam_size 1")
  return beam_search_loop(prepare(model, inputs, options, constraint, prefix), options)
