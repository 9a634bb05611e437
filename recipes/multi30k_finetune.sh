#!/usr/bin/env bash
# Fine-tuning a trained Multi30k run on a small in-domain slice: the training captions that
# mention dogs (1,916 of 29,000 pairs), with --warm_start_from and early stopping on the
# slice of val; then sacreBLEU before and after on both halves of val and of test2016.
#
#   recipes/multi30k_finetune.sh BASE_RUN [MAX_STEPS]
#   env: MULTI30K_DIR (default ../shared/data/multi30k), FT_DIR (default
#        t2t_train/multi30k_finetune), PATTERN (default '\bdogs?\b', on the English side),
#        T2T_SEED, FT_HPARAMS (default "learning_rate_constant=0.1,learning_rate_warmup_steps=50")
#
# BASE_RUN is any run directory (a trainer's output_dir or t2t-avg-all's). The slice is
# tokenized with the base run's own vocabulary (copied into the data dir before datagen,
# which then reuses it): a warm start needs the same vocabulary file.
source "$(dirname "$0")/common.sh" || exit 1

BASE=${1:?usage: recipes/multi30k_finetune.sh BASE_RUN [MAX_STEPS]}
STEPS=${2:-400}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
WORK=${FT_DIR:-t2t_train/multi30k_finetune}
SLICE=$WORK/slice
DATA=$WORK/data
RUN=$WORK/run

python recipes/slice_pairs.py --raw_dir="$RAW" --pattern="${PATTERN:-\bdogs?\b}" --out_dir=$SLICE
mkdir -p $DATA
cp -n "$BASE/vocab.model" $DATA/vocab.translate_parallel_text.model
t2t-datagen --problem=translate_parallel_text --data_dir=$DATA \
    --parallel_train=$SLICE/train.in.en,$SLICE/train.in.de \
    --parallel_dev=$SLICE/val.in.en,$SLICE/val.in.de \
    --parallel_test=$SLICE/test_2016_flickr.in.en,$SLICE/test_2016_flickr.in.de

# A fresh optimizer with a short warmup to a peak about a fifth of the base recipe's;
# dev loss on the val slice every 25 steps; stop after 75 steps without a better one.
t2t-trainer --problem=translate_parallel_text --data_dir=$DATA --output_dir=$RUN \
    --warm_start_from="$BASE" --train_steps=$STEPS --seed="$SEED" \
    --hparams="${FT_HPARAMS:-learning_rate_constant=0.1,learning_rate_warmup_steps=50}" \
    --eval_every=25 --eval_bleu_sentences=0 --eval_early_stopping_steps=75 \
    --save_every=25 --keep_checkpoints=3 --log_every=25

for model in base tuned; do
  dir=$BASE; [ $model = tuned ] && dir=$RUN/best
  for part in val.in val.out test_2016_flickr.in test_2016_flickr.out; do
    t2t-decoder --output_dir="$dir" --decode_from_file=$SLICE/$part.en \
        --decode_to_file=$WORK/$part.$model.de > /dev/null
  done
done
python - "$WORK" "$SLICE" <<'PY'
import os, sys, sacrebleu
work, slice_dir = sys.argv[1:]
print("| sacreBLEU | val, dogs | val, the rest | test2016, dogs | test2016, the rest |")
print("|---|---|---|---|---|")
for model in ("base", "tuned"):
  row = []
  for part in ("val.in", "val.out", "test_2016_flickr.in", "test_2016_flickr.out"):
    hyp = open(os.path.join(work, f"{part}.{model}.de"), encoding="utf-8").read().splitlines()
    ref = open(os.path.join(slice_dir, f"{part}.de"), encoding="utf-8").read().splitlines()
    row.append(f"{sacrebleu.corpus_bleu(hyp, [ref]).score:.2f} ({len(ref)})")
  print(f"| {model} | " + " | ".join(row) + " |")
PY
