"""benchmarks/peer_compare.py's report: the ratio and MFU lines of the summary and its printing.

Each figure is the median over a run's rounds of one side's runs (the figures that
peer_rounds.Comparison keeps); a ratio is ours / the other side's. Pure formatting and
arithmetic, but for print_summary. What is measured and how: peer_compare.py's docstring.
"""

import statistics

import bench_sizes
from peer_sides import CT2_TYPES

# Dense tensor-core peaks from NVIDIA's data sheets (without sparsity), TFLOP/s: float32
# runs on TF32 tensor cores there (TensorFlow's default on Ampere and later).
GPU_PEAK_TFLOPS = (("H100 PCIe", {"float32": 378.0, "mixed_bfloat16": 756.0}),
                   ("H100 NVL", {"float32": 417.5, "mixed_bfloat16": 835.0}),
                   ("H100", {"float32": 494.7, "mixed_bfloat16": 989.4}),
                   ("H200", {"float32": 494.7, "mixed_bfloat16": 989.4}),
                   ("A100", {"float32": 156.0, "mixed_bfloat16": 312.0}))


def gpu_peak_tflops(name, precision):
  """The data-sheet dense peak (TFLOP/s) of the GPU called `name` in `precision`, or None."""
  for key, peaks in GPU_PEAK_TFLOPS:
    if key in name:
      return peaks.get(precision)
  return None


def mfu_line(label, tflops_s, peak_tflops, peak_label):
  """'MFU <label>  X TFLOP/s = Y% of <peak_label> Z TFLOP/s'."""
  if tflops_s is None or not peak_tflops:
    return f"MFU {label:<10} n/a ({peak_label}: not measured)"
  return (f"MFU {label:<10} {tflops_s:,.2f} TFLOP/s = {tflops_s / peak_tflops:.1%} of "
          f"{peak_label} {peak_tflops:,.2f} TFLOP/s")


def median(values):
  values = [v for v in values if v is not None]
  return statistics.median(values) if values else None


def format_value(value, unit):
  if value is None:
    return "n/a"
  return f"{value:,.1f}" if unit == "sent_s" else f"{value:,.0f}"


def ratio_line(name, ours, other, other_label, n_ours, n_other, unit, note=""):
  """One summary line: 'RATIO name  ours X / label Y = R.RRx   (...)'."""
  ratio = f"{ours / other:.2f}x" if ours is not None and other else "n/a"
  runs = (f"medians of {n_ours} alternated runs each" if n_ours == n_other else
          f"medians of ours {n_ours} / {other_label} {n_other} runs")
  return (f"RATIO {name:<24} ours {format_value(ours, unit)} / {other_label} "
          f"{format_value(other, unit)} = {ratio}   ({runs}{'; ' + note if note else ''})")


def precision_line(precision):
  """What --precision means for both sides, as the summary prints it."""
  if precision == "float32":
    return "precision float32 on both sides"
  return (f"precision {precision} on both sides, except our beam search: float32, as "
          "t2t-decoder and the SavedModel run it")


def values(runs, part, side, key):
  """The figure `key` of each run of `part` by `side`, in run order (runs without it left out)."""
  return [r[key] for r in runs
          if r["part"] == part and r["side"] == side and r.get(key) is not None]


