"""Dynamic sampling (recipes/features/dynamic_sampling/sampling.py, issue 47): the group filter on real verdicts of real
completions, the batch it builds (uniform groups never reach the loss), its options, the TRL/transformers sources it
relies on (pinned), and a 3-step CPU GRPO run that logs tase/dynamic/ metrics and resumes at the same data position."""
import hashlib
import inspect
import json
import subprocess
import sys
from pathlib import Path
from types import SimpleNamespace

import pytest
from conftest import ROOT, call_main

PY = sys.executable


def freq_row(answer: str) -> dict:
    """A real freq_count record (NUMBER type) whose gold count is `answer`."""
    import synth

    return next(r for r in synth.generate("freq_count", "en", 200, 1234, max_len=6) if r["answer"] == answer)


def scores(row: dict, completions: list[str]) -> list:
    from rewards.trl import batch_scores, reward_columns

    cols = {k: [v] * len(completions) for k, v in reward_columns(row).items()}
    return batch_scores(None, completions, **cols)


def test_format_term_alone_never_makes_a_group_mixed():
    """A group whose completions are all wrong but differ in format has a spread of total reward (what TRL's float
    std sees, and what OpenRLHF#1270 / NeMo-RL#4158 filtered on), yet its strict verdicts agree: uniform. One right
    answer among wrong ones is mixed."""
    from recipes.features.dynamic_sampling.sampling import mixed_groups, verdict_level
    from recipes.grpo_core.reward_funcs import resolve_rewards
    from recipes.shared.config import TaseArgs
    from rewards.trl import accuracy_fine, format_reward, reward_columns

    row = freq_row("2")
    wrong = ["<answer>7</answer>", "the answer is **9**", "7", "<answer>9"]  # format 1, ..., 0: all wrong
    mixed = ["<answer>2</answer>", "<answer>7</answer>", "<answer>9</answer>", "<answer>7</answer>"]
    args = TaseArgs(tasks=["freq_count"], langs=["en"])
    cfg = SimpleNamespace(max_completion_length=256, reward_weights=None)
    run = resolve_rewards(args, cfg)
    level = verdict_level(args, run.level)
    assert level == "strict" and run.names == ["accuracy_fine", "format"]
    w = run.weights
    cols = {k: [v] * 4 for k, v in reward_columns(row).items()}
    totals = [w[0] * a + w[1] * f for a, f in zip(accuracy_fine(None, wrong, **cols), format_reward(None, wrong),
                                                  strict=False)]
    assert len(set(totals)) > 1  # the float total says "mixed"
    verdicts = [getattr(s, level) for s in scores(row, wrong + mixed)]
    assert verdicts[:4] == [0.0] * 4 and verdicts[4:] == [1.0, 0.0, 0.0, 0.0]
    assert mixed_groups(verdicts, 4) == [False, True]
    # a coarse run decides on the official verdict, where a loophole pass can differ from strict
    coarse = TaseArgs(tasks=["freq_count"], langs=["en"], reward_granularity="coarse")
    assert verdict_level(coarse, resolve_rewards(coarse, cfg).level) == "coarse"
    assert verdict_level(args, None) == "strict"  # no accuracy reward of ours: strict
    assert verdict_level(
        TaseArgs(tasks=["freq_count"], langs=["en"], dynamic_sampling_granularity="fine"), None) == "fine"
    with pytest.raises(ValueError, match="groups of 4"):
        mixed_groups(verdicts[:6], 4)


def test_select_keeps_mixed_groups_and_pads_with_the_earliest_uniform_ones():
    from recipes.features.dynamic_sampling.sampling import select

    s = select([[False, True, False], [True, True, False]], need=3)  # 3 mixed found in 2 rounds: no padding
    assert (s.kept, s.padded, s.dropped, s.surplus) == ([(0, 1), (1, 0), (1, 1)], [], 3, 0)
    s = select([[False, True], [True, True], [False, True]], need=2)
    assert (s.kept, s.padded, s.dropped, s.surplus) == ([(0, 1), (1, 0)], [], 2, 2)
    s = select([[False, False], [False, True]], need=2)  # the rounds ran out: one uniform group fills the batch
    assert (s.kept, s.padded, s.dropped, s.surplus) == ([(1, 1)], [(0, 0)], 3, 0)


