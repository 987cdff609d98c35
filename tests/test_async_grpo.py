"""trainer: async (TRL's AsyncGRPOTrainer) on CPU: recipes/async_grpo/patches.py's tree attention, the one-line option
errors, and a few real async GRPO steps on a tiny random Llama (tests/conftest.py `tiny64`: the wiring, not learning)
with the in-process vLLM engine (slow)."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
from conftest import call_main
from killing import checkpoint_whole, kill_when

# its runs start vLLM engines, which TRL binds after an import the warm interpreter made without vLLM
# (tests/warm_python.py)
pytestmark = pytest.mark.fresh_python

ROOT = Path(__file__).resolve().parents[1]
RECIPES = ROOT / "recipes"


def test_cpu_tree_attention_matches_causal_attention_per_path():
    """Two samples sharing a prompt, packed by TRL's own TreeRow: every segment's output equals plain causal
    attention over its root-to-segment path (grouped-query heads, as SmolLM2)."""
    torch = pytest.importorskip("torch")
    pytest.importorskip("trl.experimental.async_grpo")
    from trl.experimental.async_grpo.packing import TreeRow

    from recipes.async_grpo.patches import cpu_tree_attention

    row = TreeRow()
    for ids in ([5, 6, 7, 8, 9], [5, 6, 7, 3, 4, 2], [5, 6, 1]):
        row.add({"input_ids": torch.tensor(ids), "completion_mask": torch.tensor([0] * 2 + [1] * (len(ids) - 2)),
                 "old_log_probs": torch.zeros(len(ids)), "advantage": 0.0, "group_id": 0})
    p = row.pack()
    n, heads, kv_heads, d = len(p["input_ids"]), 6, 2, 8
    g = torch.Generator().manual_seed(0)
    q = torch.randn(1, heads, n, d, generator=g)
    k, v = torch.randn(1, kv_heads, n, d, generator=g), torch.randn(1, kv_heads, n, d, generator=g)
    out, _ = cpu_tree_attention(None, q, k, v, None, tree_kv_index=p["tree_kv_index"],
                                tree_cu_seqlens_q=p["tree_cu_seqlens_q"], tree_cu_seqlens_k=p["tree_cu_seqlens_k"])
    assert out.shape == (1, n, heads, d)
    cu_q, cu_k = p["tree_cu_seqlens_q"].tolist(), p["tree_cu_seqlens_k"].tolist()
    assert len(cu_q) > 3  # the samples really branch
    kr, vr = k.repeat_interleave(heads // kv_heads, 1), v.repeat_interleave(heads // kv_heads, 1)
    for s in range(len(cu_q) - 1):
        path = p["tree_kv_index"][cu_k[s]:cu_k[s + 1]]
        ref = torch.nn.functional.scaled_dot_product_attention(q[0][:, path], kr[0][:, path], vr[0][:, path],
                                                               is_causal=True)
        lq = cu_q[s + 1] - cu_q[s]
        assert torch.allclose(out[0, cu_q[s]:cu_q[s + 1]], ref[:, -lq:].transpose(0, 1), atol=1e-5)


def test_async_refuses_sync_only_options_in_one_line():
    """In-process (tests/conftest.call_main): recipes/grpo.py's real-CLI refusals run in tests/test_bad_inputs.py."""
    code, stderr = call_main(["recipes/grpo.py", "--config", str(RECIPES / "configs" / "grpo_qwen14b_sync.yaml"),
                              "--trainer", "async", "--dry-run"])
    assert code == 2
    err = stderr.strip().splitlines()
    assert err[-1].startswith("error: trainer: async does not support ") and "use_vllm" in err[-1], stderr[-2000:]
    assert "Traceback" not in stderr


