"""One sentencepiece BPE vocabulary shared by source and target.

It is trained once by datagen on both sides of the training split and stored in
`data_dir` as `vocab.<problem>.model` (a serialized sentencepiece ModelProto).
The same proto serves python-side encoding (datagen, decoding) and the in-graph
`tensorflow_text.SentencepieceTokenizer` (serving), so ids always agree.

Reserved ids: PAD = 0, EOS = 1, UNK = 2; there is no BOS.
"""

import io
import os
import random

import sentencepiece as spm

from t2t_keras import fileio
from t2t_keras.errors import InputError
from t2t_keras.ids import EOS_ID, PAD_ID, UNK_ID, content_ids  # noqa: E402  (re-exported)

PAD, EOS, UNK = PAD_ID, EOS_ID, UNK_ID


def train_sentencepiece(sentences, model_path, vocab_size, *,
                        character_coverage=1.0, input_sentence_size=0,
                        num_threads=None, user_defined_symbols=()):
  """Trains a BPE model on an iterable of strings; writes `model_path` atomically.

  `vocab_size` is a target: with `hard_vocab_limit=False` a small corpus may
  give fewer pieces. `input_sentence_size` > 0 samples that many sentences.
  `user_defined_symbols`: pieces kept whole wherever they occur (ids 3, 4, ...).
  Returns the SubwordVocabulary.
  """
  writer = io.BytesIO()
  errors = []

  def guarded():  # sentencepiece would wrap a reader's exception in a RuntimeError.
    try:
      yield from sentences
    except Exception as e:  # pylint: disable=broad-except
      errors.append(e)

  try:
    _train(guarded(), writer, vocab_size, character_coverage, input_sentence_size, num_threads,
           user_defined_symbols)
  except Exception:
    if errors:
      raise errors[0] from None
    raise
  if errors:
    raise errors[0]
  fileio.write_atomic(model_path, writer.getvalue())
  return SubwordVocabulary(model_path)


def _train(sentences, writer, vocab_size, character_coverage, input_sentence_size,
           num_threads, user_defined_symbols=()):
  spm.SentencePieceTrainer.train(
      sentence_iterator=sentences,
      model_writer=writer,
      model_type="bpe",
      vocab_size=int(vocab_size),
      hard_vocab_limit=False,
      character_coverage=character_coverage,
      pad_id=PAD, eos_id=EOS, unk_id=UNK, bos_id=-1,
      input_sentence_size=int(input_sentence_size),
      shuffle_input_sentence=True,
      num_threads=num_threads or max(1, min(16, os.cpu_count() or 1)),
      minloglevel=2,
      **({"user_defined_symbols": list(user_defined_symbols)} if user_defined_symbols else {}),
  )


def sample_in_order(items, k, seed):
  """(a uniform sample of k of `items`, in their order; how many items there were).

  Reservoir sampling (Vitter's algorithm R) with its own `random.Random(seed)`: one pass,
  memory for k items. k <= 0, or k >= the count, keeps everything in order.
  """
  rng = random.Random(seed)
  kept, total = [], 0
  for total, item in enumerate(items, start=1):
    if k <= 0 or total <= k:
      kept.append((total, item))
    else:
      j = rng.randrange(total)
      if j < k:
        kept[j] = (total, item)
  kept.sort(key=lambda pair: pair[0])
  return [item for _, item in kept], total


class SubwordVocabulary:
  """A sentencepiece model: text <-> ids, in python and in TF graphs.

    vocab = SubwordVocabulary("data/vocab.translate_ende_numbers.model")
    ids = vocab.encode("one hundred")        # no EOS
    vocab.decode(ids + [EOS, PAD])          # "one hundred"
    tok = vocab.tf_tokenizer()              # tensorflow_text tokenizer, same ids
  """

  def __init__(self, model_path=None, *, model_proto=None):
    if model_proto is None:
      if not fileio.exists(model_path):
        raise FileNotFoundError(
            f"vocabulary {model_path!r} not found; run t2t-datagen first")
      model_proto = fileio.read_bytes(model_path)
    self.model_path = model_path
    self._proto = bytes(model_proto)
    try:
      self._sp = spm.SentencePieceProcessor(model_proto=self._proto)
    except (RuntimeError, SyntaxError, OSError, IndexError) as e:  # sentencepiece's statuses
      self._sp = None
      reason = str(e).strip() or type(e).__name__
    if self._sp is None or self._sp.get_piece_size() == 0:
      where = repr(model_path) if model_path else "the model given"
      raise InputError(f"vocabulary {where} is damaged: not a sentencepiece model "
                       f"({reason if self._sp is None else 'no pieces'}); restore it from a "
                       f"copy, or run t2t-datagen again")

  @property
  def model_proto(self):
    """The serialized sentencepiece model (bytes)."""
    return self._proto

  @property
  def vocab_size(self):
    """Number of ids (the model's embedding size), specials included."""
    return self._sp.get_piece_size()

  def encode(self, text):
    """Text -> list of ids, without EOS."""
    return self._sp.encode(text)

  def encode_batch(self, texts, num_threads=-1):
    """List of texts -> list of id lists (threaded in C++), without EOS."""
    return self._sp.encode(list(texts), num_threads=num_threads)

  def decode(self, ids):
    """Ids -> text; stops at the first EOS and drops PAD (and other control ids)."""
    return self._sp.decode(content_ids(ids))

  def id_to_piece(self, i):
    return self._sp.id_to_piece(int(i))

  def piece_to_id(self, piece):
    return self._sp.piece_to_id(piece)

  def tf_tokenizer(self):
    """A `tensorflow_text.SentencepieceTokenizer` over the same model (int32 ids, no EOS)."""
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    from t2t_keras.data.sentencepiece_tf import sentencepiece_tokenizer  # pylint: disable=import-outside-toplevel
    return sentencepiece_tokenizer(self._proto, tf.int32)

  def __repr__(self):
    return f"SubwordVocabulary({self.model_path!r}, vocab_size={self.vocab_size})"


def load(path):
  """The vocabulary in `path`: a tensor2tensor `.subwords` file (plain or gzip; known by its
  first line, '<pad>') as a `T2tSubwordVocabulary`, a Marian pair (a zip archive of
  source.spm, target.spm and vocab.yml) as a `MarianVocabulary`, else a sentencepiece
  model. Each gives encode(text) -> ids (no EOS; the source side's), decode(ids) -> text
  (the target side's) and vocab_size; `target_side` gives the target side's encode."""
  from t2t_keras.data import marian_vocab, t2t_subwords  # pylint: disable=import-outside-toplevel
  if not fileio.exists(path):
    raise FileNotFoundError(f"vocabulary {path!r} not found")
  if t2t_subwords.is_subwords_file(path):
    return t2t_subwords.T2tSubwordVocabulary(path)
  if marian_vocab.is_archive(path):
    return marian_vocab.MarianVocabulary(path)
  return SubwordVocabulary(path)


def source_side(vocab):
  """The vocabulary that encodes and decodes source text (`vocab` unless it is a pair)."""
  return getattr(vocab, "source", vocab)


def target_side(vocab):
  """The vocabulary that encodes and decodes target text (`vocab` unless it is a pair)."""
  return getattr(vocab, "target", vocab)
