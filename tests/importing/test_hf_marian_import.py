"""t2t-import --from=hf on OPUS-MT in Hugging Face's layout: random models written as the
hub serves them (`hf_marian_fixture.py`: model.safetensors float32, float16 and bfloat16,
tf_model.h5) against a float64 NumPy model written from transformers' source
(`hf_marian_reference.py`, no code shared with the package): logits within 1e-5 and
equal greedy outputs; bad input, one line each.

Transformers' own code is the second reference where it runs here without torch
(`test_transformers_tf_marian_*`, `test_ids_equal_marian_tokenizers`): transformers
4.57 with tf-keras, installed by setup_venv.sh out of the venv's packages in
.venv/hf_reference; those tests skip, saying so, where it is absent.
"""

import json
import os

import numpy as np
import pytest
import tensorflow as tf

import hf_marian_fixture as fixture
import hf_transformers_reference
import hf_marian_reference as reference
import marian_fixture
from conftest import SHARED_DATA
from t2t_keras import bin as t2t_bin, runs
from t2t_keras.bin import t2t_import as import_bin
from t2t_keras.data import vocabulary
from t2t_keras.decoding.greedy import greedy_decode
from t2t_keras.decoding.search_common import SearchOptions
from t2t_keras.decoding.translate import pad_ids
from t2t_keras.ids import EOS_ID, PAD_ID

TOL = 1e-5
# check_logits' bound, relative to the largest |logit| (about 10 here): float32's rounding
# grows with the logits' scale, about 50 of its units in the last place at the largest.
REL_TOL = 3e-6
MULTI30K = os.path.join(SHARED_DATA, "multi30k")


def run_import(capsys, *args):
  """(exit code, stderr) of t2t-import --from=hf with `args`, run in this process."""
  capsys.readouterr()
  code = t2t_bin.run_in_process(import_bin, ["t2t-import", "--from=hf", *args])
  return code, capsys.readouterr().err


def imported(root, **kwargs):
  """(the fixture's model, the imported run) of a random HF directory under root."""
  model = fixture.write_hf_dir(str(root / "hf"), **kwargs)
  code = t2t_bin.run_in_process(import_bin, ["t2t-import", "--from=hf",
                                             f"--hf_dir={root / 'hf'}",
                                             f"--output_dir={root / 'run'}"])
  assert code == 0
  return model, runs.load(str(root / "run"))


def _hf_ids(side, ids):
  """Our ids -> Hugging Face's, of a vocabulary side (or a joint vocabulary)."""
  return [side.marian_ids[i] for i in ids]


def check_logits(model, run, lines=8):
  """The largest |logit| difference from the reference over teacher-forced pairs
  (every id but <pad>, which ours keeps out of the softmax), over the largest |logit|;
  source ids in the source side's Hugging Face ids, target ids and logits in the target
  side's."""
  vocab, worst, scale = run.vocab, 0.0, 1.0
  english, german = marian_fixture.corpus(lines, seed=5)
  for source, target in zip(english, german):
    src = vocab.encode(source) + [EOS_ID]
    tgt = vocabulary.target_side(vocab).encode(target) + [EOS_ID]
    theirs = reference.teacher_forced_logits(model["sd"], model["config"],
                                             _hf_ids(vocab, src),
                                             _hf_ids(vocab.target, tgt))
    ours = run.model({"inputs": tf.constant([src]), "targets": tf.constant([tgt])})[0].numpy()
    assert (ours[:, PAD_ID] < -1e8).all()
    theirs = theirs[:, _hf_ids(vocab.target, range(1, vocab.vocab_size))]
    worst = max(worst, float(np.abs(ours[:, 1:] - theirs).max()))
    scale = max(scale, float(np.abs(theirs).max()))
  return worst / scale