def check_async_trainer(trace: Path, per_step: list[dict], steps: int, staleness: int) -> None:
    """What the async trainer does at each of a run's first `steps` steps: its trace (--async_trace; of a killed run,
    its whole lines) and its logged metrics."""
    text = trace.read_text()
    events = [json.loads(x) for x in text[:text.rfind("\n") + 1].splitlines()]
    gens = [e for e in events if e["event"] == "generate"]
    syncs = [e for e in events if e["event"] == "sync"]
    train = [e for e in events if e["event"] == "train_step" and e["step"] <= steps]
    assert [e["step"] for e in train] == list(range(1, steps + 1))
    # rollouts were produced while training ran
    overlap = [(g, t) for g in gens for t in train if g["t0"] < t["t1"] and t["t0"] < g["t1"]]
    assert overlap, (gens, train)
    # every sync reached the engine, in order: the cold one, then one per optimizer step
    assert [s["weights"] for s in syncs] == list(range(1, len(syncs) + 1)) and len(syncs) >= steps
    for s in syncs:  # batches after a sync run on its weights (or a later sync's)
        after = [g for g in gens if g["t0"] >= s["t1"]]
        if after:
            assert after[0]["weights"] >= s["weights"]
    # the worker's policy version (TRL's, bumped once the engine acknowledged a sync) advanced step after step
    versions = [g["model_version"] for g in gens]
    assert versions == sorted(versions) and len(set(versions)) >= steps, versions
    assert all(g["model_version"] <= g["weights"] for g in gens)  # a tag never claims newer weights
    for r in per_step:
        assert r["sample/staleness_max"] <= staleness
        assert "rewards/accuracy_fine" in r and "rewards/format*0.2" in r and "reward" in r
        # the tase/ view of the batch rides on each sample (recipes/async_grpo/metrics.py): verdict shares and per task
        for key in ("official_acc", "strict_acc", "fine_credit", "zero_var_groups", "distinct_answers"):
            assert 0.0 <= r[f"tase/{key}"] <= 1.0, (key, r)
        assert r["tase/fine_credit"] >= r["tase/strict_acc"] - 1e-6 and r["tase/distinct_answers"] >= 1 / 4 - 1e-6
        assert any(k.startswith("tase/task/") and k.endswith("/official_acc") for k in r), sorted(r)
        assert all(k.split("/")[2] in ("sort_lengths", "freq_count", "sentence_length") for k in r
                   if k.startswith("tase/task/"))


# the curriculum as the async tests run it: window 1, so each failed group (the tiny random model fails all) moves its
# task one level down from the top (sort_lengths and sentence_length have 5 levels; freq_count is static)
CURRICULUM = ["--curriculum", "true", "--curriculum_window", "1", "--curriculum_up", "1.0", "--curriculum_down", "0.5",
              "--curriculum_start_level", "4"]


