"""CTranslate2's beam search, replayed in Python over any next-token log-prob function.

Written from CTranslate2's source (`src/decoding.cc`, `BeamSearch::search`, 4.x), for the
call `t2t_keras/exporting/ct2_translate.py` makes (no length penalty, no minimum length, no
prefix, the end token returned): tests use it to show that where CTranslate2's output
differs from ours, CTranslate2's own rule applied to *our* model's probabilities gives
CTranslate2's output, i.e. the two engines compute the same model and differ only in the
search. Shares no code with the package. The rule, per step:

  * the 2K best (beam, token) extensions by cumulative log prob (only beam 0 at step 0);
  * the first K of them are walked in order: one that ends in EOS, or any at the last
    step (step + 1 == max_length), is registered as a hypothesis and its slot is refilled
    by the next candidate among positions K..2K-1 that does not end in EOS; an EOS
    candidate at positions K..2K-1 is never registered (t2t registers it);
  * a sentence stops at the last step, or once the best candidate of some step ended and
    at least num_hypotheses hypotheses are registered (`allow_early_exit`);
  * the hypotheses are sorted by log prob and the first num_hypotheses kept.
"""

import numpy as np


def beam_search(next_log_probs, beam_size, max_length, num_hypotheses, eos_id):
  """CTranslate2's hypotheses for one sentence.

  Args:
    next_log_probs: fn(list of prefixes (lists of ids)) -> float [len(prefixes), V],
      each prefix's next-token log probs.
    beam_size: K; max_length: CTranslate2's max_decoding_length; num_hypotheses: as
      passed to translate_batch (beam_size * patience in ct2_translate).
    eos_id: the end token.
  Returns:
    ([(ids with the final EOS where one ended, log prob)] best first, min_gap): min_gap is
    the smallest difference between neighbouring candidates of the 2K + 1 best at any
    step, i.e. how far float rounding may move the log probs before a decision changes.
  """
  alive = [([], 0.0)]
  hypotheses, top_beam_finished, min_gap = [], False, np.inf
  for step in range(max_length):
    log_probs = np.asarray(next_log_probs([seq for seq, _ in alive]), np.float64)
    totals = np.array([score for _, score in alive])[:, None] + log_probs   # [beams, V]
    order = np.argsort(-totals, axis=None, kind="stable")[:2 * beam_size + 1]
    flat = totals.ravel()[order]
    min_gap = min(min_gap, float(np.min(flat[:-1] - flat[1:])))
    candidates = [(alive[i // totals.shape[1]][0] + [int(i % totals.shape[1])],
                   float(totals.ravel()[i])) for i in order[:2 * beam_size]]
    last_step = step + 1 == max_length
    next_alive, spare = [], beam_size
    for k in range(beam_size):
      seq, score = candidates[k]
      if seq[-1] == eos_id or last_step:
        top_beam_finished |= k == 0
        hypotheses.append((seq, score))
        for j in range(spare, 2 * beam_size):
          if candidates[j][0][-1] != eos_id:
            seq, score, spare = *candidates[j], j + 1
            break
      next_alive.append((seq, score))
    if last_step or (top_beam_finished and len(hypotheses) >= num_hypotheses):
      break
    alive = next_alive
  hypotheses.sort(key=lambda h: -h[1])
  return hypotheses[:num_hypotheses], min_gap


ROWS, SOURCE_WIDTH, TARGET_WIDTH = 4, 48, 96  # the replays' fixed shapes: one trace a model


def next_log_probs(model, source_ids):
  """`beam_search`'s next_log_probs for a t2t_keras Transformer (its only use of the
  package: the model's forward pass). fn(up to ROWS prefixes) -> float32 [len(prefixes),
  V]: the model's log-softmax for the token after each prefix (no PAD masking beyond the
  model's own: CTranslate2's search has none). One compiled teacher-forced call a step,
  on fixed shapes (the causal mask makes the zeros after a prefix, and PAD's mask the
  zeros after the source, change nothing)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  if not hasattr(model, "_test_teacher_forced"):
    model._test_teacher_forced = tf.function(  # pylint: disable=protected-access
        lambda inputs, targets: tf.nn.log_softmax(model({"inputs": inputs,
                                                         "targets": targets})))
  inputs = np.zeros([ROWS, SOURCE_WIDTH], np.int32)
  inputs[:, :len(source_ids)] = source_ids

  def fn(prefixes):
    targets = np.zeros([ROWS, TARGET_WIDTH], np.int32)
    for i, p in enumerate(prefixes):
      targets[i, :len(p)] = p
    log_probs = model._test_teacher_forced(inputs, targets).numpy()  # pylint: disable=protected-access
    return np.stack([log_probs[i, len(p)] for i, p in enumerate(prefixes)])
  return fn
