#!/usr/bin/env bash
# GPU memory and time table (issue 52): the sync paper recipe on random Qwen2.5-shaped models, one GPU, ZeRO-3.
#
#   bash bench/gpu_smoke.sh --prepare [PREP]                         # CPU, with the network: wheels + tokenizer + data
#   bash bench/gpu_memory_table.sh [PREP] [--out DIR] [--budget S]   # GPU machine: install, 4 shapes x 2 steps
#   bash bench/gpu_memory_table.sh [PREP] --dry-run                  # anywhere: the plan, no GPU
#
# PREP defaults to runs/gpu_smoke/prep (name it in the device tool's carry). The carried wheels go to WORK/site
# (the image's CUDA torch stays), then bench/gpu_memory_table.py runs the rows under --budget seconds (default 540:
# with the install, about 10 minutes of GPU time) and writes DIR/gpu_memory_table.json ($OUT when set). Other
# options pass through (--shapes 0.5B,3B, --steps 3). Bad input: one line, exit 2.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREP=runs/gpu_smoke/prep
WORK=runs/gpu_memory_table/work
PY=${PYTHON:-python3}
DRY=0
PASS=()
die() { echo "error: $*" >&2; exit 2; }

if [ $# -gt 0 ] && [ "${1#-}" = "$1" ]; then PREP=$1; shift; fi
while [ $# -gt 0 ]; do
  case "$1" in
    --dry-run) DRY=1; PASS+=("$1") ;;
    --work) [ $# -gt 1 ] || die "--work needs a folder"; WORK=$2; shift ;;
    -h|--help) sed -n '2,11p' "${BASH_SOURCE[0]}" | sed 's/^# \{0,1\}//'; exit 0 ;;
    *) PASS+=("$1") ;;
  esac
  shift
done
cd "$ROOT" || die "cannot enter $ROOT"
PREP=$(realpath -m "$PREP") WORK=$(realpath -m "$WORK")
[ -f "$PREP/model/tokenizer_config.json" ] \
  || die "$PREP: no prepared tokenizer (bash bench/gpu_smoke.sh --prepare $PREP on a CPU machine first)"
if [ "$DRY" = 0 ]; then
  { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU ' >/dev/null; } \
    || die "no CUDA GPU here (nvidia-smi finds none): run on a GPU machine, or --dry-run"
  mkdir -p "$WORK/site" || die "cannot create $WORK"
  if [ -d "$PREP/wheels" ]; then
    mapfile -t wheels < <("$PY" bench/gpu_smoke.py wheels --list bench/gpu_smoke_wheels.txt --folder "$PREP/wheels" \
      --lock requirements.lock) || exit 2
    echo "install: ${#wheels[@]} carried wheels -> $WORK/site"
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$WORK/site" "${wheels[@]}" \
      || die "installing the carried wheels failed"
  fi
  export PYTHONPATH="$WORK/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false HF_HOME=$WORK/hf \
    TASE_CACHE=$WORK/tase TRITON_CACHE_DIR=$WORK/triton TORCH_EXTENSIONS_DIR=$WORK/torch_ext
else
  export PYTHONPATH="$ROOT${PYTHONPATH:+:$PYTHONPATH}"
fi
exec "$PY" bench/gpu_memory_table.py --prep "$PREP" --work "$WORK/rows" "${PASS[@]}"
