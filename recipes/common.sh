# The preamble every recipe and run_main.sh sources: strict mode, the repository as the
# working directory, the venv (created on first use), TensorFlow's C++ logs off, the
# start time and the seed; and `train_for`, the time-boxed trainer.
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
