"""One real GRPO step with vLLM colocate rollouts on CPU, then evidence that the weights reached vLLM.

    python tests/vllm_sync_check.py OUT.json

Run by tests/test_vllm.py in its own process (vLLM colocate sets RANK/WORLD_SIZE and starts torch.distributed in
the calling process; the `__main__` guard is required because vLLM may spawn). The model is the default
SmolLM2-135M-Instruct saved as float32 (the policy trains in float32). The engine runs eager, as the recipe builds it
on CPU (recipes/features/vllm_cpu/colocate.eager_on_cpu: no dynamo trace at the first rollout). TRL builds the engine
with `dtype="auto"`: float32 where our vLLM platform plugin is active (eval/vllm_cpu.py: a CPU without native bf16, or
TASE_VLLM_CPU_FP32=force; 3.4e-6 mean absolute log-prob difference against the policy before training), else
bfloat16 (~0.02). A large learning rate
(1e-3, Adam) and a reward with variance inside every group (completion length) make one step move every weight.
Writes, per prompt: vLLM greedy tokens before the step, after it but before the next sync (stale), and after
the sync, transformers' greedy tokens from the trained
policy, and the trained policy's log-probabilities of vLLM's tokens beside vLLM's own.
"""
from __future__ import annotations

import json
import os
import sys
import tempfile
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PROMPTS = ["What is the capital of France?", "Count the letters in the word banana.",
           "Sort these words by length: cat, elephant, dog."]
NEW_TOKENS = 8


def vllm_greedy(llm, prompt_ids: list[list[int]]) -> tuple[list[list[int]], list[list[float]]]:
    from vllm import SamplingParams
    from vllm.inputs import TokensPrompt

    sp = SamplingParams(temperature=0.0, max_tokens=NEW_TOKENS, logprobs=0, ignore_eos=True)
    outs = llm.generate([TokensPrompt(prompt_token_ids=p) for p in prompt_ids], sampling_params=sp, use_tqdm=False)
    toks = [list(o.outputs[0].token_ids) for o in outs]
    lps = [[lp[t].logprob for t, lp in zip(o.outputs[0].token_ids, o.outputs[0].logprobs, strict=False)] for o in outs]
    return toks, lps


def policy_logprobs(model, prompt_ids: list[list[int]], completions: list[list[int]]) -> list[list[float]]:
    """transformers' log-probabilities of the given completion tokens (teacher forcing)."""
    import torch

    res = []
    with torch.no_grad():
        for p, c in zip(prompt_ids, completions, strict=False):
            logits = model(torch.tensor([p + c])).logits[0, len(p) - 1 : -1].float()
            res.append(torch.log_softmax(logits, -1).gather(1, torch.tensor(c)[:, None])[:, 0].tolist())
    return res


def main(out: str) -> int:
    """Run the check in a scratch folder (a float32 copy of the model and the run, ~530 MB), removed afterwards."""
    import shutil

    tmp = Path(tempfile.mkdtemp(prefix="vllm_sync_"))
    try:
        return check(out, tmp)
    finally:
        shutil.rmtree(tmp, ignore_errors=True)


def check(out: str, tmp: Path) -> int:
    os.environ.setdefault("VLLM_CPU_KVCACHE_SPACE", "1")
    os.environ.setdefault("VLLM_CPU_CI_ENV", "1")  # vLLM's own CPU CI switch: dynamo + eager, no inductor compile
    sys.path[:0] = [str(ROOT), str(ROOT / "recipes")]
    import torch
    from datasets import Dataset
    from transformers import AutoModelForCausalLM, AutoTokenizer
    from trl import GRPOConfig, GRPOTrainer

    from common.models import resolve_model
    from recipes.features.vllm_cpu.colocate import eager_on_cpu, use_reload_sync

    base = tmp / "base32"
    src = resolve_model("default")
    AutoModelForCausalLM.from_pretrained(src, dtype=torch.float32).save_pretrained(base)
    tok = AutoTokenizer.from_pretrained(src)
    tok.save_pretrained(base)
    ds = Dataset.from_list([{"prompt": [{"role": "user", "content": p}]} for p in PROMPTS[:2]])

    def length_reward(completions, **kw):  # varies inside every group, so the GRPO advantage is non-zero
        return [float(len(c[0]["content"] if isinstance(c, list) else c)) for c in completions]

    cfg = GRPOConfig(output_dir=str(tmp / "run"), use_cpu=True, bf16=False, seed=0, max_steps=1, learning_rate=1e-3,
                     lr_scheduler_type="constant", per_device_train_batch_size=4, num_generations=4,
                     max_completion_length=NEW_TOKENS, use_vllm=True, vllm_mode="colocate", vllm_max_model_length=512,
                     report_to="none", save_strategy="no", logging_steps=1, model_init_kwargs={"dtype": "float32"})
    with eager_on_cpu():  # as recipes/features/vllm_cpu/__init__.py builds a colocated CPU engine
        trainer = GRPOTrainer(model=str(base), reward_funcs=length_reward, args=cfg, train_dataset=ds,
                              processing_class=tok)
    assert use_reload_sync(trainer, "always")
    llm = trainer.vllm_generation.llm
    texts = [tok.apply_chat_template([{"role": "user", "content": p}], add_generation_prompt=True, tokenize=False)
             for p in PROMPTS]
    ids = [tok(t, add_special_tokens=False)["input_ids"] for t in texts]
    before, before_lp = vllm_greedy(llm, ids)
    base_lp = policy_logprobs(trainer.model.eval(), ids, before)
    trainer.train()  # syncs at step 0 (TRL, the initial weights), generates with vLLM, one optimizer step
    stale, _ = vllm_greedy(llm, ids)  # the engine still holds the weights of step 0
    trainer.vllm_generation.sync_weights()  # what TRL calls before the next step's rollouts
    after, after_lp = vllm_greedy(llm, ids)
    model = trainer.model.eval()
    hf_tok = []
    with torch.no_grad():
        for p in ids:
            g = model.generate(torch.tensor([p]), max_new_tokens=NEW_TOKENS, min_new_tokens=NEW_TOKENS,
                               do_sample=False, temperature=None, top_p=None, top_k=None, pad_token_id=tok.pad_token_id)
            hf_tok.append(g[0, len(p):].tolist())
    Path(out).write_text(json.dumps({
        "vllm_dtype": str(llm.llm_engine.model_config.dtype), "eager": llm.llm_engine.model_config.enforce_eager,
        "before": before, "before_lp": before_lp,
        "hf_lp_of_vllm_before": base_lp, "after": after, "after_lp": after_lp, "hf_after": hf_tok,
        "hf_lp_of_vllm_after": policy_logprobs(model, ids, after),
        "stale": stale}))
    return 0


if __name__ == "__main__":
    raise SystemExit(main(sys.argv[1]))
