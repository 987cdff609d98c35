#!/usr/bin/env bash
# Laptop / CPU-only: SFT warm-up then GRPO on SmolLM2-135M-Instruct, then export.
set -euo pipefail
usage() {
  cat <<'USAGE'
usage: launch/cpu.sh [--out DIR] [--steps N] [--reward_granularity fine|strict|coarse] [--dry-run] [-- extra grpo options]

  1. python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml --output_dir DIR/sft
        --resume_from_checkpoint true
  2. python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --model_name_or_path DIR/sft
        --output_dir DIR/grpo --resume_from_checkpoint true --max_steps N --reward_granularity G [extra]
  (a rerun of the same command continues each stage from its newest complete checkpoint)
  3. python recipes/export.py DIR/grpo --out DIR/export --force

  --out DIR        run folder (default runs/cpu)
  --steps N        GRPO steps (default 40; ~10-40 s each on 2 cores)
  --reward_granularity G
                   fine, strict or coarse reward (default fine: partial credit on the strict verdict);
                   its former name --granularity still works, with a deprecation line
  --dry-run        print the commands only
  -h, --help       this help
USAGE
}
OUT="runs/cpu" STEPS=40 GRAN="fine" DRY=0
OPTIONS=(--out OUT  --steps STEPS  --reward_granularity GRAN  --dry-run DRY=1)
RENAMED=(--granularity --reward_granularity)
# shellcheck source-path=SCRIPTDIR source=_options.sh
. "$(dirname "$0")/_options.sh"
parse_options "$@"
need_int --steps STEPS 1
cd "$(dirname "$0")/.."
PY=${PYTHON:-.venv/bin/python}
run() { echo "+ $(show "$@")"; [[ $DRY -eq 1 ]] || "$@"; }
# --resume_from_checkpoint true: rerunning the same command continues from the newest complete checkpoint
# (or starts at step 0 when there is none) instead of being refused for reusing the run folder.
run "$PY" recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml --output_dir "$OUT/sft" \
    --resume_from_checkpoint true
run "$PY" recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --model_name_or_path "$OUT/sft" \
    --output_dir "$OUT/grpo" --resume_from_checkpoint true --max_steps "$STEPS" --reward_granularity "$GRAN" ${EXTRA[@]+"${EXTRA[@]}"}
run "$PY" recipes/export.py "$OUT/grpo" --out "$OUT/export" --force
