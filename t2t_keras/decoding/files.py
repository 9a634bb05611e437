"""Translating files, problem splits and stdin, with BLEU: the text around `translate`.

    settings = parse_decode_hparams("beam_size=4,alpha=0.6")   # decoding/settings.py
    files.decode_file(model, vocab, files.InputFiles("newstest.en", "newstest.de"),
                      settings, files.Outputs("newstest.de.decoded"))
    files.decode_split(model, vocab, files.Split("translate_ende_numbers", "test", "data"),
                       settings)
    files.translate_and_score(model, vocab, files.Lines(sources, references), settings)
    files.decode_interactive(model, vocab, settings)

What is read (`InputFiles`, `Split`, `Lines`) and what is written (`Outputs`) travel as
one object each; the settings (a `DecodeSettings`) as the third.

Outputs are written under a temporary name and renamed when complete.
"""

import dataclasses
import json
import sys
import time
from typing import Optional, Sequence

from t2t_keras import errors, fileio
from t2t_keras.data import languages as languages_lib
from t2t_keras.data import vocabulary
from t2t_keras.decoding.spec import DecodingSpec
from t2t_keras.decoding.translate import encode_sources, translate_lines
from t2t_keras.decoding.settings import describe_search, parse_decode_hparams
from t2t_keras.errors import InputError


@dataclasses.dataclass(frozen=True)
class Lines:
  """A decoding's text, line-aligned: the sources, and optionally their references (for
  BLEU), target prefixes ("" for none: each output starts with its line's) and
  terminology constraints (a list of target phrases per line, each output must hold)."""
  sources: Sequence[str]
  references: Optional[Sequence[str]] = None
  prefixes: Optional[Sequence[str]] = None
  constraints: Optional[Sequence[Sequence[str]]] = None

  def head(self, n):
    """The first n lines of each."""
    return Lines(*(None if x is None else x[:n]
                   for x in (getattr(self, f.name) for f in dataclasses.fields(self))))


@dataclasses.dataclass(frozen=True)
class InputFiles:
  """The files `decode_file` reads, line-aligned with `source`: reference (BLEU),
  prefix (target prefixes, an empty line: none) and constraints (JSON lines of target
  phrases, `[]` or an empty line: none); target_language: a multilingual model's output
  language for every line (`tag_sources`), else each line starts with its tag."""
  source: str
  reference: Optional[str] = None
  prefix: Optional[str] = None
  constraints: Optional[str] = None
  target_language: Optional[str] = None
  source_language: Optional[str] = None

  def read(self, vocab):
    """Their `Lines`, framed for `vocab` (`frame_for_model`); InputError naming both
    files where a file's line count differs from the source's."""
    sources = read_lines(self.source)
    aligned = []
    for path, reader, what in ((self.reference, read_lines, ""),
                               (self.prefix, read_lines, "the prefix file "),
                               (self.constraints, read_constraints, "the constraints file ")):
      lines = reader(path) if path else None
      if lines is not None and len(lines) != len(sources):
        raise InputError(f"{self.source} has {len(sources)} lines but {what}{path} has "
                         f"{len(lines)}")
      aligned.append(lines)
    sources, aligned[1] = frame_for_model(vocab, sources, aligned[1], aligned[2],
                                          self.target_language, self.source_language,
                                          self.source)
    return Lines(sources, *aligned)


def frame_for_model(vocab, sources, prefixes=None, constraints=None, target_language=None,
                    source_language=None, name="input"):
  """(sources, prefixes) as the model of `vocab` reads them: a multilingual model's
  sources tagged (`tag_sources`); a language-token model's (M2M-100's) sources led by
  the source language's token and prefixes by the target language's
  (`languages.frame_with_tokens`); other models' unchanged. InputError for a language
  the model has no use for, and for terminology constraints on a language-token model.
  name: where the lines come from, for the errors (a file, "stdin", "lines")."""
  tokens = languages_lib.language_tokens(vocab)
  if not tokens:
    if source_language is not None:
      raise InputError("a source language is for models whose vocabulary has language "
                       "tokens (M2M-100's); this one reads any source")
    return tag_sources(languages_lib.languages_of(vocab), sources, target_language,
                       name), prefixes
  if constraints is not None:
    raise InputError("terminology constraints on a model with language tokens "
                     "(M2M-100's) are not supported yet")
  return languages_lib.frame_with_tokens(sources, prefixes, source_language,
                                         target_language, tokens, name)


