#!/usr/bin/env bash
# tensor2tensor's README walkthrough ("How to use it"), then its checkpoint averaging and
# export, with t2t's own flags. Changed from t2t: PROBLEM (the embedded default), HPARAMS
# (the CPU set), the two sentences to translate and their references (numbers), and
# $TRAIN_STEPS appended to t2t-trainer so a test can keep it short (t2t's default would be
# 250,000 steps). Run from an empty directory: HOME is that directory.
set -euo pipefail
HOME=$(pwd)
TRAIN_STEPS=${TRAIN_STEPS:-2000}

# See what problems, models, and hyperparameter sets are available.
# You can easily swap between them (and add new ones).
t2t-trainer --registry_help

PROBLEM=translate_ende_numbers
MODEL=transformer
HPARAMS=transformer_tiny

DATA_DIR=$HOME/t2t_data
TMP_DIR=/tmp/t2t_datagen
TRAIN_DIR=$HOME/t2t_train/$PROBLEM/$MODEL-$HPARAMS

mkdir -p $DATA_DIR $TMP_DIR $TRAIN_DIR

# Generate data
t2t-datagen \
  --data_dir=$DATA_DIR \
  --tmp_dir=$TMP_DIR \
  --problem=$PROBLEM

# Train
# *  If you run out of memory, add --hparams='batch_size=1024'.
t2t-trainer \
  --data_dir=$DATA_DIR \
  --problem=$PROBLEM \
  --model=$MODEL \
  --hparams_set=$HPARAMS \
  --output_dir=$TRAIN_DIR \
  --train_steps=$TRAIN_STEPS

# Decode

DECODE_FILE=$DATA_DIR/decode_this.txt
echo "one hundred and five" >> $DECODE_FILE
echo "twenty-three" >> $DECODE_FILE
echo -e 'einhundertfünf\ndreiundzwanzig' > ref-translation.de

BEAM_SIZE=4
ALPHA=0.6

t2t-decoder \
  --data_dir=$DATA_DIR \
  --problem=$PROBLEM \
  --model=$MODEL \
  --hparams_set=$HPARAMS \
  --output_dir=$TRAIN_DIR \
  --decode_hparams="beam_size=$BEAM_SIZE,alpha=$ALPHA" \
  --decode_from_file=$DECODE_FILE \
  --decode_to_file=translation.en

# See the translations
cat translation.en

# Evaluate the BLEU score
# Note: Report this BLEU score in papers, not the internal approx_bleu metric.
t2t-bleu --translation=translation.en --reference=ref-translation.de

# Average the last checkpoints into another directory and decode with the average.
AVG_DIR=$TRAIN_DIR/avg
t2t-avg-all --model_dir=$TRAIN_DIR --output_dir=$AVG_DIR --n=8
t2t-decoder \
  --data_dir=$DATA_DIR \
  --problem=$PROBLEM \
  --model=$MODEL \
  --hparams_set=$HPARAMS \
  --output_dir=$AVG_DIR \
  --decode_hparams="beam_size=$BEAM_SIZE,alpha=$ALPHA" \
  --decode_from_file=$DECODE_FILE \
  --decode_to_file=translation_avg.en

# Export for serving.
t2t-exporter \
  --model=$MODEL \
  --hparams_set=$HPARAMS \
  --problem=$PROBLEM \
  --data_dir=$DATA_DIR \
  --output_dir=$TRAIN_DIR
