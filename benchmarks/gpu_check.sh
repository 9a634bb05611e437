#!/usr/bin/env bash
# The GPU checks in one script, most important first, each writing its log and JSON to OUT as
# it ends (a run cut short keeps what finished). About 10 minutes on one H100/H200, most of it
# XLA compiling each side's step once:
#   1. MirroredStrategy over 2 and 4 logical GPUs carved from the one card against one
#      device: the same loss and gradients (TF32 off), and the step time
#      (multi_device_check.py; about 2 minutes, three processes);
#   2. base, bf16: our training step and beam search against the peer's (peer_compare.py
#      --size base --parts train,decode --precision mixed_bfloat16), with the MFU lines, both
#      sides pre-norm (--hparams norm_type=pre): Model Garden's post-norm Seq2SeqTransformer
#      fails under mixed_bfloat16 (a TypeError in its decoder: the encoder output stays
#      float32), so the paper's post-norm cannot be compared in bf16;
#   3. base, float32: the training steps of the paper's post-norm model (TF32 matmuls on the
#      GPU, TensorFlow's default);
#   4. big, bf16 and 5. big, float32: the training steps.
# On a GPU the training batch is GPU_BATCH sentences of 64 tokens a side (default 256: 16,384
# target tokens a step, as a user fills a card; the CPU figures use the size's 64).
#
#   benchmarks/gpu_check.sh [OUT]          # on a GPU machine (exit 2 without a GPU)
#   benchmarks/gpu_check.sh --tiny [OUT]   # the same steps at the tiny size, on whatever is
#                                          # there (the test suite runs it on logical CPUs;
#                                          # MirroredStrategy over 4 devices only)
#   benchmarks/gpu_check.sh --profile [--tiny] [OUT]   # instead: where the step's time goes,
#       ours and the peer's at base in bf16 (both pre-norm), 5 steps each under tf.profiler
#       (benchmarks/profile_step.py: per device, busy and idle time within and between
#       steps, kernels, the top kernels, XLA programs and host-to-device copies a step);
#       the traces are kept in OUT/trace_ours and OUT/trace_peer, to be read again on any
#       machine (profile_step.py --trace OUT/trace_ours --steps 5)
# PYTHON (default python) is ours, PEER_PYTHON the peer's (default: ours; without
# tf-models-official peer_compare.py says so and compares nothing), BENCH_DIR the peer's
# shared scripts (default ../shared/bench).
set -uo pipefail
TINY=0 PROFILE=0
while [ "${1:-}" = "--tiny" ] || [ "${1:-}" = "--profile" ]; do
  [ "$1" = "--tiny" ] && TINY=1
  [ "$1" = "--profile" ] && PROFILE=1
  shift
done
OUT=${1:-${TMPDIR:-/tmp}/t2t_gpu_check}
PY=${PYTHON:-python}
export PEER_PYTHON=${PEER_PYTHON:-$(command -v "$PY")}
cd "$(dirname "$0")/.." || exit 1
mkdir -p "$OUT"
BENCH=(--peer_python "$PEER_PYTHON" --work_dir "$OUT/work")
[ -n "${BENCH_DIR:-}" ] && BENCH+=(--bench_dir "$BENCH_DIR")
FAILED=0

step() {  # step NAME COMMAND...: runs it, its output to the console and OUT/NAME.log
  echo "=== gpu_check: $1 ($(date -u +%H:%M:%S))"
  local name=$1
  shift
  "$@" 2>&1 | tee "$OUT/$name.log" | grep -v -E '^(I0000|W0000|E0000|WARNING: All log)'
  local rc=${PIPESTATUS[0]}
  [ "$rc" = 0 ] || { echo "=== gpu_check: $name FAILED (exit code $rc)"; FAILED=1; }
  [ -f "$OUT/work/peer_compare.json" ] && mv "$OUT/work/peer_compare.json" "$OUT/$name.json"
  return 0
}

compare() {  # compare NAME SIZE PRECISION PARTS BATCH [peer_compare.py flags...]
  local name=$1 size=$2 precision=$3 parts=$4 batch=$5
  shift 5
  step "$name" "$PY" benchmarks/peer_compare.py --size "$size" --precision "$precision" \
      --parts "$parts" --rounds 1 ${batch:+--batch "$batch"} "${BENCH[@]}" \
      $([ "$TINY" = 1 ] && echo --quick) "$@"
}

GPUS=$("$PY" -c "import os; os.environ['TF_CPP_MIN_LOG_LEVEL'] = '3'
import tensorflow as tf; print(len(tf.config.list_physical_devices('GPU')))" 2>/dev/null | tail -1)
echo "gpu_check: ${GPUS:-no} GPU(s) visible to TensorFlow; output in $OUT"
if [ "$PROFILE" = 1 ]; then
  if [ "$TINY" = 0 ] && [ "${GPUS:-0}" -lt 1 ]; then
    echo "gpu_check: TensorFlow sees no GPU: nothing profiled (--tiny runs on a CPU)" >&2
    exit 2
  fi
  PROF=(--steps 5 --hparams norm_type=pre,precision=mixed_bfloat16 --size base
        --batch "${GPU_BATCH:-256}")
  [ "$TINY" = 1 ] && PROF=(--steps 2 --hparams norm_type=pre --size tiny)
  for SIDE in ours peer; do
    step profile_$SIDE "$PY" benchmarks/profile_step.py "${PROF[@]}" \
        $([ $SIDE = peer ] && echo --peer) --keep_trace "$OUT/trace_$SIDE"
  done
  echo "=== gpu_check: profile done ($(date -u +%H:%M:%S)); traces in $OUT/trace_{ours,peer}"
  exit $FAILED
elif [ "$TINY" = 1 ]; then
  step tiny_ours "$PY" benchmarks/step_bench.py --size tiny --steps 2 --decode_steps 1
  compare tiny_float32 tiny float32 train,decode ""
  # N=4 only beside the reference: 2 logical CPUs are test_trainer.py's mirrored test.
  step multi_device_tiny "$PY" benchmarks/multi_device_check.py --size tiny --devices 1,4 \
      --steps 2 --json "$OUT/multi_device_tiny.json"
else
  if [ "${GPUS:-0}" -lt 1 ]; then
    echo "gpu_check: TensorFlow sees no GPU: nothing measured (--tiny runs on a CPU)" >&2
    exit 2
  fi
  B=${GPU_BATCH:-256}
  step multi_device "$PY" benchmarks/multi_device_check.py --size tiny --devices 1,2,4 \
      --json "$OUT/multi_device.json"
  compare base_bf16 base mixed_bfloat16 train,decode "$B" --hparams norm_type=pre
  compare base_float32 base float32 train "$B"
  compare big_bf16 big mixed_bfloat16 train "$B" --hparams norm_type=pre
  compare big_float32 big float32 train "$B"
fi
echo "=== gpu_check: done ($(date -u +%H:%M:%S)); RATIO, MFU and MULTI_DEVICE lines:"
grep -h -E '^(RATIO|MFU|MULTI_DEVICE N=)' "$OUT"/*.log
exit $FAILED
