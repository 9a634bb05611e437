"""Parsing outputs become trees: TreeBuilder (TF ops) equals trees.delinearize; the decoder
and the exported SavedModel return well-formed trees over the input words."""

import glob
import json
import os
import random

import pytest
import tensorflow as tf
from nltk.tree import Tree

from conftest import SHARED_DATA
from t2t_keras import bin as t2t_bin
from t2t_keras import registry
from t2t_keras.bin import decoder as decoder_bin
from t2t_keras.data import trees, vocabulary
from t2t_keras.decoding import translate as search
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.decoding.settings import parse_decode_hparams
from t2t_keras.models.transformer import Transformer
from t2t_keras.exporting import export
from t2t_keras.exporting.tree_ops import TreeBuilder
from t2t_keras import runs

PTB = os.path.join(SHARED_DATA, "ptb_sample")
TOKENS = ["(S", "(NP", "(VP", "(PP", ")S", ")NP", ")VP", ")", "(", "XX", "XX", "XX", "foo",
          "the", "dog", "barks", ".", "a(b"]  # words as leaves: taken, skipped, repeated
WORDS = ["the", "dog", ",", "barks", ".", "``", "-LRB-", "a(b", "$"]


def _cases(n, seed=0):
  rng = random.Random(seed)
  out = []
  for _ in range(n):
    tokens = [rng.choice(TOKENS) for _ in range(rng.randint(0, 14))]
    words = [rng.choice(WORDS) for _ in range(rng.randint(0, 6))]
    out.append((" ".join(tokens), " ".join(words)))
  return out + [("", ""), ("(S XX )S", ""), ("", "a b"), (")S )S XX", "a"),
                ("(NP XX )NP", "x"), ("(S (NP XX )NP )S", "x")]


def test_tree_builder_equals_delinearize_on_malformed_outputs():
  cases = _cases(400)
  builder = TreeBuilder()
  got = tf.function(builder)([c[0] for c in cases], [c[1] for c in cases]).numpy()
  for (output, sentence), tree in zip(cases, got):
    assert tree.decode() == trees.delinearize(output.split(), sentence.split()), (output, sentence)


@pytest.mark.skipif(not os.path.isdir(PTB), reason=f"no Penn Treebank sample at {PTB}")
@pytest.mark.parametrize("words_as_leaves", [False, True])
def test_tree_builder_equals_delinearize_on_the_sample(words_as_leaves):
  outputs, sentences = [], []
  for path in sorted(glob.glob(os.path.join(PTB, "wsj_*.mrg")))[:20]:
    for tree in trees.read_mrg(path):
      words, target = trees.linearize(trees.clean(tree), words_as_leaves)
      outputs.append(target)
      sentences.append(" ".join(words))
  got = tf.function(TreeBuilder())(outputs, sentences).numpy()
  assert len(got) > 100
  assert [t.decode() for t in got] == [trees.delinearize(o.split(), s.split())
                                       for o, s in zip(outputs, sentences)]


SENTENCES = ["The dog saw a man .", "Stocks fell , sharply ."]
DECODE = "beam_size=2,extra_length=6,batch_size=4,jit=false"


TREES = {"parsing_english_ptb8k": "(S (NP XX XX )NP (VP XX (NP XX XX )NP )VP XX )S",
         "parsing_english_ptb8k_words": "(S (NP The dog )NP (VP saw (NP a man )NP )VP . )S"}


@pytest.fixture(scope="module", params=sorted(TREES))
def parsing_run(tmp_path_factory, request):
  """A random-weight 'run' of a parsing problem (vocabulary over words and tree tokens),
  1+1 layers (its exports trace the constrained search over the decoder: one layer each
  side keeps them short)."""
  out = tmp_path_factory.mktemp("parse_run")
  corpus = (SENTENCES + [TREES[request.param]]) * 30
  vocab = vocabulary.train_sentencepiece(corpus, str(out / "spm.model"), 50, num_threads=1)
  tf.keras.utils.set_random_seed(5)
  hp = registry.hparams("transformer_tiny").replace(hidden_size=16, filter_size=32,
                                                    num_heads=2, max_length=32,
                                                    num_encoder_layers=1, num_decoder_layers=1)
  model = Transformer(vocab.vocab_size, hp)
  model.build_for_ids()
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), str(out), 2).save(
      checkpoint_number=3)
  runs.save_run_info(str(out), hp, request.param, vocab.vocab_size,
                         str(out / "spm.model"))
  return str(out)