def test_uniform_groups_never_reach_the_loss():
    """The merged batch of two rounds (different prompt and completion widths, as generation gives them): kept rows
    are the drawn rows, re-padded left (prompts) and right (completions); padding groups have no loss mask and no
    advantage, and TRL's loss (masked per token) takes nothing from them."""
    import torch

    from recipes.features.dynamic_sampling.sampling import Selection, merge

    def part(n: int, p: int, c: int, base: int) -> dict:
        ids = torch.arange(base, base + n * c).view(n, c)
        return {"prompt_ids": torch.full((n, p), base), "prompt_mask": torch.ones(n, p, dtype=torch.long),
                "completion_ids": ids, "completion_mask": torch.ones(n, c, dtype=torch.long),
                "advantages": torch.linspace(-1, 1, n) + base, "old_per_token_logps": torch.randn(n, c),
                "ref_per_token_logps": None, "num_items_in_batch": torch.tensor(n * c)}

    a, b = part(4, 3, 2, 100), part(4, 5, 6, 200)  # 2 groups of 2 per round
    out = merge([a, b], Selection(kept=[(1, 1)], padded=[(0, 0)]), size=2, pad_id=-1)
    assert out["prompt_ids"].shape == (4, 5) and out["completion_ids"].shape == (4, 6)
    assert torch.equal(out["completion_ids"][:2], b["completion_ids"][2:])  # kept: round 1, group 1
    assert torch.equal(out["prompt_ids"][2:, :2], torch.full((2, 2), -1))  # round 0's prompts padded on the left
    assert torch.equal(out["completion_ids"][2:, 2:], torch.full((2, 4), -1))  # and completions on the right
    assert torch.equal(out["advantages"][:2], b["advantages"][2:]) and out["ref_per_token_logps"] is None
    assert out["completion_mask"][2:].sum() == 0 and torch.all(out["advantages"][2:] == 0)
    assert out["completion_mask"][:2].sum() == 12 and "num_items_in_batch" not in out
    # TRL's token-level loss is (per_token_loss * mask): the padding rows' gradient is exactly zero
    logps = torch.randn(4, 6, requires_grad=True)
    ((-logps * out["advantages"].unsqueeze(1) + logps ** 2) * out["completion_mask"]).sum().backward()
    assert torch.all(logps.grad[2:] == 0) and torch.any(logps.grad[:2] != 0)
    with pytest.raises(Exception, match="only text batches"):
        merge([{**a, "pixel_values": torch.zeros(4, 1)}], Selection(kept=[(0, 0), (0, 1)]), 2, -1)


def test_options_are_checked_in_one_line(tmp_path):
    from common.errors import TaseError
    from recipes.features.dynamic_sampling.sampling import check_run
    from recipes.shared.config import TaseArgs

    for kw, want in (({"dynamic_sampling_max_rounds": -1}, "integer from 0 to 32"),
                     ({"dynamic_sampling_max_rounds": True}, "integer from 0 to 32"),
                     ({"dynamic_sampling_max_rounds": 33}, "integer from 0 to 32"),
                     ({"dynamic_sampling_granularity": "total"}, "auto, strict, coarse or fine")):
        with pytest.raises(ValueError, match=want):
            TaseArgs(tasks=["freq_count"], langs=["en"], **kw)
    on = TaseArgs(tasks=["freq_count"], langs=["en"], dynamic_sampling=True)
    cfg = SimpleNamespace(per_device_train_batch_size=3, steps_per_generation=1, num_generations=2)
    check_run(on, cfg, 1)  # one process holds every group whole
    with pytest.raises(TaseError, match=r"\(3\) to be a multiple of num_generations \(2\)"):
        check_run(on, cfg, 2)
    code, err = call_main(["recipes/grpo.py", "--trainer", "async", "--dynamic_sampling", "true", "--output_dir",
                           str(tmp_path / "o"), "--dry-run"])  # async: the rollout worker filters (test_async_grpo.py)
    assert code == 0, err[-2000:]


