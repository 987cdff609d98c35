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
from killing import kill_when

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
    """What the async trainer does at every step of a run: its trace (--async_trace) and its logged metrics."""
    events = [json.loads(x) for x in trace.read_text().splitlines()]
    gens = [e for e in events if e["event"] == "generate"]
    syncs = [e for e in events if e["event"] == "sync"]
    train = [e for e in events if e["event"] == "train_step"]
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
def test_async_grpo_steps_budget_dynamic_sampling_and_reward_logging_on_cpu(vllm_env, tiny64, tmp_path):
    """One async CPU run (a tiny random Llama with SmolLM2's tokenizer and chat template, 4 completions of <= 8 tokens
    per step, max_staleness 1) for the async trainer itself and six features of issue 79. The trainer: generation in
    the rollout process overlaps optimizer steps; every weight sync reaches the engine (versions 1, 2, ...) and the
    worker's policy version follows; no trained sample is more than max_staleness syncs old; both reward functions
    and the tase/ view of the batch are logged at every step. The features: the tiny random model fails every row, so
    every group is uniform: guidance hint generates each failed freq_count group again with its hint in the worker
    (still failed, logged under tase/guide/, its schedule saved with the final model), then dynamic sampling judges
    it; dynamic sampling drops in the worker up to its cap (1 round) and then delivers zero-advantage groups, so the
    run does not stall; `max_train_seconds` stops it long before max_steps and saves, as sync does; reward logging
    carries each reward's raw and weighted mean out of the worker; the checkpoint's rollout_state.json starts a resume
    after the dropped prompts, not at the first of them. Held-out evaluation runs at every step in the trainer and
    names the best checkpoint; the curriculum (window 1: every failed group moves its task down) moves in the worker,
    is logged from there and saved with the final model."""
    trace, out, staleness = tmp_path / "trace.jsonl", tmp_path / "run", 1
    cmd = [sys.executable, str(RECIPES / "grpo.py"), "--config", str(RECIPES / "configs" / "grpo_smollm2_cpu.yaml"),
           "--trainer", "async", "--model_name_or_path", str(tiny64), "--output_dir", str(out), "--max_steps", "1000",
           "--max_staleness", str(staleness), "--async_trace", str(trace), "--learning_rate", "1e-4",
           "--num_generations", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
           "--max_completion_length", "8", "--num_train_examples", "64", "--async_max_model_len", "512",
           "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "1", "--max_train_seconds", "15",
           "--save_strategy", "steps", "--save_steps", "1", "--save_total_limit", "1", "--logging_steps", "1",
           "--held_out_rows", "4", "--eval_strategy", "steps", "--eval_steps", "1", "--held_out_max_new_tokens", "8",
           "--streaming", "true", *CURRICULUM, "--guidance", "hint"]
    res = subprocess.run(cmd, cwd=ROOT, env={**vllm_env, "TRL_EXPERIMENTAL_SILENCE": "1"}, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    # the rollout child exits by itself once stopped (recipes/async_grpo/cpu_engine.py): TRL waited 15 s, then killed it
    assert "did not exit" not in res.stderr, res.stderr[-2000:]
    stops = [x for x in res.stdout.splitlines() if x.startswith("max_train_seconds 15 reached at step ")]
    assert len(stops) == 1, res.stdout[-3000:]
    last = int(stops[0].split()[-2].rstrip(";"))
    assert 1 <= last < 1000 and (out / "model.safetensors").is_file()
    logs = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines()]
    steps = [r for r in logs if "sample/staleness_max" in r]
    assert len(steps) == last
    check_async_trainer(trace, steps, last, staleness)
    for r in steps:  # reward logging from the worker, under sync's names
        assert r["tase/reward/accuracy_fine/mean"] == pytest.approx(r["rewards/accuracy_fine"])
        assert r["tase/reward/format/weighted"] == pytest.approx(0.2 * r["tase/reward/format/mean"])
    total = {k: sum(r.get(f"tase/dynamic/{k}_total") or 0 for r in logs)
             for k in ("groups_drawn", "groups_kept", "groups_dropped", "groups_padded")}
    assert total["groups_kept"] == 0 and total["groups_padded"] >= last  # all uniform: every trained group padded
    assert total["groups_dropped"] > total["groups_padded"] and total["groups_drawn"] >= total["groups_dropped"]
    # held-out evaluation at every step, in the trainer (recipes/features/heldout/evaluation.async_trainer_class)
    best = json.loads((out / "best_checkpoint.json").read_text())
    assert [e["step"] for e in best["evaluations"]] == list(range(1, last + 1)), best
    assert best["metric"] == "tase/heldout/strict_acc" and Path(best["path"]).is_dir()
    assert (out / "heldout" / f"step-{last}" / "results.json").is_file()
    assert len([r for r in logs if "tase/heldout/strict_acc" in r]) == last
    # the curriculum in the worker: sort_lengths' first group (the stream's first row) fails and moves it 4 -> 3
    levels = [r["tase/curriculum/sort_lengths/level"] for r in logs if "tase/curriculum/sort_lengths/level" in r]
    assert levels and max(levels) < 4, levels
    assert json.loads((out / "curriculum.json").read_text())["levels"]["sort_lengths"] < 4
    assert "uniform groups now reach the trainer with zero advantage" in res.stderr  # the cap's one line
    # guidance hint in the worker (recipes/features/guidance/worker.py): every group fails; freq_count's get a hint
    guide = {k: sum(r.get(f"tase/guide/{k}_total") or 0 for r in logs)
             for k in ("groups", "groups_failed", "groups_hinted", "groups_guided")}
    assert guide["groups"] == guide["groups_failed"] >= guide["groups_hinted"] == guide["groups_guided"] >= 1, guide
    # one guidance decision per group dynamic sampling judged (a group scored across the last drain: one ahead)
    assert 0 <= guide["groups"] - total["groups_drawn"] <= 1, (guide, total)
    hinted = [r for r in logs if "tase/guide/hint_level" in r]
    assert hinted and all(r["tase/guide/version_gap"] >= 0 and r["tase/guide/success_hinted"] == 0 for r in hinted)
    assert all(r["tase/guide/success_unhinted"] == 0 for r in logs if "tase/guide/success_unhinted" in r)
    assert "freq_count" in json.loads((out / "guidance.json").read_text())["levels"]
    ckpt = next(out.glob("checkpoint-*"))
    state = json.loads((ckpt / "rollout_state.json").read_text())
    # one group per step trained; the dropped ones before it count as used: the resume starts past them
    assert state["prompt_index"] > int(ckpt.name.split("-")[1]), state


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


