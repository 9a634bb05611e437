#!/usr/bin/env bash
# One model, three languages: Multi30k English into German, French and Czech with
# target-language tags (translate_en_multi30k), against three bilingual models at equal
# compute. B = BUDGET_MIN minutes (default 20):
#   1. the multilingual model trains for 3 x B minutes of wall clock (or to STEPS steps),
#      ending at step S;
#   2. (COMPARE=1, the default) the bilingual En->De, En->Fr and En->Cs models train to
#      S / 3 steps each. Equal compute by construction: the same hparams set, the same 8k
#      vocabulary size (the multilingual's pinned to it) and token batches, so a step
#      costs the same in every model, and the multilingual's S steps are the bilinguals'
#      three S / 3 (steps, not minutes: a host's speed drifts within the hour, and the
#      runs need not share a machine or an hour);
#   3. every model: the average of its last 1 or 5 checkpoints chosen on val (the
#      multilingual's by the mean over languages of cased sacreBLEU), beam 4, alpha 0.6;
#      test2016 per language: cased sacreBLEU (and, for German, whose lowercased tokenized
#      reference Multi30k ships, that BLEU too) as RESULT lines.
#
#   recipes/multi30k_multilingual.sh [BUDGET_MIN]
#   env: MULTI30K_DIR (default ../shared/data/multi30k), T2T_RUN or RUN_DIR (default
#        t2t_train/multi30k_multilingual; the multilingual run is its multi/, the
#        bilingual ones en_de/, en_fr/, en_cs/), T2T_SEED (default 1), STEPS (train the
#        multilingual to this step instead of for 3 x B minutes: a second seed at the
#        first one's compute, with COMPARE=0), COMPARE (1: also the bilingual models),
#        HPARAMS_SET (default transformer_multi30k_tiny), HPARAMS (default as
#        recipes/multi30k.sh: bf16 where it measures faster; pin it, e.g.
#        HPARAMS=precision=mixed_bfloat16, when seeds run on different CPUs)
#
# Results on Multi30k: docs/recipes.md. Running it again resumes every run.
source "$(dirname "$0")/common.sh" || exit 1

MINUTES=${1:-20}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
ROOT=${T2T_RUN:-${RUN_DIR:-t2t_train/multi30k_multilingual}}
COMPARE=${COMPARE:-1}
SET=${HPARAMS_SET:-transformer_multi30k_tiny}
LANGS="de fr cs"
if [ -z "${HPARAMS+set}" ] && [ "$(python -m t2t_keras.training.precision)" = mixed_bfloat16 ]; then
  HPARAMS=precision=mixed_bfloat16
fi
if [ ! -f "$RAW/train.cs.gz" ]; then
  echo "Multi30k (with French and Czech) not found in $RAW (set MULTI30K_DIR)" >&2
  exit 1
fi
mkdir -p "$ROOT"

# The trainer's flags but --problem, --data_dir, --output_dir: checkpoints every 250
# steps, all kept; dev figures (each language's for the multilingual) every 1000.
TRAIN=(--hparams_set=$SET --hparams="${HPARAMS:-}" --seed="$SEED" --save_every=250
       --save_every_minutes=1000 --keep_checkpoints=1000 --eval_every=1000
       --eval_bleu_sentences=200 --log_every=100)

# evaluate RUN SOURCES REFERENCES: the average of RUN's last 1 or 5 checkpoints up to
# STEP_LIMIT chosen on val, in RUN/selected.
evaluate() {
  t2t-avg-all --model_dir=$1 --output_dir=$1/selected --select_from_file="$2" \
      --select_reference="$3" --select_windows=1,5 --select_ends=1 \
      --select_decode_hparams="beam_size=4,alpha=0.6" --max_step="$STEP_LIMIT"
}
bleu() {  # bleu RUN LANGUAGE NAME [decoder flags]: test2016 into LANGUAGE, RESULT lines
  t2t-decoder --output_dir=$1/selected --decode_from_file="$RAW/test_2016_flickr.en.gz" \
      --decode_to_file=$1/test2016.$2 --decode_hparams="beam_size=4,alpha=0.6" "${@:4}"
  local tok="$RAW/tok/test_2016_flickr.lc.norm.tok.$2.gz" tokenized=()
  [ ! -f "$tok" ] || tokenized=(--tokenized_reference="$tok")  # Multi30k has it for de only
  t2t-bleu --translation=$1/test2016.$2 --reference="$RAW/test_2016_flickr.$2.gz" \
      "${tokenized[@]}" | tee $1/test2016.$2.bleu
  awk -v n="$3" '/^sacreBLEU \(detokenized\):/ {print "RESULT test2016_sacrebleu_" n, $3}
       /^lowercased tokenized BLEU against/ {print "RESULT test2016_lc_tok_bleu_" n, $NF}' \
      $1/test2016.$2.bleu
}

# 1. The multilingual model.
MULTI=$ROOT/multi
# 8k pieces, as each bilingual model's (the problem's own 16k costs 1.4x a step here)
t2t-datagen --problem=translate_en_multi30k --data_dir=t2t_data/multi30k_multi --raw_dir="$RAW" \
    --vocab_size=8000
MULTI_TRAIN=(t2t-trainer --problem=translate_en_multi30k --data_dir=t2t_data/multi30k_multi
             --output_dir=$MULTI "${TRAIN[@]}")
if [ -n "${STEPS:-}" ]; then
  "${MULTI_TRAIN[@]}" --train_steps="$STEPS"
else
  train_for $((3 * MINUTES * 60)) "${MULTI_TRAIN[@]}"
fi
S=$(sed -n 's/^model_checkpoint_path: "ckpt-\([0-9]*\)"$/\1/p' $MULTI/checkpoint)
echo "multilingual: $S steps"
STEP_LIMIT=$S
for L in $LANGS; do
  gzip -dc "$RAW/val.en.gz" | sed "s/^/<2$L> /"
done > $ROOT/val.tagged.en
for L in $LANGS; do gzip -dc "$RAW/val.$L.gz"; done > $ROOT/val.multi.ref
evaluate $MULTI $ROOT/val.tagged.en $ROOT/val.multi.ref
for L in $LANGS; do
  bleu $MULTI $L multi_$L --target_language=$L
done
echo "RESULT multilingual_steps $S"

# 2. The bilingual models at a third of the multilingual's steps each.
if [ "$COMPARE" = 1 ]; then
  STEP_LIMIT=$((S / 3))
  for L in $LANGS; do
    RUN=$ROOT/en_$L
    t2t-datagen --problem=translate_en${L}_multi30k --data_dir=t2t_data/multi30k_en$L \
        --raw_dir="$RAW"
    t2t-trainer --problem=translate_en${L}_multi30k --data_dir=t2t_data/multi30k_en$L \
        --output_dir=$RUN "${TRAIN[@]}" --train_steps=$STEP_LIMIT
    evaluate $RUN "$RAW/val.en.gz" "$RAW/val.$L.gz"
    bleu $RUN $L bilingual_$L
  done
  echo "RESULT bilingual_steps $STEP_LIMIT"
fi
echo "recipe wall clock: $(( $(date +%s) - START )) s"
