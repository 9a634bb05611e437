#!/usr/bin/env bash
# The WMT14 en-de recipe end to end at smoke scale on a CPU: datagen from OpenNMT's 10k-pair
# WMT training sample (Moses-detokenized) + newstest2013/2014, STEPS of transformer_tiny
# (default 1000), checkpoint averaging, beam search (4, alpha 0.6) on all of newstest2014,
# and the paper's tokenized BLEU. 10k pairs prove the plumbing, not the score.
#
#   recipes/wmt14_smoke.sh [STEPS]
#   env: WMT14_DIR (default ../shared/data/wmt14), RUN_DIR (default t2t_train/wmt14_smoke)
source "$(dirname "$0")/common.sh" || exit 1

STEPS=${1:-1000}
RAW=${WMT14_DIR:-../shared/data/wmt14}
RUN=${RUN_DIR:-t2t_train/wmt14_smoke}
DATA=t2t_data/wmt14_sample
if [ ! -f "$RAW/newstest2014-deen.en.gz" ]; then
  echo "WMT14 files not found in $RAW (set WMT14_DIR)" >&2
  exit 1
fi

t2t-datagen --problem=translate_ende_wmt14_sample --data_dir=$DATA --raw_dir="$RAW"
t2t-trainer --problem=translate_ende_wmt14_sample --hparams_set=transformer_tiny \
    --hparams="max_length=128" --train_steps=$STEPS --data_dir=$DATA --output_dir=$RUN \
    --save_every=250 --keep_checkpoints=5 --eval_every=500 --eval_bleu_sentences=100
# The mean of each 3 consecutive kept checkpoints; the newest (last 3) is what is decoded.
t2t-avg-all --model_dir=$RUN --output_dir=$RUN/averaged --n=3
# --tmp_dir: the decoder reads the raw newstest2014 references from there.
t2t-decoder --output_dir=$RUN/averaged --decode_split=test --data_dir=$DATA \
    --tmp_dir="$RAW" --decode_to_file=$RUN/newstest2014.de --decode_hparams="beam_size=4,alpha=0.6"
