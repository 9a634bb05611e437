import keras
import numpy as np
import pytest
import tensorflow as tf

import numpy_transformer
from t2t_keras import registry
from t2t_keras.hparams_lib import HParams
from t2t_keras.hparams.transformer import TABLE3
from t2t_keras.models.params import analytic_param_count
from t2t_keras.layers import causal_mask, packed_masks
from t2t_keras.models.transformer import Transformer, shift_right
from t2t_keras.training.loss import smoothed_cross_entropy

VOCAB = 23


def _tiny(**changes):
  """A built 16-wide model whose weights do not depend on what ran before in the process."""
  keras.utils.set_random_seed(0)
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


# transformer_tiny is pre-norm: post-norm is asked for by name.
VARIANTS = [dict(norm_type="post"), dict(norm_type="pre"), dict(pos="emb", max_positions=64),
            dict(position_offset=2, decoder_start_id=3)]
VARIANT_IDS = ["post_timing", "pre_norm", "learned_pos", "fairseq_offset_and_start"]


@pytest.mark.parametrize(
    "changes", VARIANTS + [dict(attention_key_channels=4, attention_value_channels=4)],
    ids=VARIANT_IDS + ["small_heads"])
def test_logits_and_attention_equal_a_float64_numpy_transformer(changes):
  """The model against `numpy_transformer.forward`, the paper's formulas in float64 over the
  same variables. float32 rounds each op's result by at most 6e-8 relative; over the ~40
  ops of a 2+2-layer pass, with logits below 5 in size, 1e-4 absolute is >10x that."""
  model = _tiny(**changes)
  rng = np.random.RandomState(0)
  src = rng.randint(3, VOCAB, 7).tolist() + [1]
  tgt = rng.randint(3, VOCAB, 5).tolist() + [1]
  ref_logits, ref_attention = numpy_transformer.forward(model, src, tgt)
  memory, mask = model.encode(tf.constant([src]))
  logits, _, attention = model.decode(shift_right(tf.constant([tgt])), memory, mask,
                                      return_attention=True)
  assert np.abs(ref_logits).max() < 5
  np.testing.assert_allclose(logits[0].numpy(), ref_logits, atol=1e-4, rtol=0)
  np.testing.assert_allclose(np.stack([a[0].numpy() for a in attention]), ref_attention,
                             atol=1e-5, rtol=0)
  np.testing.assert_allclose(
      model({"inputs": tf.constant([src]), "targets": tf.constant([tgt])})[0].numpy(),
      ref_logits, atol=1e-4, rtol=0)


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


@pytest.mark.parametrize("norm_type", ["post", "pre"])
def test_fused_training_stacks_equal_the_layers_call(norm_type):
  """Training, the stacks run `residual_chain` (each residual add, dropout and LayerNorm one
  kernel); with every dropout on and the seed generators set back between the two, the
  layers' own `call` (the paper's order) gives the same encoder and decoder outputs and
  draws the same masks: a mask drawn in another order, or another rate, changes outputs
  by O(1), far above the float32 rounding (1e-5) allowed here."""
  model = _tiny(norm_type=norm_type, layer_prepostprocess_dropout=0.3, attention_dropout=0.2,
                relu_dropout=0.2)
  rng = np.random.RandomState(5)
  src, tgt = _ids(rng, 2, 7, pad_from=5), _ids(rng, 2, 6)
  seeds = [v for v in model.variables if "seed_generator" in v.path]
  start = [v.numpy() for v in seeds]
  memory, mask = model.encode(src, training=True)
  fused, _ = model.decoder_stack(shift_right(tgt), memory, mask, training=True)
  after = [v.numpy() for v in seeds]
  for v, value in zip(seeds, start):
    v.assign(value)

  def stack(dropout, embedded, layers, final_norm, call):
    x = tf.cast(dropout(embedded, training=True), tf.float32)
    for layer in layers:
      x = call(layer, x)
    return final_norm(x) if norm_type == "pre" else x

  x = stack(model.encoder_dropout,
            model.encoder_positions(model.source_embedding(src)), model.encoder_layers,
            model.encoder_norm, lambda l, x: l(x, attention_mask=mask, training=True))
  np.testing.assert_allclose(x.numpy(), memory.numpy(), atol=1e-5)
  y = stack(model.decoder_dropout,
            model.decoder_positions(model.target_embedding(shift_right(tgt))),
            model.decoder_layers, model.decoder_norm,
            lambda l, y: l(y, memory, causal_mask(6), mask, training=True))
  np.testing.assert_allclose(y.numpy(), fused.numpy(), atol=1e-5)
  assert all((v.numpy() == a).all() for v, a in zip(seeds, after))  # as many draws
  assert len(seeds) >= 4 and any((a != b).any() for a, b in zip(start, after))


@pytest.mark.parametrize("changes", VARIANTS, ids=VARIANT_IDS)
def test_beam_folded_cache_equals_tiled_cache(changes):
  """The beam cache keeps the encoder's keys/values once per sentence, and its
  steps give each beam row the logits a per-row cache over tiled memory gives."""
  model = _tiny(**changes)
  rng = np.random.RandomState(4)
  beams, steps = 3, 5
  src = _ids(rng, 2, 7, pad_from=5)
  tokens = _ids(rng, 2 * beams, steps)  # each beam row its own history (no reordering)
  memory, mask = model.encode(src)
  folded = model.init_cache(memory, steps, beam_size=beams)
  k = folded["layer_0"]["memory"]["k"]
  assert k.shape == (2, 2, 7, 8)  # [batch, heads, src_len, d_k]: once per sentence
  assert folded["ancestry"].shape == (2 * beams, steps)
  tiled_mask = tf.repeat(mask, beams, axis=0)
  tiled = model.init_cache(tf.repeat(memory, beams, axis=0), steps)
  for i in range(steps):
    ids = tokens[:, i:i + 1]
    a, folded = model.decode(ids, None, mask, cache=folded, cache_index=i)
    b, tiled = model.decode(ids, None, tiled_mask, cache=tiled, cache_index=i)
    np.testing.assert_allclose(a.numpy(), b.numpy(), atol=1e-5)
    # Beam slot j's history stays in slot j while no search reorders the ancestry.
    np.testing.assert_array_equal(folded["ancestry"][:, i].numpy(),
                                  np.arange(2 * beams) % beams)


