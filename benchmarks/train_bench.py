"""Training throughput and MFU of the Trainer on this machine's CPU, XLA on/off.

    .venv/bin/python benchmarks/train_bench.py [--sets transformer_tiny,transformer_small,transformer_base]
        [--steps N] [--warmup N] [--batch_size N] [--xla both|on|off]
        [--problem translate_ende_multi30k] [--raw_dir /work/shared/data/multi30k]
        [--hparams "layer_prepostprocess_dropout=0"] [--breakdown]

Data: real train batches of `--problem` (Multi30k from ../shared/data/multi30k
by default, generated into a temporary data_dir; translate_ende_numbers if that
directory is absent), made by the project's pipeline with the set's hparams
(bucket_mode, max_length, dropout as in the set; batch_size capped at 4096
tokens, and 1024 for transformer_base so its steps take seconds, not a minute).

Each (set, XLA) runs in its own subprocess (clean peak RSS, no shared compile
cache). The timed batches are the first `--steps` batches of the training
stream (with `--max_shapes N`: of its N most frequent batch shapes). Warm-up
first runs one batch of every distinct shape among them (each new shape is a
retrace, and with XLA a compile) and then more batches up to `--warmup`; it is
reported separately. The timed loop is `Trainer.train_step()` as `train()`
calls it (one update, including the host round trip for the loss).

Reported: target tokens/s (non-pad target ids), source+target tokens/s
(non-pad), steps/s, model TFLOPs per step (benchmarks/flops.py: matmuls on
the padded shapes, backward = 2 x forward), achieved GFLOP/s, MFU against the
best fp32 tf.matmul GFLOP/s measured in the same process,
padding fraction of the timed batches (pad ids / all ids, both sides), peak
RSS (getrusage ru_maxrss) and load average. The peak is the better of two
measurements (before and after the timed steps): other processes on a shared
machine lower it, and with it the MFU's denominator. `--breakdown` also times
forward(+loss), forward+backward and the optimizer apply on one batch of the
most frequent shape. (The training loss forms the vocabulary projection's gradients
in its forward pass, `training.loss.projected_cross_entropy`, so "forward(+loss)"
includes those two matmuls and "forward_backward" minus it understates the backward.)
"""

import argparse
import collections
import json
import os
import resource
import subprocess
import sys
import tempfile
import time

os.environ.setdefault("TF_CPP_MIN_LOG_LEVEL", "3")

HERE = os.path.dirname(os.path.abspath(__file__))
ROOT = os.path.dirname(HERE)
sys.path.insert(0, ROOT)
DEFAULT_RAW = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
DEFAULT_STEPS = {"transformer_tiny": 40, "transformer_small": 20, "transformer_multi30k": 40,
                 "transformer_base": 3}
DEFAULT_WARMUP = {"transformer_tiny": 10, "transformer_small": 10, "transformer_base": 1}
DEFAULT_MAX_SHAPES = {"transformer_base": 1}
# base's own 25000 (or 4096) tokens take ~1 min a step on 2 loaded cores.
DEFAULT_BATCH = {"transformer_base": 1024}
MAX_BATCH_TOKENS = 4096
RESULT_TAG = "TRAIN_BENCH_RESULT "


# Measurement (child process).

def matmul_peak_gflops(sizes=(2048, 4096), repeats=5):
  """Best fp32 tf.matmul GFLOP/s over a few n x n products (tf.function, no XLA)."""
  import tensorflow as tf
  best = 0.0
  for n in sizes:
    a = tf.random.normal([n, n])
    b = tf.random.normal([n, n])
    f = tf.function(lambda x, y: tf.reduce_sum(tf.matmul(x, y)))
    f(a, b).numpy()
    for _ in range(repeats):
      start = time.perf_counter()
      f(a, b).numpy()
      best = max(best, 2 * n ** 3 / (time.perf_counter() - start) / 1e9)
  return best


def _shape(batch):
  return (int(batch["inputs"].shape[0]), int(batch["inputs"].shape[1]),
          int(batch["targets"].shape[1]))


def _pick_batches(iterator, steps, max_shapes):
  """The first `steps` batches of the stream (of its `max_shapes` most frequent shapes)."""
  if not max_shapes:
    return [next(iterator) for _ in range(steps)]
  pool = [next(iterator) for _ in range(max(200, 10 * steps))]
  counts = collections.Counter(_shape(b)[1:] for b in pool)
  keep = {s for s, _ in counts.most_common(max_shapes)}
  return [b for b in pool if _shape(b)[1:] in keep][:steps]


