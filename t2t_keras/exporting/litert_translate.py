"""Translate with a LiteRT model written by t2t-exporter --format=litert.

    python litert_translate.py MODEL_DIR "a sentence" ["another" ...]
    python litert_translate.py MODEL_DIR < input.txt          # one line per input line
    python litert_translate.py --target_language=fr MODEL_DIR < in   # a multilingual model
    python litert_translate.py --source_language=en --target_language=de NLLB_DIR < in

    translator = LiteRTTranslator("runs/tiny/litert")
    translator.translate(["a sentence"])        # -> [(translation, score)]

Prints one "score<TAB>translation" line per input, as translate_saved_model.py and
ct2_translate.py do. The search is inside the model (its beam, alpha and length limits are
the run's, fixed at conversion: MODEL_DIR/litert_info.json); this file tokenizes, batches
(longest first, --batch_size rows, default 4) and detokenizes. An input longer than the model's input
limit is cut to it and said on stderr, as the SavedModel cuts it and reports `truncated`.

A run that folds the first letter (litert_info.json's fold_first_letter) has each input's
first letter folded before it is tokenized and its capital restored on the outputs, as
t2t-decoder does (ct2_translate.py's copy of t2t_keras/data/casing.py's rule).

Needs ai-edge-litert, sentencepiece and numpy only; beside this file it imports
ct2_translate.py's tokenizer and case helpers (which need no ctranslate2 for them).
"""

import argparse
import json
import os
import sys

try:  # in the package, or a copy of both files side by side
  from t2t_keras.exporting.ct2_translate import (fold_first_letter, framed_pieces,
                                                  load_tokenizers, print_results,
                                                  restore_first_letter, source_pieces,
                                                  target_text)
except ImportError:
  sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
  from ct2_translate import (fold_first_letter, framed_pieces, load_tokenizers, print_results,
                             restore_first_letter, source_pieces, target_text)

MODEL_FILE, INFO_FILE, VOCABULARY_FILE = "model.tflite", "litert_info.json", "vocabulary.json"
SOURCE_VOCABULARY_FILE = "source_vocabulary.json"
UNK_ID = 2  # t2t_keras.ids' (not imported: this file stands alone)


