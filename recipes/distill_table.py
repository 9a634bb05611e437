"""The teacher / student table of recipes/distill.sh: quality, size, cost and speed per engine.

    python recipes/distill_table.py --teacher=t2t_train/multi30k/selected \\
        --student=t2t_train/distill/student/selected --exports=t2t_train/distill/exports \\
        --dev=val.en.gz,val.de.gz --test=test_2016_flickr.en.gz,test_2016_flickr.de.gz \\
        [--tok_dev=tok/val.lc.norm.tok.de.gz --tok_test=...] --output=t2t_train/distill/table

For each model: cased sacreBLEU, lowercased tokenized BLEU (against the tokenized reference
where given, else the Multi30k tokenization of the plain one) and chrF on dev and test
(t2t-keras's own decoding, the model's selection.json decoding where it has one, else
beam 4, alpha 0.6); parameters and multiply-adds per output token
(t2t_keras/distill/cost.py, at dev's mean source and output lengths in the model's
pieces); the sizes of <exports>/<teacher|student>_{litert,ct2}_int8's model files; and
for each engine (t2t-keras in TensorFlow float32, LiteRT int8, CTranslate2 int8) the
median batch-1 latency over the first --latency_inputs dev sentences (after a warm-up
pass over them at batch 1) and the sentences/s of all of dev in calls of --batch sentences
(after a warm-up pass in those calls; LiteRT runs each call as model calls of
--litert_batch rows, its faster size), with dev's sacreBLEU. With --reference_student (the
same student set trained on the original references), its quality and cost as a third
column. Below the table: the student's test sacreBLEU against the teacher's and the
reference-trained student's, its cost, LiteRT file size and batch-1 latency against the
teacher's. Writes OUTPUT.md and OUTPUT.json; the header names the CPU and the date.
"""

import argparse
import datetime
import json
import os
import platform
import statistics
import time

ENGINES = ("t2t-keras float32", "LiteRT int8", "CTranslate2 int8")


def _pair(text):
  source, reference = text.split(",")
  return source, reference


def decoding(run_dir):
  """The run's chosen decode hparams (t2t-avg-all's selection.json), else beam 4, alpha 0.6."""
  path = os.path.join(run_dir, "selection.json")
  if os.path.exists(path):
    with open(path, encoding="utf-8") as f:
      return json.load(f)["decode_hparams"]
  return "beam_size=4,alpha=0.6"


def quality(outputs, references, tokenized=None):
  """{"sacrebleu", "lc_tok_bleu", "chrf"} of outputs against references."""
  from t2t_keras.metrics import bleu  # pylint: disable=import-outside-toplevel
  report = bleu.bleu_report(outputs, references)
  lc_tok = (bleu.multi30k_tok_bleu_vs_tokenized(outputs, tokenized) if tokenized
            else report["multi30k_tok_bleu"])
  return {"sacrebleu": report["bleu"], "lc_tok_bleu": lc_tok, "chrf": report["chrf"]}


def mean_lengths(run_dir, sources, outputs):
  """(mean source pieces, mean output pieces) in the run's vocabulary, EOS included."""
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel
  from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
  vocab = vocabulary.load(runs.load_run_info(run_dir)[1]["vocab_path"])
  source_side, target_side = vocabulary.source_side(vocab), vocabulary.target_side(vocab)
  return (statistics.mean(len(source_side.encode(s)) + 1 for s in sources),
          statistics.mean(len(target_side.encode(o)) + 1 for o in outputs))


def engines(run_dir, exports, name, decode_hparams, batch, litert_batch):
  """{engine: (translate(list of str) -> list of str, model file or None)}; CTranslate2
  batches a call's sentences by `batch`, LiteRT by `litert_batch` rows per model call."""
  import t2t_keras  # pylint: disable=import-outside-toplevel
  from t2t_keras.exporting.ct2_translate import Ct2Translator  # pylint: disable=import-outside-toplevel
  from t2t_keras.exporting.litert_translate import LiteRTTranslator  # pylint: disable=import-outside-toplevel
  translator = t2t_keras.load(run_dir, decode_hparams=decode_hparams)
  litert_dir = os.path.join(exports, f"{name}_litert_int8")
  ct2_dir = os.path.join(exports, f"{name}_ct2_int8")
  litert = LiteRTTranslator(litert_dir, num_threads=os.cpu_count(), batch_size=litert_batch)
  ct2 = Ct2Translator(ct2_dir, compute_type="int8", batch_size=batch)
  return {
      "t2t-keras float32": (lambda lines: [r.text for r in translator.translate(lines)], None),
      "LiteRT int8": (lambda lines: [t for t, _ in litert.translate(lines)],
                      os.path.join(litert_dir, "model.tflite")),
      "CTranslate2 int8": (lambda lines: [t for t, _ in ct2.translate(lines)],
                           os.path.join(ct2_dir, "model.bin"))}


