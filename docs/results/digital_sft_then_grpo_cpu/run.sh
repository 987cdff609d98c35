#!/usr/bin/env bash
# Issue 49, SFT then GRPO on variant_normalize/digital (docs/experiments/2026-11-28-digital-as-one-command.md): the two final stages as they first ran by hand, from the best SFT model, the digital proof's control
# (C: runs/proof_digital/control of `make proof ... PROOF_CONFIG=recipes/configs/proof_digital_cpu.yaml`, or the
# hand run's; the same weights). `make proof` with recipes/configs/proof_digital_sft_grpo_cpu.yaml runs the same
# commands under the names fine and control. From the repository root:
#   TASE=/path/to/Tase C=<the control> E=<a work folder> bash docs/results/digital_sft_then_grpo_cpu/run.sh
set -euo pipefail
: "${TASE:?set TASE}" "${C:?set C}" "${E:?set E}"
# E/official: digital.csv alone, in the release's layout (links into TASE)
mkdir -p "$E/official/data" "$E/official/tasks/token_structure/variant_normalize"
ln -sf "$TASE"/data/final_token_structure.json "$TASE"/data/final_token_awareness.json "$E/official/data/"
ln -sf "$TASE/tasks/token_structure/variant_normalize/digital.csv" \
    "$E/official/tasks/token_structure/variant_normalize/"
data=(--tasks variant_normalize --langs ko --subtasks digital --synth_seed 779 --num_train_examples 928
      --exclude "official:$TASE")
# GRPO from the control on fresh rows (synth_seed 779): fine reward, dynamic sampling, num_iterations 2, 80 steps
python recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml --model_name_or_path "$C" "${data[@]}" \
    --reward_funcs accuracy_fine format length_penalty --dynamic_sampling true --num_iterations 2 --max_steps 80 \
    --save_steps 20 --save_total_limit 10 --output_dir "$E/grpo"
# more SFT from the control on the same rows' gold answers: 88 steps, the control's recipe (lr 3e-4 constant)
python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml --model_name_or_path "$C" "${data[@]}" \
    --paraphrase false --learning_rate 3.0e-4 --lr_scheduler_type constant --warmup_steps 0 --max_steps 88 \
    --logging_steps 16 --output_dir "$E/sft"
for m in grpo sft; do   # the whole official file
  python -m eval run --model "$E/$m" --data "official:$E/official" --out "$E/$m.ev/official" --backend vllm \
      --max-new-tokens 32 --dtype float32
done
python -m eval compare "$E/sft.ev/official" "$E/grpo.ev/official" --n-boot 2000 --out "$E/compare_grpo_sft"