# The sources DynamicGRPOTrainer relies on (recipes/features/dynamic_sampling/sampling.py), as of TRL 1.16.0 /
# transformers 5.19.0. A change to one of them fails here: re-check what the note says, then record the new digest.
PINNED = {
    "trl.GRPOTrainer._prepare_inputs": ("calls _generate_and_score_completions once per generation batch (only then "
                                        "filter), splits its output into steps_per_generation slices"),
    "trl.GRPOTrainer._generate_and_score_completions": ("the output keys merge() knows (PROMPT_KEYS, COMPLETION_KEYS, "
                                                        "advantages, num_items_in_batch) and their padding sides"),
    "trl.GRPOTrainer._calculate_rewards": "its signature, and the columns it gives reward functions",
    "trl.GRPOTrainer.get_train_dataloader": "one dataloader batch = one copy of a chunk of the generation batch",
    "trl.GRPOTrainer._get_train_sampler": "RepeatSampler repeats each chunk num_iterations x steps_per_generation "
                                          "times",
    "trl.trainer.utils.RepeatSampler.__iter__": "chunks repeated back to back (what _dyn_next_chunk skips)",
    "trl.trainer.utils.repeat_iterable_dataset": "the same chunk order for streaming datasets",
    "transformers.Trainer.get_batch_samples": "called with the epoch's iterator, once per optimizer step",
    "transformers.Trainer._run_epoch": "one iterator per epoch; skip_first_batches(global_step x GA) on resume",
    "transformers.Trainer._init_training_state": "stateful_callbacks loaded from trainer_state.json on resume",
    "transformers.Trainer._save_checkpoint": "ExportableState callbacks' state() saved in trainer_state.json",
}
DIGESTS = {
    "trl.GRPOTrainer._prepare_inputs": "f824e7fb07147956",
    "trl.GRPOTrainer._generate_and_score_completions": "1fa48922792dcd5c",
    "trl.GRPOTrainer._calculate_rewards": "736ae29b083840b5",
    "trl.GRPOTrainer.get_train_dataloader": "2bffe5a57c539e17",
    "trl.GRPOTrainer._get_train_sampler": "36497afb4d311dc9",
    "trl.trainer.utils.RepeatSampler.__iter__": "d80412d80424bd64",
    "trl.trainer.utils.repeat_iterable_dataset": "a7c27f50f208c900",
    "transformers.Trainer.get_batch_samples": "0b3727386f73f670",
    "transformers.Trainer._run_epoch": "ebe374933064ecd6",
    "transformers.Trainer._init_training_state": "8fbd17ebb7d3793d",
    "transformers.Trainer._save_checkpoint": "a9111e30faa99339",
}


def source_digest(name: str) -> str:
    import importlib

    import transformers
    import trl

    head, *rest = name.split(".")
    obj = {"trl": trl, "transformers": transformers}[head]
    for _i, part in enumerate(rest):
        try:
            obj = getattr(obj, part)
        except AttributeError:
            obj = importlib.import_module(".".join([obj.__name__, part]))
    return hashlib.sha256(inspect.getsource(obj).encode()).hexdigest()[:16]


def test_trl_sources_it_relies_on_are_unchanged():
    """Fails when TRL or transformers change a method DynamicGRPOTrainer wraps or relies on: re-check the note."""
    from recipes.features.dynamic_sampling.sampling import trainer_class

    changed = [f"{n} ({source_digest(n)}): re-check that {PINNED[n]}" for n in PINNED if source_digest(n) != DIGESTS[n]]
    assert not changed, ("TRL/transformers changed what recipes/features/dynamic_sampling/sampling.py relies "
                         "on:\n") + "\n".join(changed)
    cls = trainer_class()
    base = cls.__mro__[1]
    for meth in ("_generate_and_score_completions", "_calculate_rewards", "get_batch_samples"):
        ours = list(inspect.signature(getattr(cls, meth)).parameters)
        theirs = list(inspect.signature(getattr(base, meth)).parameters)
        assert ours == theirs, f"{meth}: TRL's signature is now {theirs}; the wrapper passes {ours}"


def restricted_vocab(tokenizer_dir: Path, keep: list[str]) -> str:
    """generation_kwargs for a run whose model may only emit these strings' tokens (and so, a random model, answers
    like '**1**' often enough that some groups mix right and wrong)."""
    from transformers import AutoTokenizer

    tok = AutoTokenizer.from_pretrained(tokenizer_dir)
    ids = {i for s in keep for i in tok.encode(s, add_special_tokens=False)}
    return json.dumps({"suppress_tokens": [i for i in range(len(tok)) if i not in ids]})


