#!/usr/bin/env bash
# Issue 49, the third file: variant_normalize/digital (docs/experiments/2026-11-28-digital-third-file.md). Run by hand, not by `make proof`: the two warm-up stages, GRPO, the time-matched control, and the
# evaluations. From the repository root:
#   TASE=/path/to/Tase E=<a work folder> bash docs/results/digital_proof_cpu/commands.sh
set -euo pipefail
: "${TASE:?set TASE}" "${E:?set E}"
# E/official: digital.csv alone, in the release's layout (links into TASE)
mkdir -p "$E/official/data" "$E/official/tasks/token_structure/variant_normalize"
ln -sf "$TASE"/data/final_token_structure.json "$TASE"/data/final_token_awareness.json "$E/official/data/"
ln -sf "$TASE/tasks/token_structure/variant_normalize/digital.csv" \
    "$E/official/tasks/token_structure/variant_normalize/"
python -m synth --task variant_normalize --lang ko --subtask digital -n 4000 --seed 777 --exclude "official:$TASE" \
    --out "$E/dig_all.jsonl"
head -n 1536 "$E/dig_all.jsonl" > "$E/train1536.jsonl"           # warm-up, stage 1
tail -n +1537 "$E/dig_all.jsonl" > "$E/pool.jsonl"
head -n 1536 "$E/pool.jsonl" > "$E/train2.jsonl"                 # warm-up, stage 2
tail -n +1537 "$E/pool.jsonl" > "$E/grpo_pool.jsonl"             # GRPO and the control (928 rows)
python -m synth --task variant_normalize --lang ko --subtask digital -n 96 --seed 4242 --exclude "official:$TASE" \
    --exclude-exact "$E/dig_all.jsonl" --out "$E/heldout96.jsonl"
# warm-up, stage 1: 1 epoch, lr 1e-4 cosine (the sft config's schedule)
python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml --train_data "$E/train1536.jsonl" \
    --num_train_examples 1536 --learning_rate 1.0e-4 --paraphrase false --logging_steps 16 --output_dir "$E/sft"
# warm-up, stage 2: 1536 new rows, lr 3e-4 constant (the model called "warm-up" below)
python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml --model_name_or_path "$E/sft" \
    --train_data "$E/train2.jsonl" --num_train_examples 1536 --learning_rate 3.0e-4 --lr_scheduler_type constant \
    --warmup_steps 0 --paraphrase false --logging_steps 16 --output_dir "$E/sft2"
# GRPO: fine reward, dynamic sampling, num_iterations 2, 80 steps; the final model is the one evaluated (no selection)
python recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml --model_name_or_path "$E/sft2" \
    --tasks variant_normalize --langs ko --subtasks digital --train_data "$E/grpo_pool.jsonl" \
    --exclude "official:$TASE" \
    --reward_funcs accuracy_fine format length_penalty --dynamic_sampling true --num_iterations 2 --max_steps 80 \
    --save_steps 20 --save_total_limit 10 --output_dir "$E/grpo"
# the more-SFT control: the warm-up's stage-2 recipe continued on the GRPO pool's gold answers for GRPO's train_runtime
python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml --model_name_or_path "$E/sft2" \
    --train_data "$E/grpo_pool.jsonl" --num_train_examples 928 --learning_rate 3.0e-4 --lr_scheduler_type constant \
    --warmup_steps 0 --max_steps 3000 --max_train_seconds 964.8426 --paraphrase false --logging_steps 16 \
    --output_dir "$E/control"
run=(python -m eval run --max-new-tokens 32 --backend vllm --dtype float32)
for m in sft2 grpo control; do   # the whole official file
  "${run[@]}" --model "$E/$m" --data "official:$E/official" --out "$E/$m.ev/official"
done
for m in sft sft2 grpo; do   # the held-out screen
  "${run[@]}" --model "$E/$m" --data "$E/heldout96.jsonl" --out "$E/$m.ev/greedy"
  "${run[@]}" --model "$E/$m" --data "$E/heldout96.jsonl" --num-samples 8 --temperature 1 --out "$E/$m.ev/k8"
done
python -m eval compare "$E/sft2.ev/official" "$E/grpo.ev/official" "$E/control.ev/official" --n-boot 2000 \
    --out "$E/compare_official"
python -m eval compare "$E/grpo.ev/official" "$E/control.ev/official" --n-boot 2000 --out "$E/compare_grpo_control"
