"""tensor2tensor's SubwordTextEncoder vocabularies: our ids and text equal tensor2tensor's.

The reference is tensor2tensor 1.15.7's own `data_generators/text_encoder.py` (pure Python;
TensorFlow only for file access), installed by setup_venv.sh with `--no-deps --target
.venv/t2t_reference` so that its console scripts (t2t-trainer, ...) never shadow ours;
T2T_REFERENCE_DIR points elsewhere. Without it the comparisons skip and say so.
"""

import gzip
import os
import subprocess
import sys

import pytest
import tensorflow as tf

from conftest import SHARED_DATA
from t2t_keras.data import t2t_subwords, vocabulary
from t2t_keras.errors import InputError

REFERENCE_DIR = os.environ.get("T2T_REFERENCE_DIR") or os.path.join(
    os.path.dirname(__file__), "..", "..", ".venv", "t2t_reference")
T2T_DIR = os.path.join(SHARED_DATA, "t2t")
SHARED_VOCABS = ["vocab.translate_ende_wmt8k.8192.subwords.gz",
                 "vocab.translate_ende_wmt32k.32768.subwords.gz"]
REAL_TEXT = ["multi30k/val.en.gz", "multi30k/val.de.gz", "multi30k/val.fr.gz",
             "multi30k/val.cs.gz", "wmt14/newstest2013.en.gz", "wmt14/newstest2013.de.gz",
             "wmt14/newstest2014-deen.en.gz", "wmt14/newstest2014-deen.de.gz"]
TRAIN_TEXT = ["multi30k/train.en.gz", "multi30k/train.de.gz", "multi30k/train.fr.gz",
              "multi30k/train.cs.gz"]
EDGE_CASES = [
    "", " ", "  ", "   x", "a  b", "a b", " leading", "trailing ", "tab\there", "new\nline",
    "carriage\r\nreturn", "under_score", "__init__", "back\\slash", "\\u", "\\\\u",
    "\\123;", "literal \\65; and \\99999999999999999999; text", "digits 0123456789 3.14 1,000",
    "ünïcödé Straße", "漢字テスト、句読点。", "emoji 😀👍🏽", "combining e\u0301", "\u3013",
    "'quoted'", "\"double\"", "mixed_\\_\\\\__", "no\u00a0break", "zero\u200bwidth",
    "ΑΒΓ αβγ", "x" * 300, "a-b c--d", "!!!???", "12ab34", "\t", "\x00nul",
]
# A hand-made vocabulary (what t2t writes: '<pad>', '<EOS>', then subtokens; every character
# of its alphabet, those of '<pad>' and '<EOS>' included, is a subtoken of its own, as in
# any vocabulary t2t builds), so the comparisons run without the shared files too.
HAND_MADE = ["<pad>", "<EOS>", "the_", "a_", "b_", "_", ", _", ". _", "in", "ing_", "s_"] + \
    list("abcdefghijklmnopqrstuvwxyzABCEOS<> .,!?-'\\;0123456789")


@pytest.fixture(scope="module")
def text_encoder():
  """tensor2tensor's text_encoder module, from REFERENCE_DIR."""
  if not os.path.isdir(os.path.join(REFERENCE_DIR, "tensor2tensor")):
    pytest.skip(f"tensor2tensor's reference is not installed in {REFERENCE_DIR} "
                "(setup_venv.sh installs it; or set T2T_REFERENCE_DIR)")
  sys.path.insert(0, REFERENCE_DIR)
  try:
    from tensor2tensor.data_generators import text_encoder as module  # pylint: disable=import-outside-toplevel
  finally:
    sys.path.remove(REFERENCE_DIR)
  return module


def shared(path):
  full = os.path.join(SHARED_DATA, path) if not os.path.isabs(path) else path
  if not os.path.exists(full):
    pytest.skip(f"{full} is absent (../shared/data)")
  return full


@pytest.fixture(scope="module")
def hand_made(tmp_path_factory):
  path = tmp_path_factory.mktemp("vocab") / "vocab.hand.subwords"
  path.write_text("".join(f"'{s}'\n" for s in HAND_MADE), encoding="utf-8")
  return str(path)


def pair(text_encoder, path, tmp_path):
  """(ours, tensor2tensor's) for one vocabulary file (the reference reads it unzipped)."""
  plain = tmp_path / os.path.basename(path).replace(".gz", "")
  with open(path, "rb") as f:
    data = f.read()
  plain.write_bytes(gzip.decompress(data) if path.endswith(".gz") else data)
  return vocabulary.load(path), text_encoder.SubwordTextEncoder(str(plain))


def assert_same(ours, theirs, lines):
  """Python and graph: ids and decoded text equal tensor2tensor's on every line."""
  assert ours.vocab_size == theirs.vocab_size
  expected = [theirs.encode(line) for line in lines]
  for line, ids in zip(lines, expected):
    assert ours.encode(line) == ids, repr(line)
    assert ours.decode(ids) == theirs.decode(ids), repr(line)
  tokenizer = ours.tf_tokenizer()
  graph_ids = tokenizer.tokenize(tf.constant(lines))
  for line, got, ids in zip(lines, graph_ids.to_list(), expected):
    assert got == ids, repr(line)
  texts = tokenizer.detokenize(tf.ragged.constant(expected, dtype=tf.int32, inner_shape=()))
  for line, got, ids in zip(lines, texts.numpy(), expected):
    assert got.decode("utf-8") == theirs.decode(ids), repr(line)