@dataclasses.dataclass(frozen=True)
class Split:
  """A problem's split (a registry name or a Problem): its raw text from the problem's
  generator where it can produce it (tmp_dir for downloaded ones), else data_dir's
  TFRecords (`split_pairs`)."""
  problem: object
  name: str = "test"
  data_dir: Optional[str] = None
  tmp_dir: Optional[str] = None


@dataclasses.dataclass(frozen=True)
class Outputs:
  """Where a decoding goes beside its summary: path (the translations; none: not
  written), attention_plot_dir (heatmaps, settings.output.max_attention_plots of
  them), progress (a progress bar on stderr)."""
  path: Optional[str] = None
  attention_plot_dir: Optional[str] = None
  progress: bool = True


def _format(hyps, return_beams):
  if not return_beams:
    return hyps[0].text
  return "\t".join(f"{h.text}\t{h.score:.4f}" for h in hyps)


def write_lines(path, lines):
  """Writes one line per item (newlines inside an item become spaces), under a temporary
  name first; any fileio path."""
  fileio.makedirs(fileio.dirname(fileio.abspath(path)))
  with fileio.atomic_open(path, "w") as f:
    for line in lines:
      f.write(line.replace("\n", " ") + "\n")


def _write_translations(path, lines):
  """`write_lines`; InputError that says what is lost where the file system refuses (the
  directory turned read-only while decoding: `check_writable` passed at the start)."""
  try:
    write_lines(path, lines)
  except OSError as e:
    if e.errno not in errors.DENIED:
      raise
    raise InputError(f"{path} is not writable ({e.strerror} on {e.filename}): the "
                     f"{len(lines)} translations are not written. Make its directory "
                     "writable (or choose another path) and run the same command again") from e


def read_lines(path):
  """Lines of a UTF-8 text file, plain or .gz."""
  from t2t_keras.metrics.bleu import read_lines  # pylint: disable=import-outside-toplevel
  return read_lines(path)


def translate_and_score(model, vocab, lines, settings, outputs=Outputs(), search_fn=None,
                        hooks=None, log=print):
  """Translates `Lines` with `settings` (a `DecodeSettings`); writes, scores and plots as
  `outputs` and the settings' output and evaluation groups ask. Returns a summary dict.

  With prefixes, `search_fn` must take them (`translate.translate_lines`); lines whose
  outputs cannot hold all their constraints are logged by number and listed in the
  summary's "unmet". Lines longer than settings.batching.max_input_size are cut
  (`translate.cut_sources`), logged by number and listed in "truncated".

  The dict holds "translations" (best per line), "nbest", "seconds",
  "sentences_per_second", "output_path" and, with references, "bleu" (a
  `metrics.bleu.bleu_report`). `hooks`: a problem's (`DecodingSpec.hooks`): each
  source goes through its `preprocess` before the model reads it (a folding problem's
  case fold), every hypothesis through its `postprocess(source, output)` (the case
  restored, parsing's trees built); None: neither. `search_fn`
  (`DecodingSpec.search_fn`'s, e.g. with the problem's constraint) defaults to one built
  from settings.search.
  """
  output = settings.output
  if output.num_samples >= 0:  # the first num_samples lines, and what goes with them
    lines = lines.head(output.num_samples)
  sources, references, output_path = lines.sources, lines.references, outputs.path
  read = sources if hooks is None else [hooks.preprocess(s) for s in sources]  # the model's
  start = time.time()
  nbest = translate_lines(model, vocab, read, settings, search_fn,
                          progress=outputs.progress, prefixes=lines.prefixes,
                          constraints=lines.constraints)
  seconds = time.time() - start
  unmet, truncated = _report_cut_and_unmet(nbest, len(sources), settings, log)
  if hooks is not None:
    nbest = [[h._replace(text=hooks.postprocess(src, h.text)) for h in hyps]
             for src, hyps in zip(sources, nbest)]
  translations = [h[0].text for h in nbest]
  summary = {"translations": translations, "nbest": nbest, "seconds": seconds,
             "sentences_per_second": len(sources) / max(seconds, 1e-9),
             "output_path": output_path, "bleu": None, "unmet": unmet,
             "truncated": truncated}
  log(f"decoded {len(sources)} sentences in {seconds:.1f} s "
      f"({summary['sentences_per_second']:.1f} sentences/s, "
      f"{describe_search(settings.search)})")
  if output_path:
    _write_translations(output_path, [_format(h, output.return_beams) for h in nbest])
    log(f"wrote {output_path}")
  if output.return_alignment:
    summary["alignments"] = _write_alignments(model, vocab, read, nbest, output,
                                              output_path, log)
  if references is not None:
    from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
    summary["bleu"] = bleu.bleu_report(translations, references,
                                       lang=settings.evaluation.bleu_lang)
    log(bleu.format_report(summary["bleu"]))
  if outputs.attention_plot_dir:
    from t2t_keras.decoding import attention_maps  # pylint: disable=import-outside-toplevel
    limit = output.max_attention_plots or len(sources)
    paths = attention_maps.plot_translations(
        model, vocab, encode_sources(vocab, read[:limit]),
        [h[0].ids for h in nbest[:limit]], outputs.attention_plot_dir)
    log(f"wrote {len(paths)} attention plots to {outputs.attention_plot_dir}")
  return summary


