"""Beam search with GNMT's length penalty and t2t's early stopping, in static shapes.

The paper (section 6.1): beam size 4, length penalty alpha = 0.6, maximum output
length = input length + 50, terminate early when possible. This follows
tensor2tensor's `beam_search.py`:

  * score = log P(y) / lp(y),  lp(y) = ((5 + |y|) / 6) ** alpha  (Wu et al., 2016);
  * each step keeps the 2k best extensions of the k alive beams, so that k of
    them do not end in EOS; those ending in EOS compete for the k finished slots;
  * a sentence is done when no alive beam can still beat its worst finished
    hypothesis: alive log prob / lp(max length) < min finished score
    (t2t's `_is_finished`), or when it reaches its maximum length.

Unlike t2t, every tensor keeps one shape for the whole loop (sequences live in a
buffer of the maximum length, the cache is preallocated), so the loop compiles
with XLA, and each sentence's state is frozen once it is done, so a sentence's
result does not depend on the other sentences of its batch.

    ids, scores = beam_search(model, inputs, beam_size=4, alpha=0.6, extra_length=50)
    # ids int32 [batch, beam, max_len] (best first, 0 after EOS); scores float32 [batch, beam]

Everything is graph-only TensorFlow: usable in a `tf.function`, under XLA and
inside a SavedModel signature.
"""

import tensorflow as tf

from t2t_keras.decoding.greedy import greedy_loop
from t2t_keras.decoding.search_common import (NEG_INF, buffer_length, cached_logits_fn,
                                              decode_lengths_for, step_log_probs,
                                              uncached_logits_fn, write_at)
from t2t_keras.ids import EOS_ID

INF = -NEG_INF  # t2t's "infinity": large but finite, so INF * 0 stays 0.


def length_penalty(length, alpha):
  """GNMT's ((5 + length) / 6) ** alpha, float32."""
  return tf.pow((5.0 + tf.cast(length, tf.float32)) / 6.0, tf.cast(alpha, tf.float32))


def tile_beams(x, beam_size):
  """[batch, ...] -> [batch * beam, ...]: each row repeated beam_size times in place."""
  return tf.repeat(x, beam_size, axis=0)