@pytest.mark.slow
def test_async_kill_9_with_dynamic_sampling_resumes_at_the_workers_data_position(vllm_env, tiny64, tmp_path):
    """kill -9 during an async run with dynamic sampling (every group uniform: the worker drops and pads) and the
    curriculum (every group moves its task down) on streaming synth data, then --resume_from_checkpoint true: the run
    continues from the last complete checkpoint to max_steps, the worker starts at the saved prompt position
    (rollout_state.json, past the dropped prompts; TRL restores it for a Dataset only, the recipe for a stream): the
    next checkpoint's position is at least the saved one plus the groups trained since, the policy version keeps
    counting, and the curriculum starts at the levels the checkpoint saved; so does guidance hint's schedule (moved in
    the worker, saved with the trainer's step)."""
    out = tmp_path / "run"
    cmd = [sys.executable, str(RECIPES / "grpo.py"), "--config", str(RECIPES / "configs" / "grpo_smollm2_cpu.yaml"),
           "--trainer", "async", "--model_name_or_path", str(tiny64), "--output_dir", str(out), "--max_steps", "4",
           "--num_generations", "4", "--per_device_train_batch_size", "4", "--gradient_accumulation_steps", "1",
           "--max_completion_length", "8", "--num_train_examples", "64", "--async_max_model_len", "512",
           "--dynamic_sampling", "true", "--dynamic_sampling_max_rounds", "1", "--save_strategy", "steps",
           "--save_steps", "1", "--logging_steps", "1", "--streaming", "true", *CURRICULUM, "--guidance", "hint"]
    env = {**vllm_env, "TRL_EXPERIMENTAL_SILENCE": "1"}
    # the trainer and its rollout child, once checkpoint-2 is written
    kill_when(cmd, lambda: (out / "checkpoint-2" / "trainer_state.json").is_file(), env=env, timeout=900, group=True,
              poll=0.5)
    ckpts = sorted((c for c in out.glob("checkpoint-*") if (c / "trainer_state.json").is_file()),
                   key=lambda c: int(c.name.split("-")[1]))
    saved_step = int(ckpts[-1].name.split("-")[1])
    saved = json.loads((ckpts[-1] / "rollout_state.json").read_text())
    assert saved_step < 4 and saved["prompt_index"] > saved_step  # the dropped prompts count as used
    from recipes.features.curriculum.levels import saved_state

    levels = saved_state(ckpts[-1])["levels"]
    assert levels["sort_lengths"] < 4, levels  # the worker moved it, and the checkpoint holds the worker's state
    from recipes.features.guidance.hints import saved_state as saved_guidance

    hints = saved_guidance(ckpts[-1])
    assert hints["step"] == saved_step and "freq_count" in hints["levels"], hints
    res = subprocess.run([*cmd, "--resume_from_checkpoint", "true"], cwd=ROOT, env=env, capture_output=True,
                         text=True, timeout=900)
    assert res.returncode == 0, res.stderr[-4000:]
    assert f"curriculum (restored from {ckpts[-1]}): " + ", ".join(
        f"{t} {lv}/4" for t, lv in sorted(levels.items())) in res.stderr, res.stderr[-3000:]
    assert f"the rollout worker resumes at prompt {saved['prompt_index']}" in res.stderr
    assert f"guidance hint (restored from {ckpts[-1]}): hint levels " + ", ".join(
        f"{t} {lv}/1" for t, lv in sorted(hints["levels"].items())) in res.stderr, res.stderr[-3000:]
    assert json.loads((out / "trainer_state.json").read_text())["global_step"] == 4
    after = json.loads((out / "checkpoint-4" / "rollout_state.json").read_text())
    assert after["prompt_index"] >= saved["prompt_index"] + (4 - saved_step), (saved, after)
    assert after["model_version"] > saved["model_version"]
