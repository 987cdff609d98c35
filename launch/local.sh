#!/usr/bin/env bash
# One node, N GPUs, vLLM colocated with training (TRL vllm_mode=colocate), DeepSpeed ZeRO-3.
set -euo pipefail
usage() {
  cat <<'USAGE'
usage: launch/local.sh [--gpus N] [--config FILE] [--dry-run] [-- extra recipe options]

Runs GRPO on this machine's GPUs:
  accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes N \
      recipes/grpo.py --config FILE --use_vllm true --vllm_mode colocate [extra]

  --gpus N       number of GPUs (default: all visible, from nvidia-smi)
  --config FILE  recipe config (default: recipes/configs/grpo_qwen14b.yaml)
  --dry-run      print the command (and the recipe's resolved configuration) without training
  -h, --help     this help
Example: launch/local.sh --gpus 8 -- --reward_granularity coarse --output_dir runs/coarse
USAGE
}
GPUS="" CONFIG="recipes/configs/grpo_qwen14b.yaml" DRY=0 EXTRA=()
while [[ $# -gt 0 ]]; do
  case "$1" in
    --gpus) GPUS="$2"; shift 2 ;;
    --config) CONFIG="$2"; shift 2 ;;
    --dry-run) DRY=1; shift ;;
    -h|--help) usage; exit 0 ;;
    --) shift; EXTRA=("$@"); break ;;
    *) echo "error: unknown option $1 (see --help)" >&2; exit 2 ;;
  esac
done
cd "$(dirname "$0")/.."
if [[ -z "$GPUS" ]]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l || true)
  [[ "$GPUS" -gt 0 ]] || GPUS=1
fi
[[ -f "$CONFIG" ]] || { echo "error: no such config: $CONFIG" >&2; exit 2; }
PY=${PYTHON:-.venv/bin/python}
CMD=("$PY" -m accelerate.commands.launch --config_file recipes/accelerate/zero3.yaml --num_processes "$GPUS"
     recipes/grpo.py --config "$CONFIG" --use_vllm true --vllm_mode colocate ${EXTRA[@]+"${EXTRA[@]}"})
if [[ $DRY -eq 1 ]]; then
  echo "${CMD[*]}"
  "$PY" recipes/grpo.py --config "$CONFIG" ${EXTRA[@]+"${EXTRA[@]}"} --dry-run
  exit 0
fi
exec "${CMD[@]}"
