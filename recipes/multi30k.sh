#!/usr/bin/env bash
# Multi30k En->De from scratch on a CPU in MINUTES of wall clock (default 120), all in:
# datagen, training, the averaging window and the beam and alpha chosen on val, beam
# search on test2016, every BLEU variant, the SavedModel.
#
#   recipes/multi30k.sh [MINUTES]
#   env: MULTI30K_DIR (default ../shared/data/multi30k), RUN_DIR or T2T_RUN (default
#        t2t_train/multi30k), DATA_DIR (default t2t_data/multi30k), T2T_SEED (the
#        trainer's --seed, default 1),
#        HPARAMS_SET (default transformer_multi30k_tiny), HPARAMS (overrides; default
#        "precision=mixed_bfloat16" where bf16 matmuls measure at least 1.2x float32's
#        (python -m t2t_keras.training.precision), else none: set HPARAMS= to train in
#        float32 anyway),
#        RESERVE_S (seconds kept for selection and decoding, default 420),
#        PROBLEM (default translate_ende_multi30k; translate_ende_multi30k_folded trains
#        on first letters lowercased and restores the capital: docs/data.md; another
#        problem's run defaults to t2t_train/PROBLEM)
#
# Training stops RESERVE_S before the budget: `timeout` sends SIGTERM, the trainer saves a
# checkpoint and exits. Running it again resumes the run for another budget.
source "$(dirname "$0")/common.sh" || exit 1

MINUTES=${1:-120}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
PROBLEM=${PROBLEM:-translate_ende_multi30k}
# Another problem gets its own run directory (the trainer refuses one of another problem).
DEFAULT_RUN=t2t_train/multi30k
[ "$PROBLEM" = translate_ende_multi30k ] || DEFAULT_RUN=t2t_train/$PROBLEM
RUN=${T2T_RUN:-${RUN_DIR:-$DEFAULT_RUN}}
DATA=${DATA_DIR:-t2t_data/multi30k}
RESERVE_S=${RESERVE_S:-420}
# bf16 where this CPU runs its matmuls faster (measured, about 1.5 s: the avx512_bf16 flag
# alone misleads; figures in docs/recipes.md and docs/notebook.md), else float32.
if [ -z "${HPARAMS+set}" ] && [ "$(python -m t2t_keras.training.precision)" = mixed_bfloat16 ]; then
  HPARAMS=precision=mixed_bfloat16
fi
if [ ! -f "$RAW/train.en.gz" ]; then
  echo "Multi30k not found in $RAW (set MULTI30K_DIR to the directory of train.en.gz ...)" >&2
  exit 1
fi

t2t-datagen --problem=$PROBLEM --data_dir=$DATA --raw_dir="$RAW"

train_multi30k $PROBLEM $DATA $RUN
# Chosen on val (never test2016): the window, then the beam and alpha that test2016 is
# decoded and the SavedModel exported with (common.sh's select_on_val).
select_on_val $RUN "$RAW/val.en.gz" "$RAW/val.de.gz"
DECODE=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["decode_hparams"])' \
    $RUN/selected/selection.json)
t2t-decoder --output_dir=$RUN/selected \
    --decode_from_file="$RAW/test_2016_flickr.en.gz" --decode_to_file=$RUN/test2016.de \
    --decode_hparams="$DECODE"
t2t-bleu --translation=$RUN/test2016.de --reference="$RAW/test_2016_flickr.de.gz" \
    --tokenized_reference="$RAW/tok/test_2016_flickr.lc.norm.tok.de.gz" | tee $RUN/test2016.bleu
# The two headline figures as RESULT lines (what recipes/seeds.py collects per seed).
awk '/^sacreBLEU \(detokenized\):/ {print "RESULT test2016_sacrebleu", $3}
     /^lowercased tokenized BLEU against/ {print "RESULT test2016_lc_tok_bleu", $NF}' \
    $RUN/test2016.bleu
echo "recipe wall clock: $(( $(date +%s) - START )) s (budget $((MINUTES * 60)) s)"

# What users serve: the chosen average as a SavedModel, translating test2016 in a process
# that imports only TensorFlow and TF Text (the same BLEU as t2t-decoder above, or close).
t2t-exporter --output_dir=$RUN/selected --decode_hparams="$DECODE" --overwrite
gzip -dc "$RAW/test_2016_flickr.en.gz" \
    | python t2t_keras/exporting/translate_saved_model.py $RUN/selected/export \
    | cut -f2- > $RUN/test2016.served.de
t2t-bleu --translation=$RUN/test2016.served.de --reference="$RAW/test_2016_flickr.de.gz" \
    --tokenized_reference="$RAW/tok/test_2016_flickr.lc.norm.tok.de.gz"
