#!/bin/bash
# the rest of run.sh after the selection (run.sh read best_checkpoint.json; select_checkpoint.py writes selection.json)
set -u
cd /work/wt-e49
export PYTHONPATH=$PWD TRL_EXPERIMENTAL_SILENCE=1
PY=.venv/bin/python
R=runs/e49
stamp() { echo "$(date +%s) $(date +%H:%M:%S) $*" >> $R/times.log; }
while pgrep -f "runs/e49/run.sh" > /dev/null; do sleep 10; done
[ -f $R/select_grpo/selection.json ] && [ -f $R/select_sft_more/selection.json ] || { echo "no selection" >> $R/times.log; exit 1; }
g=$($PY -c "import json;print(json.load(open('$R/select_grpo/selection.json'))['chosen']['path'])")
s=$($PY -c "import json;print(json.load(open('$R/select_sft_more/selection.json'))['chosen']['path'])")
echo "chosen: grpo $g sft_more $s" >> $R/times.log
for pair in "c0 $R/c0" "grpo-selected $g" "sft_more-selected $s"; do
  set -- $pair
  [ -f $R/eval/$1/results.json ] && continue
  rm -rf $R/eval/$1   # a failed start of run.sh (empty model path) may have left a folder
  $PY -m eval run --model $2 --data official:/work/main/runs/e47/official --out $R/eval/$1 --backend vllm --max-new-tokens 32 \
    --dtype float32 --no-progress > $R/eval_$1.log 2>&1 || exit 1
  stamp eval $1
done
$PY -m eval compare $R/eval/c0 $R/eval/grpo-selected $R/eval/sft_more-selected --n-boot 2000 --out $R/compare > $R/compare.log 2>&1
stamp done