def check_greedy(model, run, lines=8, limit=20):
  """Greedy outputs equal the reference's (or differ at a float32 near tie); returns
  the set of outputs."""
  vocab, outputs = run.vocab, set()
  english, _ = marian_fixture.corpus(lines, seed=5)
  sources = [vocab.encode(line) + [EOS_ID] for line in english]
  ids, _ = greedy_decode(run.model, tf.constant(pad_ids(sources)),
                         SearchOptions(beam_size=1, max_decode_length=limit))
  sd, config = model["sd"], model["config"]
  for src, row in zip(sources, ids.numpy()):
    ours = _hf_ids(vocab.target, [int(i) for i in row if i != PAD_ID])
    theirs = reference.greedy(sd, config, _hf_ids(vocab, src), limit)
    if ours != theirs:  # float32 may flip a near tie
      t = next(t for t, (a, b) in enumerate(zip(ours + [-1], theirs + [-1])) if a != b)
      assert t < min(len(ours), len(theirs)), (ours, theirs)  # not one a prefix of the other
      memory = reference.encode(sd, config, _hf_ids(vocab, src))
      logits = reference.decoder_logits(sd, config, memory,
                                        [config["decoder_start_token_id"]] + theirs[:t])[-1]
      assert abs(logits[ours[t]] - logits[theirs[t]]) < 1e-3, (ours, theirs)
    outputs.add(tuple(ours))
  return outputs


@pytest.mark.parametrize("weights, activation, tied, separate", [
    ("safetensors", "swish", True, False), ("safetensors", "swish", True, True),
    *(pytest.param(*case, marks=pytest.mark.heavy) for case in (  # the full suite only
        ("fp16", "swish", True, False), ("bf16", "swish", True, False),
        ("h5", "swish", True, False), ("safetensors", "relu", False, False),
        ("fp16", "swish", True, True), ("safetensors", "relu", False, True)))])
@pytest.mark.heavy
def test_logits_and_greedy_outputs_equal_transformers_computation(weights, activation, tied,
                                                                  separate, tmp_path):
  """float16 and bfloat16 weights come with the sorted vocabulary, as in the tc-big
  repositories. `separate`: vocab.json and target_vocab.json, two id spaces, and the
  encoder's and decoder's tables (with an untied lm_head: three tables)."""
  tc_big = weights in ("fp16", "bf16")
  args = dict(weights=weights, activation=activation, tie_word_embeddings=tied,
              sorted_layout=tc_big, separate_vocabs=separate)
  model, run = imported(tmp_path / "sharp1", sharpness=1, **args)
  if tc_big:
    assert model["vocab"]["</s>"] > 1 and model["vocab"]["<unk>"] > 1
  hp = run.hparams
  assert (hp.pos, hp.norm_epsilon, hp.norm_type, hp.ffn_activation) == (
      "timing_hf", 1e-5, "post", activation)
  assert run.vocab.vocab_size == len(model["vocab"]) and not run.vocab.pad_added
  assert run.vocab.separate == separate
  if separate:  # the sides' pieces differ: an id means another piece on each side
    assert run.model.source_embedding is not run.model.target_embedding
    assert run.vocab.source.pieces != run.vocab.target.pieces
    # Sorted, </s> and <unk> fall at other ids on each side, so reading one side's table
    # in the other's ids would show (joint-style layouts give both sides one id order).
    assert (run.vocab.source.marian_ids != run.vocab.target.marian_ids) == tc_big
  assert check_logits(model, run) < REL_TOL
  model, run = imported(tmp_path / "sharp3", sharpness=3, **args)
  outputs = check_greedy(model, run)
  assert len(outputs) > 1 and any(o[-1] == model["config"]["eos_token_id"] for o in outputs)


def _edit(path, **changes):
  with open(path, encoding="utf-8") as f:
    value = json.load(f)
  value.update(changes)
  with open(path, "w", encoding="utf-8") as f:
    json.dump(value, f)


