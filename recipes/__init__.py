"""Training entry points and their parts (an installed package: `python recipes/grpo.py` and
`python -m recipes.grpo` both work).

Each module has one job: `config` (options and their checks, reward names), `run_dir` (output folder,
checkpoints, resume, saved config), `data` (records to trainer rows, the dataset), `model` (model
resolution), `errors` (the one-line error); the scripts (`grpo`, `sft_warmup`, `export`, `demo`, `proof`,
`ablate`, `grpo_qwen14b`, `vllm_server_cpu`) stay thin on top of them. docs/architecture.md has the map.
"""