def _nonpad(x):
  import tensorflow as tf
  return int(tf.reduce_sum(tf.cast(tf.not_equal(x, 0), tf.int32)))


def _time(fn, repeats):
  fn()
  times = []
  for _ in range(repeats):
    start = time.perf_counter()
    fn()
    times.append(time.perf_counter() - start)
  return min(times)


def breakdown(trainer, batch, use_xla, repeats=3):
  """Seconds for forward+loss, forward+backward, optimizer apply and a full step on `batch`."""
  import tensorflow as tf
  from t2t_keras.training import step
  model, optimizer, hp = trainer.model, trainer.optimizer, trainer.hparams
  variables = model.trainable_variables

  def loss_sum(batch):  # training.step's
    return step.loss_sum(model, batch, hp.label_smoothing, compact=not use_xla)

  @tf.function(jit_compile=use_xla)
  def forward(batch):
    return loss_sum(batch)

  @tf.function(jit_compile=use_xla)
  def forward_backward(batch):
    with tf.GradientTape() as tape:
      loss = loss_sum(batch)
    return tape.gradient(loss, variables)

  grads = forward_backward(batch)

  @tf.function
  def apply():  # as the trainer does: outside the XLA function
    optimizer.apply_gradients(zip(grads, variables))

  @tf.function(jit_compile=True)
  def apply_xla():
    optimizer.apply_gradients(zip(grads, variables))

  out = {
      "forward": _time(lambda: forward(batch).numpy(), repeats),
      "forward_backward": _time(lambda: [g.numpy() for g in forward_backward(batch)][0],
                                repeats),
      "apply": _time(lambda: (apply(), trainer.step.numpy()), repeats),
      "step": _time(lambda: float(trainer.step_fn.one_step(batch)[0]), repeats),  # pylint: disable=protected-access
  }
  try:
    out["apply_xla"] = _time(lambda: (apply_xla(), trainer.step.numpy()), repeats)
  except Exception as e:  # pylint: disable=broad-except
    out["apply_xla_error"] = f"{type(e).__name__}: {str(e)[:200]}"
  return out


def run_one(cfg):
  """Builds a Trainer for cfg and times it; returns a dict of results."""
  import tensorflow as tf
  from t2t_keras import registry
  from t2t_keras.data import pipeline
  from t2t_keras.training.config import TrainerConfig
  from t2t_keras.training.trainer import Trainer
  sys.path.insert(0, HERE)
  from flops import train_step_flops  # pylint: disable=import-outside-toplevel

  load_before = os.getloadavg()[0]
  peak = matmul_peak_gflops()
  hp = registry.hparams(cfg["set"])
  batch_size = cfg["batch_size"] or DEFAULT_BATCH.get(cfg["set"]) or min(hp.batch_size,
                                                                          MAX_BATCH_TOKENS)
  hp = hp.replace(batch_size=batch_size)
  if cfg["hparams"]:
    hp = hp.override(cfg["hparams"])
  problem = registry.problem(cfg["problem"])
  with tempfile.TemporaryDirectory() as output_dir:
    config = TrainerConfig(use_xla=cfg["xla"], eval_every=0, save_every=10 ** 9,
                           save_every_minutes=1e9)
    trainer = Trainer(problem, hp, cfg["data_dir"], output_dir, config,
                      log=lambda *a, **k: None)
    vocab_size = trainer.vocab.vocab_size
    params = trainer.model.count_params()
    timed = _pick_batches(trainer.iterator, cfg["steps"], cfg["max_shapes"])
    shapes = [_shape(b) for b in timed]
    distinct = list(dict.fromkeys(s[1:] for s in shapes))
    first_of_shape = [next(b for b in timed if _shape(b)[1:] == s) for s in distinct]
    warm = first_of_shape + [timed[i % len(timed)]
                             for i in range(max(0, cfg["warmup"] - len(first_of_shape)))]

    trainer.iterator = iter(warm)
    start = time.perf_counter()
    trainer.train_step()
    first_step = time.perf_counter() - start
    for _ in range(len(warm) - 1):
      trainer.train_step()
    warmup_seconds = time.perf_counter() - start

    trainer.iterator = iter(timed)
    target_tokens = 0.0
    start = time.perf_counter()
    for _ in timed:
      _, n = trainer.train_step()
      target_tokens += n
    seconds = time.perf_counter() - start

    source_tokens = sum(_nonpad(b["inputs"]) for b in timed)
    ids = sum(int(tf.size(b["inputs"])) + int(tf.size(b["targets"])) for b in timed)
    pads = ids - source_tokens - int(target_tokens)
    flops = train_step_flops(hp, vocab_size, shapes)
    result = {
        **cfg, "batch_size": batch_size, "params": params, "vocab_size": vocab_size,
        "peak_gflops": peak, "seconds": seconds, "steps_run": len(timed),
        "first_step_seconds": first_step, "warmup_seconds": warmup_seconds,
        "warmup_steps": len(warm), "distinct_shapes": len(distinct),
        "target_tokens": target_tokens, "source_tokens": source_tokens,
        "padding_fraction": pads / ids,
        "budget_tokens_per_step": sum(pipeline.batch_tokens(b) for b in timed) / len(timed),
        "mean_shape": [sum(s[i] for s in shapes) / len(shapes) for i in range(3)],
        "flops_per_step": flops / len(timed), "gflops": flops / seconds / 1e9,
        "load_before": load_before,
    }
    if cfg["breakdown"]:
      counts = collections.Counter(s[1:] for s in shapes)
      common = next(b for b in timed if _shape(b)[1:] == counts.most_common(1)[0][0])
      result["breakdown_shape"] = _shape(common)
      result["breakdown"] = breakdown(trainer, common, cfg["xla"])
  # Other processes share the cores: the peak is the better of before and after.
  result["peak_gflops_before"] = peak
  result["peak_gflops_after"] = matmul_peak_gflops()
  result["peak_gflops"] = max(peak, result["peak_gflops_after"])
  result["load_after"] = os.getloadavg()[0]
  result["max_rss_mib"] = resource.getrusage(resource.RUSAGE_SELF).ru_maxrss / 1024
  return result