@pytest.mark.heavy
@pytest.mark.slow  # the searches' own XLA loops over the cache: test_beam_search.py's
# test_compiles_in_tf_function and its cached-equals-uncached tests
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


class _KerasBuilt(Transformer):
  """Built as Keras builds a model without a `build`: by tracing `call` symbolically."""
  build = keras.layers.Layer.build


@pytest.mark.parametrize("changes", [
    dict(norm_type="post"), dict(norm_type="pre", pos="emb"),
    dict(shared_embedding_and_softmax_weights=False, shared_source_target_embedding=False,
         logit_bias=True, num_target_spaces=3, target_space_id=1),
    dict(separate_source_embedding=True, num_encoder_layers=0)],
    ids=["post", "pre_learned_pos", "separate_tables_bias_space", "source_table_no_encoder"])
def test_build_creates_the_variables_a_traced_call_creates(changes):
  """`Transformer.build` (no trace) against Keras' own build by a symbolic call: the same
  variables in the same order with the same initial values from one seed; and no call
  (training, eval, a cached decoding step) creates another."""
  hp = registry.hparams("transformer_tiny").replace(
      hidden_size=16, filter_size=32, num_heads=2, **changes)
  built = []
  for cls in (Transformer, _KerasBuilt):
    keras.utils.set_random_seed(0)
    model = cls(VOCAB, hp)
    model.build_for_ids()
    built.append(model)
  ours, keras_built = ({w.path.split("/", 1)[1]: w.numpy() for w in m.weights} for m in built)
  assert list(ours) == list(keras_built)
  for name in ours:
    np.testing.assert_array_equal(ours[name], keras_built[name], err_msg=name)
  model = built[0]
  count = len(model.weights)
  ids = tf.constant([[3, 4, 1]])
  model({"inputs": ids, "targets": ids}, training=True)
  memory, mask = model.encode(ids)
  model.decode(ids[:, :1], memory, mask, model.init_cache(memory, 4), 0)
  assert len(model.weights) == count


def test_get_config_round_trip():
  model = _tiny(norm_type="pre")
  config = model.get_config()
  again = Transformer.from_config(config)
  again.build_for_ids()
  assert again.hparams == model.hparams and again.vocab_size == VOCAB
  assert again.count_params() == model.count_params()


_STRUCTURE = ("hidden_size", "filter_size", "num_heads", "attention_key_channels",
              "attention_value_channels", "num_encoder_layers", "num_decoder_layers", "pos",
              "max_positions", "norm_type")


def _one_set_per_structure(names):
  """The first set of each distinct structure (rows that change only dropout or label
  smoothing have the base's parameters)."""
  seen, kept = set(), []
  for name in names:
    hp = registry.hparams(name)
    key = tuple(hp.get(k) for k in _STRUCTURE)
    if key not in seen:
      seen.add(key)
      kept.append(name)
  return kept


SETS = _one_set_per_structure(["transformer_base", "transformer_big", "transformer_big_enfr"] + [
    f"transformer_table3_{row}" for row in TABLE3])


SCALE = 8  # widths divided by this: the same structure (layers, heads, d_k != d_v), 1/64 the weights


def _scaled(hp):
  """hp with d_model, d_ff and the per-head d_k / d_v divided by SCALE (each divides exactly)."""
  sizes = {k: hp.get(k) for k in ("hidden_size", "filter_size", "attention_key_channels",
                                   "attention_value_channels")}
  assert all(v % SCALE == 0 for v in sizes.values()), sizes
  return hp.replace(**{k: v // SCALE for k, v in sizes.items()})


@pytest.mark.heavy
@pytest.mark.parametrize("name", SETS)
def test_param_count_matches_formula(name):
  hp = _scaled(registry.hparams(name))
  model = Transformer(370, hp)
  model.build_for_ids()
  assert model.count_params() == analytic_param_count(hp, 370)


@pytest.mark.heavy
def test_param_count_matches_formula_at_the_papers_base_size():
  hp = registry.hparams("transformer_base")
  model = Transformer(37000, hp)
  model.build_for_ids()
  assert model.count_params() == analytic_param_count(hp, 37000)


def test_pre_norm_formula():
  hp = registry.hparams("transformer_tiny").replace(norm_type="pre", pos="emb")
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  assert model.count_params() == analytic_param_count(hp, VOCAB)


@pytest.mark.parametrize("shared_target", [True, False])
def test_t2t_conventions_formula(shared_target):
  """Separate pre-softmax (and target) matrices and the target-space table (imported runs)."""
  hp = registry.hparams("transformer_tiny").replace(
      shared_embedding_and_softmax_weights=False, shared_source_target_embedding=shared_target,
      num_target_spaces=32, target_space_id=8, pos="timing_t2t", zero_pad_embedding=True)
  model = Transformer(VOCAB, hp)
  model.build_for_ids()
  assert model.count_params() == analytic_param_count(hp, VOCAB)


# Packed rows: the model on packed rows equals the model on the same pairs unpacked.

ROW = 16


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


@pytest.mark.parametrize("changes", VARIANTS, ids=VARIANT_IDS)
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
