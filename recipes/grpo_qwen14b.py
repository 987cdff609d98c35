"""The paper's GRPO recipe (Table 13) for Qwen2.5-14B-Instruct: recipes/grpo.py with its YAML as default.

    accelerate launch --config_file recipes/accelerate/zero3.yaml recipes/grpo_qwen14b.py
    accelerate launch recipes/grpo_qwen14b.py --dry-run      # resolved config, effective batch, memory
"""
import sys
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))

import grpo  # noqa: E402

if __name__ == "__main__":
    raise SystemExit(grpo.main(default_config=str(Path(__file__).resolve().parent / "configs" / "grpo_qwen14b.yaml")))
