"""This project against TF Model Garden (and CTranslate2) on this machine, in one run.

    .venv/bin/python benchmarks/peer_compare.py [--parts train,decode,multi30k] [--rounds 2]
        [--budget_min 5] [--peer_python /tmp/peer/bin/python] [--ct2_python /tmp/ct2/bin/python]
        [--bench_dir ../shared/bench] [--work_dir DIR] [--json out.json] [--quick]
        [--precision float32|mixed_bfloat16] [--size small|base|big|tiny] [--batch N]
        [--hparams "norm_type=pre"]

The peer is TF Model Garden's Seq2SeqTransformer, measured by the scripts in
../shared/bench (see its README; the peer needs its own venv). Every figure below is
measured in this run, each side in its own process, alternating peer and ours --rounds
times (peer, ours, peer, ours, ...); a ratio is ours / peer of the medians over the
rounds (each run's own figure is already a median, see below). Nothing is compared with
a number from another day. The machine should be otherwise idle: the load average before
each child is printed and kept.

Sizes (--size; benchmarks/bench_sizes.py): train and decode run at one model size. The
default, small, is described below (every earlier figure used it). base and big are the
paper's transformer_base and transformer_big (post-norm, P_drop 0.1 / 0.3, no attention
or ReLU dropout) with a 37,000-entry vocabulary on [64, 64] batches of random ids (4,096
target tokens; --batch N: N x 64 on both sides); the peer is then
benchmarks/model_garden_sized.py, built from the same hparams (--hparams overrides them on
both sides, e.g. norm_type=pre: Model Garden's post-norm model fails under
mixed_bfloat16), and CTranslate2's model is built with the size's shapes by
ct2_decode_bench.py's own builder. tiny (transformer_tiny) checks that it all runs.

MFU: after the ratios, each side's model FLOPs per step (benchmarks/flops.py: the size's
matmuls, backward = 2 x forward) over its median step time, against this CPU's matmul
peak in the run's precision measured first in a child (TensorFlow's matmul, the best of
[4096, 256] x [256, 1024] and [4096, 1024] x [1024, 4096]) or, on a GPU, against the
card's data-sheet dense peak (float32 as TF32, TensorFlow's default there).

  train     One training step on identical fixed shapes. Peer: model_garden_peer.py
            (vocab 8000, 3+3 layers, d_model 256, 4 heads, d_ff 1024, pre-norm, dropout,
            attention dropout and ReLU dropout 0.1, batch 128 x 32 random ids without
            padding, Adam, label smoothing 0.1). Ours: benchmarks/step_bench.py, the same
            shapes and ids through `Trainer.train_step()` (transformer_multi30k with those
            dropouts; XLA as the Trainer's default: off on a CPU, on where TensorFlow sees a
            GPU). The peer's JIT follows ours: JIT=0 (its default) on a CPU, JIT=1 with a
            GPU, so both compile with XLA or neither does. Both: 1 traced step, 3 warm-up steps, then 15
            timed steps (2 with --quick); figure: 4096 / median step time = target tokens/s.
  decode    Beam 4, alpha 0.6, batch 32, 40 output tokens, sentences/s, from the same two
            processes (after the training steps): the peer's beam search (a plain
            tf.function, max length 40; it may stop at EOS, so its mean decoded length is
            printed) and ours with the decoder's defaults (XLA on) and eos_id=-1, so exactly
            40 tokens. Both: first call apart, then 5 timed calls (1 with --quick), median.
            Plus CTranslate2 float32 and int8 (ct2_decode_bench.py --pre_norm, random weights,
            the same shapes, forced length 40, intra_threads = CPU count, the median of its
            7 calls; 2 with --quick) when --ct2_python exists, run after ours in each round.
  multi30k  Real training throughput on Multi30k over the same minutes of wall clock.
            Peer: model_garden_multi30k.py --budget_min B; its "training done: ... median
            tgt tok/s N" line is read (the median of its 100-step windows, first window
            excluded), then the process is terminated (its decoding is not waited for).
            Ours: t2t-trainer (python -m t2t_keras.bin.trainer) on translate_ende_multi30k,
            transformer_multi30k with attention_dropout=0.1,relu_dropout=0.1 (the peer's
            dropout 0.2 / 0.1 / 0.1), --eval_every=0 --log_every=100, no checkpoint before
            the end, stopped with SIGTERM B minutes after its "training ..." line (the
            trainer saves and exits); figure: the median of its 100-step windows' "tgt tok/s",
            first window excluded (the peer's rule; all windows when there is no other).
            Both count only non-pad target tokens (EOS included): the peer's train_step
            sums tf.not_equal(tgt, PAD_ID), the Trainer's replica_step sums
            tf.not_equal(batch["targets"], 0). Both start their clock at the training
            loop, the first (traced) step included; both use 4096-token length-bucketed
            batches. One difference: the peer's window time is the sum of its train_step
            calls only, ours the window's wall clock (input pipeline and loop included),
            which, if anything, favours the peer. Our datagen runs once before any timing
            and the data dir is reused across rounds (under --work_dir), and so is the
            trainer's persistent XLA cache (t2t_keras/xla_cache.py, emptied at the start:
            round 1 compiles the fused kernels of every new batch shape, 0.5-0.8 s each,
            later rounds load them, as a second run on a user's machine). With --quick:
            0.3 minutes and 1-step windows, just to check that it runs.

Precision: float32 on both sides by default (the peer's scripts as they are). With
--precision mixed_bfloat16 both sides run bfloat16 matmuls with float32 variables: ours
with precision=mixed_bfloat16, the peer's unchanged scripts under tf_keras's global
mixed_bfloat16 policy (set before the script builds its model; Model Garden casts its
logits back to float32). The peer's beam search then runs in bf16 too (its policy); ours
stays float32, as t2t-decoder and the SavedModel run it (they restore the weights into a
float32 model; under XLA on CPU bf16 dots are no faster than float32, so a bf16 search
was slower). CTranslate2 keeps its float32 and int8 types. Training in bf16 pays where
bf16 matmuls are faster (a Zen 5 with AVX512-BF16: 1.85x float32's rate; a Xeon listing
AVX512-BF16 without AMX: 0.55x, and both sides slower; `python -m
t2t_keras.training.precision` measures it).

Peak memory: the peak RSS of each child, measured here with os.wait4 (the kernel's
ru_maxrss of that process), not parsed from its output. The summary gives it for the
train/decode process of each side (model, optimizer, the training steps and beam search;
ours also holds the Trainer's tf.data input pipeline, as `train()` does).

On a GPU machine (TensorFlow in our python sees one; its name is printed) the same parts
run on the GPU, each side placing its ops there as TensorFlow does by default; the peak
RSS is then host memory only.

Printed: the CPU model, TF versions of both sides, each child's output (full logs under
--work_dir/logs), and a summary of lines like

    RATIO train_step_tok_s  ours 5,800 / peer 4,500 = 1.29x   (medians of 2 alternated runs each)

Everything also goes to --json (default <work_dir>/peer_compare.json). Without the peer's
venv it says "peer not installed", how to install it, and exits 0; without CTranslate2's
venv that part is skipped with a message.

This file is the command line; beside it, peer_sides.py starts each side's child and
reads its figures from the output, peer_rounds.py runs the rounds of each part
(`Comparison`), and peer_report.py makes the summary's ratio and MFU lines.
"""

