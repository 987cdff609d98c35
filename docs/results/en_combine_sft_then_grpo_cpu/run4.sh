#!/bin/bash
# a second seed of the dynamic-sampling arm (training seed 7; same C0, same prompt pool), after the CI check
set -u
cd /work/wt-e49
export PYTHONPATH=$PWD TRL_EXPERIMENTAL_SILENCE=1
PY=.venv/bin/python
R=runs/e49
T=/work/Tase
stamp() { echo "$(date +%s) $(date +%H:%M:%S) $*" >> $R/times.log; }
while [ ! -f /tmp/fc19/ci.done ]; do sleep 10; done
stamp run4 start
[ -f $R/grpo_dyn_s7/model.safetensors ] || $PY recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml \
  --model_name_or_path $R/c0 --exclude official:$T --output_dir $R/grpo_dyn_s7 --reward_funcs accuracy_fine format length_penalty \
  --cpu_bf16 false --subtasks combine --synth_seed 779 --max_steps 80 --num_iterations 2 --dynamic_sampling true \
  --save_steps 20 --save_total_limit 10 --seed 7 --resume_from_checkpoint true > $R/grpo_dyn_s7.log 2>&1 || exit 1
stamp grpo_dyn_s7
$PY recipes/select_checkpoint.py $R/grpo_dyn_s7 --heldout $R/heldout300.jsonl --out $R/select_grpo_dyn_s7 > $R/select_grpo_dyn_s7.log 2>&1 || exit 1
stamp select_dyn_s7
d=$($PY -c "import json;print(json.load(open('$R/select_grpo_dyn_s7/selection.json'))['chosen']['path'])")
echo "chosen: grpo_dyn_s7 $d" >> $R/times.log
[ -f $R/eval/grpo_dyn_s7-selected/results.json ] || $PY -m eval run --model $d --data official:/work/main/runs/e47/official \
  --out $R/eval/grpo_dyn_s7-selected --backend vllm --max-new-tokens 32 --dtype float32 --no-progress > $R/eval_grpo_dyn_s7.log 2>&1 || exit 1
stamp eval grpo_dyn_s7
rm -rf $R/compare5
$PY -m eval compare $R/eval/sft_more-selected $R/eval/grpo_dyn-selected $R/eval/grpo_dyn_s7-selected $R/eval/c0 --n-boot 2000 \
  --out $R/compare5 > $R/compare5.log 2>&1
stamp done4