def read_lines(path):
  with gzip.open(shared(path), "rt", encoding="utf-8") as f:
    return f.read().split("\n")


@pytest.mark.heavy
# The 32k file in the slow tier: the same code as the 8k file's case, on other data; its
# edge cases stay in the default tier (test_edge_cases_give_tensor2tensors_ids_and_text).
@pytest.mark.parametrize("name", [SHARED_VOCABS[0],
                                  pytest.param(SHARED_VOCABS[1], marks=pytest.mark.slow)])
def test_real_text_gives_tensor2tensors_ids_and_text(text_encoder, tmp_path, name):
  """Every line of Multi30k val (en, de, fr, cs) and WMT14 newstest2013 / 2014 (en, de)."""
  ours, theirs = pair(text_encoder, shared(os.path.join(T2T_DIR, name)), tmp_path)
  assert_same(ours, theirs, [line for path in REAL_TEXT for line in read_lines(path)])


@pytest.mark.slow
@pytest.mark.parametrize("name", SHARED_VOCABS)
def test_multi30k_train_gives_tensor2tensors_ids_and_text(text_encoder, tmp_path, name):
  """Every line of Multi30k train in four languages (116k lines; the val and newstest
  test above covers the same code on 16k lines)."""
  ours, theirs = pair(text_encoder, shared(os.path.join(T2T_DIR, name)), tmp_path)
  assert_same(ours, theirs, [line for path in TRAIN_TEXT for line in read_lines(path)])


@pytest.mark.parametrize("name", SHARED_VOCABS + ["hand_made"])
def test_edge_cases_give_tensor2tensors_ids_and_text(text_encoder, hand_made, tmp_path, name):
  """Characters outside the alphabet, "_", "\\", escapes written as text, digits, runs of
  spaces, control characters, the empty line, a 300-character token."""
  path = hand_made if name == "hand_made" else shared(os.path.join(T2T_DIR, name))
  ours, theirs = pair(text_encoder, path, tmp_path)
  assert_same(ours, theirs, EDGE_CASES)
  if name == "hand_made":  # outside this alphabet, "Z" is escaped as "\90;"
    assert ours.encode("Z") == theirs.encode("Z") and len(ours.encode("Z")) == 5


def test_decode_stops_at_eos_and_drops_pad(hand_made):
  vocab = vocabulary.load(hand_made)
  ids = vocab.encode("the cat")
  assert vocab.decode([0] + ids + [1] + vocab.encode("dog")) == "the cat"


def test_load_tells_the_kinds_apart(hand_made, tmp_path):
  assert isinstance(vocabulary.load(hand_made), t2t_subwords.T2tSubwordVocabulary)
  zipped = tmp_path / "vocab.bin"  # a gzip file under any name
  with open(hand_made, "rb") as f:
    zipped.write_bytes(gzip.compress(f.read()))
  assert vocabulary.load(str(zipped)).vocab_size == len(HAND_MADE)
  spm_path = str(tmp_path / "spm.model")
  vocabulary.train_sentencepiece(["one two three", "four five six"] * 50, spm_path, 30,
                                 num_threads=1)
  assert isinstance(vocabulary.load(spm_path), vocabulary.SubwordVocabulary)


def test_bad_files_are_refused_with_one_line(tmp_path):
  with pytest.raises(FileNotFoundError, match="vocabulary .*missing.subwords' not found"):
    vocabulary.load(str(tmp_path / "missing.subwords"))
  wrong = tmp_path / "wrong.subwords"
  wrong.write_text("'<EOS>'\n'<pad>'\n'a'\n")
  with pytest.raises(InputError, match=r"wrong.subwords: not a tensor2tensor subword vocabulary "
                                       r"\(its first two lines must be '<pad>' and '<EOS>'"):
    t2t_subwords.T2tSubwordVocabulary(str(wrong))


SAVED_MODEL_CHECK = """
import sys
sys.modules["t2t_keras"] = None  # the SavedModel must not need this package
import tensorflow as tf
import tensorflow_text  # noqa: F401  (registers TF Text's ops)
loaded = tf.saved_model.load(sys.argv[1])
ids = loaded.tokenize(tf.constant([sys.argv[2]]))
print(ids.to_list()[0], loaded.detokenize(ids).numpy()[0].decode("utf-8"))
"""
TEXT = "Hello, world_ \\ 3.14 Z"


@pytest.mark.heavy
def test_a_saved_model_tokenizes_with_tensorflow_and_tf_text_only(hand_made, tmp_path):
  vocab = vocabulary.load(hand_made)
  tokenizer = vocab.tf_tokenizer()
  module = tf.Module()
  module.tokenizer = tokenizer
  module.tokenize = tf.function(tokenizer.tokenize, input_signature=[
      tf.TensorSpec([None], tf.string)])
  module.detokenize = tf.function(tokenizer.detokenize, input_signature=[
      tf.RaggedTensorSpec([None, None], tf.int32)])
  tf.saved_model.save(module, str(tmp_path / "saved"))
  result = subprocess.run(
      [sys.executable, "-c", SAVED_MODEL_CHECK, str(tmp_path / "saved"), TEXT],
      capture_output=True, text=True, timeout=300, env=dict(os.environ, TF_CPP_MIN_LOG_LEVEL="3"))
  assert result.returncode == 0, result.stderr[-3000:]
  assert result.stdout.strip() == f"{vocab.encode(TEXT)} {vocab.decode(vocab.encode(TEXT))}"
  assert vocab.decode(vocab.encode(TEXT)) == TEXT
