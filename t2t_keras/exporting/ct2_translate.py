"""Translate with a CTranslate2 model written by t2t-exporter --format=ctranslate2.

    python ct2_translate.py MODEL_DIR "a sentence" ["another" ...]
    python ct2_translate.py MODEL_DIR < input.txt          # one line per input line
    python ct2_translate.py --compute_type=int8 --beam_size=4 --alpha=0.6 MODEL_DIR < in
    python ct2_translate.py --prefix_file=prefixes.de MODEL_DIR < in   # line-aligned target
                                                 # prefixes (an empty line: none)
    python ct2_translate.py --source_language=en --target_language=de M2M_DIR < in.en

    translator = Ct2Translator("runs/tiny/ctranslate2")
    translator.translate(["a sentence"])        # -> [(translation, score)]

Prints one "score<TAB>translation" line per input, as translate_saved_model.py
does. The decoding defaults are the run's (MODEL_DIR/t2t_decoding.json).

This file imports nothing from t2t_keras or TensorFlow on purpose: a converted
model needs ctranslate2 and sentencepiece only.

**t2t's beam search on CTranslate2's.** CTranslate2 divides scores by length **
alpha; t2t by GNMT's ((5 + length) / 6) ** alpha, EOS counted, unless the run decodes
with length_penalty_kind=length (length ** alpha, EOS counted). So CTranslate2 is
asked for beam_size * patience hypotheses of plain log probability (no length
penalty, no minimum length) and they are ranked here with the run's penalty: those that
ended, or, where none ended within the length limit, the live ones; hypotheses
holding PAD are dropped (t2t's searches never emit it). Each sentence's length limit
is t2t's: its pieces + EOS + extra_length, capped at max_decode_length and at the
position table; a sentence whose hypotheses ran past its own limit in a batch with a
longer one is searched again alone. Both searches keep the same live beams (unless
PAD ranks among the best candidates, which t2t rules out and CTranslate2 keeps), so
outputs and scores are t2t-decoder's but for one difference: CTranslate2 takes an
ended hypothesis only from the best beam_size of a step's 2 * beam_size candidates,
t2t from all of them, so now and then t2t finds a short translation that
CTranslate2 never sees (then ours scores higher; docs/ctranslate2.md has the rates).

**Target prefixes** go to CTranslate2's `target_prefix`. Its beam search forces them
and scores only what follows (`update_sample_with_prefix` in its src/decoding.cc resets
the score to 0 at each forced step), so the prefix's log probability is taken from
`score_batch` and added: a score is the log prob of the whole output, prefix included,
as t2t-decoder's. A sentence's length limit grows to its prefix's length + 1 as there.
At the first step after the prefix CTranslate2 also drops EOS from all but the best
candidate (the same function), where t2t keeps it among the 2 * beam_size.

**Language-token models** (M2M-100, NLLB imported from Hugging Face's layout:
t2t_decoding.json lists language_tokens) take both languages: the source language's
token leads each input as one piece, the target language's is the forced prefix, and
the tokens are left out of the output text, as t2t-decoder does.

**A run that folds the first letter** (t2t_decoding.json's fold_first_letter: its problem
trained on text whose first letter is lowercased, t2t_keras/data/casing.py) has each
input's first letter folded before it is tokenized and the input's capital restored on
its outputs, as t2t-decoder does (`fold_first_letter`, `restore_first_letter`: that
module's rule, copied; tests hold the copy to it).
"""

import argparse
import json
import os
import sys

PAD_PIECE_ID, EOS_PIECE_ID = 0, 1  # t2t_keras.ids' (not imported: this file stands alone)
DECODING_FILE = "t2t_decoding.json"
SPM_FILE = "sentencepiece.model"
SOURCE_SPM_FILE, TARGET_SPM_FILE = "source.spm", "target.spm"  # a Marian pair's
VOCABULARY_FILE = "shared_vocabulary.json"  # the model's pieces in id order (CTranslate2's)
# CTranslate2's files where the sides' pieces differ (separate vocabularies).
SIDE_VOCABULARY_FILES = ("source_vocabulary.json", "target_vocabulary.json")
# beam_size * patience hypotheses are ranked: with length ** alpha more long ones must end
# before the n-best holds ours (docs/ctranslate2.md, "Patience").
DEFAULT_PATIENCE = {"gnmt": 1.0, "length": 4.0}


def _split_first(text):
  """(leading ASCII whitespace, first character, the rest) of text (casing.split_first)."""
  body = text.lstrip(" \t\n\r\f\v")
  return text[:len(text) - len(body)], body[:1], body[1:]


