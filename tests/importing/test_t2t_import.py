"""t2t-import: tensor2tensor checkpoints against a float64 NumPy model written from t2t's source.

The reference (`t2t_numpy_reference.py`) shares no code with the package. The shared
checkpoint (../shared/data/t2t, written by tensor2tensor's own t2t-trainer in January 2018)
and random checkpoints with t2t's names and shapes (`t2t_checkpoint_writer.py`) are
imported through the binary or the library, and the imported model's logits must equal
the reference's within 1e-5 (float32 against float64 arithmetic: the reference's
author measured at most 2e-6 against t2t's own graph code).
"""

import gzip
import os

import numpy as np
import pytest
import tensorflow as tf

import t2t_checkpoint_writer as writer
import t2t_numpy_reference as reference
from conftest import SHARED_DATA
from t2t_keras import bin as t2t_bin, runs
from t2t_keras.bin import t2t_import as import_bin
from t2t_keras.decoding.greedy import greedy_decode
from t2t_keras.decoding.search_common import SearchOptions
from t2t_keras.importing import t2t_checkpoint

T2T_CKPT = os.path.join(SHARED_DATA, "t2t", "transformer_test_ckpt")
VOCAB_8K = os.path.join(SHARED_DATA, "t2t", "vocab.translate_ende_wmt8k.8192.subwords.gz")
VOCAB_32K = os.path.join(SHARED_DATA, "t2t", "vocab.translate_ende_wmt32k.32768.subwords.gz")
MULTI30K_VAL = os.path.join(SHARED_DATA, "multi30k", "val.{}.gz")
TOL = 1e-5


def shared(path):
  if not os.path.exists(path):
    pytest.skip(f"{path} is absent (../shared/data)")
  return path


def run_import(capsys, *args):
  """(exit code, stderr) of t2t-import with `args`, run in this process."""
  capsys.readouterr()
  code = t2t_bin.run_in_process(import_bin, ["t2t-import", *args])
  return code, capsys.readouterr().err


def checkpoint_variables(prefix):
  reader = tf.train.load_checkpoint(prefix)
  return {n: reader.get_tensor(n) for n in reader.get_variable_to_shape_map()}


def our_logits(model, inputs, targets):
  return model({"inputs": tf.constant([inputs]), "targets": tf.constant([targets])})[0].numpy()


@pytest.fixture(scope="module")
def shared_run(tmp_path_factory):
  """The shared checkpoint imported with the binary, as a user would."""
  shared(T2T_CKPT), shared(VOCAB_8K)
  out = str(tmp_path_factory.mktemp("imported") / "run")
  code = t2t_bin.run_in_process(import_bin, ["t2t-import", f"--t2t_dir={T2T_CKPT}",
                                             f"--vocab={VOCAB_8K}", f"--output_dir={out}"])
  assert code == 0
  return out


def multi30k_pairs(vocab, n):
  with gzip.open(shared(MULTI30K_VAL.format("en")), "rt", encoding="utf-8") as f:
    sources = [next(f).rstrip("\n") for _ in range(n)]
  with gzip.open(shared(MULTI30K_VAL.format("de")), "rt", encoding="utf-8") as f:
    targets = [next(f).rstrip("\n") for _ in range(n)]
  return [(vocab.encode(s) + [1], vocab.encode(t) + [1]) for s, t in zip(sources, targets)]