# Driver (parent process).

def prepare_data(args):
  from t2t_keras.data import datagen  # pylint: disable=import-outside-toplevel
  problem = args.problem
  kwargs = {}
  if problem == "translate_ende_multi30k":
    if os.path.isdir(args.raw_dir):
      kwargs["raw_dir"] = args.raw_dir
    else:
      print(f"{args.raw_dir} not found: falling back to translate_ende_numbers")
      problem = "translate_ende_numbers"
  start = time.time()
  datagen.generate(problem, args.data_dir, log=None, **kwargs)
  print(f"data: {problem} in {args.data_dir} ({time.time() - start:.0f} s datagen)")
  return problem


def compile_seconds(on, off):
  """XLA compile time: warm-up with XLA minus warm-up without (both trace every shape once)."""
  return on["warmup_seconds"] - off["warmup_seconds"] * on["warmup_steps"] / off["warmup_steps"]


def format_table(results):
  head = (f"{'set':<18} {'xla':>3} {'batch':>5} {'steps':>5} {'tgt tok/s':>9} "
          f"{'src+tgt/s':>9} {'steps/s':>7} {'TFLOP/st':>8} {'GFLOP/s':>7} {'peak':>5} "
          f"{'MFU':>5} {'pad':>5} {'shapes':>6} {'warmup s':>8} {'RSS MiB':>7} {'load':>9}")
  lines = [head, "-" * len(head)]
  for r in results:
    lines.append(
        f"{r['set']:<18} {'on' if r['xla'] else 'off':>3} {r['batch_size']:>5} "
        f"{r['steps_run']:>5} {r['target_tokens'] / r['seconds']:>9,.0f} "
        f"{(r['target_tokens'] + r['source_tokens']) / r['seconds']:>9,.0f} "
        f"{r['steps_run'] / r['seconds']:>7.2f} {r['flops_per_step'] / 1e12:>8.3f} "
        f"{r['gflops']:>7.1f} {r['peak_gflops']:>5.0f} {r['gflops'] / r['peak_gflops']:>5.1%} "
        f"{r['padding_fraction']:>5.1%} {r['distinct_shapes']:>6} "
        f"{r['warmup_seconds']:>8.1f} {r['max_rss_mib']:>7.0f} "
        f"{r['load_before']:>4.2f}/{r['load_after']:<4.2f}")
  return "\n".join(lines)


