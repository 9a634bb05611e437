#!/usr/bin/env bash
# The wide decoding grid on val for a finished recipes/multi30k.sh run, no extra training:
# the average the recipe chose (its window and last step, from RUN/selected/selection.json)
# decodes val once per beam (4, 5, 6, 8), alpha (0.6 to 1.6) and length penalty (GNMT's
# ((5 + len) / 6) ** alpha, or fairseq's len ** alpha: length_penalty_kind=length).
# Never test2016: the table is for choosing. 27 val decodes besides the base.
#
#   recipes/multi30k_grid.sh RUN_DIR        # writes RUN_DIR/grid/selection.md (the table)
#   env: MULTI30K_DIR (default ../shared/data/multi30k), GRID (";"-separated overrides
#        over beam_size=4,alpha=0.6; default below), VAL_SOURCE and VAL_REFERENCE (default
#        Multi30k's val as the run's problem reads it: the cased files, or tok/'s for a
#        recipes/multi30k_anchor.sh run)
source "$(dirname "$0")/common.sh" || exit 1

RUN=${1:?usage: recipes/multi30k_grid.sh RUN_DIR (a finished recipes/multi30k.sh run)}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
SELECTION=$RUN/selected/selection.json
[ -f "$SELECTION" ] || { echo "no $SELECTION: run recipes/multi30k.sh first" >&2; exit 1; }
read -r WINDOW LAST < <(python -c 'import json, sys
c = json.load(open(sys.argv[1]))["chosen"]; print(c["n"], c["last_step"])' "$SELECTION")

grid=()
for beam in 4 5 6 8; do
  for alpha in 0.6 1.0 1.3 1.6; do
    [ "$beam,$alpha" = 4,0.6 ] || grid+=("beam_size=$beam,alpha=$alpha")  # 4,0.6: the base
  done
  for alpha in 0.6 1.0 1.3; do
    grid+=("beam_size=$beam,alpha=$alpha,length_penalty_kind=length")
  done
done
GRID=${GRID:-$(IFS=';'; echo "${grid[*]}")}

# val as the run's problem reads it: an anchor run's (translate_ende_multi30k_tok) is tok/'s.
PROBLEM=$(python -c 'import json, sys; print(json.load(open(sys.argv[1]))["problem"])' \
    "$RUN/run.json")
VAL=$RAW/val
[ "$PROBLEM" = translate_ende_multi30k_tok ] && VAL=$RAW/tok/val.lc.norm.tok
t2t-avg-all --model_dir="$RUN" --output_dir="$RUN/grid" --max_step="$LAST" \
    --select_from_file="${VAL_SOURCE:-$VAL.en.gz}" \
    --select_reference="${VAL_REFERENCE:-$VAL.de.gz}" \
    --select_windows="$WINDOW" --select_ends=1 --select_decode_hparams="beam_size=4,alpha=0.6" \
    --select_decode_grid="$GRID"
echo "the grid: $RUN/grid/selection.md"
