#!/bin/bash
# a third arm from C0: GRPO with dynamic sampling (issue 47's lever), sized to GRPO's wall time (80 steps, est.)
set -u
cd /work/wt-e49
export PYTHONPATH=$PWD TRL_EXPERIMENTAL_SILENCE=1
PY=.venv/bin/python
R=runs/e49
T=/work/Tase
stamp() { echo "$(date +%s) $(date +%H:%M:%S) $*" >> $R/times.log; }
while pgrep -f "runs/e49/run2.sh" > /dev/null || pgrep -f "runs/e49/run.sh" > /dev/null; do sleep 10; done
stamp run3 start
[ -f $R/grpo_dyn/model.safetensors ] || $PY recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml \
  --model_name_or_path $R/c0 --exclude official:$T --output_dir $R/grpo_dyn --reward_funcs accuracy_fine format length_penalty \
  --cpu_bf16 false --subtasks combine --synth_seed 779 --max_steps 80 --num_iterations 2 --dynamic_sampling true \
  --save_steps 20 --save_total_limit 10 --resume_from_checkpoint true > $R/grpo_dyn.log 2>&1 || exit 1
stamp grpo_dyn
$PY recipes/select_checkpoint.py $R/grpo_dyn --heldout $R/heldout300.jsonl --out $R/select_grpo_dyn > $R/select_grpo_dyn.log 2>&1 || exit 1
stamp select_dyn
d=$($PY -c "import json;print(json.load(open('$R/select_grpo_dyn/selection.json'))['chosen']['path'])")
echo "chosen: grpo_dyn $d" >> $R/times.log
[ -f $R/eval/grpo_dyn-selected/results.json ] || $PY -m eval run --model $d --data official:/work/main/runs/e47/official \
  --out $R/eval/grpo_dyn-selected --backend vllm --max-new-tokens 32 --dtype float32 --no-progress > $R/eval_grpo_dyn.log 2>&1 || exit 1
stamp eval grpo_dyn
rm -rf $R/compare4
$PY -m eval compare $R/eval/c0 $R/eval/grpo-selected $R/eval/sft_more-selected $R/eval/grpo_dyn-selected --n-boot 2000 \
  --out $R/compare4 > $R/compare4.log 2>&1
stamp done3