def _break(hf, case):
  """Damages the fixture's directory `hf` as `case` says."""
  config = os.path.join(hf, "config.json")
  weights = os.path.join(hf, "model.safetensors")
  if case == "no_config":
    os.remove(config)
  elif case == "no_weights":
    os.remove(weights)
  elif case == "torch_only":
    os.rename(weights, os.path.join(hf, "pytorch_model.bin"))
  elif case == "gelu":
    _edit(config, activation_function="gelu")
  elif case == "pre_norm":
    _edit(config, normalize_before=True)
  elif case == "t5":
    _edit(config, model_type="t5")
  elif case == "vocab_size":
    with open(os.path.join(hf, "vocab.json"), encoding="utf-8") as f:
      size = len(json.load(f))
    _edit(os.path.join(hf, "vocab.json"), **{"extra▁piece": size})
  elif case == "table_rows":
    vocab_path = os.path.join(hf, "vocab.json")
    with open(vocab_path, encoding="utf-8") as f:
      size = len(json.load(f))
    _edit(vocab_path, **{"extra▁piece": size})
    _edit(config, vocab_size=size + 1, decoder_vocab_size=size + 1)
  elif case in ("missing", "extra", "int_tensor"):
    from safetensors.numpy import load_file, save_file  # pylint: disable=import-outside-toplevel
    tensors = load_file(weights)
    if case == "missing":
      del tensors["model.decoder.layers.1.fc2.bias"]
    elif case == "int_tensor":
      tensors["final_logits_bias"] = tensors["final_logits_bias"].astype(np.int64)
    else:
      tensors["model.decoder.layers.2.fc2.bias"] = tensors["model.decoder.layers.1.fc2.bias"]
    save_file(tensors, weights)
  elif case == "separate_vocabs":
    _edit(os.path.join(hf, "tokenizer_config.json"), separate_vocabs=True)
  elif case == "no_target_vocab":
    os.remove(os.path.join(hf, "target_vocab.json"))
  elif case == "target_vocab_size":
    path = os.path.join(hf, "target_vocab.json")
    with open(path, encoding="utf-8") as f:
      size = len(json.load(f))
    _edit(path, **{"extra▁piece": size})
  elif case == "target_eos":
    path = os.path.join(hf, "target_vocab.json")
    with open(path, encoding="utf-8") as f:
      entries = json.load(f)
    first = next(p for p in entries if p not in ("</s>", "<pad>"))
    entries["</s>"], entries[first] = entries[first], entries["</s>"]
    with open(path, "w", encoding="utf-8") as f:
      json.dump(entries, f)
  elif case == "not_safetensors":
    with open(weights, "wb") as f:
      f.write(b"PK\x03\x04 a zip file, as torch.save writes")
  elif case == "no_scale":
    with open(config, encoding="utf-8") as f:
      value = json.load(f)
    del value["scale_embedding"]  # MarianConfig's default: False
    with open(config, "w", encoding="utf-8") as f:
      json.dump(value, f)
  elif case in ("pad_row", "bias_rows"):
    from safetensors.numpy import load_file, save_file  # pylint: disable=import-outside-toplevel
    tensors = load_file(weights)
    if case == "pad_row":
      tensors["model.shared.weight"][-1] = 0.5
    else:
      tensors["final_logits_bias"] = tensors["final_logits_bias"][:, :-1]
    save_file(tensors, weights)
  elif case in ("old_h5", "positions"):
    import h5py  # pylint: disable=import-outside-toplevel
    state_dict = _state_dict(hf)
    os.remove(weights)
    fixture.write_h5(os.path.join(hf, "tf_model.h5"), state_dict, _config(hf))
    with h5py.File(os.path.join(hf, "tf_model.h5"), "r+") as f:
      if case == "old_h5":
        del f["final_logits_bias/final_logits_bias:0"]
      else:
        f["model/tf_marian_mt_model/model/encoder/embed_positions/embeddings:0"][1] += 0.5


def _config(hf):
  with open(os.path.join(hf, "config.json"), encoding="utf-8") as f:
    return json.load(f)


def _state_dict(hf):
  from safetensors.numpy import load_file  # pylint: disable=import-outside-toplevel
  return load_file(os.path.join(hf, "model.safetensors"))


