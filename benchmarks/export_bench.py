"""Exported-model speed: load time, first translation, latency, batch throughput.

    python benchmarks/export_bench.py                       # random transformer_small export
    python benchmarks/export_bench.py --decode_hparams=jit=false
    python benchmarks/export_bench.py --export_dir=runs/base/export   # a real export

Without --export_dir it makes a throw-away run: a sentencepiece vocabulary
(--vocab_size, trained on Multi30k's English+German training text when
/work/shared/data or --corpus has it, else on a few built-in sentences), a
transformer_small model (2+2 layers, d_model 256, d_ff 1024, 4 heads) with
random weights, and exports it with `export_model` and --decode_hparams.
Random weights rarely emit EOS, so outputs run to the maximum length (input
length + extra_length): a pessimistic load for the decoder (a trained model
stops near the input length).

The timing runs in a fresh process that imports only tensorflow and
tensorflow_text (as a server would):
  load          tf.saved_model.load
  first         the first one-sentence call (traces and XLA-compiles that shape)
  latency       one sentence per call, median and 90th percentile over
                --sentences distinct sentences, after one warm-up call each
  throughput    a batch of --batch sentences per call: sentences/s (median of
                --repeats calls, after a warm-up call)
"""

import argparse
import gzip
import json
import os
import statistics
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
MULTI30K = os.path.join(HERE, "..", "..", "shared", "data", "multi30k")
BUILTIN = ["A man in a blue shirt is standing on a ladder cleaning windows.",
           "Two young children are playing in the sand at the beach.",
           "A group of people stand in front of a building.",
           "A woman is riding a bicycle down a busy city street.",
           "The dog runs through the tall grass.",
           "Three men are working on a construction site.",
           "A little girl in a pink dress climbs the stairs.",
           "People are sitting at tables outside a restaurant."]


def _read(path, limit=None):
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    lines = [line.rstrip("\n") for line in f if line.strip()]
  return lines[:limit] if limit else lines


def source_sentences(args, count):
  if args.sentences_file:
    lines = _read(args.sentences_file)
  elif os.path.exists(os.path.join(MULTI30K, "test_2016_flickr.en.gz")):
    lines = _read(os.path.join(MULTI30K, "test_2016_flickr.en.gz"))
  else:
    lines = BUILTIN
  return [lines[i % len(lines)] for i in range(count)]


