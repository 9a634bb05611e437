"""LiteRT float32 / float16 / int8 against our SavedModel and CTranslate2 int8, on a run.

    python benchmarks/litert_bench.py --run t2t_train/main_seeds/seed1     # the main job's
    python benchmarks/litert_bench.py --run t2t_train/multi30k/selected \\
        --source ../shared/data/multi30k/val.en.gz --reference ../shared/data/multi30k/val.de.gz

One run, one decoding for every engine (--decode_hparams, default beam 4, alpha 0.6,
input + 50): the run is exported (SavedModel) and converted (LiteRT float32, float16, int8;
CTranslate2 int8) into --work_dir. Then, --repeats times in turn so that drifts in the
machine's speed are shared, each engine translates --latency_inputs sentences one at a
time (batch-1 latency: median and p90) and every input in batches of 16 (sentences/s),
after one such pass as a warm-up (the SavedModel compiles an XLA program per new shape).
Printed per engine: those, the model file's size, cased sacreBLEU against --reference, the
share of inputs whose output equals LiteRT float32's and our SavedModel's; with
--peak_rss, each engine's peak resident memory translating every input in a process of
its own. Each engine gets every core (--threads); nothing else should run meanwhile.
Without --source the problem's dev split is used.
"""

import argparse
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

sys.path.insert(0, os.path.dirname(os.path.abspath(__file__)))
from peer_sides import cpu_model  # noqa: E402  (imports no TensorFlow: the workers' RSS)

ENGINES = ("savedmodel", "litert float32", "litert float16", "litert int8", "ct2 int8")
BATCH = 16


def cpu_name():
  with open("/proc/cpuinfo") as f:
    return cpu_model(f.read()) or "unknown"


def read_lines(path):
  """The lines of a text file (gzip where it ends in .gz), without TensorFlow."""
  import gzip  # pylint: disable=import-outside-toplevel
  with (gzip.open if path.endswith(".gz") else open)(path, "rt", encoding="utf-8") as f:
    return [line.rstrip("\n") for line in f]


def load_engine(name, path, threads):
  """fn(list of sentences) -> [(translation, score)] of engine `name` over its model `path`."""
  if name == "savedmodel":
    import tensorflow as tf  # pylint: disable=import-outside-toplevel
    import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import
    if threads:
      tf.config.threading.set_intra_op_parallelism_threads(threads)
    fn = tf.saved_model.load(path).signatures["serving_default"]

    def translate(lines):
      out = fn(inputs=tf.constant(lines))
      return [(t.decode("utf-8"), float(s)) for t, s in
              zip(out["outputs"].numpy(), out["scores"].numpy())]
    return translate
  if name.startswith("litert"):
    from t2t_keras.exporting.litert_translate import LiteRTTranslator  # pylint: disable=import-outside-toplevel
    translator = LiteRTTranslator(path, num_threads=threads or os.cpu_count(), batch_size=BATCH)
    return translator.translate
  from t2t_keras.exporting.ct2_translate import Ct2Translator  # pylint: disable=import-outside-toplevel
  translator = Ct2Translator(path, compute_type="int8", intra_threads=threads, batch_size=BATCH)
  return translator.translate


def model_bytes(name, path):
  """The size of what an engine loads: the SavedModel's variables and graph, model.tflite,
  CTranslate2's model.bin."""
  if name == "savedmodel":
    return sum(os.path.getsize(os.path.join(d, f)) for d, _, names in os.walk(path)
               for f in names if not f.endswith((".model", ".json")))
  return os.path.getsize(os.path.join(path, "model.tflite" if name.startswith("litert")
                                      else "model.bin"))


def prepare(args, work):
  """{engine: model path}: the SavedModel export and the conversions, in `work`."""
  from t2t_keras.exporting import ct2_convert, export, litert  # pylint: disable=import-outside-toplevel
  paths = {"savedmodel": export.export_model(
      args.run, os.path.join(work, "savedmodel"), args.checkpoint_path,
      decode_hparams=args.decode_hparams, version=1, overwrite=True, log=None)}
  for q in ("float32", "float16", "int8"):
    paths[f"litert {q}"] = litert.convert_run(
        args.run, os.path.join(work, f"litert_{q}"), args.checkpoint_path, quantization=q,
        decode_hparams=args.decode_hparams, overwrite=True, log=None)
  paths["ct2 int8"] = ct2_convert.convert_run(
      args.run, os.path.join(work, "ct2_int8"), args.checkpoint_path, quantization="int8",
      decode_hparams=args.decode_hparams, overwrite=True, log=None)
  return paths


