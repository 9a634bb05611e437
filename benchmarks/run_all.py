"""All the speed and memory figures in one command, with the configuration used.

    .venv/bin/python benchmarks/run_all.py [--set transformer_multi30k] [--export_dir RUN/export]
        [--quick] [--json all.json]

Runs, each in its own process (clean peak memory, no shared compile cache):

  train   benchmarks/train_bench.py on Multi30k (numbers if ../shared/data is
          absent), --set with XLA off and on: target tokens/s, MFU against the
          fp32 matmul peak measured in the same process, padding fraction,
          peak RSS, XLA compile time (warm-up with XLA minus warm-up without)
  decode  benchmarks/decode_bench.py: cached beam search, beam 4, batch 32,
          40 output tokens, XLA on and off: sentences/s, first call (trace +
          compile), peak RSS
  export  benchmarks/export_bench.py: SavedModel load, first translation,
          one-sentence latency, batch-32 throughput, peak RSS of the serving
          process (--export_dir: a real export; default: a random
          transformer_small export)

and prints one summary table. --quick shortens every part (fewer timed steps
and repeats) to check the command runs; its figures are noisier. The machine
should be otherwise idle: the figures are per-core throughputs, and the load
average before and after each training run is printed beside them.
"""

import argparse
import json
import os
import subprocess
import sys
import tempfile
import time

HERE = os.path.dirname(os.path.abspath(__file__))


def _run(name, argv):
  """Runs benchmarks/<name>.py with argv, echoing its output; exits on failure."""
  print(f"\n=== {name}: {' '.join(argv)}", flush=True)
  start = time.time()
  proc = subprocess.run([sys.executable, os.path.join(HERE, f"{name}.py")] + argv, check=False)
  if proc.returncode:
    sys.exit(f"{name} failed with exit code {proc.returncode}")
  print(f"=== {name}: {time.time() - start:.0f} s", flush=True)


def _load(path):
  with open(path) as f:
    return json.load(f)


def summary(train, decode, export):
  """Summary lines of the three benchmarks' JSON results."""
  # pylint: disable=import-outside-toplevel
  sys.path.insert(0, HERE)
  from train_bench import compile_seconds
  by_xla = {r["xla"]: r for r in train}
  lines = []
  for xla, r in sorted(by_xla.items()):
    tok_s = r["target_tokens"] / r["seconds"]
    lines.append(
        f"train   {r['set']} ({r['params'] / 1e6:.1f}M params, batch {r['batch_size']} tokens, "
        f"{r['problem']}), XLA {'on ' if xla else 'off'}: {tok_s:,.0f} target tok/s, "
        f"MFU {r['gflops'] / r['peak_gflops']:.1%} ({r['gflops']:.0f} of {r['peak_gflops']:.0f} "
        f"GFLOP/s matmul peak), padding {r['padding_fraction']:.1%}, "
        f"peak RSS {r['max_rss_mib']:,.0f} MiB")
  if True in by_xla and False in by_xla:
    on, off = by_xla[True], by_xla[False]
    lines.append(f"train   XLA compile time {compile_seconds(on, off):.1f} s for "
                 f"{on['distinct_shapes']} batch shapes; XLA on/off "
                 f"{(on['target_tokens'] / on['seconds']) / (off['target_tokens'] / off['seconds']):.2f}x")
  cfg = decode["config"]
  for variant, rate in decode["sentences_per_s"].items():
    lines.append(f"decode  {variant:<10} beam {cfg['beam']}, batch {cfg['batch']}, "
                 f"{cfg['length']} tokens: {rate:.1f} sentences/s (first call "
                 f"{decode['first_call_s'][variant]:.1f} s)")
  lines.append(f"decode  peak RSS {decode['max_rss_mib']:,.0f} MiB")
  lines.append(f"export  load {export['load_s']:.2f} s, first translation {export['first_s']:.2f} s, "
               f"one sentence {export['latency_median_s'] * 1e3:.0f} ms median "
               f"({export['latency_p90_s'] * 1e3:.0f} ms p90), batch {export['batch']}: "
               f"{export['throughput_sentences_per_s']:.1f} sentences/s, "
               f"peak RSS {export['max_rss_mib']:,.0f} MiB")
  return lines


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--set", default="transformer_multi30k", help="hparams set to train")
  parser.add_argument("--export_dir", help="time this export (default: a random small model)")
  parser.add_argument("--quick", action="store_true", help="fewer steps and repeats")
  parser.add_argument("--json", help="also write all results to this file")
  args = parser.parse_args()

  import platform  # pylint: disable=import-outside-toplevel
  print(f"{platform.platform()}, Python {platform.python_version()}, {os.cpu_count()} CPUs, "
        f"load average {' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
  with tempfile.TemporaryDirectory(prefix="bench_") as tmp:
    out = {k: os.path.join(tmp, f"{k}.json") for k in ("train", "decode", "export")}
    _run("train_bench", [f"--sets={args.set}", "--xla=both", f"--json={out['train']}"]
         + (["--steps=8", "--warmup=0"] if args.quick else []))
    _run("decode_bench", ["--variants=cached-xla,cached", "--beam=4", "--batch=32",
                          f"--json={out['decode']}"] + (["--repeats=1"] if args.quick else []))
    _run("export_bench", [f"--json={out['export']}"]
         + ([f"--export_dir={args.export_dir}"] if args.export_dir else [])
         + (["--sentences=3", "--repeats=1"] if args.quick else []))
    results = {k: _load(v) for k, v in out.items()}
  lines = summary(results["train"], results["decode"], results["export"])
  print("\n=== summary" + (" (--quick: noisy)" if args.quick else ""))
  print("\n".join(lines))
  if args.json:
    with open(args.json, "w") as f:
      json.dump(results, f, indent=2)


if __name__ == "__main__":
  main()