@pytest.mark.slow
def test_async_features_three_steps_then_kill_9_and_a_budgeted_resume(vllm_env, tiny64, tmp_path):
    """Issue 79 in two async CPU runs of a tiny random Llama with SmolLM2's tokenizer and chat template (4 completions
    of <= 8 tokens per step, max_staleness 1), every feature on at once.

    Run 1 makes at least 3 steps and is killed (-9, the trainer and its rollout child) once checkpoint-3 is written.
    Over its first 3 steps: the async trainer itself (generation in the rollout process overlaps optimizer steps;
    every weight sync reaches the engine, versions 1, 2, ...; no trained sample is more than max_staleness syncs old)
    and each feature logs its metrics at every step. The tiny random model fails every row: guidance both generates
    each failed freq_count group again with its hint in the worker (still failed, under tase/guide/) and then gives it
    the row's gold completion as a member, its behaviour log-probs the engine's prompt log-probs (the gold answer fits
    the 8 tokens); dynamic sampling then keeps those mixed groups, drops the other (uniform) ones up to its cap (1
    round) and then delivers them with zero advantage, so the run does not stall; reward logging carries each reward's
    raw and weighted mean out of the worker; held-out evaluation runs in the trainer at every step; the curriculum
    (window 1: every failed group moves its task down) moves in the worker. The checkpoint's rollout_state.json starts
    a resume after the dropped prompts.

    Run 2 resumes (--resume_from_checkpoint true) with a budget, `max_train_seconds`, which stops it long before
    max_steps and saves, as sync does: it continues from the last complete checkpoint, the worker starts at the saved
    prompt position (TRL restores it for a Dataset only, the recipe for a stream), the curriculum and guidance's hint
    schedule start at the levels the checkpoint saved, the policy version keeps counting, and best_checkpoint.json
    holds every evaluation of the run, from both invocations."""
    trace, out, staleness = tmp_path / "trace.jsonl", tmp_path / "run", 1
    cmd = [sys.executable, str(RECIPES / "grpo.py"), "--config", str(RECIPES / "configs" / "grpo_smollm2_cpu.yaml"),
           "--trainer", "async", "--model_name_or_path", str(tiny64), "--output_dir", str(out), "--max_steps", "1000",
           "--max_staleness", str(staleness), "--learning_rate", "1e-4",
           "--num_generations", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
           "--max_completion_length", "8", "--num_train_examples", "64", "--async_max_model_len", "512",
           "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "1",
           "--save_strategy", "steps", "--save_steps", "1", "--logging_steps", "1",
           "--held_out_rows", "4", "--eval_strategy", "steps", "--eval_steps", "1", "--held_out_max_new_tokens", "8",
           "--streaming", "true", *CURRICULUM, "--guidance", "both"]
    env = {**vllm_env, "TRL_EXPERIMENTAL_SILENCE": "1"}
    stderr = kill_when([*cmd, "--async_trace", str(trace)],
                       checkpoint_whole(out / "checkpoint-3"), env=env, timeout=900, group=True, poll=0.5)
    assert "uniform groups now reach the trainer with zero advantage" in stderr  # the cap's one line
    # listed harmless lines stay off the terminal, the rollout process's included: vLLM's reload printed two at
    # every weight sync, transformers nine at the start (common/process.py QUIET)
    assert "Failed to load weights" not in stderr and "StepIntervalCallback" not in stderr, stderr[-3000:]
    text = (out / "metrics.jsonl").read_text()
    logs = [json.loads(x) for x in text[:text.rfind("\n") + 1].splitlines()]  # whole lines: the kill may cut one
    first = [r for r in logs if r["step"] <= 3]  # what steps 1-3 logged (run 1 may have logged a 4th before the kill)
    steps = [r for r in first if "sample/staleness_max" in r]
    assert [r["step"] for r in steps] == [1, 2, 3], [r["step"] for r in logs]
    check_async_trainer(trace, steps, 3, staleness)
    for r in steps:  # every step: reward logging from the worker, under sync's names; the worker's feature metrics
        assert r["tase/reward/accuracy_fine/mean"] == pytest.approx(r["rewards/accuracy_fine"])
        assert r["tase/reward/format/weighted"] == pytest.approx(0.2 * r["tase/reward/format/mean"])
    # held-out evaluation at every step, in the trainer (recipes/features/heldout/evaluation.async_trainer_class)
    assert [r["step"] for r in first if "tase/heldout/strict_acc" in r] == [1, 2, 3]
    assert all((out / "heldout" / f"step-{k}" / "results.json").is_file() for k in (1, 2, 3))
    total = {k: sum(r.get(f"tase/dynamic/{k}_total") or 0 for r in first)
             for k in ("groups_drawn", "groups_kept", "groups_dropped", "groups_padded")}
    assert total["groups_kept"] + total["groups_padded"] >= 3  # one group trained per step
    assert total["groups_dropped"] >= total["groups_padded"] and total["groups_drawn"] >= total["groups_dropped"]
    # guidance both in the worker (recipes/features/guidance/worker.py): every group fails; freq_count's get a hint,
    # fail again and get the gold member; sentence_length's (no hint at its level; its gold fits 8 tokens) the gold
    # member only. A hinted group's gold member is counted after the engine's answer: in the next window at most.
    guide = {k: sum(r.get(f"tase/guide/{k}_total") or 0 for r in first)
             for k in ("groups", "groups_failed", "groups_hinted", "groups_gold", "groups_guided")}
    assert guide["groups"] == guide["groups_failed"] >= guide["groups_guided"] >= guide["groups_hinted"] >= 1, guide
    assert 1 <= guide["groups_gold"] and guide["groups_guided"] <= guide["groups_hinted"] + guide["groups_gold"] + 1
    # one guidance decision per group dynamic sampling judged (a group scored across the last drain: one ahead), and
    # the groups dynamic sampling kept are the gold ones (the only mixed groups)
    assert 0 <= guide["groups"] - total["groups_drawn"] <= 1, (guide, total)
    assert abs(total["groups_kept"] - guide["groups_gold"]) <= 1 and total["groups_kept"] >= 1, (guide, total)
    hinted = [r for r in first if "tase/guide/hint_level" in r]
    assert hinted and all(r["tase/guide/version_gap"] >= 0 and r["tase/guide/success_hinted"] == 0 for r in hinted)
    assert all(r["tase/guide/success_unhinted"] == 0 for r in first if "tase/guide/success_unhinted" in r)
    assert any(r.get("tase/guide/gold_share", 0) > 0 for r in first)
    levels = [r["tase/curriculum/sort_lengths/level"] for r in first if "tase/curriculum/sort_lengths/level" in r]
    assert levels and max(levels) < 4, levels  # the curriculum in the worker: sort_lengths' failed groups move it

    ckpts = sorted((c for c in out.glob("checkpoint-*") if checkpoint_whole(c)()),
                   key=lambda c: int(c.name.split("-")[1]))
    saved_step = int(ckpts[-1].name.split("-")[1])
    saved = json.loads((ckpts[-1] / "rollout_state.json").read_text())
    assert saved_step >= 3 and saved["prompt_index"] > saved_step  # the dropped prompts count as used
    from recipes.features.curriculum.levels import saved_state

    levels = saved_state(ckpts[-1])["levels"]
    assert levels["sort_lengths"] < 4, levels  # the worker moved it, and the checkpoint holds the worker's state
    from recipes.features.guidance.hints import saved_state as saved_guidance

    hints = saved_guidance(ckpts[-1])
    assert hints["step"] == saved_step and "freq_count" in hints["levels"], hints

    res = subprocess.run([*cmd, "--resume_from_checkpoint", "true", "--max_train_seconds", "15"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    # the rollout child exits by itself once stopped (recipes/async_grpo/cpu_engine.py): TRL waited 15 s, then killed it
    assert "did not exit" not in res.stderr, res.stderr[-2000:]
    assert f"curriculum (restored from {ckpts[-1]}): " + ", ".join(
        f"{t} {lv}/4" for t, lv in sorted(levels.items())) in res.stderr, res.stderr[-3000:]
    assert f"the rollout worker resumes at prompt {saved['prompt_index']}" in res.stderr
    assert f"guidance both (restored from {ckpts[-1]}): hint levels " + ", ".join(
        f"{t} {lv}/1" for t, lv in sorted(hints["levels"].items())) in res.stderr, res.stderr[-3000:]
    stops = [x for x in res.stdout.splitlines() if x.startswith("max_train_seconds 15 reached at step ")]
    assert len(stops) == 1, res.stdout[-3000:]
    last = int(stops[0].split()[-2].rstrip(";"))
    assert saved_step < last < 1000 and (out / "model.safetensors").is_file()
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == last
    after = json.loads((out / f"checkpoint-{last}" / "rollout_state.json").read_text())
    assert after["prompt_index"] >= saved["prompt_index"] + (last - saved_step), (saved, after)
    assert after["model_version"] > saved["model_version"]
    best = json.loads((out / "best_checkpoint.json").read_text())
    assert [e["step"] for e in best["evaluations"]] == list(range(1, last + 1)), best
    assert best["metric"] == "tase/heldout/strict_acc" and Path(best["path"]).is_dir()
    assert json.loads((out / "curriculum.json").read_text())["levels"]["sort_lengths"] < 4
    assert "freq_count" in json.loads((out / "guidance.json").read_text())["levels"]


@pytest.mark.slow
def test_async_run_whose_rollout_worker_dies_ends_in_one_line(vllm_env, tiny_model, tmp_path):
    """Issue 80's case: a tiny Llama of head_dim 16, which vLLM's CPU attention rejects at the first generation
    (`Unsupported CPU attention configuration: head_dim=16`); the rollout worker dies and the run ends with one line
    naming it, exit 2, instead of the trainer waiting for samples until it is killed."""
    cmd = [sys.executable, str(RECIPES / "grpo.py"), "--config", str(RECIPES / "configs" / "grpo_smollm2_cpu.yaml"),
           "--trainer", "async", "--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "run"),
           "--max_steps", "2", "--num_generations", "4", "--per_device_train_batch_size", "4",
           "--gradient_accumulation_steps", "1", "--max_completion_length", "8", "--save_strategy", "no",
           "--num_train_examples", "16", "--async_max_model_len", "512"]
    res = subprocess.run(cmd, cwd=ROOT, env={**vllm_env, "TRL_EXPERIMENTAL_SILENCE": "1"}, capture_output=True,
                         text=True, timeout=900)
    last = res.stderr.strip().splitlines()[-1]
    assert res.returncode == 2, res.stderr[-3000:]
    assert last.startswith("error: the rollout worker died") and "head_dim=16" in last, last