def _report_cut_and_unmet(nbest, count, settings, log):
  """Logs the lines cut to max_input_size and those whose constraints no output holds
  (`translate.NBest`'s truncated and unmet); returns them, (unmet, truncated) lists."""
  unmet, truncated = list(nbest.unmet), list(nbest.truncated)
  if truncated:
    log(f"{len(truncated)} of {count} lines are longer than "
        f"{settings.batching.max_input_size} pieces (EOS included) and were cut to them, as "
        f"the run's SavedModel cuts them (decode hparam max_input_size): "
        f"{_line_numbers(truncated)}")
  if unmet:
    log(f"terminology constraints not met for {len(unmet)} of {count} lines (their "
        f"best outputs are written anyway): {_line_numbers(unmet)}")
  return unmet, truncated


def _line_numbers(indices, most=20):
  """"lines 3, 7, 9" of 0-based indices (the first `most`, then how many more)."""
  shown = ", ".join(str(i + 1) for i in indices[:most])
  more = f" and {len(indices) - most} more" if len(indices) > most else ""
  return f"line{'s' if len(indices) > 1 else ''} {shown}{more}"


def _write_alignments(model, vocab, sources, nbest, output, output_path, log):
  """Pharaoh word alignments of each best output (written beside output_path)."""
  from t2t_keras.decoding import alignment  # pylint: disable=import-outside-toplevel
  alignments = alignment.alignments(model, vocab, encode_sources(vocab, sources),
                                    [h[0].ids for h in nbest], output.alignment_layer)
  if output_path:
    write_lines(output_path + ".align", alignments)
    log(f"wrote {output_path}.align (Pharaoh word alignments, decoder layer "
        f"{output.alignment_layer})")
  return alignments


def decode_file(model, vocab, inputs, settings=None, outputs=None, search_fn=None,
                hooks=None, log=print):
  """Translates the `InputFiles` line by line (see `translate_and_score`, also for `hooks`).
  settings: a `DecodeSettings` (default `parse_decode_hparams()`'s); outputs: `Outputs`
  (default: written to "<source>.beam<k>.alpha<a>.decodes", t2t's name, with ".lp_length"
  before ".decodes" for length_penalty_kind=length)."""
  settings = settings or parse_decode_hparams()
  if outputs is None or outputs.path is None:
    s = settings.search
    kind = ".lp_length" if s.length_penalty_kind == "length" else ""
    path = f"{inputs.source}.beam{s.beam_size}.alpha{s.alpha}{kind}.decodes"
    outputs = dataclasses.replace(outputs or Outputs(), path=path)
  return translate_and_score(model, vocab, inputs.read(vocab), settings, outputs, search_fn,
                             hooks, log)


def tag_sources(known, sources, target_language=None, name="input"):
  """`sources` as a multilingual model whose vocabulary holds the tags of `known`
  (`languages_of`) reads them: with `target_language`'s tag in front of each line
  (`data/languages.py`), or each line's own tag checked; unchanged for a model of one
  target language (`known` empty), which refuses a `target_language` (InputError)."""
  if not known and target_language is None:
    return sources
  return languages_lib.tag_lines(sources, target_language, known, name)


def read_constraints(path):
  """A JSON-lines file of terminology constraints -> a list of phrase lists per line; an
  empty line is none. InputError naming the file and line of one that is not a JSON list
  of non-empty strings."""
  out = []
  for number, line in enumerate(read_lines(path), start=1):
    try:
      phrases = json.loads(line) if line.strip() else []
    except json.JSONDecodeError as e:
      raise InputError(f"{path}:{number}: not JSON ({e.msg}); a constraints line is a JSON "
                       f"list of target phrases, e.g. [\"Hund\", \"roter Ball\"]") from None
    if not isinstance(phrases, list) or not all(isinstance(p, str) and p.strip()
                                                for p in phrases):
      raise InputError(f"{path}:{number}: a constraints line must be a JSON list of "
                       f"non-empty strings, got {line.strip()[:80]}")
    out.append(phrases)
  return out


