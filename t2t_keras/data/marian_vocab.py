"""A Marian (OPUS-MT) vocabulary pair: source text through `source.spm`, target text
through `target.spm`, both pieces mapped to ids by the joint `vocab.yml`.

    vocab = MarianVocabulary("runs/opus-en-de/vocab.model")
    ids = vocab.encode("Hello world")             # source side, no EOS
    tgt = vocab.target.encode("Hallo Welt")       # target side (prefixes, references)
    vocab.decode(tgt + [EOS])                     # "Hallo Welt" (target side)

The file is a zip archive holding Marian's three files as released (`source.spm`,
`target.spm`, `vocab.yml`), so a run carries them byte for byte; `write_archive` makes
it, `vocabulary.load` knows it by its content. A pair with separate vocabularies (OPUS-MT
models trained with `tied-embeddings-src: false`, Hugging Face's `separate_vocabs`) also
holds `target_vocab.yml`: then `vocab.yml` gives the source side's ids and
`target_vocab.yml` the target side's, two id spaces of one size (the model's one
`vocab_size`; Hugging Face's converter refuses sides of two sizes).

Conventions, from Marian's source (marian-dev, `src/data/default_vocab.cpp`) and
OPUS-MT's scripts (`preprocess.sh`: `spm_encode` with source.spm, then Marian maps the
space-separated pieces through vocab.yml):

  * vocab.yml maps each piece to its Marian id; `</s>` and `<unk>` are found by name
    (newer OPUS-MT vocabularies are sorted, so they are not always 0 and 1); a piece
    missing from it is `<unk>`;
  * Marian pads with `</s>` and a mask and has no padding entry, so ours (id 0) is
    added in front: our ids are PAD 0, EOS 1 (`</s>`), UNK 2 (`<unk>`), then every
    other piece in Marian's id order (`marian_ids` gives each one's Marian id, -1 for
    the added PAD). Where vocab.yml has a `<pad>` of its own, it is our PAD and nothing
    is added;
  * a line starting with a language label (`>>fra<<`, OPUS-MT's multilingual models) has
    it as one piece, the rest through sentencepiece (`split_label`);
  * output pieces go back to text through target.spm (`spm_decode`'s DecodePieces; a
    piece it does not know keeps no "▁": `join_pieces`).

OPUS-MT's preprocess.sh also normalizes punctuation (Moses' normalize-punctuation.perl)
before source.spm; that step is not done here (docs/migrating.md).
"""

import io
import re
import zipfile

import sentencepiece as spm
import yaml

from t2t_keras import fileio
from t2t_keras.data import languages
from t2t_keras.errors import InputError
from t2t_keras.ids import PAD_ID, UNK_ID, content_ids

MEMBERS = ("source.spm", "target.spm", "vocab.yml")
# Optional: the target side's vocabulary, where it is not vocab.yml's (separate vocabularies).
TARGET_VOCAB_MEMBER = "target_vocab.yml"
# Optional: language tokens (one per line) that are one piece at a line's start and are
# dropped from output text (M2M-100's `__fr__`, NLLB's `fra_Latn`).
LABELS_MEMBER = "labels.txt"
PAD_PIECE, EOS_PIECE, UNK_PIECE = "<pad>", "</s>", "<unk>"
SPACE = "\u2581"  # sentencepiece's word boundary


def read_vocab_yml(text, name="vocab.yml"):
  """Marian's vocab.yml text -> [piece] indexed by Marian id. Every entry is read as a
  string (`yes`, `null` or `1` are pieces, not booleans or numbers). InputError (naming
  `name`) unless the ids are 0 .. n-1, each once, and `</s>` and `<unk>` are there."""
  loader = getattr(yaml, "CBaseLoader", yaml.BaseLoader)
  try:
    entries = yaml.load(text, Loader=loader)
  except yaml.YAMLError as e:
    raise InputError(f"{name}: not a YAML map of piece: id ({str(e).splitlines()[0]})") from None
  if not isinstance(entries, dict) or not entries:
    raise InputError(f"{name}: not a YAML map of piece: id")
  pieces = [None] * len(entries)
  for piece, marian_id in entries.items():
    if not str(marian_id).isdigit() or int(marian_id) >= len(entries):
      raise InputError(f"{name}: {piece!r} has id {marian_id!r}; the {len(entries)} "
                       f"entries must have the ids 0 .. {len(entries) - 1}")
    if pieces[int(marian_id)] is not None:
      raise InputError(f"{name}: id {marian_id} is given to both "
                       f"{pieces[int(marian_id)]!r} and {piece!r}")
    pieces[int(marian_id)] = piece
  for needed in (EOS_PIECE, UNK_PIECE):
    if needed not in entries:
      raise InputError(f"{name}: no {needed!r} entry (Marian requires {EOS_PIECE!r} and "
                       f"{UNK_PIECE!r})")
  return pieces