@pytest.mark.parametrize("case, message", [
    ("no_config", "config.json: no such file (a Hugging Face model directory has config.json)"),
    ("no_weights", "no weights (model.safetensors, model.safetensors.index.json or "
     "tf_model.h5 looked for)"),
    ("torch_only", "only pytorch_model.bin, a pickle that needs torch; download the "
     "repository's model.safetensors"),
    ("gelu", "config.json: activation_function: 'gelu' is not supported (supported: swish, "
     "silu, relu)"),
    ("pre_norm", "config.json: normalize_before: true is not supported (Hugging Face's "
     "Marian computes normalize_before=false only)"),
    ("t5", "model_type 't5' is not supported (supported: m2m_100, marian)"),
    ("vocab_size", "vocab.json has"),
    ("table_rows", "the weights' model.shared.weight has"),
    ("missing", "the weights have no model.decoder.layers.1.fc2.bias, which config.json needs"),
    ("extra", "1 tensor(s) the model has no place for: model.decoder.layers.2.fc2.bias"),
    ("int_tensor", "model.safetensors: tensor final_logits_bias is I64, not a float"),
    ("not_safetensors", "model.safetensors: not a safetensors file ("),
    ("separate_vocabs", "separate vocabularies (target_vocab.json) with config.json's "
     "share_encoder_decoder_embeddings: true: one embedding table cannot hold two id "
     "spaces"),
    ("no_target_vocab", "target_vocab.json: no such file (a Hugging Face model directory "
     "has target_vocab.json)"),
    ("target_vocab_size", "target_vocab.json has"),
    ("target_eos", "is not target_vocab.json's '</s>'"),
    ("no_scale", "config.json: scale_embedding: absent (false) is not supported"),
    ("pad_row", "the weights' <pad> row of model.shared.weight is not zero"),
    ("bias_rows", "the weights' final_logits_bias has"),
    ("old_h5", "has no final_logits_bias: transformers' TF weights saved before September "
     "2022 lost it"),
    ("positions", "the weights' model.encoder.embed_positions.weight are not Hugging Face's "
     "Marian sinusoids"),
    ("exists", "already holds a run"),
])
def test_a_bad_directory_gets_one_line_and_exit_1(case, message, tmp_path, capsys):
  hf = tmp_path / "hf"
  fixture.write_hf_dir(str(hf), seed=2, separate_vocabs=case.startswith(("no_target",
                                                                          "target_")))
  _break(str(hf), case)
  out = tmp_path / "run"
  if case == "exists":
    assert run_import(capsys, f"--hf_dir={hf}", f"--output_dir={out}")[0] == 0
  code, err = run_import(capsys, f"--hf_dir={hf}", f"--output_dir={out}")
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 1 and len(lines) == 1 and message in lines[0], err
  if case != "exists":
    assert not os.path.exists(out)  # nothing written


@pytest.mark.heavy
def test_transformers_tf_marian_reads_our_fixture_and_writes_what_we_read(tmp_path, capsys):
  """transformers' TFMarianMTModel (a) loads the fixture's tf_model.h5 with no key
  missing or unexpected and gives the logits ours gives for it; (b) writes a random
  model's tf_model.h5 with save_pretrained, which t2t-import reads, our logits within
  1e-5 of transformers' own."""
  model, run = imported(tmp_path / "fixture", weights="h5", sharpness=1)
  vocab = run.vocab
  english, german = marian_fixture.corpus(3, seed=5)
  pairs = [(vocab.encode(s) + [EOS_ID], vocabulary.target_side(vocab).encode(t) + [EOS_ID])
           for s, t in zip(english, german)]
  hf_pairs = [[_hf_ids(vocab, s), _hf_ids(vocab, t)] for s, t in pairs]
  written = tmp_path / "written"
  answer = hf_transformers_reference.run("logits", model["dir"], written, json.dumps(hf_pairs))
  assert answer["missing"] == [] and answer["unexpected"] == [], answer
  for (src, tgt), fixture_logits in zip(pairs, answer["fixture_logits"]):
    ours = run.model({"inputs": tf.constant([src]), "targets": tf.constant([tgt])})[0].numpy()
    theirs = np.asarray(fixture_logits)[:, _hf_ids(vocab, range(1, vocab.vocab_size))]
    assert np.abs(ours[:, 1:] - theirs).max() < TOL
  for name in ("vocab.json", "source.spm", "target.spm", "tokenizer_config.json"):
    os.link(os.path.join(model["dir"], name), written / name)
  code, err = run_import(capsys, f"--hf_dir={written}", f"--output_dir={tmp_path / 'run2'}")
  assert code == 0, err
  run2 = runs.load(str(tmp_path / "run2"))
  for (src, tgt), written_logits in zip(pairs, answer["written_logits"]):
    ours = run2.model({"inputs": tf.constant([src]), "targets": tf.constant([tgt])})[0].numpy()
    theirs = np.asarray(written_logits)[:, _hf_ids(vocab, range(1, vocab.vocab_size))]
    assert np.abs(ours[:, 1:] - theirs).max() < TOL


