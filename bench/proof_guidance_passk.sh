#!/usr/bin/env bash
# Issue 63's unhinted strict pass@8 on en_split, after recipes/proof.py has run a guidance config
# (proof_guidance_cpu.yaml): the warm-up and each arm's chosen checkpoint, 8 samples at temperature 1.0 on 200 rows
# of the whole file in OFFICIAL (default RES/official; evenly spread), plain prompts (eval never adds a hint). Writes
# RES/eval/passk/<model>/results.json and the strict pass@k table RES/eval/passk/strict_passk.md.
#   RES=runs/proof_guidance_cpu bash bench/proof_guidance_passk.sh
# BACKEND (hf), DTYPE (float32), BATCH (64), OFFICIAL and PY (.venv/bin/python) may be set; bench/proof_guidance_gpu_after.sh
# is the same run with the GPU's settings.
set -uo pipefail
[ -n "${RES:-}" ] || { echo "set RES to the proof output folder (e.g. runs/proof_guidance_cpu)" >&2; exit 2; }
PY=${PY:-.venv/bin/python}
BACKEND=${BACKEND:-hf}
DTYPE=${DTYPE:-float32}
BATCH=${BATCH:-64}
OFFICIAL=${OFFICIAL:-$RES/official}
run() {  # name, model folder
  "$PY" -m eval run --model "$2" --data "official:$OFFICIAL" --out "$RES/eval/passk/$1" --backend "$BACKEND" \
    --num-samples 8 --temperature 1.0 --seed 0 --limit 200 --max-new-tokens 32 --batch-size "$BATCH" --dtype "$DTYPE" \
    --no-progress || echo "pass@8 of $1 failed"
}
[ -d "$OFFICIAL" ] || { echo "no $OFFICIAL: run recipes/proof.py first" >&2; exit 2; }
run warm-up "$RES/sft"
for arm in hint gold dynamic control; do
  [ -d "$RES/select_$arm" ] || continue
  # best_checkpoint.json (or a former selection.json, read for one more release): recipes/shared/best_checkpoint.py
  model=$("$PY" -c 'import sys; from recipes.shared.best_checkpoint import read; r = read(sys.argv[1]); print(r["path"]) if r else sys.exit(1)' \
    "$RES/select_$arm") || continue
  run "$arm" "$model"
done
# the strict pass@k of every model sampled above (eval run's pass@k counts loophole passes): bench/strict_passk.py
"$PY" bench/strict_passk.py --data "official:$OFFICIAL" "$RES"/eval/passk/*/ --out "$RES/eval/passk/strict_passk.md"