def measure(fn, sources, latency_inputs):
  """(outputs of every source in batches of BATCH, sentences/s, [batch-1 seconds])."""
  latencies = []
  for line in sources[:latency_inputs]:
    start = time.perf_counter()
    fn([line])
    latencies.append(time.perf_counter() - start)
  start = time.perf_counter()
  outputs = []
  for i in range(0, len(sources), BATCH):
    outputs += fn(sources[i:i + BATCH])
  return outputs, len(sources) / (time.perf_counter() - start), latencies


def percentile(values, q):
  ordered = sorted(values)
  return ordered[min(len(ordered) - 1, int(q * len(ordered)))]


def peak_rss_mib(name, path, source, threads):
  """Peak resident memory (MiB) of a process that loads engine `name` and translates every
  line of `source` in batches (this script's --worker mode), as the worker reads its own
  VmHWM at the end. Not the child's rusage: Linux carries ru_maxrss across fork and exec,
  so a child of this process (holding every engine) would report at least this one's."""
  result = subprocess.run([sys.executable, os.path.abspath(__file__), "--worker", name,
                           "--worker_model", path, "--source", source, f"--threads={threads}"],
                          capture_output=True, text=True, check=False)
  if result.returncode:
    raise RuntimeError(f"the {name} worker exited with status {result.returncode}: "
                       f"{result.stderr[-2000:]}")
  return float(result.stdout.split()[-1]) / 1024  # VmHWM in kB