class LiteRTTranslator:
  """A LiteRT model directory: its interpreter, tokenizers and vocabulary.

  Args:
    model_dir: the directory t2t-exporter --format=litert wrote.
    num_threads: the interpreter's threads (None: LiteRT's default).
    batch_size: sentences per call of the model. 4: LiteRT's beam search grows slower
      than linearly per sentence past a few rows (16 rows took 1.7x as long as four calls
      of 4; docs/notebook.md), unlike TensorFlow's.
  `truncated` counts the inputs cut to the input limit so far.
  """

  def __init__(self, model_dir, num_threads=None, batch_size=4):
    from ai_edge_litert.interpreter import Interpreter  # pylint: disable=import-outside-toplevel
    self.model_dir = model_dir
    with open(os.path.join(model_dir, INFO_FILE)) as f:
      self.info = json.load(f)
    self.interpreter = Interpreter(model_path=os.path.join(model_dir, MODEL_FILE),
                                   num_threads=num_threads)
    self.runners = {name: self.interpreter.get_signature_runner(name)
                    for name in self.info["signatures"]}
    self.source_sp = self.target_sp = None  # no sentencepiece model: ids only (search_ids)
    self.marian_pair = False
    if any(name.endswith((".model", ".spm")) for name in os.listdir(model_dir)):
      self.source_sp, self.target_sp, self.marian_pair = load_tokenizers(model_dir)
    with open(os.path.join(model_dir, VOCABULARY_FILE), encoding="utf-8") as f:
      self.pieces = json.load(f)
    self.piece_ids = {p: i for i, p in enumerate(self.pieces)}
    self.source_piece_ids = self.piece_ids  # the source side's ids, where it has its own
    if os.path.isfile(os.path.join(model_dir, SOURCE_VOCABULARY_FILE)):
      with open(os.path.join(model_dir, SOURCE_VOCABULARY_FILE), encoding="utf-8") as f:
        self.source_piece_ids = {p: i for i, p in enumerate(json.load(f))}
    self.eos, self.pad = int(self.info["eos_id"]), int(self.info["pad_id"])
    self.language_tokens = self.info.get("language_tokens", {})
    self.batch_size = max(1, int(batch_size))
    self.truncated = 0
    self._warm_up()

  def _warm_up(self):
    """One throwaway search through each signature: a new interpreter's first search with
    LiteRT's default delegate (XNNPACK) can compute wrong values (about half the first
    calls of a test model chose other outputs than its every later call, and than the
    builtin kernels; docs/notebook.md, "LiteRT's first search")."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    ids = np.full([1, 1], self.eos, np.int32)
    for name, runner in self.runners.items():
      runner(ids=ids, **({"prefix": np.zeros([1, 1], np.int32)} if name == "translate_prefix"
                         else {}))

  def search_ids(self, batch, prefix=None):
    """The model's search on source ids: batch int [rows, width] (EOS-terminated,
    0-padded), prefix optional int [rows, P] (0-padded; a language-token model's) ->
    (ids int32 [rows, beam, L], 0 after EOS; scores float32 [rows, beam]).
    t2t-decoder --engine=litert's search function."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    batch = np.asarray(batch, np.int32)
    if prefix is None:
      out = self.runners["translate"](ids=batch)
    elif "translate_prefix" not in self.runners:
      raise ValueError("this LiteRT model takes no target prefixes (only a language-token "
                       "model's has the translate_prefix signature)")
    else:
      out = self.runners["translate_prefix"](ids=batch, prefix=np.asarray(prefix, np.int32))
    ids, scores = out["ids"], out["scores"]
    if ids.ndim == 2:  # greedy
      ids, scores = ids[:, None], np.reshape(scores, [-1, 1])
    return ids, scores

  def _ids(self, pieces, piece_ids=None):
    """Pieces -> ids of the target side (or of `piece_ids`); UNK for a piece it lacks."""
    piece_ids = self.piece_ids if piece_ids is None else piece_ids
    return [piece_ids.get(p, UNK_ID) for p in pieces]

  def translate_pieces(self, sources, prefixes=None):
    """n-best lists [(pieces, score)] for lists of source pieces (no EOS), in input order;
    `prefixes`: target pieces forced first (a language-token model's target token).
    Sources over the input limit are cut to it (`truncated` counts them)."""
    import numpy as np  # pylint: disable=import-outside-toplevel
    keep = int(self.info["max_input_length"]) - 1
    sources = [self._ids(s, self.source_piece_ids) for s in sources]
    self.truncated += sum(len(s) > keep for s in sources)
    sources = [s[:keep] + [self.eos] for s in sources]
    prefixes = None if prefixes is None else [self._ids(p) for p in prefixes]
    order = sorted(range(len(sources)), key=lambda i: -len(sources[i]))
    found = [None] * len(sources)
    for start in range(0, len(order), self.batch_size):
      rows = order[start:start + self.batch_size]
      batch = np.zeros([len(rows), max(len(sources[i]) for i in rows)], np.int32)
      for r, i in enumerate(rows):
        batch[r, :len(sources[i])] = sources[i]
      prefix = None
      if prefixes is not None:
        prefix = np.zeros([len(rows), max(1, max(len(prefixes[i]) for i in rows))], np.int32)
        for r, i in enumerate(rows):
          prefix[r, :len(prefixes[i])] = prefixes[i]
      ids, scores = self.search_ids(batch, prefix)
      for r, i in enumerate(rows):
        found[i] = [(self._content(hyp), float(score)) for hyp, score in zip(ids[r], scores[r])
                    if score > -1e6]  # an empty slot scores -1e7
    return found

  def _content(self, ids):
    """Pieces before the first EOS, PAD and language tokens left out."""
    out = []
    for i in ids:
      if i == self.eos:
        break
      if i != self.pad:
        out.append(self.pieces[i])
    tokens = set(self.language_tokens.values())
    return [p for p in out if p not in tokens]

  def translate(self, sentences, nbest=False, target_language=None, source_language=None):
    """[(translation, score)] per sentence, or with nbest [[(translation, score), ...]].

    target_language: a multilingual model's output language (its `<2xx>` tag put in front
    of each input; a language-token model's token forced first, with `source_language`'s
    token in front of each input). ValueError for a language the model does not know."""
    given = list(sentences)
    fold = bool(self.info.get("fold_first_letter"))
    sentences = [fold_first_letter(s) for s in given] if fold else given
    if self.source_sp is None:
      raise ValueError(f"{self.model_dir} has no sentencepiece model (the run's vocabulary "
                       "is another kind): translate with t2t-decoder --engine=litert")
    prefixes = None
    tags = self.info.get("target_languages", [])
    if self.language_tokens:
      pieces, prefixes = framed_pieces(self.source_sp, sentences, self.language_tokens,
                                       source_language, target_language)
    else:
      if target_language is not None:
        if target_language not in tags:
          raise ValueError(f"unknown target language {target_language!r}; this model knows "
                           f"{', '.join(tags) or 'none (it is not multilingual)'}")
        sentences = [f"<2{target_language}> {s}".rstrip() for s in sentences]
      pieces = source_pieces(self.source_sp, sentences, self.marian_pair)
    results = [[(target_text(self.target_sp, p, self.marian_pair), s) for p, s in hyps]
               for hyps in self.translate_pieces(pieces, prefixes)]
    if fold:
      results = [[(restore_first_letter(source, t), s) for t, s in hyps]
                 for source, hyps in zip(given, results)]
    return results if nbest else [hyps[0] for hyps in results]


def main(argv=None):
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("model_dir")
  parser.add_argument("sentences", nargs="*", help="default: the lines of stdin")
  parser.add_argument("--num_threads", type=int, default=None)
  parser.add_argument("--batch_size", type=int, default=4)
  parser.add_argument("--target_language", help="a multilingual model's output language")
  parser.add_argument("--source_language", help="a language-token model's input language")
  parser.add_argument("--nbest", action="store_true", help="every beam, a blank line between inputs")
  args = parser.parse_args(argv)
  translator = LiteRTTranslator(args.model_dir, args.num_threads, args.batch_size)
  sentences = args.sentences or [line.rstrip("\n") for line in sys.stdin]
  try:
    results = translator.translate(sentences, nbest=True, target_language=args.target_language,
                                   source_language=args.source_language)
  except ValueError as e:
    parser.error(str(e))
  if translator.truncated:
    print(f"litert_translate: {translator.truncated} input(s) longer than the model's input "
          f"limit of {translator.info['max_input_length']} pieces (EOS included) were cut "
          "to it", file=sys.stderr)
  print_results(results, args.nbest)


if __name__ == "__main__":
  main()
