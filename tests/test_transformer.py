import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import registry
from t2t_keras.hparam import HParams
from t2t_keras.hparams.transformer import TABLE3
from t2t_keras.models.params import analytic_param_count
from t2t_keras.models.transformer import Transformer, shift_right

VOCAB = 23


def _tiny(**changes):
  hp = registry.hparams("transformer_tiny").replace(
      hidden_size=16, filter_size=32, num_heads=2, **changes)
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  return model


def _ids(rng, batch, length, pad_from=None):
  ids = rng.randint(2, VOCAB, size=(batch, length)).astype("int32")
  if pad_from is not None:
    ids[:, pad_from:] = 0
  return tf.constant(ids)


VARIANTS = [dict(), dict(norm_type="pre"), dict(pos="emb", max_positions=64)]
VARIANT_IDS = ["post_timing", "pre_norm", "learned_pos"]


@pytest.mark.parametrize("changes", VARIANTS, ids=VARIANT_IDS)
def test_causality(changes):
  model = _tiny(**changes)
  rng = np.random.RandomState(0)
  src, tgt = _ids(rng, 2, 7), _ids(rng, 2, 9).numpy()
  base = model({"inputs": src, "targets": tf.constant(tgt)}).numpy()
  for i in (0, 4):
    changed = tgt.copy()
    changed[:, i + 1:] = rng.randint(2, VOCAB, size=changed[:, i + 1:].shape)
    out = model({"inputs": src, "targets": tf.constant(changed)}).numpy()
    # Logits at position p see targets < p (shift right), so positions <= i+1 keep.
    np.testing.assert_allclose(out[:, : i + 2], base[:, : i + 2], atol=1e-5)
    assert np.abs(out[:, i + 2:] - base[:, i + 2:]).max() > 1e-4


@pytest.mark.parametrize("changes", VARIANTS, ids=VARIANT_IDS)
def test_padding_invariance(changes):
  model = _tiny(**changes)
  rng = np.random.RandomState(1)
  src, tgt = _ids(rng, 2, 6), _ids(rng, 2, 5)
  padded = tf.pad(src, [[0, 0], [0, 7]])
  a = model({"inputs": src, "targets": tgt}).numpy()
  b = model({"inputs": padded, "targets": tgt}).numpy()
  np.testing.assert_allclose(a, b, atol=1e-5)


@pytest.mark.parametrize("changes", VARIANTS, ids=VARIANT_IDS)
def test_cached_decoding_equals_full_forward(changes):
  model = _tiny(**changes)
  rng = np.random.RandomState(2)
  src, tgt = _ids(rng, 3, 8, pad_from=6), _ids(rng, 3, 6)
  full = model({"inputs": src, "targets": tgt}).numpy()
  memory, mask = model.encode(src)
  cache = model.init_cache(memory, max_decode_length=10)
  dec_in = shift_right(tgt)
  steps = []
  for i in range(6):
    logits, cache = model.decode(dec_in[:, i:i + 1], None, mask, cache=cache, cache_index=i)
    steps.append(logits.numpy())
  np.testing.assert_allclose(np.concatenate(steps, 1), full, atol=1e-5)


def test_cached_decoding_compiles_in_while_loop():
  model = _tiny()
  rng = np.random.RandomState(3)
  src = _ids(rng, 2, 5)

  @tf.function(jit_compile=True)
  def greedy(src):
    memory, mask = model.encode(src)
    cache = model.init_cache(memory, 4)
    def body(i, prev, cache, out):
      logits, cache = model.decode(prev, None, mask, cache=cache, cache_index=i)
      nxt = tf.argmax(logits[:, -1], -1, output_type=tf.int32)[:, None]
      return i + 1, nxt, cache, out.write(i, nxt[:, 0])
    _, _, _, out = tf.while_loop(
        lambda i, *_: i < 4, body,
        (0, tf.zeros([2, 1], tf.int32), cache, tf.TensorArray(tf.int32, 4)))
    return tf.transpose(out.stack())

  got = greedy(src).numpy()
  # Uncached reference: re-run the full decoder on the growing prefix.
  prefix = np.zeros([2, 0], "int32")
  for _ in range(4):
    logits = model({"inputs": src, "targets": tf.constant(np.pad(prefix, [[0, 0], [0, 1]]))})
    prefix = np.concatenate([prefix, np.argmax(logits[:, -1], -1)[:, None].astype("int32")], 1)
  np.testing.assert_array_equal(got, prefix)


def test_shared_embedding_is_one_variable_used_three_ways():
  model = _tiny()
  tables = [w for w in model.weights if w.shape == (VOCAB, 16)]
  assert len(tables) == 1
  src = tf.constant([[3, 4]])
  tgt = tf.constant([[5, 6]])
  with tf.GradientTape() as tape:
    logits = model({"inputs": src, "targets": tgt})
    loss = tf.reduce_sum(logits[..., 7])
  grad = tf.convert_to_tensor(tape.gradient(loss, tables[0].value))
  rows = np.nonzero(np.abs(grad.numpy()).sum(-1))[0].tolist()
  # Row 7 through the softmax, 3 and 4 through the encoder, 0 (start) and 5 through the decoder.
  assert {0, 3, 4, 5, 7} <= set(rows)


def test_get_config_round_trip():
  model = _tiny(norm_type="pre")
  config = model.get_config()
  again = Transformer.from_config(config)
  again.build_for_ids()
  assert again.hparams == model.hparams and again.vocab_size == VOCAB
  assert again.count_params() == model.count_params()


SETS = ["transformer_base", "transformer_big", "transformer_big_enfr"] + [
    f"transformer_table3_{row}" for row in TABLE3]


@pytest.mark.parametrize("name", SETS)
def test_param_count_matches_formula(name):
  hp = registry.hparams(name)
  model = Transformer(37000, hp)
  model.build_for_ids()
  assert model.count_params() == analytic_param_count(hp, 37000)


def test_pre_norm_formula():
  hp = registry.hparams("transformer_tiny").replace(norm_type="pre", pos="emb")
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  assert model.count_params() == analytic_param_count(hp, VOCAB)
