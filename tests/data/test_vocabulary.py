import gzip
import os

import pytest
import tensorflow as tf

from t2t_keras.data import vocabulary as vocab_lib
from conftest import SHARED_DATA

MULTI30K = os.path.join(SHARED_DATA, "multi30k")


def _sentences():
  if os.path.exists(os.path.join(MULTI30K, "train.en.gz")):
    out = []
    for lang in ("en", "de"):
      with gzip.open(os.path.join(MULTI30K, f"train.{lang}.gz"), "rt", encoding="utf-8") as f:
        out.extend(line.strip() for _, line in zip(range(2000), f))
    return out
  # Without ../shared/data: a small embedded corpus covering the characters tested below.
  base = ["A man in a blue shirt is standing on a ladder.",
          "Two young girls are playing in the garden, laughing.",
          "Ein Mann in einem blauen Hemd steht auf einer Leiter.",
          "Zwei junge Mädchen spielen im Garten und lachen."]
  return [f"{s} ({i}) ünïcödé" for i in range(150) for s in base]


@pytest.fixture(scope="module")
def vocab(tmp_path_factory):
  path = str(tmp_path_factory.mktemp("vocab") / "vocab.test.model")
  return vocab_lib.train_sentencepiece(_sentences(), path, 500)


def test_reserved_ids(vocab):
  assert (vocab_lib.PAD, vocab_lib.EOS, vocab_lib.UNK) == (0, 1, 2)
  assert vocab.id_to_piece(0) == "<pad>"
  assert vocab.id_to_piece(1) == "</s>"
  assert vocab.id_to_piece(2) == "<unk>"
  assert 0 < vocab.vocab_size <= 500


def test_encode_decode_roundtrip_eos_and_pad(vocab):
  text = "A man in a blue shirt is standing on a ladder."
  ids = vocab.encode(text)
  assert vocab_lib.EOS not in ids and vocab_lib.PAD not in ids
  assert vocab.decode(ids) == text
  assert vocab.decode(ids + [vocab_lib.EOS] + ids + [vocab_lib.PAD]) == text
  assert vocab.decode([vocab_lib.PAD] + ids + [vocab_lib.PAD, vocab_lib.PAD]) == text


def test_small_corpus_gives_fewer_pieces_without_error(tmp_path):
  v = vocab_lib.train_sentencepiece(["a b", "b a", "a a b"] * 10, str(tmp_path / "v.model"), 1000)
  assert v.vocab_size < 1000
  assert v.decode(v.encode("a b a")) == "a b a"


def test_model_file_written_atomically(tmp_path, vocab):
  assert os.listdir(os.path.dirname(vocab.model_path)) == ["vocab.test.model"]
  assert vocab_lib.SubwordVocabulary(vocab.model_path).model_proto == vocab.model_proto


def test_missing_model_file():
  with pytest.raises(FileNotFoundError, match="t2t-datagen"):
    vocab_lib.SubwordVocabulary("/nonexistent/vocab.x.model")


def test_python_and_tf_text_agree_on_real_text(vocab):
  texts = _sentences()[::37][:60] + ["Zwei junge weiße Männer sind im Freien.", "", "x"]
  tok = vocab.tf_tokenizer()
  tf_ids = tok.tokenize(tf.constant(texts)).to_list()
  assert tf_ids == [vocab.encode(t) for t in texts]
  assert vocab.encode_batch(texts) == [vocab.encode(t) for t in texts]
  detok = tok.detokenize(tf.ragged.constant([vocab.encode(texts[0])], dtype=tf.int32))
  assert detok.numpy()[0].decode("utf-8") == vocab.decode(vocab.encode(texts[0]))


def test_reader_error_is_raised_as_is_and_nothing_written(tmp_path):
  def bad():
    raise ValueError("x.txt:1: invalid UTF-8")
    yield "never"  # pylint: disable=unreachable

  with pytest.raises(ValueError, match="x.txt:1: invalid UTF-8"):
    vocab_lib.train_sentencepiece(bad(), str(tmp_path / "v.model"), 100)
  assert os.listdir(tmp_path) == []


def test_tokenizers_of_two_sentencepiece_models_stay_apart_once_restored(tmp_path):
  """tensorflow_text finds a tokenizer's model resource by its op's name: restored, two
  tokenizers of different models in one SavedModel (a Marian pair's source and target)
  both used the one created first (tensorflow/text#1304), until
  `sentencepiece_tf.sentencepiece_tokenizer` named each by its model; two SavedModels
  of one process (a server's) keep theirs apart, named or not."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  import marian_fixture  # pylint: disable=import-outside-toplevel
  from t2t_keras.data import sentencepiece_tf  # pylint: disable=import-outside-toplevel
  english, german = marian_fixture.corpus(200)
  protos = [marian_fixture.train_spm(english, 60), marian_fixture.train_spm(german, 80)]
  text = tf.constant(german[:3] + english[:3] + ["sechsundachtzig"])

  class Side(tf.Module):
    def __init__(self, proto):
      super().__init__()
      self.tokenizer = sentencepiece_tf.sentencepiece_tokenizer(proto, tf.string)

    @tf.function(input_signature=[tf.TensorSpec([None], tf.string)])
    def pieces(self, x):
      return self.tokenizer.tokenize(x).to_tensor("")

  def module(protos):
    m = tf.Module()
    m.sides = [Side(p) for p in protos]
    return m

  for name, ps in (("both", protos), ("first", protos[:1]), ("second", protos[1:])):
    tf.saved_model.save(module(ps), str(tmp_path / name))
  loaded = [tf.saved_model.load(str(tmp_path / name)) for name in ("both", "first", "second")]
  for proto, side in zip(protos * 2, [*loaded[0].sides, loaded[1].sides[0],
                                      loaded[2].sides[0]]):
    sp = spm.SentencePieceProcessor(model_proto=proto)
    expected = [sp.encode(t.decode(), out_type=str) for t in text.numpy()]
    assert [[p.decode() for p in row if p] for row in side.pieces(text).numpy()] == expected
