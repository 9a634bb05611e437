"""A source file translated by a teacher for sequence-level distillation, resumably.

    summary = translate_file("runs/teacher", "train.en", "distill/teacher",
                             decode_hparams="beam_size=4,alpha=0.6")
    # distill/teacher/translations.txt: the teacher's best output, a line per input line
    # distill/teacher/scores.txt: its length-normalised score (`Translator.score`'s per_piece)
    # distill/teacher/truncated.txt: 1 where the source was cut at the input limit, else 0

Kim & Rush (2016)'s sequence-level knowledge distillation: the student is trained on the
teacher's beam-search outputs in place of the references. The teacher is anything
`t2t_keras.load` takes that can score (a run, runs as an ensemble, a model from
elsewhere; not a SavedModel export). The lines go in pieces of `piece_lines`; each piece
is written durably (`progress.py`), so a killed run goes on where it stopped, and a run
whose teacher, input or decoding changed since is refused in one line (`identity.py`).
A source longer than the teacher's input limit is translated as cut (t2t's
max_input_size) but scored whole, so its score does not match its output; such lines are
marked in truncated.txt, counted, and dropped by the filter (`filtering.py`).
"""

import json
import os
import time

from t2t_keras import fileio, runs
from t2t_keras.distill import identity
from t2t_keras.distill.progress import STATE_FILE, Progress
from t2t_keras.errors import InputError

OUTPUTS = ("translations", "scores", "truncated")
_LOADED = {}  # the last teacher loaded, by its identity and decoding: a resumed call reuses it


def translate_file(teacher, input_path, work_dir, *, checkpoint_path=None, decode_hparams="",
                   target_language=None, source_language=None, piece_lines=500,
                   max_lines=None, log=print, after_piece=None):
  """Translates `input_path` (plain or .gz, a sentence a line; the first `max_lines` lines
  where given) with `teacher` into work_dir/translations.txt, scores.txt and truncated.txt.

  Each score is the teacher's log-probability of its output, summed over the output's
  pieces and EOS and divided by their number, given the whole source: a source cut at
  the input limit (its output translates the cut source) is marked 1 in truncated.txt
  and its score is not comparable; the filter drops those lines. target_language: the
  language a multilingual teacher writes (required there); source_language: a
  language-token teacher's (M2M-100's, NLLB's) source language, where the lines do not
  start with its token. piece_lines: lines per piece (at least 1); max_lines: None or at
  least 1. after_piece(pieces_done): called after each piece is recorded (tests
  interrupt it there). Returns {"lines", "lines_truncated" (those cut), "resumed_from",
  "seconds"} and the outputs' paths ("translations", "scores", "truncated"); InputError
  (one line) where work_dir was started with another teacher, input or decoding.
  """
  log = log or (lambda message: None)
  check_line_counts(piece_lines, max_lines)
  start = time.time()
  kind = "run" if runs.is_ensemble(teacher) or fileio.exists(
      fileio.join(str(teacher), runs.RUN_FILE)) else "directory"
  if kind == "run":
    checkpoint_path = ",".join(identity.resolve_checkpoints(teacher, checkpoint_path))
  key = {"teacher": identity.teacher_identity(teacher, checkpoint_path, kind),
         "input": {"digest": identity.file_digest(input_path), "max_lines": max_lines},
         "decoding": {"decode_hparams": decode_hparams, "target_language": target_language}}
  if source_language is not None:  # only where given: work directories from before match
    key["decoding"]["source_language"] = source_language
  progress = Progress.open(work_dir, OUTPUTS, key)
  if progress.lines_done or progress.complete:
    _check_unchanged(work_dir, progress.state["key"], key, input_path)
  elif progress.state["key"] != key:  # nothing done yet: this call's teacher and input
    progress.state["key"] = key
    progress.save()
  sources = _read_sources(input_path, max_lines)
  resumed_from = progress.lines_done
  if resumed_from < len(sources):
    if resumed_from:
      log(f"resuming {input_path} at line {resumed_from + 1} of {len(sources)}")
    translator = _loaded_teacher(key, teacher, checkpoint_path)
    _translate_pieces(translator, sources, progress, piece_lines, key["decoding"], log,
                      after_piece)
  paths = progress.finish()
  truncated = count_truncated(paths["truncated"])
  log(f"translated {len(sources)} lines ({len(sources) - resumed_from} now; {truncated} cut "
      f"at the input limit); wrote {paths['translations']}, {paths['scores']} and "
      f"{paths['truncated']}")
  return {"lines": len(sources), "lines_truncated": truncated, "resumed_from": resumed_from,
          **paths, "seconds": time.time() - start}


def check_line_counts(piece_lines, max_lines):
  """InputError (one line) unless piece_lines >= 1 and max_lines is None or >= 1."""
  if not isinstance(piece_lines, int) or piece_lines < 1:
    raise InputError(f"piece_lines={piece_lines!r}: expected a whole number of lines, at "
                     "least 1")
  if max_lines is not None and (not isinstance(max_lines, int) or max_lines < 1):
    raise InputError(f"max_lines={max_lines!r}: expected a whole number of lines, at least 1 "
                     "(or none: every line)")