@pytest.mark.heavy
def test_shared_checkpoint_matches_the_reference(shared_run):
  run = runs.load(shared_run)
  assert run.info["imported_from"]["target_space_id"] == 8  # read from the Adam moments
  assert run.info["problem"] == "translate_ende_wmt8k" and run.vocab.vocab_size == 8190
  variables = checkpoint_variables(os.path.join(T2T_CKPT, "model.ckpt-1"))
  hparams = reference_hparams(T2T_CKPT)
  pairs = multi30k_pairs(run.vocab, 4) + [([5, 17, 300, 0, 1], [40, 2, 1])]  # a 0 in the input
  worst = 0.0
  for inputs, targets in pairs:
    theirs = reference.forward_logits(variables, hparams, inputs, targets, 8, version="1.4")
    ours = our_logits(run.model, inputs, targets)
    worst = max(worst, float(np.abs(ours - theirs).max()))
  assert worst < TOL, worst
  for inputs, _ in pairs[:3]:
    theirs = reference.greedy(variables, hparams, inputs, 8, version="1.4")
    ids, _ = greedy_decode(run.model, tf.constant([inputs]),
                           SearchOptions(beam_size=1, extra_length=50))
    ours = [int(i) for i in ids[0].numpy()]
    assert ours[:len(theirs)] == theirs and not any(ours[len(theirs):])


def reference_hparams(t2t_dir):
  import json  # pylint: disable=import-outside-toplevel
  with open(os.path.join(t2t_dir, "hparams.json")) as f:
    return json.load(f)


# Random checkpoints: t2t's base and big shapes at reduced width.
CONFIGS = {
    "base_post_norm_shared_16_shards": dict(hidden_size=32, filter_size=128),
    "base_pre_norm_separate_3_shards_dk_dv": dict(
        hidden_size=32, filter_size=128, layer_preprocess_sequence="n",
        layer_postprocess_sequence="da", shared_embedding_and_softmax_weights=False,
        symbol_modality_num_shards=3, attention_key_channels=48, attention_value_channels=64),
    "big_pre_norm_shared_embedding_5_shards": dict(
        hidden_size=64, filter_size=256, num_heads=16, layer_preprocess_sequence="n",
        layer_postprocess_sequence="da", shared_embedding_and_softmax_weights=False,
        shared_embedding=True, symbol_modality_num_shards=5),
    "big_post_norm_3_2_layers_1_shard": dict(
        hidden_size=64, filter_size=256, num_heads=16, num_encoder_layers=3,
        num_decoder_layers=2, symbol_modality_num_shards=1),
}


@pytest.mark.heavy
@pytest.mark.parametrize("name", sorted(CONFIGS))
def test_random_checkpoints_match_the_reference(name, tmp_path):
  hp = dict(writer.BASE, **CONFIGS[name])
  rng = np.random.default_rng(sorted(CONFIGS).index(name))
  written = writer.write_t2t_dir(str(tmp_path / "t2t"), hp, rng, target_space=5)
  t2t_checkpoint.import_run(str(tmp_path / "t2t"), str(tmp_path / "run"), log=lambda *_: None)
  run = runs.load(str(tmp_path / "run"))
  variables = written[1000]
  for length in (1, 7, 19):
    inputs = list(rng.integers(2, len(writer.VOCAB), length)) + [1]
    targets = list(rng.integers(2, len(writer.VOCAB), length + 2)) + [1]
    theirs = reference.forward_logits(variables, hp, inputs, targets, 5)
    np.testing.assert_allclose(our_logits(run.model, inputs, targets), theirs, atol=TOL, rtol=0)


SMALL = dict(writer.BASE, hidden_size=8, filter_size=16, num_heads=2, num_hidden_layers=1,
             symbol_modality_num_shards=2)
Q0 = "transformer/body/encoder/layer_0/self_attention/multihead_attention/q"


