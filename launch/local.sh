#!/usr/bin/env bash
# One node, N GPUs. Sync (default): vLLM colocated with training (TRL vllm_mode=colocate), DeepSpeed ZeRO-3.
# --async: a vLLM server on the first GPUs, TRL's AsyncGRPOTrainer under FSDP2 on the rest.
set -euo pipefail
usage() {
  cat <<'USAGE'
usage: launch/local.sh [--gpus N] [--config FILE] [--async] [--vllm-gpus K] [--dry-run] [-- extra recipe options]

Runs GRPO on this machine's GPUs.
  sync (default config recipes/configs/grpo_qwen14b_sync.yaml):
    accelerate launch --config_file recipes/accelerate/zero3.yaml --num_processes N \
        recipes/grpo.py --config FILE --use_vllm true --vllm_mode colocate [extra]
  --async (default config recipes/configs/grpo_qwen14b.yaml, the paper's async run):
    CUDA_VISIBLE_DEVICES=0..K-1 VLLM_SERVER_DEV_MODE=1 vllm serve MODEL --data-parallel-size K \
        --weight-transfer-config '{"backend":"nccl"}' ... &                      # generation, receives weights
    CUDA_VISIBLE_DEVICES=K..N-1 accelerate launch --config_file recipes/accelerate/fsdp2.yaml \
        --num_processes N-K recipes/grpo.py --config FILE --trainer async ...   # FSDP2 training

  --gpus N       number of GPUs (default: all visible, from nvidia-smi)
  --config FILE  recipe config
  --async        asynchronous GRPO (TRL AsyncGRPOTrainer): vLLM server + FSDP2 trainer
  --vllm-gpus K  async: GPUs for the vLLM server (default: the config's vllm_gpus, else 2)
  --port P       async: vLLM server port (default 8000)
  --dry-run      print every command (and the recipe's resolved configuration) without running anything
  -h, --help     this help
Example: launch/local.sh --gpus 8 -- --reward_granularity coarse --output_dir runs/coarse
USAGE
}
GPUS="" CONFIG="" DRY=0 ASYNC=0 VGPUS="" PORT=8000
OPTIONS=(--gpus GPUS  --config CONFIG  --async ASYNC=1  --vllm-gpus VGPUS  --port PORT  --dry-run DRY=1)
# shellcheck source-path=SCRIPTDIR source=_options.sh
. "$(dirname "$0")/_options.sh"
parse_options "$@"
cd "$(dirname "$0")/.."
[[ -z "$GPUS" ]] || need_int --gpus GPUS 1
[[ -z "$VGPUS" ]] || need_int --vllm-gpus VGPUS 1
need_int --port PORT 1 65535
if [[ -z "$GPUS" ]]; then
  GPUS=$(nvidia-smi -L 2>/dev/null | wc -l || true)
  [[ "$GPUS" -gt 0 ]] || GPUS=1
  [[ $DRY -eq 1 && $ASYNC -eq 1 && "$GPUS" -lt 2 ]] && GPUS=8  # dry run on a machine without GPUs: the paper's node
fi
[[ -n "$CONFIG" ]] || { [[ $ASYNC -eq 1 ]] && CONFIG="recipes/configs/grpo_qwen14b.yaml" || CONFIG="recipes/configs/grpo_qwen14b_sync.yaml"; }
[[ -f "$CONFIG" ]] || { echo "error: no such config: $CONFIG" >&2; exit 2; }
PY=${PYTHON:-.venv/bin/python}
key() { config_key "$CONFIG" "$1"; }
# A real start checks the GPUs here, once: the recipe's own refusal would run in every rank, print its line N
# times and end in torch.distributed's traceback (issue 66). NEED: the config's min_gpus, at least --gpus.
need_gpus() {
  local need=$1 have min
  min=$(key min_gpus); [[ -n "$min" && "$min" -gt "$need" ]] && need=$min
  have=$("$PY" -c 'import torch; print(torch.cuda.device_count())' 2>/dev/null || true)
  [[ "$have" =~ ^[0-9]+$ ]] || have=0
  (( have >= need )) && return 0
  echo "error: this run needs $need CUDA GPUs and $have are visible; use --dry-run to inspect the plan, or a smaller recipe (recipes/configs/grpo_smollm2_*.yaml)" >&2
  exit 2
}
if [[ $ASYNC -eq 0 ]]; then
  CMD=("$PY" -m accelerate.commands.launch --config_file recipes/accelerate/zero3.yaml --num_processes "$GPUS"
       recipes/grpo.py --config "$CONFIG" --use_vllm true --vllm_mode colocate ${EXTRA[@]+"${EXTRA[@]}"})
  if [[ $DRY -eq 1 ]]; then
    show "${CMD[@]}"
    "$PY" recipes/grpo.py --config "$CONFIG" ${EXTRA[@]+"${EXTRA[@]}"} --dry-run
    exit 0
  fi
  need_gpus "$GPUS"
  exec "${CMD[@]}"
fi
# --async
[[ -n "$VGPUS" ]] || VGPUS=$(key vllm_gpus); [[ -n "$VGPUS" && "$VGPUS" -gt 0 ]] || VGPUS=2
TGPUS=$((GPUS - VGPUS))
(( TGPUS >= 1 )) || { echo "error: --async needs at least one training GPU: $GPUS GPUs, $VGPUS for vLLM" >&2; exit 2; }
MODEL=$(key model_name_or_path)
DTYPE=$(key dtype); DTYPE=${DTYPE:-bfloat16}
MAXLEN=$(key token_budget); MAXLEN=${MAXLEN:-18432}
VDEV=$(seq -s, 0 $((VGPUS - 1)))
TDEV=$(seq -s, "$VGPUS" $((GPUS - 1)))
VLLM=${VLLM:-$( [[ "$PY" == */* ]] && echo "$(dirname "$PY")/vllm" || echo vllm)}
SERVE=(env "CUDA_VISIBLE_DEVICES=$VDEV" VLLM_SERVER_DEV_MODE=1 "$VLLM" serve "$MODEL" --data-parallel-size "$VGPUS"
       --dtype "$DTYPE" --max-model-len "$MAXLEN" --host 127.0.0.1 --port "$PORT"
       --weight-transfer-config '{"backend":"nccl"}')
TRAIN=(env "CUDA_VISIBLE_DEVICES=$TDEV" "$PY" -m accelerate.commands.launch --config_file recipes/accelerate/fsdp2.yaml
       --num_processes "$TGPUS" recipes/grpo.py --config "$CONFIG" --trainer async --vllm_gpus "$VGPUS"
       --vllm_server_base_url "http://127.0.0.1:$PORT" ${EXTRA[@]+"${EXTRA[@]}"})
[[ $DRY -eq 1 ]] || need_gpus "$GPUS"
echo "# async on $GPUS GPUs: vLLM server on GPU(s) $VDEV, FSDP2 trainer on GPU(s) $TDEV"
echo "$(show "${SERVE[@]}") &"
show "${TRAIN[@]}"
if [[ $DRY -eq 1 ]]; then
  "$PY" recipes/grpo.py --config "$CONFIG" --trainer async --vllm_gpus "$VGPUS" --min_gpus "$GPUS" \
      --vllm_server_base_url "http://127.0.0.1:$PORT" ${EXTRA[@]+"${EXTRA[@]}"} --dry-run
  exit 0
fi
"${SERVE[@]}" &
SERVER_PID=$!
trap 'kill "$SERVER_PID" 2>/dev/null || true' EXIT
# no fixed sleep: the trainer polls the server's /health for up to vllm_server_timeout seconds
"${TRAIN[@]}"
