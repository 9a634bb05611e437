"""The model on packed rows equals the model on the same pairs unpacked."""

import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.layers import packed_masks
from t2t_keras.models.transformer import Transformer, shift_right
from t2t_keras.training.loss import smoothed_cross_entropy

VOCAB = 23
ROW = 16


def _tiny(**changes):
  hp = registry.hparams("transformer_tiny").replace(
      hidden_size=16, filter_size=32, num_heads=2, **changes)
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  return model


def _pairs(rng, lengths):
  """Pairs of random ids ending in EOS (1), of the given (source, target) lengths."""
  return [(np.append(rng.randint(2, VOCAB, n - 1), 1).astype("int32"),
           np.append(rng.randint(2, VOCAB, m - 1), 1).astype("int32")) for n, m in lengths]


def _pack(pairs, length=ROW):
  """One packed row of `pairs`, built by hand as t2t lays it out."""
  row = {}
  for side, key in enumerate(("inputs", "targets")):
    ids, seg, pos = (np.zeros(length, "int32") for _ in range(3))
    at = 0
    for k, pair in enumerate(pairs):
      n = len(pair[side])
      ids[at:at + n], seg[at:at + n], pos[at:at + n] = pair[side], k + 1, np.arange(n)
      at += n
    row[key], row[key + "_segmentation"], row[key + "_position"] = ids, seg, pos
  return {k: tf.constant(v[None]) for k, v in row.items()}


VARIANTS = [dict(), dict(norm_type="pre"), dict(pos="emb", max_positions=64)]


@pytest.mark.parametrize("changes", VARIANTS, ids=["post_timing", "pre_norm", "learned_pos"])
def test_packed_logits_and_loss_equal_unpacked(changes):
  model = _tiny(**changes)
  pairs = _pairs(np.random.RandomState(0), [(4, 6), (7, 3), (2, 5)])
  row = _pack(pairs)
  packed = model(row).numpy()[0]
  at = 0
  for k, (src, tgt) in enumerate(pairs):
    alone = model({"inputs": tf.constant(src[None]), "targets": tf.constant(tgt[None])})
    np.testing.assert_allclose(packed[at:at + len(tgt)], alone.numpy()[0], atol=1e-5)
    seg_logits = tf.constant(packed[None, at:at + len(tgt)])
    got = smoothed_cross_entropy(seg_logits, tf.constant(tgt[None]), 0.1)[0]
    want = smoothed_cross_entropy(alone, tf.constant(tgt[None]), 0.1)[0]
    assert float(got) == pytest.approx(float(want), abs=1e-5), k
    at += len(tgt)
  # The row's loss is the pairs' summed loss over real tokens only (pad is weighted out).
  total = smoothed_cross_entropy(model(row), row["targets"], 0.1)
  assert float(total[1]) == sum(len(t) for _, t in pairs)


def test_no_attention_crosses_a_segment():
  encoder, decoder, memory = packed_masks(tf.constant([[1, 1, 2, 2, 2, 0]]),
                                          tf.constant([[1, 2, 2, 2, 0, 0]]))
  seg_in, seg_tgt = np.array([1, 1, 2, 2, 2, 0]), np.array([1, 2, 2, 2, 0, 0])
  for q in range(6):
    for k in range(6):
      if seg_in[q]:
        assert bool(encoder[0, 0, q, k]) == (seg_in[q] == seg_in[k]), (q, k)
      if seg_tgt[q]:
        assert bool(decoder[0, 0, q, k]) == (seg_tgt[q] == seg_tgt[k] and k <= q), (q, k)
        assert bool(memory[0, 0, q, k]) == (seg_tgt[q] == seg_in[k]), (q, k)


def test_changing_one_pair_leaves_the_others_unchanged():
  model = _tiny(norm_type="pre")
  rng = np.random.RandomState(1)
  pairs = _pairs(rng, [(5, 5), (6, 4), (3, 6)])
  base = model(_pack(pairs)).numpy()[0]
  other = list(pairs)
  other[1] = _pairs(rng, [(6, 4)])[0]
  changed = model(_pack(other)).numpy()[0]
  np.testing.assert_allclose(changed[:5], base[:5], atol=1e-6)     # pair 1
  np.testing.assert_allclose(changed[9:15], base[9:15], atol=1e-6)  # pair 3
  assert np.abs(changed[5:9] - base[5:9]).max() > 1e-3             # pair 2 itself


def test_shift_right_restarts_each_segment():
  targets = tf.constant([[7, 8, 1, 9, 1, 0]])
  positions = tf.constant([[0, 1, 2, 0, 1, 0]])
  assert shift_right(targets, positions).numpy().tolist() == [[0, 7, 8, 0, 9, 0]]
  assert shift_right(targets).numpy().tolist() == [[0, 7, 8, 1, 9, 1]]