def split_pairs(problem, data_dir=None, split="test", tmp_dir=None, vocab=None):
  """(sources, references) text of a problem's split.

  Raw text from the problem's generator when it can produce it (always for
  generated problems; with tmp_dir for downloaded ones), else the ids in
  data_dir's TFRecords detokenized with `vocab` (references then carry
  sentencepiece's normalization).
  """
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  if isinstance(problem, str):
    problem = registry.problem(problem)
  try:
    pairs = [(s["inputs"].strip(), s["targets"].strip())
             for s in problem.generate_samples(split, tmp_dir)]
    pairs = [p for p in pairs if p[0] and p[1]]
    if pairs:
      return [p[0] for p in pairs], [p[1] for p in pairs]
  except (FileNotFoundError, OSError, ValueError, NotImplementedError):
    pass
  if data_dir is None or vocab is None:
    raise FileNotFoundError(f"no raw {split} data for {problem.name}: pass tmp_dir, or "
                            f"data_dir and vocab to read its TFRecords")
  return record_pairs(problem, data_dir, split, vocab)


def record_pairs(problem, data_dir, split, vocab):
  """(sources, references) text of a split's TFRecords in data_dir, detokenized with vocab."""
  sources, references = [], []
  for ex in problem.dataset(data_dir, split).as_numpy_iterator():
    sources.append(vocabulary.source_side(vocab).decode(ex["inputs"]))
    references.append(vocab.decode(ex["targets"]))
  return sources, references


def decode_split(model, vocab, split, settings=None, outputs=Outputs(), search_fn=None,
                 hooks=None, log=print):
  """Translates a problem's `Split` and prints BLEU against its references (a summary dict;
  settings and hooks as `decode_file`'s)."""
  settings = settings or parse_decode_hparams()
  sources, references = split_pairs(split.problem, split.data_dir, split.name, split.tmp_dir,
                                    vocab)
  return translate_and_score(model, vocab, Lines(sources, references), settings, outputs,
                             search_fn, hooks, log)


def decode_interactive(model, vocab, settings, stream=None, log=print, search_fn=None,
                       target_language=None, source_language=None):
  """Reads lines from `stream` (stdin) and prints their n-best translations until EOF
  (settings: a `DecodeSettings`, or the run's `DecodingSpec`: its settings, its search
  where `search_fn` is None, its problem's hooks around each line as `translate_and_score`
  applies them; `search_fn` as in `translate_and_score`; a multilingual model's lines take
  `target_language`'s tag, or carry their own: a line without one is answered with the
  error and skipped)."""
  stream = stream or sys.stdin
  spec = settings if isinstance(settings, DecodingSpec) else DecodingSpec(None, settings)
  settings = spec.settings.replace(batch_size=1)
  hooks = spec.hooks
  # Languages the model has no use for are refused once, before the first line.
  frame_for_model(vocab, [], None, None, target_language, source_language, "stdin")
  spec = dataclasses.replace(spec, settings=settings)
  search_fn = search_fn or spec.search_fn(model, vocab)
  # A language-token model's (M2M-100's) lines: the target language's token is a forced
  # prefix, through one search that takes it, built at the first such line.
  prefix_search_fn = None
  for line in stream:
    line = line.strip()
    if not line:
      continue
    try:
      (line,), prefixes = frame_for_model(vocab, [line], None, None, target_language,
                                          source_language, "stdin")
    except InputError as e:
      log(f"error: {e}")
      continue
    if prefixes is not None and prefix_search_fn is None:
      prefix_search_fn = spec.search_fn(model, vocab, takes="prefix")
    nbest = translate_lines(model, vocab, [hooks.preprocess(line)], settings,
                            search_fn if prefixes is None else prefix_search_fn,
                            prefixes=prefixes)
    if nbest.truncated:
      log(f"(the line is longer than {settings.batching.max_input_size} pieces and was cut "
          "to them: decode hparam max_input_size)")
    for k, hyp in enumerate(nbest[0]):
      log(f"{k}\t{hyp.score:.4f}\t{hooks.postprocess(line, hyp.text)}")
      if not settings.output.return_beams:
        break