import argparse
import os
import shutil
import sys
import tempfile

HERE = os.path.dirname(os.path.abspath(__file__))
sys.path.insert(0, HERE)
# pylint: disable=wrong-import-position
import bench_sizes  # noqa: E402
import peer_report  # noqa: E402  (the summary's lines)
import peer_rounds  # noqa: E402  (the rounds of each part)
import peer_sides  # noqa: E402  (each side's child and its output)
from step_bench import data_ready  # noqa: E402  (no TensorFlow at import)
# pylint: enable=wrong-import-position

ROOT = os.path.dirname(HERE)
DEFAULT_BENCH = os.path.normpath(os.path.join(ROOT, "..", "shared", "bench"))
DEFAULT_RAW = os.path.normpath(os.path.join(ROOT, "..", "shared", "data", "multi30k"))
DEFAULT_WORK = os.path.join(tempfile.gettempdir(), "t2t_peer_compare")
PEER_INSTALL = ("python3 -m venv /tmp/peer && /tmp/peer/bin/pip install -q tf-models-official "
                "sentencepiece sacremoses")
CT2_INSTALL = "python3 -m venv /tmp/ct2 && /tmp/ct2/bin/pip install ctranslate2 numpy"
PARTS = ("train", "decode", "multi30k")
PRECISIONS = ("float32", "mixed_bfloat16")


def check_bench_dir(bench_dir, parts, with_ct2, size="small"):
  """Names of the shared scripts these parts need that bench_dir lacks (the small size's
  peer step is the shared script; the other sizes' is benchmarks/model_garden_sized.py)."""
  need = []
  if {"train", "decode"} & set(parts) and size == "small":
    need.append(peer_sides.SCRIPTS["step"])
  if "decode" in parts and with_ct2:
    need.append(peer_sides.SCRIPTS["ct2"])
  if "multi30k" in parts:
    need.append(peer_sides.SCRIPTS["multi30k"])
  return [s for s in need if not os.path.isfile(os.path.join(bench_dir, s))]