@pytest.mark.slow
def test_three_step_run_logs_groups_and_resumes_at_the_same_prompts(tiny_model, tmp_path):
    """3 GRPO steps with dynamic sampling on rows whose answer is 1 or 2, the model restricted to '**', '1', '2':
    every step logs groups drawn, kept and dropped; then a run resumed from checkpoint-2 makes step 3 on the same
    prompts (the re-draws' batches are skipped again on resume) with the same metrics."""
    import synth

    rows = [r for r in synth.generate("freq_count", "en", 200, 1234, max_len=6) if r["answer"] in ("1", "2")][:24]
    data = tmp_path / "train.jsonl"
    data.write_text("".join(json.dumps(r) + "\n" for r in rows))
    cfg = tmp_path / "gen.yaml"
    cfg.write_text("generation_kwargs: " + json.dumps(restricted_vocab(tiny_model, ["**", "1", "2"])) + "\n")
    args = [PY, "recipes/grpo.py", "--config", str(cfg), "--model_name_or_path", str(tiny_model), "--max_steps", "3",
            "--save_steps", "2", "--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--train_data",
            str(data), "--num_train_examples", "24", "--num_generations", "4", "--per_device_train_batch_size", "8",
            "--max_completion_length", "8", "--logging_steps", "1", "--report_to", "none", "--learning_rate", "1e-3",
            "--seed", "0", "--gradient_checkpointing", "false", "--log_completions", "true",
            "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "3"]
    first, again = tmp_path / "first", tmp_path / "again"
    res = subprocess.run([*args, "--output_dir", str(first), "--keep_optimizer_state", "true"],  # resumed from below
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    logs = [json.loads(x) for x in (first / "metrics.jsonl").read_text().splitlines()]
    steps = [m for m in logs if "tase/dynamic/groups_drawn" in m]
    assert [m["step"] for m in steps] == [1, 2, 3]
    total = 0
    for m in steps:
        d = {k.removeprefix("tase/dynamic/"): v for k, v in m.items() if k.startswith("tase/dynamic/")}
        assert d["groups_drawn"] == d["groups_kept"] + d["groups_dropped"] + d["groups_surplus"]
        assert d["groups_drawn"] == 2 * (1 + d["rounds"]) and 0 <= d["rounds"] <= 3  # 2 prompts per batch
        assert d["groups_kept"] + d["groups_padded"] == 2 and d["capped"] == float(d["groups_padded"] > 0)
        assert d["trained_uniform_share"] == d["groups_padded"] / 2  # the loss saw no uniform group but padding
        total += d["groups_drawn"]
        assert d["prompts_consumed"] == total
    assert any(m["tase/dynamic/groups_kept"] > 0 for m in steps)  # mixed groups were found and trained on
    assert any(m["tase/dynamic/groups_dropped"] > 0 for m in steps)
    state = json.loads((first / "checkpoint-2" / "trainer_state.json").read_text())["stateful_callbacks"]
    saved = state["DynamicSamplingState"]["attributes"]
    assert saved["extra"] == saved["pos"] - 2 and saved["prompts"] == sum(m["tase/dynamic/groups_drawn"]
                                                                         for m in steps[:2])
    res = subprocess.run([*args, "--output_dir", str(again), "--resume_from_checkpoint", str(first / "checkpoint-2")],
                         cwd=ROOT, capture_output=True, text=True, timeout=600)
    assert res.returncode == 0, res.stderr[-3000:]
    import pandas as pd

    one, two = (pd.read_parquet(d / "completions" / "completions_00003.parquet") for d in (first, again))
    assert one["prompt"].astype(str).tolist() == two["prompt"].astype(str).tolist()
    last = [json.loads(x) for x in (again / "metrics.jsonl").read_text().splitlines() if "tase/dynamic/rounds" in x]
    assert [m["step"] for m in last] == [3]
    assert {k: v for k, v in last[0].items() if k.startswith("tase/dynamic/")} == \
        {k: v for k, v in steps[2].items() if k.startswith("tase/dynamic/")}
