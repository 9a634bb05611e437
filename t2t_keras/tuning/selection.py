"""Choosing the checkpoint average on dev data: which window of checkpoints to average.

    result = select_average("runs/m30k", "runs/m30k/selected", sources, references,
                            windows=(1, 5, 10, 20), ends=3)
    # runs/m30k/selected/ckpt-<step>: the best average on dev, a run directory
    # runs/m30k/selected/selection.json and selection.md: every candidate and why

A candidate is the mean of `n` consecutive kept checkpoints ending at an `end`
checkpoint: every n of `windows` with every end of `end_checkpoints(...)` (the
newest, and with ends > 1 earlier ones spread over the newer half of the run,
for runs that overfit before the end). Each candidate is written, restored into
one model (so the compiled search is reused), decodes the dev sources with the
given decoding hparams and is scored by the problem's `DevScore` (cased
sacreBLEU, ties to chrF; a problem may name its own with a `dev_score` hook, as
parsing does: EVALB F1 of the trees, ties to complete match). The best is
written to output_dir/ckpt-<its last step> and the directory's checkpoint index
names only it (other files there are left alone); remaining ties go to the wider
window (more averaging is the safer bet), then to the later end.

With a `decode_grid` (overrides over `decode_overrides`, e.g. ["alpha=1.0",
"beam_size=8,alpha=1.0"]), the chosen average then decodes dev once per entry
and the best decoding is kept as the result's `decode_hparams` (ties keep the
decoding the windows were compared with): two stages, windows first, so the
cost is windows + grid decodes rather than their product. Nothing here reads a
test split: the caller passes dev data.
"""

import dataclasses
import json
import os
import time

from t2t_keras import fileio, runs
from t2t_keras.data import problem as problem_lib
from t2t_keras.decoding.settings import describe_search
from t2t_keras.errors import InputError
from t2t_keras.hparams_lib import HParamsError
from t2t_keras.metrics.dev_score import SACREBLEU, DevScore
from t2t_keras.tuning import averaging

SELECTION_JSON = "selection.json"
SELECTION_MD = "selection.md"
_CANDIDATE_DIR = "candidates"


def dev_score_of(problem_name):
  """How runs of the problem are compared on dev: its `dev_score()` hook (cased sacreBLEU,
  ties to chrF, unless the problem names its own)."""
  return problem_lib.hooks(problem_name).dev_score()


def end_checkpoints(paths, ends):
  """`ends` checkpoints of `paths` (oldest first) to end windows at: the newest, then
  evenly spaced back over the newer half. Returns indices into paths, newest first."""
  last = len(paths) - 1
  if ends <= 1 or last == 0:
    return [last]
  span = last // 2
  picks = sorted({last - round(k * span / (ends - 1)) for k in range(ends)}, reverse=True)
  return picks


def candidate_windows(paths, windows, ends):
  """[(n, paths of the window)] for every window size and end, without repeats."""
  seen, out = set(), []
  for end in end_checkpoints(paths, ends):
    for n in sorted(set(windows)):
      window = tuple(paths[max(0, end - n + 1):end + 1])
      if window not in seen:
        seen.add(window)
        out.append((len(window), list(window)))
  return out


def _better(a, b, dev_score=SACREBLEU):
  """Whether candidate a beats b: the metric, its tie-break (BLEU, then chrF by default),
  then the wider window, then the later end."""
  key = (dev_score.key, dev_score.second_key, "n", "last_step")
  return tuple(a[k] for k in key) > tuple(b[k] for k in key)


def merge_overrides(base, extra):
  """"a=1,b=2" with "b=3,c=4" -> "a=1,b=3,c=4": extra's values win, base's order kept."""
  merged = {}
  for text in (base, extra):
    for item in (text or "").split(","):
      if item.strip():
        if "=" not in item:
          raise HParamsError(f"bad hparams override {item!r}: expected key=value")
        key, _, value = item.partition("=")
        merged[key.strip()] = value.strip()
  return ",".join(f"{k}={v}" for k, v in merged.items())