def parse_args():
  """The command line, checked: (args, the parts in order); the defaults that depend on
  other flags (--budget_min, --json) filled in and the directories made absolute."""
  parser = argparse.ArgumentParser(
      description=__doc__.splitlines()[0],
      epilog="See the module docstring for exactly what is measured.")
  parser.add_argument("--parts", default=",".join(PARTS),
                      help="comma-separated: train, decode, multi30k (default: all)")
  parser.add_argument("--rounds", type=int, default=2,
                      help="alternations peer, ours per part (default 2: peer, ours, peer, ours)")
  parser.add_argument("--budget_min", type=float, default=None,
                      help="minutes of Multi30k training per side and round (default 5; "
                           "--quick: 0.3)")
  parser.add_argument("--peer_python",
                      default=os.environ.get("PEER_PYTHON", "/tmp/peer/bin/python"),
                      help="the peer venv's python (default: $PEER_PYTHON or /tmp/peer/bin/python)")
  parser.add_argument("--ct2_python", default="/tmp/ct2/bin/python",
                      help="CTranslate2 venv's python (skipped when absent)")
  parser.add_argument("--bench_dir", default=DEFAULT_BENCH,
                      help="the peer's scripts (default: ../shared/bench beside the repository)")
  parser.add_argument("--raw_dir", default=DEFAULT_RAW, help="raw Multi30k (train.en.gz ...)")
  parser.add_argument("--work_dir", default=DEFAULT_WORK,
                      help="data, logs, model and run dirs (reused across rounds and runs)")
  parser.add_argument("--json",
                      help="write everything here (default: <work_dir>/peer_compare.json)")
  parser.add_argument("--hparams", default="",
                      help="overrides of the model on both sides, e.g. norm_type=pre (the "
                           "peer is built from them: layers, widths, norm placement, dropouts; "
                           "not with the small size's shared peer script)")
  parser.add_argument("--ours_hparams", default="",
                      help='extra overrides for our side only, e.g. "bucket_mode=max" '
                           "(printed in the summary; default: none, the peer's configuration)")
  parser.add_argument("--precision", default="float32", choices=PRECISIONS,
                      help="both sides: ours with precision=..., the peer under tf_keras's "
                           "global mixed-precision policy (default float32, as the peer's "
                           "scripts; mixed_bfloat16 pays where bf16 matmuls are faster: "
                           "python -m t2t_keras.training.precision)")
  parser.add_argument("--size", default="small", choices=list(bench_sizes.SIZES),
                      help="the model and batch of train/decode (benchmarks/bench_sizes.py): "
                           "small (3+3, d 256, 8k vocabulary; the default), base and big "
                           "(the paper's, 37k vocabulary), tiny (a check that it runs)")
  parser.add_argument("--batch", type=int, default=None,
                      help="sentences a training step on both sides (default: the size's; "
                           "e.g. more on a GPU)")
  parser.add_argument("--quick", action="store_true",
                      help="tiny step counts and a 0.3-minute budget: checks that it runs")
  args = parser.parse_args()
  parts = [p for p in args.parts.split(",") if p]
  unknown = [p for p in parts if p not in PARTS]
  if unknown or not parts:
    parser.error(f"--parts: unknown {unknown}; choose from {', '.join(PARTS)}")
  if args.rounds < 1:
    parser.error("--rounds must be at least 1")
  if args.hparams and args.size == "small":
    parser.error("--hparams builds the peer from the overrides: use --size tiny, base or big "
                 "(the small size's peer is the shared script, fixed)")
  if "multi30k" in parts and args.size != "small":
    parser.error("--parts multi30k measures the small size's recipe only; drop it or use "
                 "--size small")
  if args.budget_min is None:
    args.budget_min = 0.3 if args.quick else 5.0
  args.work_dir = os.path.abspath(args.work_dir)
  args.bench_dir = os.path.abspath(args.bench_dir)
  args.json = os.path.abspath(args.json or os.path.join(args.work_dir, "peer_compare.json"))
  return args, parts