def make_export(args, workdir):
  """A random transformer_small run in workdir, exported; returns the export path."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  from t2t_keras import registry  # pylint: disable=import-outside-toplevel
  from t2t_keras.data import vocabulary  # pylint: disable=import-outside-toplevel
  from t2t_keras.models.transformer import Transformer  # pylint: disable=import-outside-toplevel
  from t2t_keras.exporting import export  # pylint: disable=import-outside-toplevel
  from t2t_keras import runs  # pylint: disable=import-outside-toplevel

  if args.corpus:
    corpus = _read(args.corpus)
  elif os.path.exists(os.path.join(MULTI30K, "train.en.gz")):
    corpus = (_read(os.path.join(MULTI30K, "train.en.gz"))
              + _read(os.path.join(MULTI30K, "train.de.gz")))
  else:
    corpus = BUILTIN * 10
  start = time.perf_counter()
  vocab = vocabulary.train_sentencepiece(corpus, os.path.join(workdir, "spm.model"),
                                         args.vocab_size)
  print(f"vocabulary: {vocab.vocab_size} pieces from {len(corpus)} lines "
        f"({time.perf_counter() - start:.1f} s)")
  tf.keras.utils.set_random_seed(1)
  hp = registry.hparams("transformer_small").replace(layer_prepostprocess_dropout=0.0)
  model = Transformer(vocab.vocab_size, hp)
  model.build_for_ids()
  tf.train.CheckpointManager(tf.train.Checkpoint(model=model), workdir, 1).save(
      checkpoint_number=1)
  runs.save_run_info(workdir, hp, "export_bench", vocab.vocab_size,
                         os.path.join(workdir, "spm.model"))
  print(f"model: transformer_small, {model.count_params():,} parameters (random weights)")
  start = time.perf_counter()
  path = export.export_model(workdir, decode_hparams=args.decode_hparams, log=None)
  print(f"export: {time.perf_counter() - start:.1f} s -> {path}")
  return path


def measure(export_path, sentences, batch, repeats):
  """Timings of an export in this process (imports only tensorflow + tensorflow_text)."""
  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  import tensorflow_text  # noqa: F401  pylint: disable=import-outside-toplevel,unused-import

  if not tf.io.gfile.exists(os.path.join(export_path, "saved_model.pb")):
    versions = sorted((int(n.rstrip("/")) for n in tf.io.gfile.listdir(export_path)
                       if n.rstrip("/").isdigit()), reverse=True)
    if not versions:
      raise FileNotFoundError(f"no SavedModel in {export_path}")
    export_path = os.path.join(export_path, str(versions[0]))
  result = {"export": export_path}
  start = time.perf_counter()
  model = tf.saved_model.load(export_path)
  fn = model.signatures["serving_default"]
  result["load_s"] = time.perf_counter() - start

  def call(lines):
    t = time.perf_counter()
    out = fn(inputs=tf.constant(lines))
    out["outputs"].numpy()
    return time.perf_counter() - t, out

  result["first_s"], out = call(sentences[:1])
  result["example"] = [sentences[0], out["outputs"].numpy()[0].decode("utf-8")]
  singles = sentences[:max(1, len(sentences))]
  warm = [call([s])[0] for s in singles]  # one warm-up per sentence (its shape may be new)
  times = sorted(call([s])[0] for s in singles)
  result["new_shape_first_call_max_s"] = max(warm)
  result["latency_median_s"] = statistics.median(times)
  result["latency_p90_s"] = times[min(len(times) - 1, int(0.9 * len(times)))]
  lines = [sentences[i % len(sentences)] for i in range(batch)]
  result["batch_first_s"], out = call(lines)
  batch_times = sorted(call(lines)[0] for _ in range(repeats))
  result["batch"] = batch
  result["batch_median_s"] = statistics.median(batch_times)
  result["throughput_sentences_per_s"] = batch / result["batch_median_s"]
  lengths = [len(t.decode("utf-8").split()) for t in out["outputs"].numpy().tolist()]
  result["mean_output_words"] = sum(lengths) / len(lengths)
  import resource  # pylint: disable=import-outside-toplevel
  result["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  return result


def main():
  parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
  parser.add_argument("--export_dir", help="An export (version dir or its parent); "
                      "default: export a random transformer_small model.")
  parser.add_argument("--decode_hparams", default="", help="For the random model's export.")
  parser.add_argument("--vocab_size", type=int, default=8000)
  parser.add_argument("--corpus", help="Text file for the random model's vocabulary.")
  parser.add_argument("--sentences_file", help="Source sentences (default Multi30k test 2016).")
  parser.add_argument("--sentences", type=int, default=10, help="Sentences for latency.")
  parser.add_argument("--batch", type=int, default=32)
  parser.add_argument("--repeats", type=int, default=3)
  parser.add_argument("--measure", action="store_true", help=argparse.SUPPRESS)
  parser.add_argument("--json", help="Also write the figures to this JSON file.")
  args = parser.parse_args()

  sentences = source_sentences(args, max(args.sentences, 1))
  if args.measure:  # the child process: tensorflow + tensorflow_text only
    print(json.dumps(measure(args.export_dir, sentences, args.batch, args.repeats)))
    return

  with tempfile.TemporaryDirectory() as workdir:
    # Absolute paths: the child runs in "/".
    export_path = os.path.abspath(args.export_dir or make_export(args, workdir))
    cmd = [sys.executable, os.path.abspath(__file__), "--measure", f"--export_dir={export_path}",
           f"--sentences={args.sentences}", f"--batch={args.batch}",
           f"--repeats={args.repeats}"]
    if args.sentences_file:
      cmd.append(f"--sentences_file={os.path.abspath(args.sentences_file)}")
    # A fresh process, started outside the repository (no t2t_keras on its path
    # unless installed): what a server sees.
    done = subprocess.run(cmd, capture_output=True, text=True, cwd="/")
    if done.returncode:
      sys.exit(done.stderr[-4000:])
    result = json.loads(done.stdout.strip().splitlines()[-1])
  print(f"export               {result['export']}")
  print(f"load                 {result['load_s']:.2f} s")
  print(f"first translation    {result['first_s']:.2f} s (trace, + XLA compile of its shape with jit)")
  print(f"new-shape first call {result['new_shape_first_call_max_s']:.2f} s (max over "
        f"{args.sentences} sentences)")
  print(f"one-sentence latency {result['latency_median_s'] * 1000:.0f} ms median, "
        f"{result['latency_p90_s'] * 1000:.0f} ms p90")
  print(f"batch {result['batch']:<3}            {result['batch_median_s']:.2f} s -> "
        f"{result['throughput_sentences_per_s']:.1f} sentences/s "
        f"(first batch call {result['batch_first_s']:.2f} s; "
        f"{result['mean_output_words']:.1f} words/output)")
  print(f"example              {result['example'][0]!r} -> {result['example'][1][:80]!r}")
  print(f"peak RSS (serving)   {result['max_rss_mib']:.0f} MiB")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(result, f, indent=2)


if __name__ == "__main__":
  main()