def _is_capital(char):
  """A character whose lowercase is one other character that uppercases back to it."""
  lower = char.lower()
  return len(lower) == 1 and lower != char and lower.upper() == char


def fold_first_letter(text):
  """text with its first letter lowercased where it is a capital (casing.fold's rule).
  litert_translate.py's too."""
  lead, first, rest = _split_first(text)
  return lead + first.lower() + rest if _is_capital(first) else text


def restore_first_letter(source, output):
  """output with its first letter uppercased where it is a folded capital, unless the
  source's first character is a lowercase one (casing.restore's rule).
  litert_translate.py's too."""
  first = _split_first(source)[1]
  if first.upper() != first:
    return output
  lead, first, rest = _split_first(output)
  upper = first.upper()
  return lead + upper + rest if _is_capital(upper) and upper.lower() == first else output


def length_penalty(length, alpha, kind="gnmt"):
  """The length penalty of `length` pieces, EOS included (t2t_keras.decoding.
  search_common's): "gnmt": ((5 + length) / 6) ** alpha; "length": length ** alpha."""
  if kind == "length":
    return float(length) ** alpha
  if kind != "gnmt":
    raise ValueError(f"length_penalty_kind={kind!r}: one of gnmt, length")
  return ((5.0 + length) / 6.0) ** alpha


def load_tokenizers(model_dir):
  """(source, target sentencepiece processors, whether they are a Marian pair) of a model
  directory: text <-> pieces by one sentencepiece model, or a Marian pair's source and
  target ones (pieces <-> ids: the model's vocabulary). litert_translate.py's too."""
  import sentencepiece as spm  # pylint: disable=import-outside-toplevel
  files = ((SPM_FILE, SPM_FILE) if os.path.exists(os.path.join(model_dir, SPM_FILE))
           else (SOURCE_SPM_FILE, TARGET_SPM_FILE))
  source, target = (spm.SentencePieceProcessor(model_file=os.path.join(model_dir, name))
                    for name in files)
  return source, target, files[0] == SOURCE_SPM_FILE


def source_pieces(source_sp, sentences, marian_pair):
  """[[piece]] of each source sentence; in a Marian pair a leading language label
  (`>>fra<<`, OPUS-MT's multilingual models) is one piece, as in t2t_keras's
  `marian_vocab.split_label` (not imported: this file stands alone)."""
  sentences = list(sentences)
  if not marian_pair:
    return source_sp.encode(sentences, out_type=str)
  labels, rest = [], []
  for text in sentences:
    end = text.find("<<") if text.startswith(">>") else -1
    labels.append([text[:end + 2]] if end >= 0 else [])
    rest.append(text[end + 2:] if end >= 0 else text)
  return [label + pieces for label, pieces in
          zip(labels, source_sp.encode(rest, out_type=str))]


def framed_pieces(source_sp, sentences, language_tokens, source_language, target_language):
  """A language-token model's (M2M-100, NLLB) inputs: each sentence's pieces led by
  source_language's token (one piece), and the forced prefix [target_language's token]
  per sentence; a language is a code of `language_tokens` ({code: token}) or a token.
  ValueError without both languages or for one the model does not know.
  litert_translate.py's too."""
  if target_language is None or source_language is None:
    raise ValueError("a language-token model takes source_language and target_language "
                     f"(one of {', '.join(sorted(language_tokens))})")
  known = set(language_tokens.values())

  def token(language):
    if language in language_tokens or language in known:
      return language_tokens.get(language, language)
    raise ValueError(f"unknown language {language!r}; this model knows "
                     f"{', '.join(sorted(language_tokens))}")

  source, target = token(source_language), token(target_language)
  return ([[source] + p for p in source_pieces(source_sp, sentences, False)],
          [[target]] * len(sentences))


def target_text(target_sp, pieces, marian_pair):
  """Output pieces -> text; in a Marian pair a piece target.spm does not know keeps no
  "\u2581" and the ends are stripped, as t2t_keras's `marian_vocab.join_pieces`."""
  text = target_sp.decode(pieces)
  return text.replace("\u2581", " ").strip() if marian_pair else text


def vocabularies(model_dir):
  """(source pieces, target pieces), each in id order, from a CTranslate2 model dir: its
  shared_vocabulary.json twice, else its source_ and target_vocabulary.json."""
  names = ((VOCABULARY_FILE,) * 2 if os.path.isfile(os.path.join(model_dir, VOCABULARY_FILE))
           else SIDE_VOCABULARY_FILES)
  out = []
  for name in names:
    with open(os.path.join(model_dir, name), encoding="utf-8") as f:
      out.append(json.load(f))
  return tuple(out)