def split_label(text, labels=()):
  """(["<label>"] or [], the rest): a line that starts with `>>` keeps all up to the first
  `<<` as one piece, the target-language label of OPUS-MT's multilingual models (added
  after sentencepiece by OPUS-MT's preprocess.sh; transformers' MarianTokenizer
  `remove_language_code` splits it off the same way); one of `labels` (a language token
  of the vocabulary's LABELS_MEMBER) followed by a space or the end is one piece too."""
  label, rest = re.match(languages.label_pattern(labels), text).groups()
  return ([label.rstrip(" ")] if label else []), rest


def join_pieces(sp, pieces):
  """Pieces -> text: sentencepiece's DecodePieces, then any "▁" left (a piece this
  model does not know, e.g. a source-side piece of the joint vocabulary, is kept
  verbatim) a space, the ends stripped, as transformers' MarianTokenizer
  (`convert_tokens_to_string`) and TF Text's detokenizer give it."""
  return sp.decode_pieces(pieces).replace(SPACE, " ").strip()


def our_order(marian_pieces):
  """[piece] by Marian id -> ([piece] by our id, [Marian id] by our id, -1 for an added
  PAD): PAD, </s>, <unk>, then the rest in Marian's order."""
  special = [PAD_PIECE, EOS_PIECE, UNK_PIECE]
  index = {piece: i for i, piece in enumerate(marian_pieces)}
  ours = special + [p for p in marian_pieces if p not in special]
  return ours, [index.get(p, -1) for p in ours]


def write_archive(path, source_spm, target_spm, vocab_yml, labels=(), target_vocab_yml=None):
  """Writes the pair file (`MEMBERS`, stored as given, `labels` as LABELS_MEMBER where
  there are any, `target_vocab_yml` as TARGET_VOCAB_MEMBER where given) at `path`,
  atomically."""
  buffer = io.BytesIO()
  members = list(zip(MEMBERS, (source_spm, target_spm, vocab_yml)))
  if labels:
    members.append((LABELS_MEMBER, "".join(f"{label}\n" for label in labels).encode()))
  if target_vocab_yml is not None:
    members.append((TARGET_VOCAB_MEMBER, target_vocab_yml))
  with zipfile.ZipFile(buffer, "w", zipfile.ZIP_DEFLATED) as archive:
    for name, data in members:
      info = zipfile.ZipInfo(name, date_time=(1980, 1, 1, 0, 0, 0))  # same bytes each time
      archive.writestr(info, data, zipfile.ZIP_DEFLATED)
  fileio.write_atomic(path, buffer.getvalue())


def is_archive(path):
  """Whether `path` is a pair file (a zip archive with `MEMBERS`)."""
  with fileio.open(path, "rb") as f:
    if f.read(4) != b"PK\x03\x04":
      return False
  with zipfile.ZipFile(io.BytesIO(fileio.read_bytes(path))) as archive:
    return set(MEMBERS) <= set(archive.namelist())


class _Side:
  """One side's text <-> ids: a sentencepiece model's pieces through this side's ids
  (`pieces`: each of our ids' piece; `marian_ids`: each one's Marian id, `our_order`'s)."""

  def __init__(self, proto, pieces, marian_ids, name, labels=()):
    self.model_proto = proto
    self._sp = spm.SentencePieceProcessor(model_proto=proto)
    self._ids = {p: i for i, p in enumerate(pieces)}
    self._pieces = pieces
    self.marian_ids = marian_ids
    self.name = name
    self.labels = tuple(labels)
    # A label the side's vocabulary lacks (the target side of separate vocabularies) is
    # read as any piece it lacks: UNK.
    self._label_ids = frozenset(self._ids[label] for label in labels if label in self._ids)

  @property
  def vocab_size(self):
    return len(self._pieces)

  def encode(self, text):
    """Text -> ids (a piece not in vocab.yml: UNK), without EOS; a leading language
    label (`>>fra<<`) is one piece (`split_label`)."""
    label, text = split_label(text, self.labels)
    return [self._ids.get(p, UNK_ID) for p in label + self._sp.encode(text, out_type=str)]

  def encode_batch(self, texts, num_threads=-1):
    split = [split_label(text, self.labels) for text in texts]
    labels, texts = zip(*split) if split else ((), ())
    return [[self._ids.get(p, UNK_ID) for p in label + pieces] for label, pieces in
            zip(labels, self._sp.encode(list(texts), out_type=str, num_threads=num_threads))]

  def decode(self, ids):
    """Ids -> text through this side's model (`join_pieces`); stops at the first EOS,
    drops PAD and the labels' ids."""
    return join_pieces(self._sp, [self._pieces[i] for i in content_ids(ids)
                                  if i not in self._label_ids])

  def id_to_piece(self, i):
    return self._pieces[int(i)]

  def piece_to_id(self, piece):
    return self._ids.get(piece, UNK_ID)

  @property
  def pieces(self):
    """Each of this side's ids' piece, in id order."""
    return list(self._pieces)

  def tf_tokenizer(self):
    """This side in TF ops (`MarianTokenizer`): tokenize with this side's model,
    detokenize with the same."""
    from t2t_keras.data.marian_vocab_tf import MarianTokenizer  # pylint: disable=import-outside-toplevel
    return MarianTokenizer(self.model_proto, self.model_proto, self._pieces, self.labels)


