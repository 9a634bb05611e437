#!/usr/bin/env bash
# Sequence-level knowledge distillation (Kim & Rush, 2016), as Marian / Bergamot users run it:
# the teacher translates the training sources with beam search (resumable: run the recipe
# again after a kill), its outputs are filtered by its length-normalised score and by length
# ratio, a student trains on them for MINUTES (default 120), is averaged and chosen on val,
# exported as LiteRT int8 and CTranslate2 int8, and compared with the teacher and with the
# same student trained on the references for as long (table.md).
#
#   TEACHER=t2t_train/multi30k/selected recipes/distill.sh [MINUTES]      # Multi30k En-De
#   # the whole chain in minutes on the numbers problem (docs/recipes.md, "Distillation"):
#   TEACHER=t2t_train/numbers_tiny PROBLEM=translate_ende_numbers MAX_LINES=1000 \
#       HPARAMS_SET=transformer_tiny HPARAMS=hidden_size=64,filter_size=256,num_decoder_layers=1 \
#       SAVE_EVERY=50 SELECT_WINDOWS=1,2 LATENCY_INPUTS=20 DISTILL_DIR=t2t_train/distill_numbers \
#       recipes/distill.sh 2
#   env: TEACHER (the teacher's run directory; required), DISTILL_DIR (default
#        t2t_train/distill), PROBLEM (a registered problem whose splits are written as files;
#        default: Multi30k's files in MULTI30K_DIR, default ../shared/data/multi30k),
#        RAW_DIR (a corpus PROBLEM's raw files, default ../shared/data/multi30k; a problem
#        that generates its data ignores it), MAX_LINES (the first N training sources only;
#        default all), TEACHER_DECODE (the teacher's decoding of the training sources;
#        default "beam_size=4,alpha=0.6", not its selection.json's), MIN_SCORE (lowest
#        score kept, the mean log-probability per piece; default -3.0), MAX_RATIO (largest
#        source / output length ratio in the teacher's pieces, either way; default 3.0),
#        VOCAB (teacher: the student shares the teacher's vocabulary; own: VOCAB_SIZE
#        pieces trained on the distilled text; default teacher), VOCAB_SIZE (default 8000),
#        HPARAMS_SET (default transformer_multi30k_student), HPARAMS, T2T_SEED, SAVE_EVERY
#        (default 250), SELECT_WINDOWS (default 1,5,10,20), LATENCY_INPUTS (default 100),
#        REFERENCE_MINUTES (the same student trained on the original references for the
#        table's comparison, once, in DISTILL_DIR/references_<HPARAMS_SET>_vocab-<...>_
#        seed<T2T_SEED>; default MINUTES, 0 leaves it out)
#   The teacher's translations (DISTILL_DIR/teacher) serve every setting; what follows
#   them goes in DISTILL_DIR/<settings>/ (e.g. score-3.0_ratio3.0_vocab-teacher): a rerun
#   with other MIN_SCORE, MAX_RATIO or VOCAB trains a new student there.
source "$(dirname "$0")/common.sh" || exit 1

MINUTES=${1:-120}
OUT=${DISTILL_DIR:-t2t_train/distill}
if [ -z "${TEACHER:-}" ] || [ ! -f "$TEACHER/run.json" ]; then
  echo "set TEACHER to the teacher's run directory (t2t-trainer's or t2t-avg-all's)" >&2
  exit 1
fi
MIN_SCORE=${MIN_SCORE:--3.0}
MAX_RATIO=${MAX_RATIO:-3.0}
VOCAB=${VOCAB:-teacher}
VOCAB_SIZE=${VOCAB_SIZE:-8000}
case "$VOCAB" in
  teacher) VOCAB_FLAGS=(--vocab_from="$TEACHER"); VOCAB_NAME=teacher ;;
  own) VOCAB_FLAGS=(--vocab_size="$VOCAB_SIZE"); VOCAB_NAME=own$VOCAB_SIZE ;;
  *) echo "VOCAB=$VOCAB: expected teacher (share the teacher's vocabulary) or own" \
          "(VOCAB_SIZE pieces trained on the distilled text)" >&2
     exit 1 ;;
esac
SET=$OUT/score${MIN_SCORE}_ratio${MAX_RATIO}_vocab-$VOCAB_NAME
mkdir -p "$SET/exports"
DISTILL=(python -m t2t_keras.distill)

# The files: a registered problem's splits (a corpus problem's from RAW_DIR), or
# Multi30k's (and its tokenized references).
TOK_FLAGS=()
if [ -n "${PROBLEM:-}" ]; then
  "${DISTILL[@]}" splits --problem="$PROBLEM" --output_dir="$OUT/splits" \
      --raw_dir="${RAW_DIR:-../shared/data/multi30k}" ${MAX_LINES:+--max_lines=$MAX_LINES}
  TRAIN_SRC=$OUT/splits/train.source TRAIN_REF=$OUT/splits/train.target
  DEV_SRC=$OUT/splits/dev.source DEV_REF=$OUT/splits/dev.target
  TEST_SRC=$OUT/splits/test.source TEST_REF=$OUT/splits/test.target
