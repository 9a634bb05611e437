"""BLEU on detokenized text: sacreBLEU, and the tokenized variants papers report.

Three numbers, never mixed up:

  * `sacrebleu_scores` - sacreBLEU corpus BLEU (cased, 13a tokenization) and chrF
    on detokenized text, with their signatures. Comparable across papers that
    print a signature; the number to report by default.
  * `tokenized_bleu` - the number "Attention Is All You Need" and t2t report on
    WMT en-de: Moses `replace-unicode-punctuation` + `tokenizer.perl`, then
    compound splitting as in t2t's `get_ende_bleu.sh`
    (s{(\\S)-(\\S)}{$1 ##AT##-##AT## $2}g), then multi-bleu-style BLEU on those
    tokens (sacreBLEU with tokenize="none"). Labelled "tokenized BLEU".
  * `multi30k_tok_bleu` - the Multi30k convention: lowercase, Moses punctuation
    normalisation, Moses tokenization with XML escaping, BLEU on tokens.
    `multi30k_tokens_bleu` is the same figure for hypotheses already tokenized that
    way (translate_ende_multi30k_tok's outputs): their tokens scored as they are, since
    tokenizing again is not idempotent (it escapes the escapes: &apos; -> &amp; apos ;).

BLEU is only ever computed on text: t2t's `approx_bleu` on subword ids was
often mistaken for BLEU, and nothing here offers it.
"""

import functools
import gzip
import re

import sacrebleu
from sacrebleu.metrics import BLEU, CHRF
from sacremoses import MosesPunctNormalizer, MosesTokenizer

from t2t_keras import fileio
from t2t_keras.errors import InputError

_COMPOUND = re.compile(r"(\S)-(\S)")


def _check(hyps, refs):
  hyps, refs = list(hyps), list(refs)
  if len(hyps) != len(refs):
    raise ValueError(f"{len(hyps)} translations but {len(refs)} references")
  return hyps, refs


def sacrebleu_scores(hyps, refs):
  """sacreBLEU corpus BLEU (13a, cased) and chrF on detokenized text.

  Returns {"bleu": float, "bleu_signature": str, "bleu_text": str,
           "chrf": float, "chrf_signature": str}.
  """
  hyps, refs = _check(hyps, refs)
  bleu, chrf = BLEU(), CHRF()
  b = bleu.corpus_score(hyps, [refs])
  c = chrf.corpus_score(hyps, [refs])
  return {"bleu": b.score, "bleu_signature": str(bleu.get_signature()),
          "bleu_text": str(b), "chrf": c.score, "chrf_signature": str(chrf.get_signature())}


@functools.lru_cache(maxsize=8)
def _moses(lang):
  return MosesTokenizer(lang=lang), MosesPunctNormalizer(lang=lang)


def split_compounds(tokenized):
  """t2t's get_ende_bleu.sh: "rich-text" -> "rich ##AT##-##AT## text" (perl's s///g semantics)."""
  return _COMPOUND.sub(r"\1 ##AT##-##AT## \2", tokenized)


def tokenize_for_bleu(text, lang="de"):
  """Moses replace-unicode-punctuation + tokenizer.perl (escaping as perl), then compound splitting."""
  tokenizer, normalizer = _moses(lang)
  text = normalizer.replace_unicode_punct(text)
  return split_compounds(tokenizer.tokenize(text, return_str=True, escape=True))


def token_bleu(hyp_tokens, ref_tokens):
  """BLEU on already tokenized lines (multi-bleu.perl style: split on spaces), a sacrebleu BLEUScore."""
  hyp_tokens, ref_tokens = _check(hyp_tokens, ref_tokens)
  return sacrebleu.corpus_bleu(hyp_tokens, [ref_tokens], tokenize="none", force=True)


def tokenized_bleu(hyps, refs, lang="de"):
  """The paper's (t2t get_ende_bleu.sh) tokenized BLEU with compound splitting, as a float."""
  hyps, refs = _check(hyps, refs)
  return token_bleu([tokenize_for_bleu(h, lang) for h in hyps],
                    [tokenize_for_bleu(r, lang) for r in refs]).score


