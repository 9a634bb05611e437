"""Our XLA beam search against CTranslate2 float32 and int8, on a trained run's real weights.

    python benchmarks/ct2_compare.py --run t2t_train/numbers_tiny            # the main job's
    python benchmarks/ct2_compare.py --run t2t_train/multi30k/selected \\
        --source ../shared/data/multi30k/val.en.gz --reference ../shared/data/multi30k/val.de.gz

One run, the same inputs and decoding for every engine (--decode_hparams, default the
paper's beam 4, alpha 0.6, input + 50): the run is converted (float32 and int8) into
--work_dir; then, --repeats times in turn, ours (t2t-decoder's search with XLA, after a
pass that compiles it), CTranslate2 float32 and CTranslate2 int8 translate every input.
Printed per engine: sentences/s (median over repeats), cased sacreBLEU against
--reference, the share of inputs whose best output equals ours, and where equal the
largest score difference (also exact match, the main job's measure); with --peak_rss,
each engine's peak resident memory translating --source in a process of its own.
Without --source the problem's dev split is used (its raw text for generated problems
such as the main job's numbers). Both engines get every
core of this CPU (--threads); nothing else should run meanwhile.
"""

import argparse
import json
import os
import platform
import statistics
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

from t2t_keras import runs  # noqa: E402
from t2t_keras.decoding import translate, files  # noqa: E402
from t2t_keras.decoding.settings import parse_decode_hparams  # noqa: E402
from t2t_keras.decoding.spec import DecodingSpec  # noqa: E402
from t2t_keras.data import languages  # noqa: E402
from t2t_keras.metrics import bleu  # noqa: E402
from t2t_keras.exporting import ct2_convert, ct2_translate  # noqa: E402

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_sides import cpu_model  # noqa: E402  (imports no TensorFlow)


def cpu_name():
  """This CPU as peer_compare.py names it (model name with family / model)."""
  with open("/proc/cpuinfo") as f:
    return cpu_model(f.read()) or platform.processor() or "unknown"


def timed(fn, repeats):
  """(the last result, median seconds) of `repeats` calls of fn()."""
  seconds, result = [], None
  for _ in range(repeats):
    start = time.perf_counter()
    result = fn()
    seconds.append(time.perf_counter() - start)
  return result, statistics.median(seconds)


# Runs argv[1:] and prints its peak RSS (KiB): a child of a small process, because Linux
# carries ru_maxrss across fork and exec, so a direct child of this process (TensorFlow and
# a model loaded) would report at least this one's resident memory.
_RSS_WRAPPER = ("import os, subprocess, sys; child = subprocess.Popen(sys.argv[1:], "
                "stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL); "
                "_, status, usage = os.wait4(child.pid, 0); "
                "print(usage.ru_maxrss if status == 0 else -status)")


def peak_rss_mib(command, stdin_path):
  """Peak resident memory (MiB) of `command` run alone, its stdin the (decompressed)
  lines of stdin_path: the command's own rusage, read by `_RSS_WRAPPER`."""
  import subprocess  # pylint: disable=import-outside-toplevel
  lines = "".join(f"{line}\n" for line in files.read_lines(stdin_path)).encode("utf-8")
  result = subprocess.run([sys.executable, "-c", _RSS_WRAPPER, *command], input=lines,
                          capture_output=True, check=True)
  kib = int(result.stdout.split()[-1])
  if kib < 0:
    raise RuntimeError(f"{command[0]}... exited with status {-kib}")
  return kib / 1024  # Linux: KiB


