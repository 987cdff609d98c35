#!/usr/bin/env bash
# Issue 63's unhinted strict pass@8 on en_split after the GPU proof (recipes/configs/proof_guidance_gpu.yaml, run on the
# device by bench/gpu_proof.sh; run this on the device after it): bench/proof_guidance_passk.sh with the GPU's settings
# (transformers in bf16, batches of 128) and the official file the device call kept.
set -uo pipefail
: "${RES:?}" "${KEEP:?}" "${PY:?}"
OFFICIAL="$KEEP/official" BACKEND=hf DTYPE=bfloat16 BATCH=128 RES="$RES" PY="$PY" \
  exec bash "$(dirname "$0")/proof_guidance_passk.sh"