else
  RAW=${MULTI30K_DIR:-../shared/data/multi30k}
  if [ ! -f "$RAW/train.en.gz" ]; then
    echo "Multi30k not found in $RAW (set MULTI30K_DIR, or PROBLEM)" >&2
    exit 1
  fi
  TRAIN_SRC=$OUT/train.source TRAIN_REF=$OUT/train.reference
  gzip -dc "$RAW/train.en.gz" | sed -n "1,${MAX_LINES:-\$}p" > "$TRAIN_SRC.tmp"
  gzip -dc "$RAW/train.de.gz" | sed -n "1,${MAX_LINES:-\$}p" > "$TRAIN_REF.tmp"
  mv "$TRAIN_SRC.tmp" "$TRAIN_SRC"
  mv "$TRAIN_REF.tmp" "$TRAIN_REF"
  DEV_SRC=$RAW/val.en.gz DEV_REF=$RAW/val.de.gz
  TEST_SRC=$RAW/test_2016_flickr.en.gz TEST_REF=$RAW/test_2016_flickr.de.gz
  TOK_FLAGS=(--tok_dev="$RAW/tok/val.lc.norm.tok.de.gz"
             --tok_test="$RAW/tok/test_2016_flickr.lc.norm.tok.de.gz")
fi

# The teacher's translations and scores, piece by piece: a rerun goes on where it stopped,
# and refuses a teacher, input or decoding changed since.
"${DISTILL[@]}" translate --teacher="$TEACHER" --input="$TRAIN_SRC" \
    --work_dir="$OUT/teacher" --decode_hparams="${TEACHER_DECODE:-beam_size=4,alpha=0.6}"
"${DISTILL[@]}" filter --sources="$TRAIN_SRC" --work_dir="$OUT/teacher" \
    --output_dir="$SET/filtered" --min_score="$MIN_SCORE" --max_ratio="$MAX_RATIO" \
    --vocab="$TEACHER/vocab.model"

# The distilled problem (translate_parallel_text over these files): a data_dir of its own,
# which refuses other files or another vocabulary later (distilled.json).
"${DISTILL[@]}" datagen --data_dir="$SET/data" \
    --train="$SET/filtered/train.source,$SET/filtered/train.target" \
    --dev="$DEV_SRC,$DEV_REF" --test="$TEST_SRC,$TEST_REF" "${VOCAB_FLAGS[@]}"

# The student: train_student MINUTES DATA_DIR RUN_DIR trains the student set for MINUTES
# (a rerun resumes it for another MINUTES), then chooses the averaging window and decoding
# on val as recipes/multi30k.sh chooses them, into RUN_DIR/selected.
train_student() {
  train_for $(($1 * 60)) t2t-trainer --problem=translate_parallel_text \
      --hparams_set="${HPARAMS_SET:-transformer_multi30k_student}" --hparams="${HPARAMS:-}" \
      --seed="$SEED" --data_dir="$2" --output_dir="$3" \
      --save_every="${SAVE_EVERY:-250}" --save_every_minutes=1000 --keep_checkpoints=1000 \
      --eval_every=1000 --eval_bleu_sentences=200 --log_every=100
  select_on_val "$3" "$DEV_SRC" "$DEV_REF"
}
train_student "$MINUTES" "$SET/data" "$SET/student"

# The same student trained on the original references (the same hparams set, vocabulary
# setting, seed and REFERENCE_MINUTES, default MINUTES, chosen on val the same way), so
# that the table measures what distillation gains. Its directory serves every filter
# setting and is trained once: a rerun uses it as it is (remove it to train it again).
# REFERENCE_MINUTES=0 leaves it out (the table then has no such column).
REF=$OUT/references_${HPARAMS_SET:-transformer_multi30k_student}_vocab-${VOCAB_NAME}_seed$SEED
REFERENCE_MINUTES=${REFERENCE_MINUTES:-$MINUTES}
REFERENCE_FLAGS=()
if (( REFERENCE_MINUTES > 0 )); then
  if [ ! -f "$REF/student/selected/selection.json" ]; then
    "${DISTILL[@]}" datagen --data_dir="$REF/data" --train="$TRAIN_SRC,$TRAIN_REF" \
        --dev="$DEV_SRC,$DEV_REF" --test="$TEST_SRC,$TEST_REF" "${VOCAB_FLAGS[@]}"
    train_student "$REFERENCE_MINUTES" "$REF/data" "$REF/student"
  fi
  REFERENCE_FLAGS=(--reference_student="$REF/student/selected")
fi

# Both models exported as LiteRT int8 and CTranslate2 int8, each with its own decoding.
for NAME in teacher student; do
  RUN=$TEACHER; [ $NAME = student ] && RUN=$SET/student/selected
  DECODE=beam_size=4,alpha=0.6
  if [ -f "$RUN/selection.json" ]; then
    DECODE=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["decode_hparams"])' \
        "$RUN/selection.json")
  fi
  t2t-exporter --output_dir="$RUN" --format=litert --quantization=int8 \
      --decode_hparams="$DECODE" --export_dir="$SET/exports/${NAME}_litert_int8" --overwrite
  t2t-exporter --output_dir="$RUN" --format=ctranslate2 --quantization=int8 \
      --decode_hparams="$DECODE" --export_dir="$SET/exports/${NAME}_ct2_int8" --overwrite
done

python recipes/distill_table.py --teacher="$TEACHER" --student="$SET/student/selected" \
    --exports="$SET/exports" --dev="$DEV_SRC,$DEV_REF" --test="$TEST_SRC,$TEST_REF" \
    "${TOK_FLAGS[@]}" "${REFERENCE_FLAGS[@]}" --latency_inputs="${LATENCY_INPUTS:-100}" \
    --output="$SET/table"
echo "recipe wall clock: $(( $(date +%s) - START )) s"
