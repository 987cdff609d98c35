"""Training entry points and their parts (an installed package: `python recipes/grpo.py` and
`python -m recipes.grpo` both work; nothing here edits sys.path).

One job per module: `config` (options dataclasses, YAML checks, reward names), `run_dir` (output folder,
checkpoints, resume, saved config), `data` (records to trainer rows, the dataset), `model` (model
resolution), `errors` (the one-line error), `grpo_args` / `grpo_plan` (GRPO parsing and checks; what
--dry-run prints), `async_cpu` / `async_patches` / `gloo_transfer` (async GRPO without CUDA). The scripts
(`grpo`, `sft_warmup`, `export`, `demo`, `proof`, `ablate`, `grpo_qwen14b`) stay thin on top of them.
docs/architecture.md, "Training", has the map.
"""
