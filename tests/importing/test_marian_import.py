"""t2t-import --from=marian: random Marian models, written as Marian writes them
(`marian_fixture.py`), against a float64 NumPy model written from Marian's source
(`marian_reference.py`, which shares no code with the package) and the vocabulary pair
against sentencepiece and the release's vocab.yml.

Logits within 1e-5 (float32 against float64) on a well-conditioned model and equal greedy
outputs on one whose outputs vary (`marian_fixture`'s sharpness), for post- and pre-norm,
swish and relu, tied-all, target-tied and separate embeddings.
"""

import os
import shutil

import numpy as np
import pytest
import sentencepiece as spm
import tensorflow as tf
import yaml

import marian_fixture as fixture
import marian_reference as reference
from t2t_keras import bin as t2t_bin, runs
from t2t_keras.bin import t2t_import as import_bin
from t2t_keras.data import marian_vocab, vocabulary
from t2t_keras.decoding.greedy import greedy_decode
from t2t_keras.decoding.search_common import SearchOptions
from t2t_keras.decoding.translate import pad_ids
from t2t_keras.ids import EOS_ID, PAD_ID, UNK_ID

TOL = 1e-5
ENDED = []  # per variant, its outputs that end before the limit (`test_some_outputs_end`)


def run_import(capsys, *args):
  """(exit code, stderr) of t2t-import with `args`, run in this process."""
  capsys.readouterr()
  code = t2t_bin.run_in_process(import_bin, ["t2t-import", "--from=marian", *args])
  return code, capsys.readouterr().err


def _release(root, variant, sharpness):
  """(release files, imported run dir) of a random `variant`; the pre-norm ones with
  newer OPUS-MT's sorted vocab.yml (</s> and <unk> not at 0 and 1)."""
  files = fixture.write_release(str(root / "release"), variant, seed=1,
                                sorted_layout=variant.startswith("pre"), sharpness=sharpness)
  code = t2t_bin.run_in_process(import_bin, [
      "t2t-import", "--from=marian", f"--marian_dir={root / 'release'}",
      f"--output_dir={root / 'run'}"])
  assert code == 0
  return files, str(root / "run")


@pytest.fixture(scope="module")
def releases(tmp_path_factory):
  """{variant: (files, run dir)} of models whose outputs vary (sharpness 3)."""
  return {v: _release(tmp_path_factory.mktemp(v), v, 3) for v in fixture.VARIANTS}


def _to_marian(vocab, ids):
  """Our ids -> Marian's, of a vocabulary side (or a joint vocabulary)."""
  return [vocab.marian_ids[i] for i in ids]


@pytest.mark.heavy
@pytest.mark.parametrize("variant", sorted(fixture.VARIANTS))
def test_logits_and_greedy_outputs_equal_marians_computation(releases, variant, tmp_path):
  files, run_dir = _release(tmp_path, variant, 1)
  run = runs.load(run_dir)
  params, config = reference.read(files["npz"])
  vocab = run.vocab
  assert vocab.pad_added and run.model.vocab_size == len(files["pieces"]) + 1
  english, german = fixture.corpus(12, seed=5)
  worst = 0.0
  for source, target in zip(english, german):
    src = vocab.encode(source) + [EOS_ID]
    tgt = vocabulary.target_side(vocab).encode(target) + [EOS_ID]
    theirs = reference.teacher_forced_logits(params, config, _to_marian(vocab, src),
                                             _to_marian(vocab, tgt))
    ours = run.model({"inputs": tf.constant([src]), "targets": tf.constant([tgt])})[0].numpy()
    assert (ours[:, PAD_ID] < -1e8).all()  # the added PAD is outside the softmax
    worst = max(worst, float(np.abs(ours[:, 1:] - theirs[:, _to_marian(vocab, range(
        1, vocab.vocab_size))]).max()))
  assert worst < TOL, worst
  files, run_dir = releases[variant]
  run = runs.load(run_dir)
  params, config = reference.read(files["npz"])
  vocab = run.vocab
  outputs, ended = set(), ENDED
  sources = [vocab.encode(source) + [EOS_ID] for source in english[:8]]
  ids, _ = greedy_decode(run.model, tf.constant(pad_ids(sources)),
                         SearchOptions(beam_size=1, max_decode_length=20))
  for src, row in zip(sources, ids.numpy()):
    memory = reference.encode(params, config, _to_marian(vocab, src))
    theirs = reference.greedy(params, config, _to_marian(vocab, src), 20,
                              files["pieces"].index("</s>"))
    ours = [int(i) for i in row if i != PAD_ID]
    mine = _to_marian(vocab, ours)
    if mine != theirs:  # float32 may flip a near tie (this scale: |logit error| < 2e-4)
      t = next(t for t, (a, b) in enumerate(zip(mine + [-1], theirs + [-1])) if a != b)
      logits = reference.decoder_logits(params, config, memory, theirs[:t])[-1]
      assert abs(logits[mine[t]] - logits[theirs[t]]) < 1e-3, (mine, theirs)
    outputs.add(tuple(ours))
  assert len(outputs) > 1  # the random model's outputs vary with the input
  ended.append(sum(o[-1] == EOS_ID for o in outputs))


