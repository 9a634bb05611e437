#!/usr/bin/env bash
# Multi30k En->De in the text-only anchor's setting, like for like (Wu et al. 2021): the
# tokenized text of the Multi30k papers (tok/: lowercased, punctuation-normalised, Moses
# tokens, XML-escaped), a joint BPE of about 10k types (translate_ende_multi30k_tok), and
# their metric, lowercased BLEU on those tokens as they are, on val (the choices) and on
# test2016. recipes/multi30k.sh's steps on that problem, in MINUTES of wall clock (default
# 120); a figure beside the cased recipe's, never instead of it (docs/recipes.md).
#
#   recipes/multi30k_anchor.sh [MINUTES]
#   env: MULTI30K_DIR (default ../shared/data/multi30k: the directory holding tok/),
#        RUN_DIR or T2T_RUN (default t2t_train/multi30k_anchor), DATA_DIR (default
#        t2t_data/multi30k_tok), T2T_SEED, HPARAMS_SET, HPARAMS, RESERVE_S: as multi30k.sh
source "$(dirname "$0")/common.sh" || exit 1

MINUTES=${1:-120}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
TOK=$RAW/tok
RUN=${T2T_RUN:-${RUN_DIR:-t2t_train/multi30k_anchor}}
DATA=${DATA_DIR:-t2t_data/multi30k_tok}
PROBLEM=translate_ende_multi30k_tok
RESERVE_S=${RESERVE_S:-420}
if [ -z "${HPARAMS+set}" ] && [ "$(python -m t2t_keras.training.precision)" = mixed_bfloat16 ]; then
  HPARAMS=precision=mixed_bfloat16
fi
if [ ! -f "$TOK/train.lc.norm.tok.en.gz" ]; then
  echo "Multi30k's tokenized files not found in $TOK (set MULTI30K_DIR to the directory" \
       "whose tok/ holds train.lc.norm.tok.en.gz ...)" >&2
  exit 1
fi

t2t-datagen --problem=$PROBLEM --data_dir=$DATA --raw_dir="$RAW"

# As multi30k.sh (its dev BLEU every 1000 steps is sacreBLEU on the tokenized lines: a
# trend, not the anchor's metric).
train_multi30k $PROBLEM $DATA $RUN
# Chosen on val only, as multi30k.sh (the window, then beam and alpha, and the anchor's own
# decoding: fairseq's beam 5, lenpen 1.0), ranked by the problem's dev score: lowercased
# BLEU on the tokens against tok/val (never test2016). recipes/multi30k_grid.sh widens it.
select_on_val $RUN "$TOK/val.lc.norm.tok.en.gz" "$TOK/val.lc.norm.tok.de.gz" \
    "alpha=1.0;beam_size=6;beam_size=6,alpha=1.0;beam_size=8;beam_size=8,alpha=1.0;beam_size=5,alpha=1.0,length_penalty_kind=length"
IFS=$'\t' read -r DECODE VAL_BLEU < <(python -c '
import json, sys
s = json.load(open(sys.argv[1]))
chosen = [d for d in s["decodings"] if d["decode_hparams"] == s["decode_hparams"]] or [s["chosen"]]
print(s["decode_hparams"], chosen[0][s["key"]], sep="\t")' $RUN/selected/selection.json)
t2t-decoder --output_dir=$RUN/selected \
    --decode_from_file="$TOK/test_2016_flickr.lc.norm.tok.en.gz" \
    --decode_to_file=$RUN/test2016.tok.de --decode_hparams="$DECODE"
t2t-bleu --tokenized --translation=$RUN/test2016.tok.de \
    --reference="$TOK/test_2016_flickr.lc.norm.tok.de.gz" | tee $RUN/test2016.bleu
# The anchor's metric on val (the chosen average and decoding, from the selection) and on
# test2016, as RESULT lines (recipes/seeds.py collects them per seed).
echo "RESULT val_lc_tok_bleu $VAL_BLEU"
awk '/^lowercased tokenized BLEU on tokens/ {print "RESULT test2016_lc_tok_bleu", $NF}' \
    $RUN/test2016.bleu
echo "recipe wall clock: $(( $(date +%s) - START )) s (budget $((MINUTES * 60)) s)"
