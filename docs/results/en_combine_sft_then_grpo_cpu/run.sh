#!/bin/bash
# Issue 49: SFT then GRPO on en_combine, against more SFT for the same wall time (both from C0, the control at 300 steps)
set -u
cd /work/wt-e49
export PYTHONPATH=$PWD TRL_EXPERIMENTAL_SILENCE=1
PY=.venv/bin/python
R=runs/e49
W=/work/main/runs/e47/sft
T=/work/Tase
stamp() { echo "$(date +%s) $(date +%H:%M:%S) $*" >> $R/times.log; }
stamp start
# data: the sft and both GRPO prompt sets (for the held-out exclusion)
for spec in "sft 768 777 --max-len 12" "grpo778 2000 778" "grpo779 2000 779"; do
  set -- $spec; name=$1; n=$2; seed=$3; shift 3
  [ -f $R/data/$name.jsonl ] || $PY -m synth --task component_split --lang en -n $n --seed $seed --subtask combine "$@" \
    --exclude official:$T --no-progress --out $R/data/$name.jsonl || exit 1
done
[ -f $R/heldout300.jsonl ] || $PY -m synth --task component_split --lang en -n 300 --seed 4243 --subtask combine \
  --out $R/heldout300.jsonl --exclude official:$T --exclude-exact $R/data/sft.jsonl --exclude-exact $R/data/grpo778.jsonl \
  --exclude-exact $R/data/grpo779.jsonl --no-progress || exit 1
stamp data
# C0: the held-out-selected control of the 2026-11-26 run (300 steps of gold-answer SFT on the seed-778 GRPO prompts, lr 5e-5 constant)
[ -f $R/c0/model.safetensors ] || nice -n -5 $PY recipes/sft_warmup.py --config $R/c0_config.yaml --model_name_or_path $W \
  --learning_rate 5e-05 --lr_scheduler_type constant --warmup_steps 0 --max_steps 300 --logging_steps 8 \
  --exclude official:$T --output_dir $R/c0 --save_strategy no > $R/c0.log 2>&1 || exit 1
stamp c0
# GRPO from C0 on fresh prompts (seed 779): the 2026-11-26 recipe (fine reward, num_iterations 2), 150 steps
[ -f $R/grpo/model.safetensors ] || nice -n -5 $PY recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml \
  --model_name_or_path $R/c0 --exclude official:$T --output_dir $R/grpo --reward_funcs accuracy_fine format length_penalty \
  --cpu_bf16 false --subtasks combine --synth_seed 779 --max_steps 150 --num_iterations 2 --save_steps 50 \
  --save_total_limit 10 --resume_from_checkpoint true > $R/grpo.log 2>&1 || exit 1
stamp grpo
RT=$($PY -c "import json;print(json.load(open('$R/grpo/trainer_state.json'))['log_history'][-1]['train_runtime'])" 2>/dev/null \
) || exit 1
echo "grpo train_runtime $RT" >> $R/times.log
# more SFT from C0 on the same fresh prompts (gold answers), for GRPO's train_runtime
[ -f $R/sft_more/model.safetensors ] || nice -n -5 $PY recipes/sft_warmup.py --config $R/cont_config.yaml --model_name_or_path $R/c0 \
  --learning_rate 5e-05 --lr_scheduler_type constant --warmup_steps 0 --max_steps 3000 --max_train_seconds $RT \
  --logging_steps 8 --exclude official:$T --output_dir $R/sft_more --save_strategy steps --save_steps 100 \
  --save_total_limit 30 > $R/sft_more.log 2>&1 || exit 1
stamp sft_more
# held-out selection (300 rows, greedy), C0 scored the same way for reference
$PY -m eval run --model $R/c0 --data $R/heldout300.jsonl --out $R/select_c0 --backend vllm --max-new-tokens 32 --dtype float32 --no-progress > $R/select_c0.log 2>&1
$PY recipes/select_checkpoint.py $R/grpo --heldout $R/heldout300.jsonl --out $R/select_grpo > $R/select_grpo.log 2>&1 || exit 1
$PY recipes/select_checkpoint.py $R/sft_more --heldout $R/heldout300.jsonl --out $R/select_sft_more > $R/select_sft_more.log 2>&1 || exit 1
stamp select
g=$($PY -c "import json;print(json.load(open('$R/select_grpo/best_checkpoint.json'))['path'])")
s=$($PY -c "import json;print(json.load(open('$R/select_sft_more/best_checkpoint.json'))['path'])")
echo "chosen: grpo $g sft_more $s" >> $R/times.log
for pair in "c0 $R/c0" "grpo-selected $g" "sft_more-selected $s"; do
  set -- $pair
  $PY -m eval run --model $2 --data official:/work/main/runs/e47/official --out $R/eval/$1 --backend vllm --max-new-tokens 32 \
    --dtype float32 --no-progress > $R/eval_$1.log 2>&1 || exit 1
  stamp eval $1
done
$PY -m eval compare $R/eval/c0 $R/eval/grpo-selected $R/eval/sft_more-selected --n-boot 2000 --out $R/compare > $R/compare.log 2>&1
stamp done
