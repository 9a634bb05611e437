#!/usr/bin/env bash
# Multi30k En->De from scratch on a CPU: datagen, MINUTES of training (default 120),
# checkpoint averaging, beam search (4, alpha 0.6) on test2016, every BLEU variant.
#
#   recipes/multi30k.sh [MINUTES]
#   env: MULTI30K_DIR (default ../shared/data/multi30k), RUN_DIR (default t2t_train/multi30k),
#        NUM_LAST (checkpoints to average, default 10: best on val at 2 h),
#        HPARAMS_SET (default transformer_multi30k)
#
# Training stops at the wall-clock budget: `timeout` sends SIGTERM, the trainer saves a
# checkpoint and exits. Running it again resumes the run for another MINUTES.
set -euo pipefail
cd "$(dirname "$0")/.."
source ./setup_venv.sh
export TF_CPP_MIN_LOG_LEVEL=3

MINUTES=${1:-120}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
RUN=${RUN_DIR:-t2t_train/multi30k}
DATA=t2t_data/multi30k
NUM_LAST=${NUM_LAST:-10}
if [ ! -f "$RAW/train.en.gz" ]; then
  echo "Multi30k not found in $RAW (set MULTI30K_DIR to the directory of train.en.gz ...)" >&2
  exit 1
fi

t2t-datagen --problem=translate_ende_multi30k --data_dir=$DATA --raw_dir="$RAW"

# Checkpoints every 250 steps, all kept (7.6M parameters with Adam's slots: about 90 MB
# each), so any window can be averaged afterwards; dev loss, accuracy and greedy BLEU
# every 1000 steps.
rc=0
timeout -s TERM $((MINUTES * 60)) t2t-trainer --problem=translate_ende_multi30k \
    --hparams_set=${HPARAMS_SET:-transformer_multi30k} --data_dir=$DATA --output_dir=$RUN \
    --save_every=250 --save_every_minutes=1000 --keep_checkpoints=1000 \
    --eval_every=1000 --eval_bleu_sentences=200 --log_every=100 || rc=$?
[ $rc -eq 0 ] || [ $rc -eq 124 ] || exit $rc   # 124: the budget ran out (checkpoint saved)

# The last NUM_LAST checkpoints averaged: --min_steps starts the window at the NUM_LAST-th
# newest, so only that one average is written (all kept checkpoints would give one each).
MIN_STEP=$(python -c "import sys, tensorflow as tf
paths = tf.train.get_checkpoint_state(sys.argv[1]).all_model_checkpoint_paths
print(paths[max(0, len(paths) - int(sys.argv[2]))].rsplit('-', 1)[1])" "$RUN" "$NUM_LAST")
t2t-avg-all --model_dir=$RUN --output_dir=$RUN/averaged --n=$NUM_LAST --min_steps=$MIN_STEP
t2t-decoder --output_dir=$RUN/averaged \
    --decode_from_file="$RAW/test_2016_flickr.en.gz" --decode_to_file=$RUN/test2016.de \
    --decode_hparams="beam_size=4,alpha=0.6"
t2t-bleu --translation=$RUN/test2016.de --reference="$RAW/test_2016_flickr.de.gz" \
    --tokenized_reference="$RAW/tok/test_2016_flickr.lc.norm.tok.de.gz"