class Ct2Translator:
  """A converted model, its sentencepiece model (a Marian pair: two) and the run's decoding.

  Args:
    model_dir: the directory t2t-exporter --format=ctranslate2 wrote.
    device, compute_type: ctranslate2.Translator's ("cpu"/"cuda"; "default" is the
      quantization the model was converted with; "int8", "float32", ...).
    intra_threads: threads per translation (0: every CPU core).
    beam_size, alpha, extra_length, max_decode_length, length_penalty_kind: override
      t2t_decoding.json (a model converted before length_penalty_kind: "gnmt").
    patience: hypotheses collected = beam_size * patience, ranked with the run's penalty
      (None: DEFAULT_PATIENCE of the length penalty's kind).
    batch_size: sentences per CTranslate2 batch (it sorts a call's inputs by length
      and cuts them into batches of this many, as t2t-decoder does).

  `researched` counts the sentences searched again alone (module docstring).
  """

  def __init__(self, model_dir, device="cpu", compute_type="default", intra_threads=0,
               beam_size=None, alpha=None, extra_length=None, max_decode_length=None,
               patience=None, batch_size=32, length_penalty_kind=None):
    import ctranslate2  # pylint: disable=import-outside-toplevel
    self.model_dir = model_dir
    with open(os.path.join(model_dir, DECODING_FILE)) as f:
      self.settings = {"length_penalty_kind": "gnmt", **json.load(f)}
    for key, value in (("beam_size", beam_size), ("alpha", alpha),
                       ("length_penalty_kind", length_penalty_kind),
                       ("extra_length", extra_length),
                       ("max_decode_length", max_decode_length)):
      if value is not None:
        self.settings[key] = value
    self.patience = float(patience if patience is not None else DEFAULT_PATIENCE.get(
        self.settings["length_penalty_kind"], 1.0))
    self.batch_size = int(batch_size)
    self.researched = 0
    self.translator = ctranslate2.Translator(
        model_dir, device=device, compute_type=compute_type,
        intra_threads=intra_threads or os.cpu_count() or 1, inter_threads=1)
    self.source_sp, self.target_sp, self.marian_pair = load_tokenizers(model_dir)
    # The target side's pieces in id order, and the source side's (the same list where
    # CTranslate2 wrote one shared vocabulary).
    self.source_id_pieces, self.pieces = vocabularies(model_dir)
    self.piece_ids = {p: i for i, p in enumerate(self.pieces)}
    self.eos = self.pieces[EOS_PIECE_ID]
    self.pad = self.pieces[PAD_PIECE_ID]
    self.language_tokens = self.settings.get("language_tokens", {})
    self.token_pieces = frozenset(self.language_tokens.values())

  @property
  def compute_type(self):
    return self.translator.compute_type

  def limit(self, num_pieces, prefix_length=0):
    """t2t's maximum output length (EOS included) for a source of num_pieces pieces + EOS
    and a target prefix of prefix_length pieces; ValueError where a fixed limit
    (max_decode_length, the position table) cannot hold the prefix."""
    s = self.settings
    limit = num_pieces + 1 + s["extra_length"]
    caps = [(s["max_positions"], "the model's max_positions")]
    if s.get("max_decode_length"):
      limit = min(limit, s["max_decode_length"])
      caps.append((s["max_decode_length"], "max_decode_length"))
    for cap, name in caps:
      if prefix_length > cap:
        raise ValueError(f"a target prefix of {prefix_length} ids is longer than the output "
                         f"limit of {cap} ids ({name})")
    return max(1, min(max(limit, prefix_length + 1), *(cap for cap, _ in caps)))

  def _search(self, sources, max_length, prefixes=None):
    """CTranslate2's beam search: for each source (pieces, EOS added by the model), its
    hypotheses as (pieces, prefix included, with the final EOS where one ended, log
    probability of what follows the prefix)."""
    beam = int(self.settings["beam_size"])
    wanted = beam if beam == 1 else max(beam, round(beam * self.patience))
    results = self.translator.translate_batch(
        sources, target_prefix=None if prefixes is None else [p or None for p in prefixes],
        beam_size=beam, patience=wanted / beam, num_hypotheses=wanted,
        length_penalty=0.0, return_scores=True, return_end_token=True,
        max_input_length=0, max_decoding_length=max_length, min_decoding_length=0,
        max_batch_size=self.batch_size)
    return [list(zip(r.hypotheses, r.scores)) for r in results]

  def _prefix_log_probs(self, sources, prefixes):
    """The log prob of each target prefix given its source (0.0 for none), by
    CTranslate2's score_batch (which scores the EOS it appends too: left out)."""
    out = [0.0] * len(sources)
    rows = [i for i, p in enumerate(prefixes) if p]
    if rows:
      results = self.translator.score_batch([sources[i] for i in rows],
                                            [prefixes[i] for i in rows],
                                            max_batch_size=self.batch_size)
      for i, result in zip(rows, results):
        out[i] = float(sum(result.log_probs[:-1]))
    return out

  def _rank(self, hypotheses, limit, prefix_log_prob=0.0):
    """t2t's n-best of CTranslate2's hypotheses: [(pieces without EOS, score)], best first
    (`prefix_log_prob` added to each: CTranslate2 leaves the prefix out of its scores)."""
    alpha, beam = float(self.settings["alpha"]), int(self.settings["beam_size"])
    kind = self.settings["length_penalty_kind"]
    hypotheses = [h for h in hypotheses if self.pad not in h[0]] or hypotheses
    hypotheses = [(p, s + prefix_log_prob) for p, s in hypotheses]
    finished = [(p, s) for p, s in hypotheses if p and p[-1] == self.eos]
    if finished:
      ranked = [(p[:-1], s / length_penalty(len(p), alpha, kind)) for p, s in finished]
    else:
      ranked = [(p, s / length_penalty(limit, alpha, kind)) for p, s in hypotheses]
    ranked.sort(key=lambda h: -h[1])
    return ranked[:beam]

  def translate_pieces(self, sources, prefixes=None):
    """n-best lists [(pieces, score)] for lists of source pieces (no EOS), in input order;
    `prefixes`: target pieces each output starts with ([]: none).

    Sources longer than max_input_length - 1 pieces are cut there (the EOS makes the
    limit), as the SavedModel export does.
    """
    keep = int(self.settings["max_input_length"]) - 1
    sources = [list(s)[:keep] for s in sources]
    if not sources:
      return []
    prefixes = None if prefixes is None else [list(p) for p in prefixes]
    given = prefixes or [[]] * len(sources)
    limits = [self.limit(len(s), len(p)) for s, p in zip(sources, given)]
    found = self._search(sources, max(limits), prefixes)
    prefix_log_probs = self._prefix_log_probs(sources, given)
    out = []
    for source, prefix, hyps, limit, lp in zip(sources, given, found, limits,
                                                prefix_log_probs):
      if any(len(p) > limit for p, _ in hyps):
        hyps = self._search([source], limit, None if prefixes is None else [prefix])[0]
        self.researched += 1
      out.append(self._rank(hyps, limit, lp))
    return out

  def search_ids(self, batch, prefix=None):
    """t2t-decoder's search function on this model (`decoding.translate.translate_ids`).

    batch: int [rows, width] source ids, EOS-terminated and 0-padded (rows may
    repeat: each distinct one is translated once); prefix: optional int [rows, P]
    target prefixes, 0-padded. Returns (ids int32 [rows, beam, length], each
    hypothesis's ids then EOS, 0-padded; scores float32 [rows, beam], -1e7 in empty slots).
    """
    import numpy as np  # pylint: disable=import-outside-toplevel
    rows = []
    prefix_rows = (np.zeros([len(batch), 0], np.int32) if prefix is None
                   else np.asarray(prefix)).tolist()
    for row, prefix_row in zip(np.asarray(batch).tolist(), prefix_rows):
      end = row.index(EOS_PIECE_ID) if EOS_PIECE_ID in row else len(row)
      rows.append((tuple(i for i in row[:end] if i != PAD_PIECE_ID),
                   tuple(i for i in prefix_row if i != PAD_PIECE_ID)))
    distinct = list(dict.fromkeys(rows))
    found = dict(zip(distinct, self.translate_pieces(
        [[self.source_id_pieces[i] for i in r] for r, _ in distinct],
        None if prefix is None else [[self.pieces[i] for i in p] for _, p in distinct])))
    beam = int(self.settings["beam_size"])
    nbest = [[[self.piece_ids[p] for p in pieces] + [EOS_PIECE_ID]
              for pieces, _ in found[r]] for r in rows]
    length = max(len(h) for hyps in nbest for h in hyps)
    ids = np.zeros([len(rows), beam, length], np.int32)
    scores = np.full([len(rows), beam], -1e7, np.float32)
    for i, (r, hyps) in enumerate(zip(rows, nbest)):
      for k, (h, (_, score)) in enumerate(zip(hyps, found[r])):
        ids[i, k, :len(h)] = h
        scores[i, k] = score
    return ids, scores

  def source_pieces(self, sentences):
    """[[piece]] of each source sentence (`source_pieces`)."""
    return source_pieces(self.source_sp, sentences, self.marian_pair)

  def target_text(self, pieces):
    """Output pieces -> text (`target_text`), a language-token model's tokens left out."""
    return target_text(self.target_sp, [p for p in pieces if p not in self.token_pieces],
                       self.marian_pair)

  def translate(self, sentences, nbest=False, prefixes=None, target_language=None,
                source_language=None):
    """[(translation, score)] per sentence, or with nbest [[(translation, score), ...]];
    `prefixes`: target text each translation starts with ("": none). A language-token
    model (M2M-100, NLLB: t2t_decoding.json's language_tokens) takes both languages (its
    codes or tokens): source_language's token leads each input, target_language's is the
    forced first output piece, as t2t-decoder --source_language --target_language;
    ValueError without them or for a language the model does not know. A folding run's
    inputs are folded and their capitals restored on the outputs (module docstring)."""
    given = list(sentences)
    fold = bool(self.settings.get("fold_first_letter"))
    sentences = [fold_first_letter(s) for s in given] if fold else given
    if self.language_tokens:
      if prefixes is not None:
        raise ValueError("a language-token model's prefix is its target language's token: "
                         "give target_language, not prefixes")
      pieces, prefix_pieces = framed_pieces(self.source_sp, sentences, self.language_tokens,
                                            source_language, target_language)
    elif target_language is not None or source_language is not None:
      raise ValueError(f"{self.model_dir} is not a language-token model: it takes no "
                       "source_language or target_language")
    else:
      pieces = self.source_pieces(sentences)
      prefix_pieces = None if prefixes is None else [
          self.target_sp.encode(p, out_type=str) if p else [] for p in prefixes]
    results = [[(self.target_text(p), s) for p, s in hyps]
               for hyps in self.translate_pieces(pieces, prefix_pieces)]
    if fold:
      results = [[(restore_first_letter(source, t), s) for t, s in hyps]
                 for source, hyps in zip(given, results)]
    return results if nbest else [hyps[0] for hyps in results]