def main():
  parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
  parser.add_argument("--sets", default="transformer_tiny,transformer_small,transformer_base")
  parser.add_argument("--steps", type=int, default=0,
                      help="timed steps (default: tiny 40, small 20, base 3)")
  parser.add_argument("--warmup", type=int, default=-1,
                      help="warm-up steps, at least one per distinct shape (default: 10; base 1)")
  parser.add_argument("--batch_size", type=int, default=0,
                      help=f"token budget (default: the set's, capped at {MAX_BATCH_TOKENS}; "
                           "base 1024)")
  parser.add_argument("--max_shapes", type=int, default=-1,
                      help="time only the N most frequent batch shapes (0: all; default: "
                           "all; base 1, to bound its XLA compile time)")
  parser.add_argument("--xla", default="both", choices=["both", "on", "off"])
  parser.add_argument("--base_xla", default="same", choices=["both", "on", "off", "same"],
                      help="XLA setting for transformer_base ('same': as --xla)")
  parser.add_argument("--problem", default="translate_ende_multi30k")
  parser.add_argument("--raw_dir", default=DEFAULT_RAW)
  parser.add_argument("--data_dir", default="", help="reuse generated data (default: temp dir)")
  parser.add_argument("--hparams", default="", help="extra overrides for every set")
  parser.add_argument("--breakdown", action="store_true",
                      help="also time forward / forward+backward / apply on one batch")
  parser.add_argument("--json", help="Also write the results (one dict per run) to this file.")
  parser.add_argument("--child", default="", help=argparse.SUPPRESS)
  args = parser.parse_args()

  if args.child:
    print(RESULT_TAG + json.dumps(run_one(json.loads(args.child))), flush=True)
    return

  import tensorflow as tf  # pylint: disable=import-outside-toplevel
  tmp = None
  if not args.data_dir:
    tmp = tempfile.TemporaryDirectory(prefix="train_bench_")
    args.data_dir = tmp.name
  problem = prepare_data(args)
  print(f"TF {tf.__version__}, {os.cpu_count()} CPUs, load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}", flush=True)
  results = []
  for name in args.sets.split(","):
    xla = args.base_xla if name == "transformer_base" and args.base_xla != "same" else args.xla
    for use_xla in {"both": [True, False], "on": [True], "off": [False]}[xla]:
      cfg = {"set": name, "xla": use_xla, "problem": problem, "data_dir": args.data_dir,
             "steps": args.steps or DEFAULT_STEPS.get(name, 20),
             "warmup": args.warmup if args.warmup >= 0 else DEFAULT_WARMUP.get(name, 10),
             "max_shapes": args.max_shapes if args.max_shapes >= 0
                           else DEFAULT_MAX_SHAPES.get(name, 0),
             "batch_size": args.batch_size, "hparams": args.hparams,
             "breakdown": args.breakdown}
      start = time.time()
      proc = subprocess.run([sys.executable, os.path.abspath(__file__), "--child",
                             json.dumps(cfg)], capture_output=True, text=True, check=False)
      lines = [l for l in proc.stdout.splitlines() if l.startswith(RESULT_TAG)]
      if proc.returncode or not lines:
        print(f"{name} xla={use_xla}: failed (rc {proc.returncode})\n{proc.stderr[-3000:]}")
        continue
      r = json.loads(lines[-1][len(RESULT_TAG):])
      results.append(r)
      b, s, t = r["mean_shape"]
      print(f"{name} XLA {'on' if use_xla else 'off'}: {r['params'] / 1e6:.1f}M params, vocab "
            f"{r['vocab_size']}, batch_size {r['batch_size']}{', ' + args.hparams if args.hparams else ''}; "
            f"{r['steps_run']} timed steps in {r['seconds']:.1f} s after {r['warmup_steps']} "
            f"warm-up ({r['warmup_seconds']:.1f} s, first {r['first_step_seconds']:.1f} s, "
            f"{r['distinct_shapes']} shapes); mean batch {b:.0f} x ({s:.1f} src, {t:.1f} tgt); "
            f"{time.time() - start:.0f} s wall", flush=True)
      if r.get("breakdown_shape"):
        bd = r["breakdown"]
        parts = ", ".join(f"{k} {v * 1e3:.0f} ms" for k, v in bd.items() if k != "apply_xla_error")
        print(f"  breakdown on batch {tuple(r['breakdown_shape'])}: {parts}"
              + (f"; apply_xla failed: {bd['apply_xla_error']}" if "apply_xla_error" in bd else ""),
              flush=True)
  print()
  print(format_table(results))
  by = {(r["set"], r["xla"]): r for r in results}
  for name in args.sets.split(","):
    if (name, True) in by and (name, False) in by:
      on, off = by[name, True], by[name, False]
      ratio = (on["target_tokens"] / on["seconds"]) / (off["target_tokens"] / off["seconds"])
      print(f"{name}: XLA on / off = {ratio:.2f}x target tokens/s; XLA compile time "
            f"{compile_seconds(on, off):.1f} s ({on['distinct_shapes']} shapes: warm-up "
            f"{on['warmup_seconds']:.1f} s with XLA, {off['warmup_seconds']:.1f} s without)")
  if args.json:
    with open(args.json, "w") as f:
      json.dump(results, f, indent=2)
  if tmp:
    tmp.cleanup()


if __name__ == "__main__":
  main()
