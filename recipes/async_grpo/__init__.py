"""Asynchronous GRPO (`trainer: async`, TRL's AsyncGRPOTrainer): what only the async path needs, apart from the sync
path's modules. `main` (the async entry recipes/grpo.py hands a real async start to), `cpu_engine` (the rollout
worker with an in-process vLLM engine, for machines without CUDA), `gloo_transfer` (its weight transport), `patches`
(the CPU patches: ChatML response schema, tree attention in SDPA, peak FLOPs), `metrics` (the tase/ view on TRL's
rollout loop) and `trl_checks` (the tested TRL range, stalled weight syncs). Importing the package imports none of them:
TRL and vLLM load only when a run asks for them."""
