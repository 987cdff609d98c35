#!/usr/bin/env bash
# Issue 63's unhinted strict pass@8 on en_split (recipes/configs/proof_guidance_gpu.yaml), run by bench/gpu_proof.sh
# after the proof: the warm-up and each arm's chosen checkpoint, 8 samples at temperature 1.0 on 200 rows of the whole
# file (evenly spread), plain prompts (eval never adds a hint). Writes RES/eval/passk/<model>/results.json.
set -uo pipefail
: "${RES:?}" "${KEEP:?}" "${PY:?}"
run() {  # name, model folder
  "$PY" -m eval run --model "$2" --data "official:$KEEP/official" --out "$RES/eval/passk/$1" --backend hf \
    --num-samples 8 --temperature 1.0 --seed 0 --limit 200 --max-new-tokens 32 --batch-size 128 --dtype bfloat16 \
    --no-progress || echo "pass@8 of $1 failed"
}
run warm-up "$RES/sft"
for arm in hint gold dynamic control; do
  [ -d "$RES/select_$arm" ] || continue
  # best_checkpoint.json (or a former selection.json, read for one more release): recipes/best_checkpoint.py
  model=$("$PY" -c 'import sys; from recipes.best_checkpoint import read; r = read(sys.argv[1]); print(r["path"]) if r else sys.exit(1)' \
    "$RES/select_$arm") || continue
  run "$arm" "$model"
done
