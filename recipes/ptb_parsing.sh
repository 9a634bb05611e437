#!/usr/bin/env bash
# English constituency parsing as translation (the paper's section 6.3) on the Penn Treebank
# sample, in MINUTES of wall clock (default 60): datagen, training, the averaging window
# and the decoding chosen on dev (EVALB F1), decoding dev, EVALB F1
# (all, <= 40 words, by length) beside the right-branching baseline, and a SavedModel that
# parses raw sentences into trees in a process with only TensorFlow and TF Text.
#
#   recipes/ptb_parsing.sh [MINUTES]
#   env: PTB_DIR (default ../shared/data/ptb_sample; a full LDC treebank works too),
#        PROBLEM (default parsing_english_ptb8k_words; parsing_english_ptb8k has XX leaves),
#        RUN_DIR or T2T_RUN (default t2t_train/ptb_parsing), T2T_SEED (--seed, default 1),
#        HPARAMS_SET (default transformer_parsing_cpu),
#        HPARAMS (overrides of the set, t2t's --hparams),
#        DECODE (default beam_size=4,alpha=1.0 after the problem's extra_length=300: the
#        decoding the averaging windows are compared with; "beam_size=21,alpha=0.3" is the
#        paper's), DECODE_GRID (default "alpha=0.6;alpha=1.5;beam_size=8": the decodings,
#        each over DECODE, also tried on dev for the chosen average; "" for none),
#        RESERVE_S (seconds kept for the checkpoint selection, decoding and export,
#        default 900)
source "$(dirname "$0")/common.sh" || exit 1

MINUTES=${1:-60}
RAW=${PTB_DIR:-../shared/data/ptb_sample}
RUN=${T2T_RUN:-${RUN_DIR:-t2t_train/ptb_parsing}}
P=${PROBLEM:-parsing_english_ptb8k_words}
DATA=t2t_data/ptb/$P
DECODE=${DECODE-beam_size=4,alpha=1.0}
RESERVE_S=${RESERVE_S:-900}

t2t-datagen --problem=$P --data_dir=$DATA --raw_dir="$RAW"

TRAIN_S=$((MINUTES * 60 - RESERVE_S - $(date +%s) + START))
train_for $TRAIN_S t2t-trainer --problem=$P \
    --hparams_set=${HPARAMS_SET:-transformer_parsing_cpu} --hparams="${HPARAMS:-}" \
    --seed="$SEED" --data_dir=$DATA --output_dir=$RUN \
    --save_every=500 --save_every_minutes=1000 --keep_checkpoints=20 \
    --eval_every=1000 --eval_bleu_sentences=0 --log_every=100

# Chosen on dev by EVALB F1: the averaging window (the newest checkpoint alone or averaged
# with 1, 3 or 7 older ones, 500 steps apart; decoded with $DECODE), then for that average
# alpha 0.6, 1.0 or 1.5 at beam 4, or beam 8 (with DECODE's alpha); what was tried is in
# $RUN/selected/selection.md. The rest of the recipe decodes with the chosen.
t2t-avg-all --model_dir=$RUN --output_dir=$RUN/selected \
    --select_from_file=$DATA/$P.dev.words --select_reference=$DATA/$P.dev.trees \
    --select_windows=1,2,4,8 --select_decode_hparams="$DECODE" \
    --select_decode_grid="${DECODE_GRID-alpha=0.6;alpha=1.5;beam_size=8}"
DECODE=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["decode_hparams"])' \
    $RUN/selected/selection.json)

# Dev sentences -> trees (t2t-decoder builds a well-formed tree from every output).
t2t-decoder --output_dir=$RUN/selected --decode_from_file=$DATA/$P.dev.words \
    --decode_to_file=$RUN/dev.parsed --decode_hparams="$DECODE"
echo "== EVALB (COLLINS.prm), dev =="
t2t-evalb --gold_file=$DATA/$P.dev.trees --test_file=$RUN/dev.parsed --by_length \
    | tee $RUN/dev.evalb
# The first (all-sentences) F1 as a RESULT line (what recipes/seeds.py collects per seed).
awk '/^Bracketing FMeasure/ && !done {print "RESULT dev_f1", $NF; done = 1}' $RUN/dev.evalb
echo "== the right-branching baseline on the same trees =="
t2t-evalb --gold_file=$DATA/$P.dev.trees --right_branching | grep -A7 -- "-- All --"
echo "recipe wall clock: $(( $(date +%s) - START )) s (budget $((MINUTES * 60)) s)"

# What users serve: raw sentences in, trees out, with only TensorFlow and TF Text.
t2t-exporter --output_dir=$RUN/selected --decode_hparams="$DECODE" --overwrite
python t2t_keras/exporting/translate_saved_model.py $RUN/selected/export \
    "The dog saw a man in the park ." "Stocks fell sharply on Friday ."