def select_average(model_dir, output_dir, sources, references, windows=(1, 5, 10, 20), ends=1,
                   decode_overrides="beam_size=4,alpha=0.6", max_step=None, dev_name="dev",
                   decode_grid=(), log=print):
  """Scores averages of model_dir's checkpoints on dev and keeps the best in output_dir.

  First the window (each candidate average written, restored, decoded and
  scored before the next), then, for the chosen average, the decodings of
  `decode_grid`.

  Args:
    model_dir: the trainer's output_dir.
    output_dir: where the chosen average goes (a run directory for t2t-decoder).
    sources, references: dev text lines.
    windows: how many consecutive checkpoints each candidate averages.
    ends: how many end checkpoints (see `end_checkpoints`).
    decode_overrides: the decoding hparams the candidates are compared with (after
      the problem's `decode_defaults`, as t2t-decoder applies them).
    max_step: ignore newer checkpoints (the choice a shorter run would make).
    dev_name: how the report names the dev data.
    decode_grid: decoding overrides (each over decode_overrides) the chosen average
      is also scored with; the best becomes the result's decode_hparams.
  Returns:
    the selection dict written to output_dir/selection.json.
  """
  if fileio.abspath(model_dir).rstrip("/") == fileio.abspath(output_dir).rstrip("/"):
    raise InputError(f"the selected average must go to another directory than {model_dir}")
  if not sources or len(sources) != len(references):
    raise InputError(f"dev data for selection: {len(sources)} sources and {len(references)} "
                     "references (need the same, non-zero number)")
  paths = averaging.checkpoint_paths(model_dir, log)
  if max_step is not None:
    paths = [p for p in paths if (averaging.step_of(p) or 0) <= max_step]
    if not paths:
      raise InputError(f"no checkpoint at or before step {max_step} in {model_dir!r}")
  start = time.time()
  scorer = _Scorer.load(model_dir, paths[-1], sources, references)
  settings, decode_overrides, grid = scorer.decodings(decode_overrides, decode_grid)
  best, candidates, chosen, signature = _choose_window(
      scorer, settings, paths, windows, ends, output_dir, dev_name, log)
  runs.copy_run_info(model_dir, output_dir)
  dev_score = scorer.dev_score
  result = {
      "model_dir": fileio.abspath(model_dir), "chosen": dict(best, checkpoint=chosen),
      "rule": (f"highest {dev_score.name} on {dev_name} ({len(sources)} sentences, "
               f"{describe_search(settings.search)}); ties: "
               f"{dev_score.second_name}, "
               "then the wider window, then the later end"),
      "metric": dev_score.name, "key": dev_score.key, "second_metric": dev_score.second_name,
      "second_key": dev_score.second_key,
      "dev": dev_name, "sentences": len(sources), "decode_hparams": decode_overrides,
      "window_decode_hparams": decode_overrides,
      "signature": signature, "max_step": max_step,
      "seconds": round(time.time() - start, 1), "candidates": candidates, "decodings": []}
  _write_selection(output_dir, result)  # the window alone, should the grid fail
  if grid:
    _choose_decoding(scorer, result, grid, best, chosen, dev_name, log)
    result["seconds"] = round(time.time() - start, 1)
    _write_selection(output_dir, result)
  return result


@dataclasses.dataclass
class _Scorer:
  """A run's model (restored to any checkpoint), its vocabulary and problem, and the dev
  lines it is scored on."""
  model: object
  vocab: object
  problem: str
  hparams: object
  sources: list
  references: list
  dev_score: DevScore

  @classmethod
  def load(cls, model_dir, checkpoint, sources, references):
    model, vocab, hparams, info, _ = runs.load(model_dir, checkpoint)
    return cls(model, vocab, info.get("problem"), hparams, sources, references,
               dev_score_of(info.get("problem")))

  def restore(self, prefix):
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    tf.train.Checkpoint(model=self.model).restore(
        prefix).expect_partial().assert_existing_objects_matched()

  def decodings(self, decode_overrides, decode_grid):
    """(the window stage's DecodeSettings, its overrides string, [(overrides,
    DecodeSettings)] of every distinct grid entry over it). As t2t-decoder: the problem's
    decode defaults (parsing: input + 300), then the overrides. A bad entry fails here,
    before anything is decoded or written."""
    from t2t_keras.decoding.spec import DecodingSpec  # pylint: disable=import-outside-toplevel
    settings = DecodingSpec.for_run(self.problem, decode_overrides, self.hparams).settings
    decode_overrides = merge_overrides(decode_overrides, "")
    grid, seen = [], {settings}
    for extra in decode_grid:
      overrides = merge_overrides(decode_overrides, extra)
      grid_settings = DecodingSpec.for_run(self.problem, overrides, self.hparams).settings
      if grid_settings not in seen:
        seen.add(grid_settings)
        grid.append((overrides, grid_settings))
    return settings, decode_overrides, grid

  def search_fn(self, settings):
    from t2t_keras.decoding.spec import DecodingSpec  # pylint: disable=import-outside-toplevel
    return DecodingSpec.for_run(self.problem, settings).search_fn(self.model, self.vocab)

  def score(self, settings, search_fn):
    """(the dev score dict, the rounded figures a candidate records) of the model now."""
    from t2t_keras.decoding import translate  # pylint: disable=import-outside-toplevel
    t0 = time.time()
    outputs = translate.decode_lines(self.model, self.vocab, self.sources, settings, search_fn,
                                     hooks=problem_lib.hooks(self.problem))
    score = self.dev_score.score(self.sources, outputs, self.references)
    return score, {self.dev_score.key: round(score[self.dev_score.key], 2),
                   self.dev_score.second_key: round(score[self.dev_score.second_key], 2),
                   "decode_seconds": round(time.time() - t0, 1)}