def summary(runs, args, size, peak_gflops, parts, with_ct2):
  """The summary's lines, its ratios and (with the train part, else None) its MFU figures.

  `args` are peer_compare.py's (budget_min, quick, batch, hparams, precision, gpus), `size`
  the bench_sizes size of train/decode, `peak_gflops` the measured matmul peak (or None).
  """
  lines, ratios = [], []

  def add(name, part, ours_key, other_side, other_key, unit, note="", ours_side="ours"):
    ours_v = values(runs, part, ours_side, ours_key)
    other_v = values(runs, part, other_side, other_key)
    o, p = median(ours_v), median(other_v)
    label = other_side if other_side != "ct2" else f"ct2_{other_key.split('_')[0]}"
    lines.append(ratio_line(name, o, p, label, len(ours_v), len(other_v), unit, note))
    ratios.append({"name": name, "ours": o, "other": p, "other_label": label,
                   "ratio": o / p if o is not None and p else None,
                   "ours_runs": ours_v, "other_runs": other_v})

  batch = size.sentences(args.batch)
  if "train" in parts:
    add("train_step_tok_s", "step", "train_target_tok_s", "peer", "train_target_tok_s",
        "tok_s", f"size {size.name}, batch {batch} x {size.length}, "
        f"{size.tokens(batch)} target tokens/step")
  if "decode" in parts:
    lengths = values(runs, "step", "peer", "decode_length_mean")
    note = "beam 4, batch 32, 40 tokens"
    if lengths and min(lengths) < 40:
      note += f"; the peer's mean decoded length was {min(lengths):.1f} (stops at EOS)"
    add("decode_sent_s", "step", "decode_sent_s", "peer", "decode_sent_s", "sent_s", note)
    if with_ct2:
      for t in CT2_TYPES:
        add("decode_sent_s", "step", "decode_sent_s", "ct2", f"{t}_sent_s", "sent_s",
            "CTranslate2 " + t)
  if "multi30k" in parts:
    add("multi30k_tok_s", "multi30k", "tgt_tok_s", "peer", "tgt_tok_s", "tok_s",
        f"{args.budget_min:g} min each; median of {1 if args.quick else 100}-step "
        "windows, first excluded")
  mfu = None
  if "train" in parts:
    add("train_step_peak_rss_mib", "step", "max_rss_mib", "peer", "max_rss_mib", "mib",
        "peak RSS of the train+decode process, os.wait4; lower is better")
    more, mfu = mfu_lines(runs, args, size, peak_gflops)
    lines.extend(more)
  return lines, ratios, mfu


def mfu_lines(runs, args, size, peak_gflops):
  """Each side's model FLOPs per step (benchmarks/flops.py; both run the same model on the
  same batch) over its median step time, against the measured matmul peak of this
  machine in the run's precision and, on a GPU, the card's data-sheet dense peak:
  (lines, the figures for the report)."""
  step_flops = bench_sizes.step_flops(bench_sizes.hparams(size, args.hparams), size,
                                      args.batch)
  lines = [f"MFU model {step_flops / 1e12:.3f} TFLOP a step (matmuls, backward = 2 x "
           "forward; benchmarks/flops.py)"]
  peaks = [] if args.gpus else [(f"measured {args.precision} matmul peak",
                                 peak_gflops / 1000 if peak_gflops else None)]
  for name in args.gpus:
    peaks.append((f"{name} dense {args.precision} peak", gpu_peak_tflops(name, args.precision)))
  mfu = {"flops_per_step": step_flops, "peaks_tflops": dict(peaks)}
  for side in ("ours", "peer"):
    step_s = median(values(runs, "step", side, "train_median_step_s"))
    tflops_s = step_flops / step_s / 1e12 if step_s else None
    mfu[side] = tflops_s
    for label, peak in peaks:
      lines.append(mfu_line(side, tflops_s, peak, label))
  return lines, mfu


def print_summary(args, cpu, versions, lines, failures):
  """The summary as the run ends: what was compared, the lines, the failures, the JSON.

  `versions`: {"ours": ..., "peer": ...} as package_versions gave them.
  """
  ours, peer = versions["ours"], versions["peer"]
  print("\n=== summary (ours / other; each figure the median over this run's rounds)"
        + (" --quick: noise, not a measurement" if args.quick else ""))
  print(precision_line(args.precision) + "\n"
        + (f"both sides with --hparams={args.hparams}\n" if args.hparams else "")
        + (f"ours with --ours_hparams={args.ours_hparams}\n" if args.ours_hparams else "")
        + f"CPU {cpu}" + (f"; GPU {', '.join(args.gpus)}" if args.gpus else "")
        + f"; ours tensorflow {ours.get('tensorflow')}, peer tensorflow "
        f"{peer.get('tensorflow')} (tf-models-official "
        f"{peer.get('tf-models-official')})")
  print("\n".join(lines))
  for failure in failures:
    print(f"FAILED {failure}")
  print(f"written: {args.json}")