@pytest.mark.heavy
@pytest.mark.parametrize("separate", [False, True])
def test_ids_equal_marian_tokenizers(separate, tmp_path):
  """transformers' MarianTokenizer and our pair (Python and in-graph) give the same ids
  for source and target lines: Multi30k's English, German, French and Czech where the
  shared data is here, the fixture's number words always, and lines with a leading
  language label (`>>fra<<`, one piece); and the text of id lists drawn from the whole
  target vocabulary (source-side pieces too, where it is joint). (Its tokenizer also
  reads `</s>` or `<unk>` typed in the text as those tokens; ours encodes them as text,
  as Marian does.) `separate`: vocab.json and target_vocab.json, each side in its own
  ids (a label is UNK on the target side, which lacks it)."""
  model = fixture.write_hf_dir(str(tmp_path / "hf"), seed=3, separate_vocabs=separate)
  english, german = marian_fixture.corpus(20, seed=9)
  labelled = [">>fra<< twenty one", ">>deu<<", ">>x<<>>y<< two", "> >one<<", "two >>fra<<"]
  lines = {"source": english + ["qqq ☃ ▁"] + labelled, "target": german + labelled}
  if os.path.isdir(MULTI30K):
    import gzip  # pylint: disable=import-outside-toplevel
    for lang in ("en", "de", "fr", "cs"):
      with gzip.open(os.path.join(MULTI30K, f"val.{lang}.gz"), "rt", encoding="utf-8") as f:
        lines["source" if lang == "en" else "target"] += [next(f).strip() for _ in range(20)]
  rng = np.random.RandomState(0)  # id lists over the target vocabulary's pieces, then </s>
  target_vocab = model["target_vocab"]
  special = {target_vocab[p] for p in ("</s>", "<unk>", "<pad>")}
  pieces = [i for i in range(len(target_vocab)) if i not in special]
  lines["decode"] = [[int(i) for i in rng.choice(pieces, n)] + [target_vocab["</s>"]]
                     for n in (1, 3, 8, 20) * 5]
  theirs = hf_transformers_reference.run("tokenize", model["dir"], json.dumps(lines))
  code = t2t_bin.run_in_process(import_bin, ["t2t-import", "--from=hf",
                                             f"--hf_dir={model['dir']}",
                                             f"--output_dir={tmp_path / 'run'}"])
  assert code == 0
  vocab = runs.load(str(tmp_path / "run")).vocab
  assert vocab.separate == separate
  for side_name, side in (("source", vocab.source), ("target", vocab.target)):
    ours = [_hf_ids(side, side.encode(line) + [EOS_ID]) for line in lines[side_name]]
    assert ours == theirs[side_name]
    graph = side.tf_tokenizer().tokenize(tf.constant(lines[side_name])).to_list()
    assert [_hf_ids(side, ids + [EOS_ID]) for ids in graph] == theirs[side_name]
  source_graph = vocab.tf_tokenizer().tokenize(tf.constant(lines["source"])).to_list()
  assert [_hf_ids(vocab.source, ids + [EOS_ID]) for ids in source_graph] == theirs["source"]
  ours = {hf_id: i for i, hf_id in enumerate(vocab.target.marian_ids)}
  decode = [[ours[i] for i in ids] for ids in lines["decode"]]
  assert [vocab.decode(ids) for ids in decode] == theirs["decoded"]
  content = tf.ragged.constant([[i for i in ids if i > EOS_ID] for ids in decode])
  assert [t.decode() for t in vocab.tf_tokenizer().detokenize(content).numpy()] == \
      theirs["decoded"]
