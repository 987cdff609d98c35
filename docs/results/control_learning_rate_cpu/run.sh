#!/usr/bin/env bash
# Issue 49, the 2026-11-28 run (docs/experiments/2026-11-28-control-learning-rate.md): the three jobs as they ran, in
# /work/main with the official release at /work/Tase. Job 1 and job 2 (digital) need runs/proof_digital_sft_grpo of
# `make proof ... PROOF_CONFIG=recipes/configs/proof_digital_sft_grpo_cpu.yaml`; job 3 (en_combine) needs
# runs/proof_combine_sft_grpo of `make proof ... PROOF_CONFIG=recipes/configs/proof_combine_sft_grpo_cpu.yaml`.
# Jobs 2 and 3 ran side by side, job 1 alone before them, job 4 alone after them.

job1() {
  # Issue 49 follow-up (2026-11-28): the skeptic's arms on digital SFT then GRPO.
  # From the digital start C (runs/proof_digital_sft_grpo/start = proof_digital's control, 64.60; the 2026-11-28 run took it
  # for the best SFT model, which this job disproved):
  #   sft_lr5e-5, sft_lr1e-4: more SFT, 88 steps, constant lr (the en_combine control's 5e-5, and 1e-4 between it
  #   and 3e-4)
  #   grpo_s7: the fine GRPO arm with seed 7 (the committed arm has seed 42)
  set -euo pipefail
  cd /work/main; export PATH=/work/main/.venv/bin:$PATH
  R=runs/proof_digital_sft_grpo; C=$R/start; E=/work/exp21
  data=(--tasks variant_normalize --langs ko --subtasks digital --synth_seed 779 --num_train_examples 928
        --exclude "official:/work/Tase")
  t() { local s; s=$(date +%s); "$@"; echo "TIME $(( $(date +%s) - s )) s: ${*:1:3}"; }
  for lr in 5.0e-5 1.0e-4; do
    [ -f $E/sft_lr$lr/model.safetensors ] || t python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml \
        --model_name_or_path $C "${data[@]}" --paraphrase false --learning_rate $lr --lr_scheduler_type constant \
        --warmup_steps 0 --max_steps 88 --logging_steps 16 --output_dir $E/sft_lr$lr
  done
  [ -f $E/grpo_s7/model.safetensors ] || t python recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml \
      --model_name_or_path $C "${data[@]}" --reward_funcs accuracy_fine format length_penalty --dynamic_sampling true \
      --num_iterations 2 --max_steps 80 --save_steps 20 --save_total_limit 10 --seed 7 --output_dir $E/grpo_s7
  for m in sft_lr5.0e-5 sft_lr1.0e-4 grpo_s7; do
    for d in official heldout; do
      spec="official:$R/official"; [ $d = heldout ] && spec=$R/heldout.jsonl
      t python -m eval run --model $E/$m --data "$spec" --out $E/ev/$d/$m --backend vllm --max-new-tokens 32 \
          --dtype float32 --no-progress
    done
  done
  for d in official heldout; do
    python -m eval compare $R/eval/$d/start $R/eval/$d/fine $R/eval/$d/sft_control $E/ev/$d/sft_lr5.0e-5 \
        $E/ev/$d/sft_lr1.0e-4 $E/ev/$d/grpo_s7 --n-boot 2000 --out $E/cmp_$d
  done
  echo DONE
}

job2() {
  # Issue 49 follow-up (2026-11-28), job A: SFT then GRPO on digital from the held-out-best SFT model
  # S2 = /work/exp21/sft_lr1.0e-4 (78.40 whole file, 95.83 held-out), on fresh rows (synth_seed 781, 928 rows):
  #   a_grpo: GRPO fine as the committed arm (seed 42); a_sft1e-4, a_sft5e-5: 88 more SFT steps at those lrs
  set -euo pipefail
  cd /work/main; export PATH=/work/main/.venv/bin:$PATH
  R=runs/proof_digital_sft_grpo; S2=/work/exp21/sft_lr1.0e-4; E=/work/exp21
  data=(--tasks variant_normalize --langs ko --subtasks digital --synth_seed 781 --num_train_examples 928
        --exclude "official:/work/Tase")
  t() { local s; s=$(date +%s); "$@"; echo "TIME $(( $(date +%s) - s )) s: ${*:1:3}"; }
  [ -f $E/a_grpo/model.safetensors ] || t python recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml \
      --model_name_or_path $S2 "${data[@]}" --reward_funcs accuracy_fine format length_penalty --dynamic_sampling true \
      --num_iterations 2 --max_steps 80 --save_steps 20 --save_total_limit 10 --output_dir $E/a_grpo
  for lr in 1.0e-4 5.0e-5; do
    [ -f $E/a_sft$lr/model.safetensors ] || t python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml \
        --model_name_or_path $S2 "${data[@]}" --paraphrase false --learning_rate $lr --lr_scheduler_type constant \
        --warmup_steps 0 --max_steps 88 --logging_steps 16 --output_dir $E/a_sft$lr
  done
  for m in a_grpo a_sft1.0e-4 a_sft5.0e-5; do
    for d in official heldout; do
      spec="official:$R/official"; [ $d = heldout ] && spec=$R/heldout.jsonl
      [ -f $E/ev/$d/$m/results.json ] || t python -m eval run --model $E/$m --data "$spec" --out $E/ev/$d/$m \
          --backend vllm --max-new-tokens 32 --dtype float32 --no-progress
    done
  done
  for d in official heldout; do
    python -m eval compare $E/ev/$d/sft_lr1.0e-4 $E/ev/$d/a_grpo $E/ev/$d/a_sft1.0e-4 $E/ev/$d/a_sft5.0e-5 \
        --n-boot 2000 --out $E/cmp_a_$d
  done
  echo DONE
}

