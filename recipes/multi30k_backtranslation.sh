#!/usr/bin/env bash
# Back-translation (Sennrich et al., 2016; sampled as Edunov et al., 2018) at small scale on
# Multi30k En->De: the first PARALLEL training pairs are the parallel data, the German side
# of the rest is the target-side monolingual data. Three runs of the same hparams and steps:
#   rev   De->En on the parallel pairs (the same data dir, --problem=..._rev),
#   base  En->De on the parallel pairs,
#   bt    En->De on the parallel pairs plus (rev's sample of each monolingual line, the line);
# then sacreBLEU of base and bt on val and test2016 (beam 4; alpha 0.6, and each model's
# best of ALPHAS on val), and rev's on val. Each run keeps its best checkpoint by val loss
# (early stopping); val chooses that and the length penalty, nothing else.
#
#   recipes/multi30k_backtranslation.sh [STEPS]
#   env: MULTI30K_DIR (default ../shared/data/multi30k), BT_DIR (default
#        t2t_train/multi30k_bt), PARALLEL (pairs kept parallel, default 10000), T2T_SEED,
#        HPARAMS_SET (default transformer_multi30k_tiny), BT_HPARAMS (default
#        "batch_size=4096,learning_rate_warmup_steps=400,learning_rate_constant=1.0"),
#        BT_DECODE (how rev translates the monolingual side, default
#        "sampling_method=random,beam_size=1"; "beam_size=4" for beam back-translation),
#        ALPHAS (length penalties tried on val, default "0.6 1.0 1.5 2.0")
#
# All three runs share one vocabulary, trained on the parallel pairs only.
source "$(dirname "$0")/common.sh" || exit 1

STEPS=${1:-1200}
RAW=${MULTI30K_DIR:-../shared/data/multi30k}
WORK=${BT_DIR:-t2t_train/multi30k_bt}
PARALLEL=${PARALLEL:-10000}
HP=${BT_HPARAMS:-batch_size=4096,learning_rate_warmup_steps=400,learning_rate_constant=1.0}
DECODE=${BT_DECODE:-sampling_method=random,beam_size=1}
ALPHAS=${ALPHAS:-0.6 1.0 1.5 2.0}
PROBLEM=translate_parallel_text
if [ ! -f "$RAW/train.en.gz" ]; then
  echo "Multi30k not found in $RAW (set MULTI30K_DIR to the directory of train.en.gz ...)" >&2
  exit 1
fi

mkdir -p $WORK/text
# (sed reads to the end: `head` would stop zcat with SIGPIPE, an error under pipefail)
zcat "$RAW/train.en.gz" | sed -n "1,${PARALLEL}p" > $WORK/text/parallel.en
zcat "$RAW/train.de.gz" | sed -n "1,${PARALLEL}p" > $WORK/text/parallel.de
zcat "$RAW/train.de.gz" | sed -n "$((PARALLEL + 1)),\$p" > $WORK/text/mono.de
echo "parallel: $(wc -l < $WORK/text/parallel.en) pairs; monolingual German:" \
     "$(wc -l < $WORK/text/mono.de) lines"

datagen() {  # datagen DATA_DIR SOURCE_FILE TARGET_FILE
  t2t-datagen --problem=$PROBLEM --data_dir="$1" --parallel_train="$2,$3" \
      --parallel_dev="$RAW/val.en.gz,$RAW/val.de.gz" \
      --parallel_test="$RAW/test_2016_flickr.en.gz,$RAW/test_2016_flickr.de.gz"
}
train() {  # train PROBLEM DATA_DIR RUN_DIR: the best checkpoint by val loss in RUN_DIR/best
  t2t-trainer --problem="$1" --data_dir="$2" --output_dir="$3" \
      --hparams_set=${HPARAMS_SET:-transformer_multi30k_tiny} --hparams="$HP" \
      --train_steps=$STEPS --seed="$SEED" --eval_every=100 --eval_bleu_sentences=0 \
      --eval_early_stopping_steps=$((STEPS / 4)) --save_every=100 --keep_checkpoints=2 \
      --log_every=100
}

datagen $WORK/data_parallel $WORK/text/parallel.en $WORK/text/parallel.de
train ${PROBLEM}_rev $WORK/data_parallel $WORK/rev
train $PROBLEM $WORK/data_parallel $WORK/base

t2t-decoder --output_dir=$WORK/rev/best --decode_from_file=$WORK/text/mono.de \
    --decode_to_file=$WORK/text/mono.synthetic.en --decode_hparams="$DECODE" > /dev/null
cat $WORK/text/parallel.en $WORK/text/mono.synthetic.en > $WORK/text/bt.en
cat $WORK/text/parallel.de $WORK/text/mono.de > $WORK/text/bt.de
mkdir -p $WORK/data_bt
cp -n $WORK/data_parallel/vocab.$PROBLEM.model $WORK/data_bt/
datagen $WORK/data_bt $WORK/text/bt.en $WORK/text/bt.de
train $PROBLEM $WORK/data_bt $WORK/bt

t2t-decoder --output_dir=$WORK/rev/best --decode_from_file="$RAW/val.de.gz" \
    --decode_to_file=$WORK/val.rev.en > /dev/null
# Beam 4 with each length penalty of ALPHAS; each model's alpha is chosen on val.
for model in base bt; do
  for alpha in $ALPHAS; do
    for part in val test_2016_flickr; do
      t2t-decoder --output_dir=$WORK/$model/best --decode_from_file="$RAW/$part.en.gz" \
          --decode_to_file=$WORK/$part.$model.a$alpha.de --decode_hparams="alpha=$alpha" \
          > /dev/null
    done
  done
done
python - "$WORK" "$RAW" $ALPHAS <<'PY' | tee $WORK/results.md
import gzip, json, os, sys, sacrebleu
work, raw, alphas = sys.argv[1], sys.argv[2], sys.argv[3:]
def lines(path):
  opener = gzip.open if path.endswith(".gz") else open
  with opener(path, "rt", encoding="utf-8") as f:
    return f.read().splitlines()
def bleu(hyp, ref):
  return sacrebleu.corpus_bleu(lines(hyp), [lines(ref)])
def best(run):
  b = json.load(open(os.path.join(work, run, "run.json")))["best"]
  return f"step {b['step']}, val loss {b['value']:.3f}"
rev = bleu(os.path.join(work, "val.rev.en"), os.path.join(raw, "val.en.gz"))
print(f"rev (De->En) on {len(lines(os.path.join(work, 'text/parallel.en')))} pairs: "
      f"{best('rev')}, val sacreBLEU {rev.score:.2f} (beam 4, alpha 0.6)\n")
print("| run (En->De) | training pairs | best checkpoint | alpha | sacreBLEU val "
      "(length ratio) | sacreBLEU test2016 (length ratio) |")
print("|---|---|---|---|---|---|")
for run, text in (("base", "parallel"), ("bt", "bt")):
  n = len(lines(os.path.join(work, f"text/{text}.en")))
  scores = {a: [bleu(os.path.join(work, f"{part}.{run}.a{a}.de"),
                     os.path.join(raw, f"{part}.de.gz"))
                for part in ("val", "test_2016_flickr")] for a in alphas}
  chosen = max(alphas, key=lambda a: scores[a][0].score)
  for a in dict.fromkeys([alphas[0], chosen]):
    note = " (chosen on val)" if a == chosen else ""
    print(f"| {run} | {n} | {best(run)} | {a}{note} | " + " | ".join(
        f"{b.score:.2f} ({b.sys_len / b.ref_len:.3f})" for b in scores[a]) + " |")
PY
