"""recipes/trl_grpo.py: a sync GRPO run that does not generate with vLLM does not import it (TRL's trainer module
would, whenever vLLM is installed: 5-8 s of every GRPO process on 2 cores), and a later caller in the same
interpreter that does use vLLM gets TRL's generation modules bound to it. One fresh interpreter (the test worker may
have imported vLLM already): a real 1-step run through recipes/grpo.py's main, then `grpo_trainer(use_vllm=True)`."""
from __future__ import annotations

import subprocess
import sys

import pytest
from conftest import ROOT

pytestmark = pytest.mark.fresh_python  # what a fresh interpreter imports is the point (tests/warm_python.py)

CHECK = r"""
import sys
import importlib.util

from recipes import grpo
from recipes.trl_grpo import grpo_trainer

out, model = sys.argv[1], sys.argv[2]
assert grpo.main(["--model_name_or_path", model, "--output_dir", out, "--max_steps", "1", "--save_strategy", "no",
                  "--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--tasks", "sort_lengths",
                  "--langs", "en", "--max_len", "6", "--num_train_examples", "8", "--num_generations", "2",
                  "--per_device_train_batch_size", "2", "--max_completion_length", "4", "--report_to", "none",
                  "--gradient_checkpointing", "false", "--use_vllm", "false"]) == 0
import trl.generation.vllm_generation as vg
import trl.trainer.grpo_trainer as gt
assert "vllm" not in sys.modules, sorted(m for m in sys.modules if m.startswith("vllm"))[:5]
assert not hasattr(vg, "LLM")  # TRL saw no vLLM while its trainer imported
assert "vllm" not in sys.modules and importlib.util.find_spec("vllm") is not None  # hidden only during the import

from trl import GRPOTrainer
assert grpo_trainer(True) is GRPOTrainer  # the same trainer class, now with vLLM bound
import vllm
import trl.generation as tg
import trl.generation.vllm_client as vc
assert vg.LLM is vllm.LLM and vg.SamplingParams is vllm.SamplingParams
assert gt.VLLMGeneration is vg.VLLMGeneration is tg.VLLMGeneration
assert gt.VLLMGeneration._init_vllm.__globals__["LLM"] is vllm.LLM  # what a colocated trainer builds its engine with
assert callable(vc.get_ip)  # server mode's address lookup, bound only with vLLM
assert grpo_trainer(False) is GRPOTrainer  # already imported: nothing hidden again
assert vg.LLM is vllm.LLM
print("ok")
"""


@pytest.mark.slow
def test_sync_run_without_vllm_imports_no_vllm_and_a_later_vllm_caller_gets_it(tiny_model, tmp_path):
    res = subprocess.run([sys.executable, "-c", CHECK, str(tmp_path / "run"), str(tiny_model)], cwd=ROOT,
                         capture_output=True, text=True, timeout=600)
    assert res.returncode == 0 and res.stdout.strip().endswith("ok"), res.stderr[-3000:]