def main():
  args, parts = parse_args()
  peer_versions = (peer_sides.package_versions(args.peer_python, ["tensorflow", "tf-keras",
                                                                  "tf-models-official"])
                   if os.path.exists(args.peer_python) else {})
  if not peer_versions.get("tf-models-official"):
    print(f"peer not installed: {args.peer_python} "
          f"{'has no tf-models-official' if os.path.exists(args.peer_python) else 'not found'}."
          f"\nInstall TF Model Garden in its own venv (about 2 minutes; "
          f"../shared/bench/README.md):\n    {PEER_INSTALL}\nthen run this again "
          f"(or pass --peer_python / set PEER_PYTHON). Nothing was compared.")
    return 0
  with_ct2 = "decode" in parts and os.path.exists(args.ct2_python)
  ct2_versions = peer_sides.package_versions(args.ct2_python, ["ctranslate2"]) if with_ct2 else {}
  if with_ct2 and not ct2_versions.get("ctranslate2"):
    with_ct2 = False
  missing = check_bench_dir(args.bench_dir, parts, with_ct2, args.size)
  if missing:
    print(f"peer_compare: {args.bench_dir} lacks {', '.join(missing)} (the peer's scripts; "
          f"pass --bench_dir DIR)", file=sys.stderr)
    return 2
  needs_multi30k = "multi30k" in parts or args.size == "small"
  if (needs_multi30k and not data_ready(os.path.join(args.work_dir, "data", peer_sides.PROBLEM))
      and not os.path.exists(os.path.join(args.raw_dir, "train.en.gz"))):
    print(f"peer_compare: Multi30k not found in {args.raw_dir} (train.en.gz ...; pass "
          f"--raw_dir): the multi30k part and the small size need it (step_bench.py its "
          f"8000-piece vocabulary)", file=sys.stderr)
    return 2

  os.makedirs(args.work_dir, exist_ok=True)
  ours_versions = peer_sides.package_versions(sys.executable, ["tensorflow", "keras"])
  try:
    with open("/proc/cpuinfo") as f:
      cpu = peer_sides.cpu_model(f.read())
  except OSError:
    cpu = None
  args.gpus = peer_sides.gpu_names(sys.executable)
  print(f"CPU: {cpu or 'unknown'}; {os.cpu_count()} CPUs; load average "
        f"{' '.join(f'{x:.2f}' for x in os.getloadavg())}")
  print(f"GPU: {', '.join(args.gpus)}: both sides train with XLA (ours: the Trainer's "
        f"default on a GPU; the peer: JIT=1)" if args.gpus else
        "GPU: none (both sides train without XLA: the Trainer's CPU default, the peer's JIT=0)")
  print(f"ours: {sys.executable}: " + ", ".join(f"{k} {v}" for k, v in ours_versions.items()))
  print(f"peer: {args.peer_python}: " + ", ".join(f"{k} {v}" for k, v in peer_versions.items()))
  if "decode" in parts:
    print(f"ct2:  {args.ct2_python}: " + (
        ", ".join(f"{k} {v}" for k, v in ct2_versions.items()) if with_ct2 else
        f"not installed: the CTranslate2 comparison is skipped (install: {CT2_INSTALL})"))
  print(f"parts {','.join(parts)}; {args.rounds} rounds; "
        f"{peer_report.precision_line(args.precision)}; work dir {args.work_dir}"
        + ("; --quick: figures are noise" if args.quick else ""), flush=True)

  # Our binaries' persistent XLA cache (t2t_keras/xla_cache.py), emptied here:
  # round 1 compiles every program, later rounds load round 1's, as a user's
  # second run on this machine would.
  xla_dir = os.path.join(args.work_dir, "xla_cache")
  shutil.rmtree(xla_dir, ignore_errors=True)
  os.environ["T2T_XLA_CACHE"] = xla_dir
  print(f"ours: XLA cache {xla_dir}, emptied: round 1 compiles, later rounds load round 1's "
        "programs", flush=True)

  comp = peer_rounds.Comparison(args)
  comp.report.update({"cpu_model": cpu, "cpus": os.cpu_count(), "gpus": args.gpus,
                      "parts": parts,
                      "versions": {"ours": ours_versions, "peer": peer_versions,
                                   "ct2": ct2_versions}})
  try:
    if comp.prepare_data(parts):
      if {"train", "decode"} & set(parts):
        comp.peak_gflops = None if args.gpus else comp.measure_peak()
        print(f"matmul peak ({args.precision}): " + (
            f"{comp.peak_gflops:,.0f} GFLOP/s" if comp.peak_gflops else
            "not measured (a GPU's MFU is against its data-sheet peak)" if args.gpus else
            "not measured (the measurement failed)"), flush=True)
        comp.report["peak_gflops"] = comp.peak_gflops
        for rnd in range(1, args.rounds + 1):
          comp.step_round(rnd, with_ct2, "decode" in parts)
      if "multi30k" in parts:
        for rnd in range(1, args.rounds + 1):
          comp.multi30k_round(rnd)
  finally:
    if comp.current is not None:
      comp.current.kill_if_running()
  lines = comp.summary(parts, with_ct2)
  comp.save()
  peer_report.print_summary(args, cpu, {"ours": ours_versions, "peer": peer_versions}, lines,
                            comp.failures)
  return 1 if comp.failures else 0


if __name__ == "__main__":
  sys.exit(main())
