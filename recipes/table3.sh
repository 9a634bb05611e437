#!/usr/bin/env bash
# Table 3 of the paper at CPU scale on Multi30k: 21 rows (the base with 3 seeds, then
# rows A-E) of transformer_table3_cpu* for STEPS steps each, then the table, the seed
# spread, the paper's findings and a picture in RUN_DIR/results.{md,csv,png}.
#
#   recipes/table3.sh [STEPS]        (default 1200; about 6 hours on 2 CPU cores)
#   env: MULTI30K_DIR (default ../shared/data/multi30k), RUN_DIR (default t2t_train/table3)
#
# Resumable: stop it at any time (Ctrl-C, SIGTERM, or `timeout`); the same command skips
# finished rows and resumes the interrupted one from its newest checkpoint.
source "$(dirname "$0")/common.sh" || exit 1

STEPS=${1:-1200}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
RUN=${RUN_DIR:-t2t_train/table3}
DATA=t2t_data/multi30k
if [ ! -f "$RAW/train.en.gz" ]; then
  echo "Multi30k not found in $RAW (set MULTI30K_DIR to the directory of train.en.gz ...)" >&2
  exit 1
fi

t2t-datagen --problem=translate_ende_multi30k --data_dir=$DATA --raw_dir="$RAW"
t2t-sweep --problem=translate_ende_multi30k --data_dir=$DATA --raw_dir="$RAW" \
    --output_dir=$RUN --train_steps=$STEPS --rows_file=recipes/table3_rows.txt
cat $RUN/results.md