def speed(translate, sources, latency_inputs, batch):
  """(outputs of every source in batches, sentences/s, median batch-1 ms), each measured
  after a warm-up pass of its own shape (XLA programs, caches): the batches, then the
  latency inputs one at a time."""
  for i in range(0, len(sources), batch):
    translate(sources[i:i + batch])
  for line in sources[:latency_inputs]:
    translate([line])
  latencies = []
  for line in sources[:latency_inputs]:
    start = time.perf_counter()
    translate([line])
    latencies.append(time.perf_counter() - start)
  start, outputs = time.perf_counter(), []
  for i in range(0, len(sources), batch):
    outputs += translate(sources[i:i + batch])
  rate = len(sources) / (time.perf_counter() - start)
  return outputs, rate, 1000 * statistics.median(latencies)


def measure_quality(run_dir, splits, translate=None):
  """A model's quality and cost: {"run", "decode_hparams", "dev", "test", "parameters",
  "macs_per_token"}, decoded by t2t-keras in float32 with its chosen decoding
  (`translate`: list of str -> list of str, default the run loaded with it)."""
  import t2t_keras  # pylint: disable=import-outside-toplevel
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  from t2t_keras.distill.cost import model_cost  # pylint: disable=import-outside-toplevel
  decode_hparams = decoding(run_dir)
  column = {"run": run_dir, "decode_hparams": decode_hparams}
  if translate is None:
    translator = t2t_keras.load(run_dir, decode_hparams=decode_hparams)
    translate = lambda lines: [r.text for r in translator.translate(lines)]  # noqa: E731
  for split, (source_path, reference_path, tokenized_path) in splits.items():
    sources, references = read_lines(source_path), read_lines(reference_path)
    outputs = translate(sources)
    tokenized = read_lines(tokenized_path) if tokenized_path else None
    column[split] = quality(outputs, references, tokenized)
    if split == "dev":
      lengths = mean_lengths(run_dir, sources, outputs)
  column.update(model_cost(run_dir, *lengths))
  return column


def measure(args, name, run_dir, splits):
  """One exported model's column: its quality and cost, and each engine's speed."""
  from t2t_keras.decoding.files import read_lines  # pylint: disable=import-outside-toplevel
  found = engines(run_dir, args.exports, name, decoding(run_dir), args.batch,
                  args.litert_batch)
  column = measure_quality(run_dir, splits, found["t2t-keras float32"][0])
  dev_sources, dev_references = read_lines(splits["dev"][0]), read_lines(splits["dev"][1])
  for engine, (translate, model_file) in found.items():
    outputs, rate, latency = speed(translate, dev_sources, args.latency_inputs, args.batch)
    column[engine] = {"sentences_per_s": rate, "batch1_ms": latency,
                      "dev_sacrebleu": quality(outputs, dev_references)["sacrebleu"],
                      "model_mib": os.path.getsize(model_file) / 2 ** 20 if model_file else None}
  return column


NAMES = {"teacher": "teacher", "student": "student",
         "reference_student": "the student on the references"}


def table(columns, header):
  """The markdown table: the teacher's and the student's columns, and the reference-trained
  student's where there is one (quality and cost; it is not exported), then the
  comparisons the recipe is judged by."""
  names = [n for n in NAMES if n in columns]
  rows = [("run", lambda c: f"`{c['run']}`"), ("decoding", lambda c: c["decode_hparams"]),
          ("parameters", lambda c: f"{c['parameters']:,}"),
          ("multiply-adds per output token", lambda c: f"{c['macs_per_token']:,.0f}")]
  for split in ("dev", "test"):
    rows.append((f"{split}: sacreBLEU / lc tok BLEU / chrF", lambda c, x=split: (
        f"{c[x]['sacrebleu']:.2f} / {c[x]['lc_tok_bleu']:.2f} / {c[x]['chrf']:.2f}")))
  measured_for_all = len(rows)  # then each engine's rows: not the reference student's
  for engine in ENGINES:
    if engine != "t2t-keras float32":
      rows.append((f"{engine} model file, MiB", lambda c, e=engine: f"{c[e]['model_mib']:.2f}"))
    rows.append((f"{engine}: batch-1 ms (median) / sentences/s / dev sacreBLEU",
                 lambda c, e=engine: (f"{c[e]['batch1_ms']:.1f} / {c[e]['sentences_per_s']:.1f}"
                                      f" / {c[e]['dev_sacrebleu']:.2f}")))
  lines = [header, "", "| | " + " | ".join(NAMES[n] for n in names) + " |",
           "|---|" + "---|" * len(names)]
  for i, (label, fn) in enumerate(rows):
    cells = ["(not measured)" if n == "reference_student" and i >= measured_for_all
             else fn(columns[n]) for n in names]
    lines.append(f"| {label} | " + " | ".join(cells) + " |")
  return "\n".join(lines + [""] + comparisons(columns)) + "\n"