@pytest.mark.heavy
def test_decoder_and_export_give_the_same_well_formed_trees(capsys, parsing_run, tmp_path):
  src = tmp_path / "dev.words"
  src.write_text("\n".join(SENTENCES) + "\n")
  out = tmp_path / "dev.parsed"
  capsys.readouterr()
  code = t2t_bin.run_in_process(decoder_bin, [
      "t2t-decoder", f"--output_dir={parsing_run}", f"--decode_from_file={src}",
      f"--decode_to_file={out}", f"--decode_hparams={DECODE}"])
  stdout = capsys.readouterr().out
  assert code == 0
  with open(os.path.join(parsing_run, "run.json")) as f:
    problem = json.load(f)["problem"]
  assert f"{problem}'s defaults extra_length=300,beam_size=21,alpha=0.3" in stdout
  # Words as leaves: the search copies the input's words between brackets.
  assert ("output constraint LeafCopyConstraint" in stdout) == problem.endswith("_words")
  parsed = out.read_text().splitlines()
  for sentence, tree in zip(SENTENCES, parsed):
    assert Tree.fromstring(tree).leaves() == sentence.split()  # well-formed, words as leaves

  # The export's half for the _words problem only: its graph holds the same TreeBuilder
  # and presets as the XX problem's, and the output constraint too; TreeBuilder on XX
  # leaves is test_tree_builder_equals_delinearize_on_the_sample[False]'s.
  if not problem.endswith("_words"):
    return
  path = export.export_model(parsing_run, export_dir=str(tmp_path / "export"),
                             decode_hparams=DECODE, log=None)
  with open(os.path.join(path, "assets", "export_info.json")) as f:
    info = json.load(f)
  # The problem's preset alpha 0.3 stays; the given beam and length win.
  assert (info["decode_hparams"]["alpha"], info["decode_hparams"]["beam_size"],
          info["decode_hparams"]["extra_length"]) == (0.3, 2, 6)
  served = tf.saved_model.load(path).signatures["serving_default"](
      inputs=tf.constant(SENTENCES))["outputs"].numpy()
  assert [t.decode() for t in served] == parsed


@pytest.mark.heavy
def test_words_as_leaves_outputs_copy_their_input(parsing_run):
  """Even a random-weight model's outputs keep the input's words, in order, when
  constrained (parsing_english_ptb8k_words); the XX problem has no constraint."""
  model, vocab, _, info, _ = runs.load(parsing_run)
  settings = parse_decode_hparams("beam_size=2,extra_length=200,jit=false")
  constraint = DecodingSpec.for_run(info["problem"], settings).constraint(vocab)
  if not info["problem"].endswith("_words"):
    assert constraint is None
    return
  outputs = search.decode_lines(
      model, vocab, SENTENCES, settings,
      DecodingSpec.for_run(info["problem"], settings).search_fn(model, vocab))
  for sentence, output in zip(SENTENCES, outputs):
    assert [t for t in output.split() if t[0] not in "()"] == sentence.split()


@pytest.mark.heavy
def test_litert_holds_the_output_constraint(parsing_run, tmp_path):
  """t2t-exporter --format=litert builds the words-as-leaves constraint into the LiteRT
  search (its shifts are slices and a concat: LiteRT has no builtin for tf.roll, which
  they replace), and t2t-decoder --engine=litert writes the TensorFlow engine's trees, the
  input's words as their leaves. (The XX problem has no constraint: the other LiteRT
  tests cover an unconstrained search.)"""
  pytest.importorskip("ai_edge_litert", reason="ai-edge-litert is not installed "
                                               "(pip install 't2t-keras[litert]')")
  from t2t_keras.exporting import litert  # pylint: disable=import-outside-toplevel
  if not runs.load_run_info(parsing_run)[1]["problem"].endswith("_words"):
    return
  decode = "beam_size=2,extra_length=200,jit=false"  # room for a random model to wander
  litert_dir = litert.convert_run(parsing_run, litert_dir=str(tmp_path / "litert"),
                                  decode_hparams=decode, log=None)
  with open(os.path.join(litert_dir, "litert_info.json")) as f:
    assert json.load(f)["constrained"] is True
  src = tmp_path / "dev.words"
  src.write_text("\n".join(SENTENCES) + "\n")
  parsed = {}
  for engine in ("tensorflow", "litert"):
    out = tmp_path / f"{engine}.parsed"
    assert t2t_bin.run_in_process(decoder_bin, [
        "t2t-decoder", f"--output_dir={parsing_run}", f"--decode_from_file={src}",
        f"--decode_to_file={out}", f"--decode_hparams={decode}", f"--engine={engine}",
        f"--litert_model_dir={litert_dir}"]) == 0
    parsed[engine] = out.read_text().splitlines()
  assert parsed["litert"] == parsed["tensorflow"]
  for sentence, tree in zip(SENTENCES, parsed["litert"]):
    assert Tree.fromstring(tree).leaves() == sentence.split()