class MarianVocabulary:
  """The pair: `encode` is the source side's, `decode` the target side's (what a
  translation needs); `source` and `target` give each side whole. `separate`: whether
  the sides have their own ids (TARGET_VOCAB_MEMBER); `marian_ids` is the source side's
  (both sides' when joint).

  Args:
    path: the pair file (`write_archive`).
    vocab_name: how errors in its vocab.yml name it (default: path:vocab.yml).
    target_vocab_name: the same for its target_vocab.yml.
  """

  def __init__(self, path, vocab_name=None, target_vocab_name=None):
    self.model_path = path
    try:
      with zipfile.ZipFile(io.BytesIO(fileio.read_bytes(path))) as archive:
        data = {name: archive.read(name) for name in MEMBERS}
        names = archive.namelist()
        labels = (archive.read(LABELS_MEMBER).decode("utf-8").split()
                  if LABELS_MEMBER in names else [])
        target_yml = (archive.read(TARGET_VOCAB_MEMBER) if TARGET_VOCAB_MEMBER in names
                      else None)
    except (zipfile.BadZipFile, KeyError) as e:
      raise InputError(f"{path}: not a Marian vocabulary pair ({e})") from None
    vocab_name = vocab_name or f"{path}:vocab.yml"
    pieces, self.marian_ids = our_order(read_vocab_yml(data["vocab.yml"].decode("utf-8"),
                                                       vocab_name))
    unknown = [label for label in labels if label not in pieces]
    if unknown:
      raise InputError(f"{path}: {LABELS_MEMBER} names {unknown[0]!r}, which its vocab.yml "
                       "does not hold")
    self.labels = tuple(labels)
    self.source = _Side(data["source.spm"], pieces, self.marian_ids, "source", labels)
    self.separate = target_yml is not None
    if self.separate:
      target_name = target_vocab_name or f"{path}:{TARGET_VOCAB_MEMBER}"
      target_pieces, target_ids = our_order(read_vocab_yml(target_yml.decode("utf-8"),
                                                           target_name))
      if len(target_pieces) != len(pieces):
        raise InputError(f"{target_name} makes {len(target_pieces)} ids and {vocab_name} "
                         f"{len(pieces)}; separate vocabularies must be of one size (the "
                         "model has one vocab_size, as Hugging Face's OPUS-MT conversions)")
      self.target = _Side(data["target.spm"], target_pieces, target_ids, "target", labels)
    else:
      self.target = _Side(data["target.spm"], pieces, self.marian_ids, "target", labels)
    self.pad_added = self.marian_ids[PAD_ID] < 0
    self.vocab_size = len(pieces)
    self.encode, self.encode_batch = self.source.encode, self.source.encode_batch
    self.decode = self.target.decode
    self.id_to_piece, self.piece_to_id = self.target.id_to_piece, self.target.piece_to_id

  def tf_tokenizer(self):
    """In TF ops: tokenize source text, detokenize target ids (`MarianTokenizer`)."""
    from t2t_keras.data.marian_vocab_tf import MarianTokenizer  # pylint: disable=import-outside-toplevel
    return MarianTokenizer(self.source.model_proto, self.target.model_proto,
                           self.source.pieces, self.labels,
                           detokenize_pieces=self.target.pieces if self.separate else None)

  def __repr__(self):
    return f"MarianVocabulary({self.model_path!r}, vocab_size={self.vocab_size})"
