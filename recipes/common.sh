# The preamble every recipe and run_main.sh sources: strict mode, the repository as the
# working directory, the venv (created on first use), TensorFlow's C++ logs off, the
# start time and the seed; `train_for`, the time-boxed trainer; and the Multi30k recipes'
# training and choice on val (`train_multi30k`, `select_on_val`).
#
#   source "$(dirname "$0")/common.sh" || exit 1        # from recipes/*.sh
set -euo pipefail
cd "$(dirname "${BASH_SOURCE[0]}")/.."
source ./setup_venv.sh
export TF_CPP_MIN_LOG_LEVEL=3
START=$(date +%s)
SEED=${T2T_SEED:-1}   # the trainer's --seed (recipes/seeds.py sets T2T_SEED and T2T_RUN)

# train_for SECONDS COMMAND...: COMMAND under `timeout -s TERM SECONDS`. The budget running
# out (exit 124: the trainer saved a checkpoint on SIGTERM) is not an error; any other
# failure ends the recipe with the command's status.
train_for() {
  local rc=0
  timeout -s TERM "$1" "${@:2}" || rc=$?
  [ $rc -eq 0 ] || [ $rc -eq 124 ] || exit $rc
}

# train_multi30k PROBLEM DATA_DIR RUN_DIR: the Multi30k recipes' trainer (multi30k.sh,
# multi30k_anchor.sh) until RESERVE_S before the MINUTES budget; HPARAMS_SET (default
# transformer_multi30k_tiny), HPARAMS, SEED. Checkpoints every 250 steps, all kept (2.3M
# parameters with Adam's slots: about 28 MB each), so any window can be averaged
# afterwards; dev loss, accuracy and greedy BLEU every 1000 steps.
train_multi30k() {
  train_for $((MINUTES * 60 - RESERVE_S - $(date +%s) + START)) t2t-trainer --problem="$1" \
      --hparams_set="${HPARAMS_SET:-transformer_multi30k_tiny}" --hparams="${HPARAMS:-}" \
      --seed="$SEED" --data_dir="$2" --output_dir="$3" \
      --save_every=250 --save_every_minutes=1000 --keep_checkpoints=1000 \
      --eval_every=1000 --eval_bleu_sentences=200 --log_every=100
}

# select_on_val RUN_DIR VAL_SOURCE VAL_REFERENCE [GRID]: the Multi30k recipes' choice on val
# (never test2016) into RUN_DIR/selected: the averaging window (SELECT_WINDOWS, default 1,
# 5, 10 or 20 checkpoints ending at 3 points of the run's newer half, each decoded with
# beam 4, alpha 0.6), then for that average the decodings of GRID (default: beam 4, 6, 8
# with alpha 0.6 and 1.0); what was tried is in RUN_DIR/selected/selection.md.
select_on_val() {
  t2t-avg-all --model_dir="$1" --output_dir="$1/selected" \
      --select_from_file="$2" --select_reference="$3" \
      --select_windows="${SELECT_WINDOWS:-1,5,10,20}" --select_ends=3 \
      --select_decode_hparams="beam_size=4,alpha=0.6" \
      --select_decode_grid="${4:-alpha=1.0;beam_size=6;beam_size=6,alpha=1.0;beam_size=8;beam_size=8,alpha=1.0}"
}
