import math

import keras
import numpy as np
import pytest
import tensorflow as tf

from t2t_keras import layers


def test_sinusoid_matches_section_3_5():
  d = 16
  got = layers.sinusoid_encoding(tf.range(50), d).numpy()
  for pos in (0, 1, 7, 49):
    for i in range(d // 2):
      angle = pos / 10000 ** (2 * i / d)
      assert got[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-5)
      assert got[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-5)


def test_positional_encoding_start_index_is_an_offset():
  pe = layers.PositionalEncoding(8)
  x = tf.zeros([1, 5, 8])
  full = pe(x).numpy()
  step = pe(tf.zeros([1, 1, 8]), start_index=3).numpy()
  np.testing.assert_allclose(step[0, 0], full[0, 3], atol=1e-6)


def test_shared_embedding_scales_by_sqrt_d_and_ties_softmax():
  emb = layers.SharedEmbedding(11, 4)
  ids = tf.constant([[3, 5]])
  x = emb(ids).numpy()
  table = emb.embeddings.numpy()
  np.testing.assert_allclose(x[0, 0], table[3] * 2.0, rtol=1e-6)
  h = tf.constant(np.random.RandomState(0).randn(1, 2, 4), tf.float32)
  np.testing.assert_allclose(emb.logits(h).numpy(), h.numpy() @ table.T, rtol=1e-5, atol=1e-5)
  assert len(emb.weights) == 1


def test_scaled_dot_product_attention_against_numpy():
  rng = np.random.RandomState(1)
  q, k, v = (rng.randn(2, 2, 3, 4).astype("f"), rng.randn(2, 2, 5, 4).astype("f"),
             rng.randn(2, 2, 5, 6).astype("f"))
  mask = np.ones([2, 1, 1, 5], bool)
  mask[1, ..., 3:] = False
  out, w = layers.scaled_dot_product_attention(tf.constant(q), tf.constant(k), tf.constant(v),
                                               tf.constant(mask))
  logits = np.einsum("bhqd,bhkd->bhqk", q, k) / 2.0
  logits = np.where(mask, logits, -1e9)
  ref_w = np.exp(logits - logits.max(-1, keepdims=True))
  ref_w /= ref_w.sum(-1, keepdims=True)
  np.testing.assert_allclose(w.numpy(), ref_w, atol=1e-6)
  np.testing.assert_allclose(out.numpy(), np.einsum("bhqk,bhkd->bhqd", ref_w, v), atol=1e-5)
  assert np.all(w.numpy()[1, ..., 3:] == 0)


def test_masks():
  np.testing.assert_array_equal(layers.causal_mask(3)[0, 0].numpy(),
                                [[1, 0, 0], [1, 1, 0], [1, 1, 1]])
  np.testing.assert_array_equal(layers.padding_mask(tf.constant([[4, 1, 0]]))[0, 0, 0].numpy(),
                                [True, True, False])
  np.testing.assert_array_equal(layers.cache_step_mask(4, 1)[0, 0, 0].numpy(),
                                [True, True, False, False])


def test_multi_head_attention_weight_shapes():
  mha = layers.MultiHeadAttention(num_heads=4, key_size=3, value_size=5, output_size=8)
  y = mha(tf.zeros([2, 6, 8]))
  assert y.shape == (2, 6, 8)
  shapes = sorted(tuple(w.shape) for w in mha.weights)
  assert shapes == sorted([(8, 4, 3), (8, 4, 3), (8, 4, 5), (4, 5, 8)])


def test_multi_head_attention_is_the_paper_formula():
  # softmax(Q_i K_i^T / sqrt(d_k)) V_i per head, concatenated, times W^O; the layer
  # folds 1 / sqrt(d_k) into its query kernel (self- and encoder-decoder attention).
  rng = np.random.RandomState(3)
  mha = layers.MultiHeadAttention(num_heads=2, key_size=4, value_size=3, output_size=6)
  x, memory = rng.randn(2, 5, 6).astype("f"), rng.randn(2, 7, 6).astype("f")
  mask = np.ones([2, 1, 5, 7], bool)
  mask[0, ..., 4:] = False
  y = mha(tf.constant(x), memory=tf.constant(memory), attention_mask=tf.constant(mask))
  wq, wk, wv, wo = (l.kernel.numpy() for l in (mha.query_dense, mha.key_dense,
                                               mha.value_dense, mha.output_dense))
  q = np.einsum("btd,dhk->bhtk", x, wq)
  k, v = np.einsum("btd,dhk->bhtk", memory, wk), np.einsum("btd,dhk->bhtk", memory, wv)
  logits = np.where(mask, np.einsum("bhqd,bhkd->bhqk", q, k) / 2.0, -1e9)
  w = np.exp(logits - logits.max(-1, keepdims=True))
  w /= w.sum(-1, keepdims=True)
  want = np.einsum("bhqk,bhkd,hdo->bqo", w, v, wo)
  np.testing.assert_allclose(y.numpy(), want, rtol=1e-4, atol=1e-5)
  y_self = mha(tf.constant(x))
  q, k, v = (np.einsum("btd,dhk->bhtk", x, m) for m in (wq, wk, wv))
  logits = np.einsum("bhqd,bhkd->bhqk", q, k) / 2.0
  w = np.exp(logits - logits.max(-1, keepdims=True))
  w /= w.sum(-1, keepdims=True)
  np.testing.assert_allclose(y_self.numpy(), np.einsum("bhqk,bhkd,hdo->bqo", w, v, wo),
                             rtol=1e-4, atol=1e-5)


def test_residual_post_and_pre_norm():
  x = tf.constant(np.random.RandomState(0).randn(1, 2, 4), tf.float32)
  y = tf.constant(np.random.RandomState(1).randn(1, 2, 4), tf.float32)
  post = layers.Residual(dropout=0.0, norm_type="post")
  np.testing.assert_allclose(post(x, y).numpy(), post.layer_norm(x + y).numpy(), atol=1e-6)
  np.testing.assert_allclose(post.sublayer_input(x).numpy(), x.numpy())
  pre = layers.Residual(dropout=0.0, norm_type="pre")
  np.testing.assert_allclose(pre(x, y).numpy(), (x + y).numpy(), atol=1e-6)
  np.testing.assert_allclose(pre.sublayer_input(x).numpy(), pre.layer_norm(x).numpy())
  with pytest.raises(ValueError, match="norm_type must be 'post' or 'pre', got 'mid'"):
    layers.Residual(norm_type="mid")
  with pytest.raises(ValueError, match="pos must be one of 'timing', 'timing_t2t', 'timing_hf', 'emb', got 'rope'"):
    layers.PositionalEncoding(8, kind="rope")


def test_residual_stream_stays_float32_under_mixed_bfloat16():
  """A 1e-3 update survives the add (bfloat16's spacing at 1.0 is 2^-7); the LayerNorm
  returns float32 (the sublayer casts to bfloat16 itself)."""
  x = tf.ones([1, 2, 4], tf.float32)
  y = tf.fill([1, 2, 4], tf.constant(1e-3, tf.bfloat16))
  for norm_type in ("pre", "post"):
    res = layers.Residual(dropout=0.0, norm_type=norm_type, dtype="mixed_bfloat16")
    assert res.compute_dtype == "bfloat16"
    out = res(x, y)
    assert out.dtype == tf.float32
    if norm_type == "pre":
      np.testing.assert_allclose(out.numpy(), 1.001, rtol=1e-6)
    assert res.sublayer_input(x * tf.range(1.0, 5.0)).dtype == tf.float32
  # Without the float32 stream the update is lost: what bfloat16 arithmetic gives.
  assert float(tf.cast(x, tf.bfloat16)[0, 0, 0] + y[0, 0, 0]) == 1.0


def test_transformer_stream_is_float32_and_stacks_return_the_compute_dtype():
  from t2t_keras import registry
  from t2t_keras.models.transformer import Transformer
  hp = registry.hparams("transformer_tiny").replace(num_encoder_layers=1,
                                                    num_decoder_layers=1)
  model = Transformer(20, hp, dtype="mixed_bfloat16")
  ids = tf.constant([[3, 4, 1]])
  seen = []
  layer = model.encoder_layers[0]
  original = layer.call
  layer.call = lambda x, **kw: (seen.append(x.dtype), original(x, **kw))[1]
  memory, _ = model.encode(ids)
  assert seen == [tf.float32] and memory.dtype == tf.bfloat16
  x, _ = model.decoder_stack(ids, memory, None)
  assert x.dtype == tf.bfloat16
  assert model({"inputs": ids, "targets": ids}).dtype == tf.float32  # logits


def _zero_dropout_model(norm_type):
  from t2t_keras import registry
  from t2t_keras.models.transformer import Transformer
  hp = registry.hparams("transformer_tiny").replace(
      num_encoder_layers=2, num_decoder_layers=2, norm_type=norm_type,
      layer_prepostprocess_dropout=0.0, attention_dropout=0.0, relu_dropout=0.0)
  model = Transformer(20, hp)
  model.build_for_ids()
  rng = np.random.default_rng(0)
  for v in model.weights:  # LayerNorms unlike one another: a swapped one would show
    if "gamma" in v.path or "beta" in v.path:
      v.assign(rng.normal(size=v.shape).astype(np.float32) * 0.5 + ("gamma" in v.path))
  return model


@pytest.mark.parametrize("norm_type", ["pre", "post"])
def test_encoder_stack_is_x_plus_sublayer_of_its_own_layer_norm(norm_type):
  """Each sublayer reads LayerNorm(x) of its own residual (pre-norm; post-norm
  normalizes x + f(x)), the FFN's output bias included, fused (training) or not."""
  model = _zero_dropout_model(norm_type)
  ids = tf.constant([[3, 4, 5, 1], [6, 1, 0, 0]])
  mask = layers.padding_mask(ids)
  x = model._stream(model.encoder_positions(model.embedding(ids)))
  pre = norm_type == "pre"
  for layer in model.encoder_layers:
    for res, sub in ((layer.self_attention_residual,
                      lambda h: layer.self_attention(h, attention_mask=mask)),
                     (layer.ffn_residual, layer.ffn)):
      y = sub(res.layer_norm(x) if pre else x)
      x = x + y if pre else res.layer_norm(x + y)
  want = model.encoder_norm(x) if pre else x
  for training in (False, True):
    got, _ = model.encode(ids, training=training)
    np.testing.assert_allclose(got, want, rtol=1e-5, atol=1e-5)


@pytest.mark.parametrize("norm_type", ["pre", "post"])
def test_fused_training_path_equals_inference_path_without_dropout(norm_type):
  """With every dropout 0, training (fused residual kernels) and inference (plain
  ops) compute the same decoder output and the same gradients."""
  model = _zero_dropout_model(norm_type)
  features = {"inputs": tf.constant([[3, 4, 5, 1], [6, 1, 0, 0]]),
              "targets": tf.constant([[7, 8, 1], [9, 1, 0]])}
  results = []
  for training in (False, True):
    with tf.GradientTape() as tape:
      out = model.decoder_output(features, training=training)
      loss = tf.reduce_sum(out * tf.random.stateless_normal(tf.shape(out), [1, 2]))
    grads = tape.gradient(loss, model.trainable_variables)
    results.append([out] + [tf.convert_to_tensor(g) for g in grads])
  assert all(g is not None for g in results[1])
  for got, want in zip(results[1], results[0]):
    np.testing.assert_allclose(got, want, rtol=1e-4, atol=1e-5)


LAYER_CASES = [
    (layers.MultiHeadAttention, dict(num_heads=2, key_size=3, value_size=4, output_size=8, dropout=0.1)),
    (layers.FeedForward, dict(hidden_size=8, filter_size=16, relu_dropout=0.1)),
    (layers.Residual, dict(dropout=0.2, norm_type="pre", epsilon=1e-5)),
    (layers.SharedEmbedding, dict(vocab_size=10, hidden_size=8)),
    (layers.PositionalEncoding, dict(hidden_size=8, kind="emb", max_positions=32)),
    (layers.EncoderLayer, dict(hidden_size=8, filter_size=16, num_heads=2, key_size=4,
                               value_size=4, dropout=0.1, norm_type="pre")),
    (layers.DecoderLayer, dict(hidden_size=8, filter_size=16, num_heads=2, key_size=4,
                               value_size=4, dropout=0.1)),
]


@pytest.mark.parametrize("cls,kwargs", LAYER_CASES, ids=[c[0].__name__ for c in LAYER_CASES])
def test_get_config_round_trip(cls, kwargs):
  layer = cls(**kwargs)
  config = layer.get_config()
  for key, value in kwargs.items():
    assert config[key] == value
  again = cls.from_config(config)
  assert again.get_config() == config


def test_encoder_and_decoder_layer_shapes_and_weight_counts():
  enc = layers.EncoderLayer(8, 16, 2, 4, 4)
  assert enc(tf.zeros([2, 5, 8])).shape == (2, 5, 8)
  # 4 attention kernels, 2 dense kernels + 2 biases, 2 LayerNorms x (gamma, beta)
  assert len(enc.weights) == 4 + 4 + 4
  dec = layers.DecoderLayer(8, 16, 2, 4, 4)
  y = dec(tf.zeros([2, 3, 8]), tf.zeros([2, 5, 8]))
  same, weights = dec.call_with_attention(tf.zeros([2, 3, 8]), tf.zeros([2, 5, 8]))
  assert y.shape == (2, 3, 8) and weights.shape == (2, 2, 3, 5)
  np.testing.assert_array_equal(same, y)
  assert len(dec.weights) == 8 + 4 + 6


def test_dropout_rate_scale_and_reproducibility():
  x = tf.ones([200, 100])
  drop = layers.Dropout(0.25, seed=7)
  y = drop(x, training=True).numpy()
  kept = y != 0
  assert abs(kept.mean() - 0.75) < 0.02
  np.testing.assert_allclose(y[kept], 1 / 0.75, rtol=1e-6)
  np.testing.assert_array_equal(drop(x, training=False).numpy(), x.numpy())
  again = layers.Dropout(0.25, seed=7)(x, training=True).numpy()
  np.testing.assert_array_equal(again, y)  # same seed, same mask
  assert not np.array_equal(drop(x, training=True).numpy(), y)  # the generator advances
  fresh = layers.Dropout(0.25, seed=7)
  jit = tf.function(lambda: fresh(x, training=True), jit_compile=True)
  assert abs((jit().numpy() != 0).mean() - 0.75) < 0.02


def test_keep_mask_any_shape_and_rate_to_32_bits():
  from t2t_keras.layers.dropout import keep_mask
  seed = tf.constant([3, 4], tf.int64)
  odd = keep_mask(tf.constant([7, 13, 5]), 0.1, seed).numpy()
  assert odd.shape == (7, 13, 5) and odd.dtype == bool
  big = keep_mask(tf.constant([1000, 1000]), 0.1, seed).numpy()
  assert abs(big.mean() - 0.9) < 0.0012  # 4 sigma at 1e6 draws
  assert keep_mask(tf.constant([1000]), 0.0, seed).numpy().all()
  np.testing.assert_array_equal(keep_mask(tf.constant([7, 13, 5]), 0.1, seed).numpy(), odd)
  other = keep_mask(tf.constant([7, 13, 5]), 0.1, tf.constant([3, 5], tf.int64)).numpy()
  assert not np.array_equal(other, odd)


def test_random_bits_look_independent_across_bits_elements_and_seeds():
  """The hash's bits are fair, and masks of neighbouring elements and of seeds
  one apart (as a SeedGenerator hands them out) are uncorrelated, within 5 sigma."""
  from t2t_keras.layers.dropout import keep_mask, random_bits
  n = 1 << 20
  bits = tf.function(random_bits, jit_compile=True)(tf.constant([n]), tf.constant([7, 0], tf.int64))
  bits = bits.numpy()
  fractions = ((bits[:, None] >> np.arange(32, dtype=np.uint32)) & 1).mean(axis=0)
  assert np.abs(fractions - 0.5).max() < 5 * 0.5 / np.sqrt(n), fractions
  corr = lambda a, b: np.corrcoef(a.ravel(), b.ravel())[0, 1]
  limit = 5 / np.sqrt(n)
  mask = lambda seed: keep_mask(tf.constant([n]), 0.5, tf.constant(seed, tf.int64)).numpy()
  a = mask([7, 0])
  assert abs(corr(a[:-1], a[1:])) < limit  # neighbours
  assert abs(corr(a[:-2], a[2:])) < limit
  for other in ([7, 1], [8, 0], [7 + (1 << 32), 0], [7, 1 << 32]):  # each word, each half
    assert abs(corr(a, mask(other))) < limit, other
  assert abs(a.mean() - 0.5) < limit / 2
  # Seeds differing in either word (a SeedGenerator's layer seed or its counter)
  # differ in both keys, so no mask is a shifted copy of another.
  from t2t_keras.layers.dropout import _keys
  keys = lambda seed: [int(k) for k in _keys(tf.constant(seed, tf.int64))]
  base = keys([7, 0])
  for other in ([7, 1], [8, 0], [7 + (1 << 32), 0], [7, 1 << 32]):
    assert all(x != y for x, y in zip(keys(other), base)), other


def test_write_step_writes_one_position():
  from t2t_keras.layers.cached_decoder import write_step
  cache = tf.reshape(tf.range(2 * 3 * 4 * 2, dtype=tf.float32), [2, 3, 4, 2])
  update = -tf.ones([2, 3, 1, 2])
  got = write_step(cache, update, tf.constant(2)).numpy()
  want = cache.numpy().copy()
  want[:, :, 2, :] = -1
  np.testing.assert_array_equal(got, want)


def test_beam_history_mask():
  from t2t_keras.layers.cached_decoder import beam_history_mask
  # One sentence, 2 beams, length 3: beam 0 came from slots 1, 0 (step 0, 1); beam 1 from 1, 1.
  ancestry = tf.constant([[1, 0, 0], [1, 1, 1]])
  mask = beam_history_mask(ancestry, 2, tf.constant(1)).numpy().reshape(2, 2, 3)
  # mask[beam, slot, step]: step 2 is after the index, so masked everywhere.
  assert mask[0].tolist() == [[False, True, False], [True, False, False]]
  assert mask[1].tolist() == [[False, False, False], [True, True, False]]


def test_attention_dropout_drops_weights_not_the_returned_map():
  """Attention dropout at a nonzero rate: the values are mixed with the dropped, rescaled
  weights (each 0 or w / (1 - rate)), the returned map is the undropped softmax, the drop
  fraction is the rate within 4 binomial standard deviations, and without training
  nothing is dropped."""
  from t2t_keras.layers.attention import scaled_dot_product_attention
  from t2t_keras.layers.dropout import Dropout
  rate = 0.3
  rng = np.random.RandomState(0)
  q, k, v = (tf.constant(rng.randn(2, 4, 16, 8).astype("float32")) for _ in range(3))
  layer = Dropout(rate, seed=7)
  seen = []

  def recording(x, training=False):
    seen.append(layer(x, training=training))
    return seen[-1]

  out, weights = scaled_dot_product_attention(q, k, v, dropout=recording, training=True)
  dropped, w = seen[-1].numpy().astype(np.float64), weights.numpy().astype(np.float64)
  kept = dropped != 0
  np.testing.assert_allclose(dropped[kept], w[kept] / (1 - rate), rtol=1e-6)
  np.testing.assert_allclose(w.sum(-1), 1.0, rtol=1e-6)  # the map itself is not dropped
  n = w.size
  assert abs((~kept).sum() - rate * n) <= 4 * math.sqrt(n * rate * (1 - rate))
  np.testing.assert_allclose(out.numpy(), dropped @ v.numpy().astype(np.float64), atol=1e-5)
  out_eval, weights_eval = scaled_dot_product_attention(q, k, v, dropout=recording,
                                                        training=False)
  np.testing.assert_array_equal(seen[-1].numpy(), weights_eval.numpy())
  np.testing.assert_allclose(out_eval.numpy(), w @ v.numpy().astype(np.float64), atol=1e-5)
  again, _ = scaled_dot_product_attention(q, k, v, dropout=recording, training=True)
  assert not np.allclose(again.numpy(), out.numpy())  # a new mask each call


@pytest.mark.heavy
def test_attention_dropout_is_live_in_the_model_and_alone_when_others_are_zero():
  """With every other dropout at 0, the model's training output differs from its
  inference output exactly when attention_dropout > 0 (the rate reaches every attention)."""
  from t2t_keras import registry
  from t2t_keras.models.transformer import Transformer
  batch = {"inputs": tf.constant([[5, 6, 7, 1]]), "targets": tf.constant([[8, 9, 1]])}
  for rate in (0.0, 0.5):
    hp = registry.hparams("transformer_tiny").replace(
        hidden_size=16, filter_size=32, num_heads=2, attention_dropout=rate,
        relu_dropout=0.0, layer_prepostprocess_dropout=0.0)
    tf.keras.utils.set_random_seed(1)
    model = Transformer(20, hp)
    train, infer = model(batch, training=True).numpy(), model(batch, training=False).numpy()
    assert np.allclose(train, infer, atol=1e-6) == (rate == 0.0), rate