def vm_hwm_kb():
  """This process's peak resident memory (kB), /proc/self/status's VmHWM."""
  with open("/proc/self/status") as f:
    return next(int(line.split()[1]) for line in f if line.startswith("VmHWM:"))


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--run", help="a run directory (trainer's or t2t-avg-all's)")
  parser.add_argument("--checkpoint_path")
  parser.add_argument("--source", help="one sentence per line (default: the problem's dev)")
  parser.add_argument("--reference")
  parser.add_argument("--decode_hparams", default="beam_size=4,alpha=0.6")
  parser.add_argument("--repeats", type=int, default=2,
                      help="timed passes after the warm-up (0: the warm-up's outputs only, "
                           "for agreement and BLEU; its times are not figures)")
  parser.add_argument("--latency_inputs", type=int, default=50)
  parser.add_argument("--max_inputs", type=int, default=0, help="the first N inputs (0: all)")
  parser.add_argument("--threads", type=int, default=0, help="per engine (0: every core)")
  parser.add_argument("--work_dir", help="where the conversions go (default: a temp dir)")
  parser.add_argument("--json")
  parser.add_argument("--peak_rss", action="store_true")
  parser.add_argument("--worker", choices=ENGINES, help=argparse.SUPPRESS)
  parser.add_argument("--worker_model", help=argparse.SUPPRESS)
  args = parser.parse_args()
  if args.worker:  # --peak_rss's child: load one engine, translate everything, exit
    fn = load_engine(args.worker, args.worker_model, args.threads)
    sources = read_lines(args.source)
    for i in range(0, len(sources), BATCH):
      fn(sources[i:i + BATCH])
    print(vm_hwm_kb())
    return
  if not args.run:
    parser.error("--run is required")
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding import files  # pylint: disable=import-outside-toplevel
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  run_info = runs.load_run_info(args.run)[1]
  if args.source:
    sources = files.read_lines(args.source)
    references = files.read_lines(args.reference) if args.reference else None
  else:
    sources, references = files.split_pairs(run_info["problem"], split="dev")
  if args.max_inputs:
    sources = sources[:args.max_inputs]
    references = references[:args.max_inputs] if references else None
  work = args.work_dir or tempfile.mkdtemp(prefix="litert_bench_")
  paths = prepare(args, work)
  print(f"{args.run}; {len(sources)} inputs ({args.latency_inputs} at batch 1); decode "
        f"{args.decode_hparams}; CPU {cpu_name()}, {os.cpu_count()} cores", flush=True)
  engines = {name: load_engine(name, paths[name], args.threads) for name in ENGINES}
  results, outputs = {}, {}
  for name, fn in engines.items():  # warm-up: one whole pass (the SavedModel's XLA
    outputs[name], rate, latencies = measure(fn, sources, args.latency_inputs)  # programs
    results[name] = {"rates": [], "latencies": []}  # compile for each new batch shape)
    if not args.repeats:  # --repeats=0: outputs only (agreement, BLEU), no timing
      results[name] = {"rates": [rate], "latencies": latencies or [float("nan")]}
  for _ in range(args.repeats):
    for name, fn in engines.items():
      outputs[name], rate, latencies = measure(fn, sources, args.latency_inputs)
      results[name]["rates"].append(rate)
      results[name]["latencies"] += latencies
  print(f"{'engine':<16} {'batch-1 median ms':>17} {'p90 ms':>7} {'sent/s @16':>10} "
        f"{'MiB':>6} {'BLEU':>6} {'exact':>6} {'= litert f32':>12} {'= SavedModel':>12}")
  for name, r in results.items():
    r["batch1_median_ms"] = 1000 * statistics.median(r["latencies"])
    r["batch1_p90_ms"] = 1000 * percentile(r["latencies"], 0.9)
    r["sentences_per_s"] = statistics.median(r["rates"])
    r["model_mib"] = model_bytes(name, paths[name]) / 2 ** 20
    report = bleu.bleu_report([t for t, _ in outputs[name]], references) if references else {}
    r["bleu"], r["exact_match"] = report.get("bleu"), report.get("exact_match")
    for other, key in (("litert float32", "equal_litert_f32"), ("savedmodel", "equal_savedmodel")):
      r[key] = sum(a[0] == b[0] for a, b in zip(outputs[name], outputs[other])) / len(sources)
    print(f"{name:<16} {r['batch1_median_ms']:>17.1f} {r['batch1_p90_ms']:>7.1f} "
          f"{r['sentences_per_s']:>10.1f} {r['model_mib']:>6.2f} "
          f"{r['bleu'] if references else float('nan'):>6.2f} "
          f"{r['exact_match'] if references else float('nan'):>5.1f}% "
          f"{100 * r['equal_litert_f32']:>11.1f}% {100 * r['equal_savedmodel']:>11.1f}%",
          flush=True)
  ours, lite = outputs["savedmodel"], outputs["litert float32"]
  differ = [abs(a[1] - b[1]) for a, b in zip(ours, lite) if a[0] != b[0]]
  same = [abs(a[1] - b[1]) for a, b in zip(ours, lite) if a[0] == b[0]]
  results["litert float32"]["vs_savedmodel"] = {
      "differ": len(differ), "max_score_diff_where_equal": max(same, default=0.0),
      "max_score_diff_where_differ": max(differ, default=0.0)}
  print(f"litert float32 against the SavedModel: {len(differ)} of {len(sources)} outputs "
        f"differ (largest |score difference| there {max(differ, default=0.0):.2e}: a tie "
        f"where small); where equal, largest |score difference| {max(same, default=0.0):.2e}")
  if args.peak_rss:
    source = args.source
    if not source or args.max_inputs:
      source = os.path.join(work, "inputs.txt")
      with open(source, "w", encoding="utf-8") as f:
        f.write("".join(f"{line}\n" for line in sources))
    for name in ENGINES:
      results[name]["peak_rss_mib"] = peak_rss_mib(name, paths[name], source, args.threads)
      print(f"peak RSS, {name} alone: {results[name]['peak_rss_mib']:,.0f} MiB", flush=True)
  if args.json:
    with open(args.json, "w") as f:
      json.dump({"run": args.run, "cpu": cpu_name(), "inputs": len(sources),
                 "decode_hparams": args.decode_hparams, "results": results}, f, indent=2,
                default=float)


if __name__ == "__main__":
  main()