def top_k(scores, k):
  """tf.math.top_k(scores, k) over the last axis (sorted), exact, in two small stages.

  The k best of [batch, n] lie in the k blocks with the highest maxima (each
  block holding one of them has a maximum at least as high as the k-th best,
  and at most k blocks do), so: block maxima, top k blocks, top k of their
  k * block entries. Under XLA on CPU a top_k over [32, 32000] (beam 4, vocab
  8000) cost 1.3 ms a step; sorting k * block and n / block entries instead of n
  is the cheaper search. Ties may come out in another order than tf's.

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


def beam_search_loop(symbols_to_logits_fn, state, batch_size, beam_size, max_length,
                     decode_lengths, alpha=0.6, eos_id=EOS_ID, stop_early=True,
                     reordered_keys=None):
  """The beam search loop over any next-token function.

  One function (with its `cond` and `body`) because both close over the same
  loop-state tuple, in t2t's layout so the two can be read side by side; `body`
  runs top to bottom: extend, split alive from finished, merge, test the stop.

  Args:
    symbols_to_logits_fn: (ids int32 [batch * beam, max_length + 1], i, state) ->
      (logits float [batch * beam, vocab], state). ids[:, 0] is the start
      symbol 0 and ids[:, i] the latest token; the logits are for token i + 1.
      State leaves the function returns unchanged (the same tensor) are taken
      to be equal across a sentence's beams and are not reordered.
    state: nested tensors, batch * beam leading (each sentence's rows tiled).
    reordered_keys: if given, only these top-level keys of a dict state follow
      the beams when they swap histories (the model's beam-folded cache needs
      only its "ancestry" reordered); by default every leaf the function changed.
    batch_size, beam_size: ints (batch_size may be a scalar tensor).
    max_length: length of the output buffer (int or scalar tensor).
    decode_lengths: int32 [batch], each sentence's maximum output length (EOS
      included), at most max_length.
    alpha: length penalty exponent.
    eos_id: the end symbol; an id the model never emits (e.g. -1) forces every
      hypothesis to max length.
    stop_early: stop a sentence once no alive beam can beat its worst finished one.
  Returns:
    (ids int32 [batch, beam, max_length] best first, 0 after EOS;
     scores float32 [batch, beam] log prob / length penalty (-INF for empty
     slots); steps int32, the number of decoder steps run).
    A sentence with no finished hypothesis returns its alive beams, scored with
    the penalty of its maximum length.
  """
  decode_lengths = tf.cast(decode_lengths, tf.int32)
  alpha = tf.cast(alpha, tf.float32)
  seq = tf.zeros([batch_size, beam_size, max_length + 1], tf.int32)
  alive_log_probs = tf.tile(
      tf.constant([[0.0] + [-INF] * (beam_size - 1)], tf.float32), [batch_size, 1])
  finished_scores = tf.fill([batch_size, beam_size], -INF)
  finished_flags = tf.zeros([batch_size, beam_size], tf.bool)
  done = tf.zeros([batch_size], tf.bool)
  max_penalty = length_penalty(decode_lengths, alpha)  # [batch]

  def cond(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags,
           done, state):
    del alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, state
    return tf.logical_and(i < max_length, tf.logical_not(tf.reduce_all(done)))

  def body(i, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags,
           done, state):
    flat_ids = tf.reshape(alive_seq, [batch_size * beam_size, -1])
    logits, new_state = symbols_to_logits_fn(flat_ids, i, state)
    log_probs = step_log_probs(logits)
    vocab_size = log_probs.shape[-1] or tf.shape(log_probs)[-1]  # static: blocked top_k
    log_probs = tf.reshape(log_probs, [batch_size, beam_size, vocab_size])

    # The 2k best extensions of the alive beams, by length-normalized score.
    candidates = alive_log_probs[:, :, None] + log_probs
    penalty = length_penalty(i + 1, alpha)
    flat_scores = tf.reshape(candidates / penalty, [batch_size, beam_size * vocab_size])
    topk_scores, topk_ids = top_k(flat_scores, 2 * beam_size)
    topk_log_probs = topk_scores * penalty
    topk_beams = topk_ids // vocab_size
    topk_tokens = topk_ids % vocab_size
    topk_seq = tf.gather(alive_seq, topk_beams, axis=1, batch_dims=1)
    topk_seq = write_at(topk_seq, i + 1, topk_tokens)
    # An extension of a dead (-INF) beam, or a token a constraint forbade (-INF log
    # prob), never counts as finished; the test is on the log prob, before the length
    # penalty (over 2 after 8 tokens at alpha 1) shrinks it.
    topk_finished = tf.logical_and(tf.equal(topk_tokens, eos_id), topk_log_probs > -INF / 2)

    # Alive: the k best extensions that do not end in EOS.
    alive_candidates = topk_log_probs + tf.cast(topk_finished, tf.float32) * -INF
    new_alive_log_probs, alive_index = tf.math.top_k(alive_candidates, k=beam_size)
    new_alive_seq = tf.gather(topk_seq, alive_index, axis=1, batch_dims=1)
    source_beams = tf.gather(topk_beams, alive_index, axis=1, batch_dims=1)
    reorder = lambda new, old: new if new is old else _gather_beams(
        new, source_beams, batch_size, beam_size)
    if reordered_keys is None:
      new_state = tf.nest.map_structure(reorder, new_state, state)
    else:
      new_state = {key: tf.nest.map_structure(reorder, value, state[key])
                   if key in reordered_keys else value for key, value in new_state.items()}

    # Finished: the k best of the old finished and the extensions ending in EOS.
    finished_candidates = topk_scores + (1.0 - tf.cast(topk_finished, tf.float32)) * -INF
    all_seq = tf.concat([finished_seq, topk_seq], axis=1)
    all_scores = tf.concat([finished_scores, finished_candidates], axis=1)
    all_flags = tf.concat([finished_flags, topk_finished], axis=1)
    new_finished_scores, finished_index = tf.math.top_k(all_scores, k=beam_size)
    new_finished_seq = tf.gather(all_seq, finished_index, axis=1, batch_dims=1)
    new_finished_flags = tf.gather(all_flags, finished_index, axis=1, batch_dims=1)

    # Sentences already done keep their state.
    active = tf.logical_not(done)
    keep = lambda new, old: tf.where(
        tf.reshape(active, [-1] + [1] * (new.shape.rank - 1)), new, old)
    alive_seq = keep(new_alive_seq, alive_seq)
    alive_log_probs = keep(new_alive_log_probs, alive_log_probs)
    finished_seq = keep(new_finished_seq, finished_seq)
    finished_scores = keep(new_finished_scores, finished_scores)
    finished_flags = keep(new_finished_flags, finished_flags)

    done = tf.logical_or(done, i + 1 >= decode_lengths)
    if stop_early:
      # t2t's _is_finished: the best alive beam, even with the largest length
      # penalty, scores below the worst finished hypothesis.
      best_possible_alive = alive_log_probs[:, 0] / max_penalty
      worst_finished = tf.reduce_min(
          finished_scores * tf.cast(finished_flags, tf.float32), axis=1)
      worst_finished += (1.0 - tf.cast(tf.reduce_any(finished_flags, 1), tf.float32)) * -INF
      done = tf.logical_or(done, worst_finished > best_possible_alive)
    return (i + 1, alive_seq, alive_log_probs, finished_seq, finished_scores,
            finished_flags, done, new_state)

  loop_vars = (tf.constant(0), seq, alive_log_probs, seq, finished_scores, finished_flags,
               done, state)
  (steps, alive_seq, alive_log_probs, finished_seq, finished_scores, finished_flags, _,
   _) = tf.while_loop(cond, body, loop_vars)

  any_finished = tf.reduce_any(finished_flags, axis=1)
  alive_scores = tf.where(alive_log_probs > -INF / 2, alive_log_probs / max_penalty[:, None],
                          -INF)
  ids = tf.where(any_finished[:, None, None], finished_seq, alive_seq)[:, :, 1:]
  scores = tf.where(any_finished[:, None], finished_scores, alive_scores)
  return ids, scores, steps


def beam_search(model, inputs, beam_size=4, alpha=0.6, extra_length=50,
                max_decode_length=None, eos_id=EOS_ID, stop_early=True, cached=True,
                constraint=None):
  """Beam search translation of a batch of source ids.

  Args:
    model: a Transformer (encode / init_cache / decode).
    inputs: int32 [batch, src_len] source ids (EOS-terminated, 0-padded).
    beam_size, alpha: the paper's 4 and 0.6. beam_size 1 runs greedy search
      (as t2t does), scored log prob / length penalty.
    extra_length: maximum output length = non-pad input length + extra_length.
    max_decode_length: optional cap (and buffer length) on output lengths.
    eos_id: end symbol (an id never emitted forces maximum length).
    stop_early: t2t's early termination (off: run to maximum length).
    cached: decode one step at a time with the k/v cache (fast); False re-runs
      the full decoder over the output buffer at every step (reference/benchmark).
    constraint: optional; its `wrap(fn, inputs)` forbids tokens at each step
      (`decoding/constraints.py`, e.g. parse trees whose leaves copy the input).
  Returns:
    (ids int32 [batch, beam, max_len], best first, 0 after EOS;
     scores float32 [batch, beam] = log prob / ((5 + len) / 6) ** alpha).
  """
  ids, scores, _ = _beam_search_with_steps(
      model, inputs, beam_size, alpha, extra_length, max_decode_length, eos_id,
      stop_early, cached, constraint=constraint)
  return ids, scores


def _beam_search_with_steps(model, inputs, beam_size, alpha, extra_length, max_decode_length,
                            eos_id, stop_early, cached, prefix_only=False, constraint=None):
  inputs = tf.convert_to_tensor(inputs, tf.int32)
  batch_size = tf.shape(inputs)[0]
  length = buffer_length(model, inputs, extra_length, max_decode_length)
  decode_lengths = decode_lengths_for(inputs, extra_length, length)
  memory, mask = model.encode(inputs)
  reordered_keys = None
  if cached and beam_size > 1:
    # Beam-folded cache over the untiled memory: the encoder's keys/values once
    # per sentence, and beams swapping histories reorder the ancestry only.
    state = model.init_cache(memory, length, beam_size=beam_size)
    reordered_keys = ("ancestry",)
    fn = cached_logits_fn(model, mask)
  else:
    memory, mask = tile_beams(memory, beam_size), tile_beams(mask, beam_size)
    if cached:
      state = model.init_cache(memory, length)
      fn = cached_logits_fn(model, mask)
    else:
      state = {}
      fn = uncached_logits_fn(model, memory, mask, prefix_only=prefix_only)
  if constraint is not None:
    fn = constraint.wrap(fn, tile_beams(inputs, beam_size))
  if beam_size == 1:
    return _greedy_as_beam(fn, state, batch_size, length, decode_lengths, alpha, eos_id)
  return beam_search_loop(fn, state, batch_size, beam_size, length, decode_lengths,
                          alpha=alpha, eos_id=eos_id, stop_early=stop_early,
                          reordered_keys=reordered_keys)


def _greedy_as_beam(fn, state, batch_size, length, decode_lengths, alpha, eos_id):
  """Greedy search in beam_search's output format (t2t also runs greedy for one beam).

  The 2k-candidate search with k = 1 would keep the better of the two best
  extensions when it ends in EOS, which argmax decoding never picks.
  """
  ids, log_probs, steps = greedy_loop(fn, state, batch_size, length, decode_lengths, eos_id)
  is_eos = tf.equal(ids, eos_id)
  lengths = tf.where(tf.reduce_any(is_eos, 1),
                     tf.argmax(tf.cast(is_eos, tf.int32), 1, output_type=tf.int32) + 1,
                     decode_lengths)
  return ids[:, None], (log_probs / length_penalty(lengths, alpha))[:, None], steps
