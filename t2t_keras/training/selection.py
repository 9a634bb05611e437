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
given decoding hparams and is scored with cased sacreBLEU. The best is written
to output_dir/ckpt-<its last step> and the directory's checkpoint index names
only it (other files there are left alone); BLEU ties go to chrF, then to the wider
window (more averaging is the safer bet), then to the later end. Nothing here reads a test split: the
caller passes dev data.
"""

import json
import os
import shutil
import time

from t2t_keras.errors import InputError
from t2t_keras.training import averaging, model_io

SELECTION_JSON = "selection.json"
SELECTION_MD = "selection.md"
_CANDIDATE_DIR = "candidates"


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


def _better(a, b):
  """Whether candidate a beats b: BLEU, then chrF, then the wider window, then the later end."""
  key = ("bleu", "chrf", "n", "last_step")
  return tuple(a[k] for k in key) > tuple(b[k] for k in key)


def select_average(model_dir, output_dir, sources, references, windows=(1, 5, 10, 20), ends=1,
                   decode_overrides="beam_size=4,alpha=0.6", max_step=None, dev_name="dev",
                   log=print):
  """Scores averages of model_dir's checkpoints on dev and keeps the best in output_dir.

  Args:
    model_dir: the trainer's output_dir.
    output_dir: where the chosen average goes (a run directory for t2t-decoder).
    sources, references: dev text lines.
    windows: how many consecutive checkpoints each candidate averages.
    ends: how many end checkpoints (see `end_checkpoints`).
    decode_overrides: the decoding hparams the candidates are compared with.
    max_step: ignore newer checkpoints (the choice a shorter run would make).
    dev_name: how the report names the dev data.
  Returns:
    the selection dict written to output_dir/selection.json.
  """
  from t2t_keras.data.vocabulary import SubwordVocabulary  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding import decoder  # pylint: disable=import-outside-toplevel
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  import tensorflow as tf  # pylint: disable=import-outside-toplevel

  if os.path.abspath(model_dir) == os.path.abspath(output_dir):
    raise InputError(f"the selected average must go to another directory than {model_dir}")
  if not sources or len(sources) != len(references):
    raise InputError(f"dev data for selection: {len(sources)} sources and {len(references)} "
                     "references (need the same, non-zero number)")
  paths = averaging.checkpoint_paths(model_dir, log)
  if max_step is not None:
    paths = [p for p in paths if (averaging.step_of(p) or 0) <= max_step]
    if not paths:
      raise InputError(f"no checkpoint at or before step {max_step} in {model_dir!r}")
  hp = decoder.decode_hparams(decode_overrides)
  start = time.time()
  model, _, info, _ = model_io.load_model(model_dir, paths[-1])
  vocab = SubwordVocabulary(info["vocab_path"])
  search_fn = decoder.make_search_fn(model, hp)
  restore = tf.train.Checkpoint(model=model)
  work = os.path.join(output_dir, _CANDIDATE_DIR)
  candidates, best, best_prefix = [], None, None
  for k, (n, window) in enumerate(candidate_windows(paths, windows, ends)):
    prefix = os.path.join(work, f"cand-{k}")
    averaging.average_checkpoint_files(window, prefix)
    restore.restore(prefix).expect_partial().assert_existing_objects_matched()
    t0 = time.time()
    hyps = decoder.decode_lines(model, vocab, sources, hp, search_fn)
    score = bleu.sacrebleu_scores(hyps, references)
    cand = {"n": n, "first_step": averaging.step_of(window[0]),
            "last_step": averaging.step_of(window[-1]), "bleu": round(score["bleu"], 2),
            "chrf": round(score["chrf"], 2), "decode_seconds": round(time.time() - t0, 1)}
    candidates.append(cand)
    log(f"  average of {n:3d} checkpoint(s), steps {cand['first_step']}-{cand['last_step']}: "
        f"{dev_name} sacreBLEU {cand['bleu']:.2f}, chrF {cand['chrf']:.2f}")
    if best is None or _better(cand, best):
      if best_prefix is not None:
        _remove(best_prefix)
      best, best_prefix = cand, prefix
    else:
      _remove(prefix)
  chosen = os.path.join(output_dir, f"ckpt-{best['last_step']}")
  for suffix in _prefix_files(best_prefix):
    os.replace(best_prefix + suffix, chosen + suffix)
  shutil.rmtree(work, ignore_errors=True)
  averaging.write_checkpoint_index(chosen)
  averaging.copy_run_info(model_dir, output_dir)
  result = {
      "model_dir": os.path.abspath(model_dir), "chosen": dict(best, checkpoint=chosen),
      "rule": (f"highest cased sacreBLEU on {dev_name} ({len(sources)} sentences, "
               f"beam {hp.beam_size}, alpha {hp.alpha}); ties: chrF, then the wider window, "
               "then the later end"),
      "dev": dev_name, "sentences": len(sources), "decode_hparams": decode_overrides,
      "bleu_signature": score["bleu_signature"], "max_step": max_step,
      "seconds": round(time.time() - start, 1), "candidates": candidates}
  _write_json(os.path.join(output_dir, SELECTION_JSON), result)
  _write_text(os.path.join(output_dir, SELECTION_MD), format_selection(result))
  log(f"chose the average of {best['n']} checkpoint(s), steps {best['first_step']}-"
      f"{best['last_step']} ({dev_name} sacreBLEU {best['bleu']:.2f}): {chosen}")
  return result


def format_selection(result):
  """The selection as Markdown: the rule, then one row per candidate, the chosen in bold."""
  chosen = result["chosen"]
  lines = [f"# Checkpoint selection for {result['model_dir']}", "",
           f"Chosen: the average of {chosen['n']} checkpoint(s), steps {chosen['first_step']}-"
           f"{chosen['last_step']}, {result['dev']} sacreBLEU {chosen['bleu']:.2f}.", "",
           f"Rule: {result['rule']}.", f"Signature: {result['bleu_signature']}", "",
           "| checkpoints averaged | steps | dev sacreBLEU | dev chrF |", "|---|---|---|---|"]
  for c in result["candidates"]:
    mark = "**" if (c["n"], c["last_step"]) == (chosen["n"], chosen["last_step"]) else ""
    lines.append(f"| {c['n']} | {c['first_step']}-{c['last_step']} | {mark}{c['bleu']:.2f}"
                 f"{mark} | {c['chrf']:.2f} |")
  return "\n".join(lines) + "\n"


def _prefix_files(prefix):
  directory, base = os.path.split(prefix)
  return [name[len(base):] for name in os.listdir(directory)
          if name.startswith(base + ".")]


def _remove(prefix):
  for suffix in _prefix_files(prefix):
    os.remove(prefix + suffix)


def _write_json(path, obj):
  _write_text(path, json.dumps(obj, indent=1) + "\n")


def _write_text(path, text):
  with open(path + ".tmp", "w", encoding="utf-8") as f:
    f.write(text)
  os.replace(path + ".tmp", path)