def _choose_window(scorer, settings, paths, windows, ends, output_dir, dev_name, log):
  """Scores every candidate average and moves the best to output_dir/ckpt-<last step>.

  Returns (the best candidate dict, all candidate dicts, the chosen checkpoint's
  prefix, the score's signature)."""
  dev_score = scorer.dev_score
  search_fn = scorer.search_fn(settings)
  work = os.path.join(output_dir, _CANDIDATE_DIR)
  candidates, best, best_prefix = [], None, None
  for k, (n, window) in enumerate(candidate_windows(paths, windows, ends)):
    prefix = os.path.join(work, f"cand-{k}")
    averaging.average_checkpoint_files(window, prefix)
    scorer.restore(prefix)
    score, scores = scorer.score(settings, search_fn)
    cand = {"n": n, "first_step": averaging.step_of(window[0]),
            "last_step": averaging.step_of(window[-1]), **scores}
    candidates.append(cand)
    log(f"  average of {n:3d} checkpoint(s), steps {cand['first_step']}-{cand['last_step']}: "
        f"{dev_name} {dev_score.name} {cand[dev_score.key]:.2f}, {dev_score.second_name} "
        f"{cand[dev_score.second_key]:.2f}")
    if best is None or _better(cand, best, dev_score):
      if best_prefix is not None:
        _remove(best_prefix)
      best, best_prefix = cand, prefix
    else:
      _remove(prefix)
  chosen = os.path.join(output_dir, f"ckpt-{best['last_step']}")
  for suffix in _prefix_files(best_prefix):
    fileio.replace(best_prefix + suffix, chosen + suffix)
  fileio.rmtree(work)
  runs.write_checkpoint_index(chosen)
  log(f"chose the average of {best['n']} checkpoint(s), steps {best['first_step']}-"
      f"{best['last_step']} ({dev_name} {dev_score.name} {best[dev_score.key]:.2f}): {chosen}")
  return best, candidates, chosen, score["signature"]


def _choose_decoding(scorer, result, grid, best, chosen, dev_name, log):
  """Scores the chosen average with every grid decoding; records them in
  result["decodings"] and the best (ties: the earlier) in result["decode_hparams"]."""
  dev_score = scorer.dev_score
  scorer.restore(chosen)
  key = (dev_score.key, dev_score.second_key)
  best_decoding = {"decode_hparams": result["decode_hparams"], **{k: best[k] for k in key},
                   "decode_seconds": best["decode_seconds"]}
  result["decodings"].append(best_decoding)
  for overrides, grid_settings in grid:
    _, scores = scorer.score(grid_settings, scorer.search_fn(grid_settings))
    decoding = {"decode_hparams": overrides, **scores}
    result["decodings"].append(decoding)
    log(f"  decoding {overrides}: {dev_name} {dev_score.name} {decoding[dev_score.key]:.2f}, "
        f"{dev_score.second_name} {decoding[dev_score.second_key]:.2f}")
    if tuple(decoding[k] for k in key) > tuple(best_decoding[k] for k in key):
      best_decoding = decoding  # ties keep the earlier (the window stage's first)
  result["decode_hparams"] = best_decoding["decode_hparams"]
  log(f"chose the decoding {best_decoding['decode_hparams']} ({dev_name} {dev_score.name} "
      f"{best_decoding[dev_score.key]:.2f})")


def format_selection(result):
  """The selection as Markdown: the rule, then one row per candidate, the chosen in bold."""
  chosen, key, second = result["chosen"], result["key"], result["second_key"]
  lines = [f"# Checkpoint selection for {result['model_dir']}", "",
           f"Chosen: the average of {chosen['n']} checkpoint(s), steps {chosen['first_step']}-"
           f"{chosen['last_step']}, {result['dev']} {result['metric']} {chosen[key]:.2f}.", "",
           f"Rule: {result['rule']}.", f"Signature: {result['signature']}", "",
           f"| checkpoints averaged | steps | dev {result['metric']} | "
           f"dev {result['second_metric']} |", "|---|---|---|---|"]
  for c in result["candidates"]:
    mark = "**" if (c["n"], c["last_step"]) == (chosen["n"], chosen["last_step"]) else ""
    lines.append(f"| {c['n']} | {c['first_step']}-{c['last_step']} | {mark}{c[key]:.2f}"
                 f"{mark} | {c[second]:.2f} |")
  if result.get("decodings"):
    lines += ["", f"Then the decoding, for the chosen average (ties keep the first): "
              f"{result['decode_hparams']}.", "",
              f"| decoding | dev {result['metric']} | dev {result['second_metric']} | seconds |",
              "|---|---|---|---|"]
    for d in result["decodings"]:
      mark = "**" if d["decode_hparams"] == result["decode_hparams"] else ""
      lines.append(f"| {d['decode_hparams']} | {mark}{d[key]:.2f}{mark} | {d[second]:.2f} | "
                   f"{d['decode_seconds']} |")
  return "\n".join(lines) + "\n"


def _write_selection(output_dir, result):
  _write_json(os.path.join(output_dir, SELECTION_JSON), result)
  _write_text(os.path.join(output_dir, SELECTION_MD), format_selection(result))


def _prefix_files(prefix):
  directory, base = os.path.split(prefix)
  return [name[len(base):] for name in fileio.listdir(directory)
          if name.startswith(base + ".")]


def _remove(prefix):
  for suffix in _prefix_files(prefix):
    fileio.remove(prefix + suffix)


def _write_json(path, obj):
  _write_text(path, json.dumps(obj, indent=1) + "\n")


def _write_text(path, text):
  fileio.write_atomic(path, text)