def test_some_outputs_end():
  """Over the four variants' greedy outputs above, some end before the limit."""
  if len(ENDED) < len(fixture.VARIANTS):
    pytest.skip("runs after the four variants' greedy tests")
  assert sum(ENDED) > 0, ENDED


def test_the_vocabulary_pair_against_sentencepiece_and_vocab_yml(releases):
  """Source text through source.spm, target text through target.spm, pieces to ids by
  vocab.yml (found by name in the sorted layout; "yes" / "null" / "1" read as pieces);
  the in-graph tokenizer gives the same ids and text."""
  files, run_dir = releases["pre_relu_tied_all"]
  vocab = runs.load(run_dir).vocab
  marian_ids = {piece: i for i, piece in enumerate(files["pieces"])}
  assert files["pieces"][0] != "</s>"  # the sorted layout
  assert [vocab.id_to_piece(i) for i in (PAD_ID, EOS_ID, UNK_ID)] == ["<pad>", "</s>", "<unk>"]
  assert vocab.marian_ids[PAD_ID] == -1
  for piece in ("yes", "null", "1"):
    assert vocab.marian_ids[vocab.piece_to_id(piece)] == marian_ids[piece]
  english, german = fixture.corpus(20, seed=9)
  sides = [(vocab.source, files["source_spm"], english), (vocab.target, files["target_spm"],
                                                          german)]
  for side, spm_path, lines in sides:
    sp = spm.SentencePieceProcessor(model_file=spm_path)
    for line in lines:
      pieces = sp.encode(line, out_type=str)
      ids = side.encode(line)
      assert [vocab.marian_ids[i] for i in ids] == [marian_ids.get(p, marian_ids["<unk>"])
                                                   for p in pieces]
      assert side.decode(ids + [EOS_ID, PAD_ID]) == sp.decode_pieces(pieces)
  assert vocab.encode("qqq ☃").count(UNK_ID) >= 1  # pieces outside vocab.yml: <unk>
  tokenizer, target = vocab.tf_tokenizer(), vocab.target.tf_tokenizer()
  got = tokenizer.tokenize(tf.constant(english)).to_list()
  assert got == [vocab.encode(line) for line in english]
  assert target.tokenize(tf.constant(german)).to_list() == [vocab.target.encode(line)
                                                             for line in german]
  ids = tf.ragged.constant([vocab.target.encode(line) for line in german])
  assert [t.decode() for t in tokenizer.detokenize(ids).numpy()] == german


@pytest.mark.parametrize("found_by", ["decoder.yml", "names", "flags"])
def test_separate_vocabularies_equal_marians_computation(found_by, tmp_path, capsys):
  """A target-tied model with a vocabulary per side (`*.src.vocab.yml`,
  `*.trg.vocab.yml`), found through decoder.yml's two vocabs, by their names, or given
  as flags: each side in its own ids (source text through the source side's, target
  text, outputs and logits through the target side's), logits within 1e-5 of the
  reference in each side's Marian ids, greedy outputs equal."""
  files = fixture.write_release(str(tmp_path / "release"), "pre_swish_tied_target", seed=1,
                                sharpness=1, separate_vocabs=True)
  release = tmp_path / "release"
  args = [f"--marian_dir={release}"]
  if found_by != "decoder.yml":
    os.remove(release / "decoder.yml")
  if found_by == "flags":
    args += [f"--marian_vocab={files['vocab']}", f"--marian_target_vocab={files['target_vocab']}"]
  code, err = run_import(capsys, *args, f"--output_dir={tmp_path / 'run'}")
  assert code == 0, err
  run = runs.load(str(tmp_path / "run"))
  vocab = run.vocab
  assert vocab.separate and vocab.source.pieces != vocab.target.pieces
  assert vocab.source.marian_ids != vocab.target.marian_ids  # a mix-up would show
  params, config = reference.read(files["npz"])
  english, german = fixture.corpus(12, seed=5)
  worst = 0.0
  for source, target in zip(english, german):
    src = vocab.encode(source) + [EOS_ID]
    tgt = vocab.target.encode(target) + [EOS_ID]
    assert [files["target_pieces"][i] for i in _to_marian(vocab.target, tgt[:-1])] == \
        [p if p in files["target_pieces"] else "<unk>"
         for p in spm.SentencePieceProcessor(model_file=files["target_spm"]).encode(
             target, out_type=str)]
    theirs = reference.teacher_forced_logits(params, config, _to_marian(vocab.source, src),
                                             _to_marian(vocab.target, tgt))
    ours = run.model({"inputs": tf.constant([src]), "targets": tf.constant([tgt])})[0].numpy()
    worst = max(worst, float(np.abs(ours[:, 1:] - theirs[:, _to_marian(vocab.target, range(
        1, vocab.vocab_size))]).max()))
  assert worst < TOL, worst
  sources = [vocab.encode(source) + [EOS_ID] for source in english[:8]]
  ids, _ = greedy_decode(run.model, tf.constant(pad_ids(sources)),
                         SearchOptions(beam_size=1, max_decode_length=20))
  eos = files["target_pieces"].index("</s>")
  for src, row in zip(sources, ids.numpy()):
    ours = _to_marian(vocab.target, [int(i) for i in row if i != PAD_ID])
    assert ours == reference.greedy(params, config, _to_marian(vocab.source, src), 20, eos)