def multi30k_tokenize(text, lang="de"):
  """Lowercase, Moses punctuation normalisation, Moses tokenization with XML escaping."""
  tokenizer, normalizer = _moses(lang)
  return tokenizer.tokenize(normalizer.normalize(text.lower()), return_str=True, escape=True)


def multi30k_tok_bleu(hyps, refs, lang="de"):
  """Lowercased tokenized BLEU of the Multi30k papers, as a float."""
  hyps, refs = _check(hyps, refs)
  return token_bleu([multi30k_tokenize(h, lang) for h in hyps],
                    [multi30k_tokenize(r, lang) for r in refs]).score


def multi30k_tok_bleu_vs_tokenized(hyps, tokenized_refs, lang="de"):
  """Lowercased tokenized BLEU against references that are already tokenized.

  `tokenized_refs` are lines of Multi30k's `tok/*.lc.norm.tok.*` files
  (lowercased, punctuation-normalised, Moses-tokenized with XML escaping);
  the hypotheses are tokenized the same way by `multi30k_tokenize`.
  """
  hyps, tokenized_refs = _check(hyps, tokenized_refs)
  return token_bleu([multi30k_tokenize(h, lang) for h in hyps], tokenized_refs).score


def multi30k_tokens_bleu(hyp_tokens, tokenized_refs):
  """Lowercased BLEU on lines already tokenized the Multi30k way, tokens as they are.

  multi-bleu.perl -lc's figure: both sides lowercased and split on whitespace, nothing
  else (XML escapes such as &apos; and &quot; stay tokens). For the outputs of a model
  trained on `tok/*.lc.norm.tok.*` text against those reference files. A sacrebleu
  BLEUScore (`.score`, and its precisions in `str()`).
  """
  hyp_tokens, tokenized_refs = _check(hyp_tokens, tokenized_refs)
  return token_bleu([" ".join(h.lower().split()) for h in hyp_tokens],
                    [" ".join(r.lower().split()) for r in tokenized_refs])


def bleu_report(hyps, refs, lang="de"):
  """Every BLEU variant of a corpus: sacreBLEU + chrF, tokenized, Multi30k-style; a dict."""
  hyps, refs = _check(hyps, refs)
  report = sacrebleu_scores(hyps, refs)
  char = BLEU(tokenize="char")
  report["char_bleu"] = char.corpus_score(hyps, [refs]).score
  report["char_bleu_signature"] = str(char.get_signature())
  report["tokenized_bleu"] = tokenized_bleu(hyps, refs, lang)
  report["multi30k_tok_bleu"] = multi30k_tok_bleu(hyps, refs, lang)
  report["exact_match"] = 100.0 * sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / max(
      1, len(hyps))
  report["sentences"] = len(hyps)
  return report


def format_report(report):
  """Human-readable lines of a `bleu_report`."""
  return "\n".join([
      f"sacreBLEU (detokenized): {report['bleu']:.2f}  [{report['bleu_signature']}]",
      f"  {report['bleu_text']}",
      f"chrF: {report['chrf']:.2f}  [{report['chrf_signature']}]",
      f"character-level sacreBLEU (for one-word outputs such as German number compounds, "
      f"where word 4-grams do not exist): {report['char_bleu']:.2f}  "
      f"[{report['char_bleu_signature']}]",
      f"tokenized BLEU (Moses + ##AT## compound splitting, paper-comparable on WMT en-de): "
      f"{report['tokenized_bleu']:.2f}",
      f"lowercased tokenized BLEU (Multi30k convention): {report['multi30k_tok_bleu']:.2f}",
      f"exact match: {report['exact_match']:.1f}% of {report['sentences']} sentences",
  ])


def read_lines(path):
  """Lines of a UTF-8 text file (plain or .gz) without their newlines."""
  if not fileio.isfile(path):
    raise FileNotFoundError(f"{path}: no such file")
  lines = []
  with fileio.open(path, "rb") as raw_file, (
      gzip.GzipFile(fileobj=raw_file, mode="rb") if path.endswith(".gz") else raw_file) as f:
    for lineno, raw in enumerate(f, start=1):
      try:
        lines.append(raw.decode("utf-8").rstrip("\r\n"))
      except UnicodeDecodeError as e:
        raise InputError(f"{path}:{lineno}: invalid UTF-8 ({e.reason} at byte {e.start})") \
            from None
  return lines
