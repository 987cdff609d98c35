"""Training entry points and their parts (an installed package: `python recipes/grpo.py` and
`python -m recipes.grpo` both work; nothing here edits sys.path).

The top level holds the entry scripts (`grpo`, `grpo_qwen14b`, `sft_warmup`, `proof`, `export`, `demo`, `ablate`,
`select_checkpoint`) and `trl_grpo` (TRL's trainer imported without vLLM); the parts sit in sub-packages:
`shared/` (the command line, read once: `parser`; options: `config`; output folder and resume: `run_dir`; training
rows: `data`, `streams`; the model: `model`, `adapters`, `lora_check`; the chosen checkpoint: `best_checkpoint`),
`grpo_core/` (what sync and async GRPO share: `args`, `plan`, `run`, `distributed`, `model_shapes`, the reward
functions), `async_grpo/` (the async entry and what only it needs), `features/` (one package per training opt-in
and the one list the entry points fold), `proof_stages/` (the proof's stages), `steps/` (the step runner and the
ablation grid). Library code raises `common.errors.TaseError`; a recipe's `main` is decorated with
`common.errors.one_line_exit`. docs/architecture.md, "Training", has the map.
"""