def test_separate_vocabularies_with_a_shared_table_are_refused(tmp_path, capsys):
  files = fixture.write_release(str(tmp_path / "release"), "post_swish_tied_all", seed=2,
                                separate_vocabs=True)
  code, err = run_import(capsys, f"--marian_dir={os.path.dirname(files['npz'])}",
                         f"--output_dir={tmp_path / 'run'}")
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 1 and len(lines) == 1, err
  assert "one table cannot hold the two id spaces of separate source and target" in lines[0]
  assert not os.path.exists(tmp_path / "run")


def _variant_release(tmp_path, edit_config=None, variant="post_swish_tied_all"):
  files = fixture.write_release(str(tmp_path / "release"), variant, seed=2)
  if edit_config:
    params, config = reference.read(files["npz"])
    edit_config(config)
    fixture.write_npz(files["npz"], {k: v.astype(np.float32) for k, v in params.items()},
                      config)
  return files


@pytest.mark.parametrize("case, message", [
    ("no_npz", "give --marian_npz: the model's .npz (none found)"),
    ("no_vocab", "give --marian_vocab: the joint vocab.yml (none found)"),
    ("no_spm", "--source_spm="),
    ("aan", "transformer-decoder-autoreg: 'average-attention' is not supported"),
    ("gelu", "transformer-ffn-activation: 'gelu' is not supported (supported: swish, relu)"),
    ("norm", "transformer-preprocess / -postprocess / -postprocess-top ('', 'dan', 'n')"),
    ("vocab_size", "the model's Wemb has"),
    ("exists", "already holds a run"),
])
def test_a_bad_release_gets_one_line_and_exit_1(case, message, tmp_path, capsys):
  edits = {"aan": lambda c: c.update({"transformer-decoder-autoreg": "average-attention"}),
           "gelu": lambda c: c.update({"transformer-ffn-activation": "gelu"}),
           "norm": lambda c: c.update({"transformer-postprocess-top": "n"})}
  files = _variant_release(tmp_path, edits.get(case))
  release = tmp_path / "release"
  if case in ("no_npz", "no_vocab"):
    os.remove(files["npz" if case == "no_npz" else "vocab"])
    os.remove(release / "decoder.yml")
  if case == "no_spm":
    os.remove(files["source_spm"])
  if case == "vocab_size":
    with open(files["vocab"], "a", encoding="utf-8") as f:
      f.write(yaml.safe_dump({"extra▁piece": len(files["pieces"])}, allow_unicode=True))
  out = tmp_path / "run"
  if case == "exists":
    assert run_import(capsys, f"--marian_dir={release}", f"--output_dir={out}")[0] == 0
  code, err = run_import(capsys, f"--marian_dir={release}", f"--output_dir={out}")
  lines = [line for line in err.splitlines() if line.strip()]
  assert code == 1 and len(lines) == 1 and message in lines[0], err
  if case != "exists":
    assert not os.path.exists(out)  # nothing written


def test_ctranslate2_conventions_are_an_hparam_away(releases, tmp_path, capsys):
  """--hparams sets the two conventions where CTranslate2's and Hugging Face's Marian
  ports differ from Marian (docs/migrating.md): their sinusoids and LayerNorm epsilon."""
  files, _ = releases["post_swish_tied_all"]
  release = os.path.dirname(files["npz"])
  out = tmp_path / "ct2_conventions"
  code, err = run_import(capsys, f"--marian_dir={release}", f"--output_dir={out}",
                         "--hparams=pos=timing_hf,norm_epsilon=1e-5")
  assert code == 0, err
  hparams = runs.load(str(out)).hparams
  assert (hparams.pos, hparams.norm_epsilon) == ("timing_hf", 1e-5)
  shutil.rmtree(out)
