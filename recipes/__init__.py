"""Training entry points and their parts (an installed package: `python recipes/grpo.py` and
`python -m recipes.grpo` both work; nothing here edits sys.path).

One job per module: `parser` (the command line, read once by TRL's parser), `config` (options dataclasses,
reward names), `run_dir` (output folder, checkpoints, resume, saved config), `data` (records to trainer rows,
the dataset), `model` (model resolution), `grpo_args` / `grpo_plan` (GRPO's options and checks; what --dry-run
prints), `grpo_run` (what sync and async GRPO share around their trainer), `features/` (one module per training
opt-in and the one list the entry points fold), `async_grpo/` (the async entry and
what only it needs), `proof_*` (the proof's stages). Library code raises `common.errors.TaseError`; a recipe's
`main` is decorated with `common.errors.one_line_exit`. The scripts (`grpo`, `sft_warmup`, `export`, `demo`,
`proof`, `ablate`, `grpo_qwen14b`) stay thin on top of them. docs/architecture.md, "Training", has the map.
"""