job3() {
  # Issue 49 follow-up (2026-11-28), job B: en_combine's more-SFT control at other learning rates.
  # From C0 (runs/proof_combine_sft_grpo/start, 25.30) on the same rows as the committed control (control_config.yaml:
  # component_split/en/combine, 2,000 rows of synth_seed 779), constant lr, 329 steps (the committed control's count),
  # checkpoints at 100, 200, 300 and the final 329, chosen on the 300 held-out selection rows as the committed arms.
  set -euo pipefail
  cd /work/main; export PATH=/work/main/.venv/bin:$PATH
  R=runs/proof_combine_sft_grpo; E=/work/exp21b
  t() { local s; s=$(date +%s); "$@"; echo "TIME $(( $(date +%s) - s )) s: ${*:1:3}"; }
  for lr in 1.0e-4 2.0e-5; do
    [ -f $E/sft$lr/model.safetensors ] || t python recipes/sft_warmup.py --config $R/control_config.yaml \
        --model_name_or_path $R/start --learning_rate $lr --lr_scheduler_type constant --warmup_steps 0 --max_steps 329 \
        --logging_steps 8 --exclude official:/work/Tase --output_dir $E/sft$lr --save_strategy steps --save_steps 100 \
        --save_total_limit 30
    [ -f $E/select_sft$lr/selection.json ] || t python recipes/select_checkpoint.py $E/sft$lr \
        --heldout $R/heldout_select.jsonl --out $E/select_sft$lr
    c=$(python -c "import json;print(json.load(open('$E/select_sft$lr/selection.json'))['chosen']['path'])")
    echo "chosen sft$lr: $c"
    [ -f $E/ev/sft$lr/results.json ] || t python -m eval run --model $c --data official:$R/official --out $E/ev/sft$lr \
        --backend vllm --max-new-tokens 32 --dtype float32 --no-progress
  done
  echo DONE
}

job4() {
  # Issue 49 (2026-11-28), job 4: a third seed (11) of en_combine's GRPO with dynamic sampling from C0, chosen on the
  # held-out selection rows like seeds 42 and 7, compared with the held-out-best more-SFT control (lr 2e-5, job 3)
  set -euo pipefail
  cd /work/main; export PATH=/work/main/.venv/bin:$PATH
  R=runs/proof_combine_sft_grpo; E=/work/exp21c
  [ -f $E/grpo_dyn_s11/model.safetensors ] || python recipes/grpo.py --config recipes/configs/grpo_combine_cpu.yaml \
    --model_name_or_path $R/start --exclude official:/work/Tase --output_dir $E/grpo_dyn_s11 \
    --reward_funcs accuracy_fine format length_penalty --cpu_bf16 false --subtasks combine --synth_seed 779 \
    --max_steps 80 --num_iterations 2 --dynamic_sampling true --save_steps 20 --save_total_limit 10 --seed 11
  [ -f $E/select/selection.json ] || python recipes/select_checkpoint.py $E/grpo_dyn_s11 --heldout $R/heldout_select.jsonl \
    --out $E/select
  c=$(python -c "import json;print(json.load(open('$E/select/selection.json'))['chosen']['path'])")
  echo "chosen: $c"
  [ -f $E/ev/results.json ] || python -m eval run --model "$c" --data official:$R/official --out $E/ev --backend vllm \
    --max-new-tokens 32 --dtype float32 --no-progress
  python -m eval compare /work/exp21b/ev/sft2.0e-5 $R/eval/official/grpo_dyn $R/eval/official/grpo_dyn_s7 $E/ev \
    $R/eval/official/sft_control --n-boot 2000 --out $E/cmp
  echo DONE
}

( job1 ) && { ( job2 ) & ( job3 ); wait; } && ( job4 )