def compare(ours, theirs):
  """(share of inputs with equal best outputs, max |score difference| where equal)."""
  equal = [abs(o[1] - t[1]) for o, t in zip(ours, theirs) if o[0] == t[0]]
  return len(equal) / max(len(ours), 1), max(equal, default=0.0)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--run", required=True, help="a run directory (trainer's or t2t-avg-all's)")
  parser.add_argument("--checkpoint_path")
  parser.add_argument("--source", help="one sentence per line (default: the problem's dev)")
  parser.add_argument("--reference")
  parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--threads", type=int, default=0, help="CTranslate2's (0: every core)")
  parser.add_argument("--work_dir", help="where the conversions go (default: a temp dir)")
  parser.add_argument("--json")
  parser.add_argument("--source_language", help="a language-token model's (M2M-100, NLLB) "
                      "input language: its token leads each input in every engine")
  parser.add_argument("--target_language", help="a language-token model's output language: "
                      "its token is the forced first output piece in every engine")
  parser.add_argument("--peak_rss", action="store_true",
                      help="also each engine's peak RSS, translating --source alone in a "
                           "process of its own (t2t-decoder; ct2_translate.py)")
  args = parser.parse_args()

  run = runs.load(args.run, args.checkpoint_path)
  if args.source:
    sources = files.read_lines(args.source)
    references = files.read_lines(args.reference) if args.reference else None
  else:
    sources, references = files.split_pairs(run.info["problem"], split="dev")
  ours_sources, prefixes = sources, None
  if args.target_language:  # a language-token model: framed as t2t-decoder frames a file
    ours_sources, prefixes = languages.frame_with_tokens(
        sources, None, args.source_language, args.target_language,
        languages.language_tokens(run.vocab), "--source")
  ct2_languages = dict(source_language=args.source_language,
                       target_language=args.target_language)
  settings = parse_decode_hparams(args.decode_hparams)
  hp = settings.search
  work = args.work_dir or tempfile.mkdtemp(prefix="ct2_compare_")
  dirs = {q: ct2_convert.convert_run(args.run, os.path.join(work, q), args.checkpoint_path,
                                     quantization=q, overwrite=True, log=None)
          for q in ("float32", "int8")}
  print(f"{args.run} ({run.checkpoint_path}); {len(sources)} inputs; decode {hp.beam_size=} "
        f"{hp.alpha=} {hp.extra_length=} {hp.max_decode_length=}; CPU {cpu_name()}, {os.cpu_count()} cores", flush=True)

  search_fn = DecodingSpec(None, settings).search_fn(run.model, run.vocab,
                                                     "ids" if prefixes is None else "prefix")
  translate.translate_lines(run.model, run.vocab, ours_sources, settings, search_fn,  # compiles
                            prefixes=prefixes)
  engines = {"ours (TF, XLA)": lambda: [
      (h[0].text, h[0].score) for h in translate.translate_lines(
          run.model, run.vocab, ours_sources, settings, search_fn, prefixes=prefixes)]}
  translators = {}
  for q, path in dirs.items():
    translator = ct2_translate.Ct2Translator(
        path, compute_type=q, intra_threads=args.threads, beam_size=hp.beam_size,
        alpha=hp.alpha, extra_length=hp.extra_length, max_decode_length=hp.max_decode_length,
        batch_size=settings.batching.batch_size)
    engines[f"ct2 {q} ({translator.compute_type})"] = (
        lambda t=translator: t.translate(sources, **ct2_languages))
    translator.translate(sources[:settings.batching.batch_size], **ct2_languages)  # warm-up
    translators[q] = translator

  results, outputs = {}, {}
  for _ in range(args.repeats):  # engines in turn, repeated: drifts in machine speed are shared
    for name, fn in engines.items():
      outputs[name], seconds = timed(fn, 1)
      results.setdefault(name, {"seconds": []})["seconds"].append(seconds)
  ours = outputs["ours (TF, XLA)"]
  print(f"{'engine':<28} {'sentences/s':>11} {'x ours':>7} {'BLEU':>6} {'exact':>6} "
        f"{'= ours':>7} {'max |score diff|':>16}")
  base = len(sources) / statistics.median(results["ours (TF, XLA)"]["seconds"])
  for name, r in results.items():
    r["sentences_per_s"] = len(sources) / statistics.median(r["seconds"])
    report = bleu.bleu_report([t for t, _ in outputs[name]], references) if references else {}
    r["bleu"], r["exact_match"] = report.get("bleu"), report.get("exact_match")
    r["equal_to_ours"], r["max_score_diff"] = compare(ours, outputs[name])
    print(f"{name:<28} {r['sentences_per_s']:>11.1f} {r['sentences_per_s'] / base:>6.2f}x "
          f"{r['bleu'] if references else float('nan'):>6.2f} "
          f"{r['exact_match'] if references else float('nan'):>5.1f}% "
          f"{100 * r['equal_to_ours']:>6.1f}% {r['max_score_diff']:>16.2e}", flush=True)
  for q, translator in translators.items():
    print(f"ct2 {q}: {translator.researched} searches again alone (hypotheses past a "
          f"sentence's own length limit) over {args.repeats} passes")
  if args.peak_rss and args.source:
    decode = f"{args.decode_hparams},batch_size={settings.batching.batch_size}"
    languages_flags = [f"--{k}={v}" for k, v in ct2_languages.items() if v]
    commands = {"ours (TF, XLA)": ["t2t-decoder", f"--output_dir={args.run}",
                                   f"--decode_from_file={args.source}",
                                   f"--decode_to_file={os.path.join(work, 'rss.out')}",
                                   f"--decode_hparams={decode}", *languages_flags]}
    for q, path in dirs.items():  # the engine names of the table above
      commands[f"ct2 {q} ({translators[q].compute_type})"] = [
          sys.executable, ct2_translate.__file__, f"--compute_type={q}",
          f"--beam_size={hp.beam_size}", f"--alpha={hp.alpha}",
          f"--extra_length={hp.extra_length}", f"--max_decode_length={hp.max_decode_length}",
          *languages_flags, path]
    for name, command in commands.items():
      results[name]["peak_rss_mib"] = peak_rss_mib(command, args.source)
      print(f"peak RSS, {name} alone: {results[name]['peak_rss_mib']:,.0f} MiB", flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"run": args.run, "cpu": cpu_name(), "inputs": len(sources),
                 "decode_hparams": settings.values(), "results": results}, f, indent=2)


if __name__ == "__main__":
  main()
