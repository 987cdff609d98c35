"""The paper's GRPO recipe (Table 13) for Qwen2.5-14B-Instruct: recipes/grpo.py with its YAML as default.
The YAML is async (TRL AsyncGRPOTrainer, a vLLM server + FSDP2 trainer), as the paper trained.

    launch/local.sh --async                                  # starts the vLLM server and this recipe under FSDP2
    accelerate launch recipes/grpo_qwen14b.py --dry-run      # resolved config, effective batch, async split, memory
    accelerate launch --config_file recipes/accelerate/zero3.yaml recipes/grpo_qwen14b.py \
        --config recipes/configs/grpo_qwen14b_sync.yaml      # the synchronous variant
"""
from pathlib import Path

from recipes import grpo
from recipes.grpo_core import distributed

if __name__ == "__main__":
    raise SystemExit(distributed.launcher_exit(
        grpo.main(default_config=str(Path(__file__).resolve().parent / "configs" / "grpo_qwen14b.yaml"))))