def comparisons(columns):
  """The lines that say what the student costs and gains: test sacreBLEU against the
  teacher and against the reference-trained student, its decoding cost and its LiteRT
  int8 file and batch-1 latency against the teacher's."""
  t, s = columns["teacher"], columns["student"]
  out = [f"* test sacreBLEU, student minus teacher: "
         f"{s['test']['sacrebleu'] - t['test']['sacrebleu']:+.2f}"]
  if "reference_student" in columns:
    r = columns["reference_student"]
    out.append(f"* test sacreBLEU, student minus the same student on the references: "
               f"{s['test']['sacrebleu'] - r['test']['sacrebleu']:+.2f} (what distillation "
               "gained)")
  out.append(f"* multiply-adds per output token: {s['macs_per_token'] / t['macs_per_token']:.0%}"
             " of the teacher's")
  lite = "LiteRT int8"
  out.append(f"* {lite}: the student's file is {s[lite]['model_mib'] / t[lite]['model_mib']:.0%} "
             f"of the teacher's; the teacher's batch-1 latency is "
             f"{t[lite]['batch1_ms'] / s[lite]['batch1_ms']:.2f}x the student's")
  return out


def cpu_name():
  """/proc/cpuinfo's first model name with its family and model numbers (a VM's "AMD EPYC"
  alone names five generations)."""
  fields = {}
  try:
    with open("/proc/cpuinfo", encoding="utf-8") as f:
      for line in f:
        key, _, value = line.partition(":")
        fields.setdefault(key.strip(), value.strip())
  except OSError:
    return platform.processor() or "an unknown CPU"
  return (f"{fields.get('model name', 'an unknown CPU')} (family {fields.get('cpu family', '?')}, "
          f"model {fields.get('model', '?')})")


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--teacher", required=True)
  parser.add_argument("--student", required=True)
  parser.add_argument("--exports", required=True, help="<name>_litert_int8, <name>_ct2_int8")
  parser.add_argument("--dev", type=_pair, required=True, help="SOURCE,REFERENCE")
  parser.add_argument("--test", type=_pair, required=True, help="SOURCE,REFERENCE")
  parser.add_argument("--reference_student",
                      help="the student set trained on the original references (quality "
                           "and cost only)")
  parser.add_argument("--tok_dev")
  parser.add_argument("--tok_test")
  parser.add_argument("--latency_inputs", type=int, default=100)
  parser.add_argument("--batch", type=int, default=16, help="sentences per call")
  parser.add_argument("--litert_batch", type=int, default=4,
                      help="rows per LiteRT model call within a call (LiteRTTranslator's "
                           "batch_size)")
  parser.add_argument("--output", required=True, help="writes OUTPUT.md and OUTPUT.json")
  args = parser.parse_args()
  from t2t_keras import tf_startup  # pylint: disable=import-outside-toplevel
  tf_startup.import_tensorflow_quietly()
  splits = {"dev": (*args.dev, args.tok_dev), "test": (*args.test, args.tok_test)}
  columns = {name: measure(args, name, run_dir, splits)
             for name, run_dir in (("teacher", args.teacher), ("student", args.student))}
  if args.reference_student:
    columns["reference_student"] = measure_quality(args.reference_student, splits)
  header = (f"Teacher against student, {cpu_name()}, {os.cpu_count()} cores, "
            f"{datetime.date.today().isoformat()}; one run; speed over {args.dev[0]} "
            f"(batch-1: its first {args.latency_inputs}; calls of {args.batch} sentences, "
            f"LiteRT's as model calls of {args.litert_batch} rows).")
  text = table(columns, header)
  with open(args.output + ".md", "w", encoding="utf-8") as f:
    f.write(text)
  with open(args.output + ".json", "w", encoding="utf-8") as f:
    json.dump({"header": header, "columns": columns}, f, indent=1)
  print(text, end="")


if __name__ == "__main__":
  main()