def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("model_dir")
  parser.add_argument("sentences", nargs="*", help="default: the lines of stdin")
  parser.add_argument("--device", default="cpu")
  parser.add_argument("--compute_type", default="default")
  parser.add_argument("--intra_threads", type=int, default=0)
  parser.add_argument("--beam_size", type=int)
  parser.add_argument("--alpha", type=float)
  parser.add_argument("--length_penalty_kind", choices=("gnmt", "length"),
                      help="gnmt: ((5 + length) / 6) ** alpha; length: length ** alpha")
  parser.add_argument("--extra_length", type=int)
  parser.add_argument("--max_decode_length", type=int, help="a cap on every output's length")
  parser.add_argument("--batch_size", type=int, default=32)
  parser.add_argument("--patience", type=float,
                      help="beam_size * patience hypotheses are ranked (default: 1 with GNMT's "
                      "length penalty, 4 with length ** alpha; docs/ctranslate2.md)")
  parser.add_argument("--nbest", action="store_true", help="every beam, a blank line between inputs")
  parser.add_argument("--prefix_file", help="target prefixes, one per input line ('': none)")
  parser.add_argument("--source_language", help="a language-token model's (M2M-100, NLLB) "
                      "input language, e.g. en or eng_Latn")
  parser.add_argument("--target_language", help="a language-token model's output language")
  args = parser.parse_args(argv)
  translator = Ct2Translator(args.model_dir, args.device, args.compute_type, args.intra_threads,
                             args.beam_size, args.alpha, args.extra_length,
                             args.max_decode_length,
                             patience=args.patience, batch_size=args.batch_size,
                             length_penalty_kind=args.length_penalty_kind)
  sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
  prefixes = None
  if args.prefix_file:
    with open(args.prefix_file, encoding="utf-8") as f:
      prefixes = [line.rstrip("\n") for line in f]
    if len(prefixes) != len(sentences):
      parser.error(f"{len(sentences)} inputs but {len(prefixes)} lines in {args.prefix_file}")
  try:
    results = translator.translate(sentences, nbest=True, prefixes=prefixes,
                                   target_language=args.target_language,
                                   source_language=args.source_language)
  except ValueError as e:
    parser.error(str(e))
  print_results(results, args.nbest)


def print_results(results, nbest):
  """One "score<TAB>translation" line per input (its best), or with `nbest` every beam and
  a blank line after each input (litert_translate.py's output too)."""
  for hyps in results:
    for text, score in (hyps if nbest else hyps[:1]):
      print(f"{score:.4f}\t{text}")
    if nbest:
      print()


if __name__ == "__main__":
  main()