@pytest.mark.parametrize("case, hparams, options, args, message", [
    ("no_hparams", None, {}, [], "no hparams.json there (t2t-trainer writes it"),
    ("missing_variable", {}, dict(drop=("transformer/body/decoder/layer_0/ffn/conv2/bias",)), [],
     "the checkpoint has no transformer/body/decoder/layer_0/ffn/conv2/bias, which the model"),
    ("extra_variable", {}, dict(extra={f"{Q0}/bias": np.zeros(8, np.float32)}), [],
     f"1 checkpoint variable(s) the model has no place for: {Q0}/bias"),
    ("ffn_layer", dict(ffn_layer="sru"), {}, [],
     "unsupported t2t hparam ffn_layer='sru': t2t-keras imports dense_relu_dense"),
    ("relative_attention", dict(self_attention_type="dot_product_relative",
                                max_relative_position=20), {}, [],
     "unsupported t2t hparam self_attention_type='dot_product_relative'"),
    ("norm_sequence", dict(layer_preprocess_sequence="n", layer_postprocess_sequence="dan"),
     {}, [], "unsupported t2t hparams layer_preprocess_sequence='n', "
             "layer_postprocess_sequence='dan'"),
    ("problem_contradicts_flags", {}, {}, ["--problem=translate_enfr_wmt32k"],
     "--problem=translate_enfr_wmt32k contradicts the checkpoint's flags.txt, which trained "
     "it with --problem=translate_ende_wmt8k"),
    ("no_target_space", {}, dict(target_space=None), [],
     "cannot tell which target space id the checkpoint was trained with: it has no optimizer "
     "state for target_space_embedding; give --target_space_id (tensor2tensor up to 1.5.1 "
     "fed 8 for translate_ende_wmt8k, 1.5.2 and later 0)"),
])
def test_bad_input_gets_one_line_and_exit_1(case, hparams, options, args, message, tmp_path,
                                             capsys):
  t2t_dir = tmp_path / case
  if hparams is None:
    t2t_dir.mkdir()
  else:
    writer.write_t2t_dir(str(t2t_dir), dict(SMALL, **hparams), np.random.default_rng(0),
                         **options)
  code, err = run_import(capsys, f"--t2t_dir={t2t_dir}", f"--output_dir={tmp_path / 'run'}",
                         *args)
  assert code == 1
  assert err.count("\n") == 1 and err.startswith("t2t-import: error: "), err
  assert message in err
  assert not (tmp_path / "run" / "run.json").exists()


def test_vocabulary_of_another_size_is_refused(tmp_path, capsys):
  code, err = run_import(capsys, f"--t2t_dir={shared(T2T_CKPT)}", f"--vocab={shared(VOCAB_32K)}",
                         f"--output_dir={tmp_path / 'run'}")
  assert code == 1 and err.count("\n") == 1
  assert "the checkpoint's embeddings are symbol_modality_8190_16, the vocabulary has " in err


def test_target_space_flag_when_the_checkpoint_cannot_tell(tmp_path, capsys):
  hp = dict(SMALL)
  written = writer.write_t2t_dir(str(tmp_path / "t2t"), hp, np.random.default_rng(1),
                                 target_space=None)
  code, _ = run_import(capsys, f"--t2t_dir={tmp_path / 't2t'}", "--target_space_id=0",
                       f"--output_dir={tmp_path / 'run'}")
  assert code == 0
  run = runs.load(str(tmp_path / "run"))
  assert run.hparams.target_space_id == 0
  inputs, targets = [3, 4, 5, 1], [6, 7, 1]
  np.testing.assert_allclose(our_logits(run.model, inputs, targets),
                             reference.forward_logits(written[1000], hp, inputs, targets, 0),
                             atol=TOL, rtol=0)


def test_no_target_space_embedding(tmp_path):
  """t2t 1.15's use_target_space_embedding=False: no row is added (the reference with a zero
  table computes the same)."""
  hp = dict(SMALL, use_target_space_embedding=False)
  table = "transformer/body/target_space_embedding/kernel"
  written = writer.write_t2t_dir(str(tmp_path / "t2t"), hp, np.random.default_rng(2),
                                 target_space=None, drop=(table,))
  t2t_checkpoint.import_run(str(tmp_path / "t2t"), str(tmp_path / "run"), log=lambda *_: None)
  run = runs.load(str(tmp_path / "run"))
  assert run.hparams.num_target_spaces == 0 and run.model.target_space is None
  variables = dict(written[1000], **{table: np.zeros((32, 8), np.float32)})
  inputs, targets = [3, 4, 5, 1], [6, 7, 1]
  np.testing.assert_allclose(our_logits(run.model, inputs, targets),
                             reference.forward_logits(variables, dict(SMALL), inputs, targets, 0),
                             atol=TOL, rtol=0)