def count_truncated(path):
  """The number of lines marked 1 in a truncated.txt."""
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  return sum(line == "1" for line in read_lines(path))


def load_teacher(teacher, checkpoint_path=None, decode_hparams="", target_language=None):
  """`t2t_keras.load(teacher)`, refused in one line where it cannot distil: a SavedModel
  export (it cannot score its outputs), a multilingual teacher without target_language."""
  import t2t_keras  # pylint: disable=import-outside-toplevel
  from t2t_keras.library.translator import Translator  # pylint: disable=import-outside-toplevel
  translator = t2t_keras.load(teacher, checkpoint_path=checkpoint_path or None,
                              decode_hparams=decode_hparams)
  if not isinstance(translator, Translator):
    raise InputError(f"teacher {teacher} is a SavedModel export, which cannot score its "
                     "translations: give the run it was exported from")
  languages = translator.target_languages
  if languages and target_language is None:
    raise InputError(f"teacher {teacher} is multilingual (it writes {', '.join(languages)}): "
                     "give the language to distil into (--target_language)")
  return translator


def _loaded_teacher(key, teacher, checkpoint_path):
  """`load_teacher`, or the teacher the last call of this process loaded where its identity
  and decoding are the same (one kept: a call resumed in the same process, a notebook's)."""
  decoding = key["decoding"]
  cache_key = json.dumps([key["teacher"]["models"], decoding], sort_keys=True)
  if cache_key not in _LOADED:
    _LOADED.clear()
    _LOADED[cache_key] = load_teacher(teacher, checkpoint_path, decoding["decode_hparams"],
                                      decoding["target_language"])
  return _LOADED[cache_key]


def _check_unchanged(work_dir, old, new, input_path):
  """InputError (one line) naming what differs between the key work_dir was started with
  and this run's."""
  what = identity.changed(old["teacher"], new["teacher"])
  if what:
    raise InputError(f"{work_dir} was started with another teacher ({old['teacher']['path']}: "
                     f"{what}): give that teacher, or start again in a new work directory")
  if old["input"] != new["input"]:
    raise InputError(f"{work_dir} was started with another input ({input_path}: "
                     f"{old['input']} -> {new['input']}): give that input, or start again "
                     "in a new work directory")
  if old["decoding"] != new["decoding"]:
    raise InputError(f"{work_dir} was started with other decoding settings "
                     f"({old['decoding']} -> {new['decoding']}): give those, or start "
                     "again in a new work directory")


def _read_sources(input_path, max_lines):
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  lines = read_lines(input_path)
  return lines if max_lines is None else lines[:max_lines]


def _translate_pieces(translator, sources, progress, piece_lines, decoding, log, after_piece):
  """Translates and scores sources[progress.lines_done:] piece by piece, each recorded;
  decoding: the key's (its languages)."""
  languages = {"target_language": decoding["target_language"],
               "source_language": decoding.get("source_language")}
  first = done = progress.lines_done
  pieces, start = 0, time.time()
  while done < len(sources):
    lines = sources[done:done + piece_lines]
    results = translator.translate(lines, **languages)
    texts = [r.text for r in results]
    scores = translator.score(lines, texts, per_piece=True, **languages)
    progress.append({"translations": texts, "scores": [f"{s:.6f}" for s in scores],
                     "truncated": ["1" if r.truncated else "0" for r in results]})
    done, pieces = done + len(lines), pieces + 1
    rate = (done - first) / max(time.time() - start, 1e-9)
    log(f"{done} of {len(sources)} lines translated ({rate:.1f} lines/s)")
    if after_piece:
      after_piece(pieces)


def finished_outputs(work_dir):
  """{"translations", "scores", "truncated"}: the paths of a finished `translate_file` in
  work_dir; InputError where it has not finished (run it again: it goes on where it
  stopped) or was written before truncated.txt was."""
  state = _state(work_dir)
  if not state.get("complete"):
    raise InputError(f"{work_dir}: the teacher's translation is not finished "
                     f"({state.get('lines_done', 0)} lines done): run the translate step "
                     "again, it goes on where it stopped")
  if any(name not in state.get("bytes", {}) for name in OUTPUTS):
    raise InputError(f"{work_dir}: the teacher's translation has no truncated.txt (an older "
                     "version wrote it): translate again in a new work directory")
  return {name: os.path.join(work_dir, f"{name}.txt") for name in OUTPUTS}


def check_sources(work_dir, sources_path):
  """The max_lines the teacher's translation in work_dir read of its input (None: all);
  InputError (one line) where `sources_path` is not that input (its SHA-256 differs)."""
  recorded = _state(work_dir).get("key", {}).get("input", {})
  digest = identity.file_digest(sources_path)
  if recorded.get("digest") != digest:
    raise InputError(f"{sources_path} is not the input the teacher translated in {work_dir} "
                     f"({digest} against {recorded.get('digest')} in {STATE_FILE}): give "
                     "translate's --input")
  return recorded.get("max_lines")


def _state(work_dir):
  state_path = os.path.join(work_dir, STATE_FILE)
  return fileio.read_json(state_path) if fileio.exists(state_path) else {}
