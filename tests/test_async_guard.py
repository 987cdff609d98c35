"""trainer: async cannot hang silently (issue 50): a weight sync whose peer stops answering ends in one line within
weight_sync_timeout (the real gloo transport of recipes/async_grpo/gloo_transfer.py, a peer that joins and never takes
the weights), the installed TRL is checked against the tested range, and the shipped async configs set the timeout."""
import threading
import time

import pytest
import torch
from conftest import ROOT

from common.errors import TaseError


def test_stalled_weight_sync_fails_in_one_line_within_its_timeout():
    from recipes.async_grpo.gloo_transfer import GlooWeightReceiver, GlooWeightTransfer

    weights = {"w": torch.ones(4096)}
    manifest = {"names": ["w"], "dtypes": ["float32"], "shapes": [[4096]]}
    joined = []
    transfer = GlooWeightTransfer(manifest=manifest, timeout_s=3)
    # the peer joins the group (as the rollout child does) and then never takes a sync: a stalled engine
    transfer.start_peer = lambda: threading.Thread(
        target=lambda: joined.append(GlooWeightReceiver(transfer.peer_info())), daemon=True).start()
    transfer.init_weight_transfer()
    t0 = time.monotonic()
    with pytest.raises(TaseError) as e:
        transfer.send_weights(iter(weights.items()))
    took = time.monotonic() - t0
    line = str(e.value)
    assert joined and "\n" not in line and took < 3 + 10, (took, line)
    assert line.startswith("weight sync stalled: weight sync 1 did not complete within weight_sync_timeout 3 s")


def test_absent_peer_fails_in_one_line():
    from recipes.async_grpo.gloo_transfer import GlooWeightTransfer

    transfer = GlooWeightTransfer(manifest={"names": [], "dtypes": [], "shapes": []}, timeout_s=2)
    t0 = time.monotonic()
    with pytest.raises(TaseError, match=r"^weight sync stalled: joining the rollout engine's weight group"):
        transfer.init_weight_transfer()
    assert time.monotonic() - t0 < 2 + 10


def test_trl_version_range():
    import trl

    from recipes.async_grpo.trl_checks import TESTED_TRL, trl_version_problem

    assert trl_version_problem(trl.__version__) is None  # the venv's TRL is the tested one
    kind, line = trl_version_problem("1.15.2")
    assert kind == "refuse" and "needs TRL >= 1.16.0 (installed 1.15.2)" in line and "\n" not in line
    kind, line = trl_version_problem("1.17.0")
    assert kind == "warn" and line.startswith("warning: trainer: async was tested with TRL >= 1.16.0, < 1.17.0")
    assert TESTED_TRL == ("1.16.0", "1.17.0")


def test_shipped_async_configs_set_weight_sync_timeout():
    import yaml

    configs = [p for p in (ROOT / "recipes" / "configs").glob("*.yaml")
               if (yaml.safe_load(p.read_text()) or {}).get("trainer") == "async"]
    assert configs
    for p in configs:
        t = yaml.safe_load(p.read_text()).get("weight_sync_timeout")
        assert isinstance(t, int) and 0 < t < 1800, p  # set, and tighter than TRL's 30-minute default


def test_async_sample_metrics_average_to_the_sync_batch_metrics():
    """Averaged key by key over the samples that carry each key (what TRL's async collator does), the per-sample
    tase/ shares give tracking.batch_metrics of the same completions (equal-size groups, as GRPO's are)."""
    from recipes.async_grpo.metrics import sample_metrics
    from recipes.features.tracking.metrics import Verdict, batch_metrics, groups

    vs = [Verdict("a", "sort_lengths", "en", 1.0, 1.0, 1.0, "ABC"),
          Verdict("a", "sort_lengths", "en", 1.0, 0.0, 0.5, "AB"),
          Verdict("a", "sort_lengths", "en", 0.0, 0.0, 0.0, "ABC"),
          Verdict("b", "freq_count", "zh", 0.0, 0.0, 0.2, "3"),
          Verdict("b", "freq_count", "zh", 0.0, 0.0, 0.0, "3"), Verdict("b", "freq_count", "zh", 0.0, 0.0, 0.0, "3")]
    rows = [m for g in groups(vs) for m in sample_metrics(g, "strict")]
    keys = {k for m in rows for k in m}
    averaged = {k: sum(m[k] for m in rows if k in m) / sum(k in m for m in rows) for k in keys}
    want = batch_metrics(vs, "strict")
    assert averaged == pytest.approx(want) and set(averaged) == set(want)
    assert want["tase/loophole_share"] == 0.5 and want["tase/zero_var_groups"] == 0.5


def test_rollout_loops_add_tase_metrics_to_trl_scored_samples():
    """TRL's own `_score_group` (rewards summed, advantages, per-sample `rewards/<name>`) run through the loop the
    GPU path spawns (async_metrics.ServerRolloutLoop; the CPU engine's loop has the same mixin): every training row
    also carries its tase/ share, a conversation forked into two rows carries it on both."""
    import asyncio
    import pickle

    import numpy as np
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence, _AsyncRolloutLoop

    import synth
    from recipes.async_grpo import metrics as async_metrics
    from rewards.trl import accuracy_fine, format_reward, reward_columns
    from synth.gold import gold_completion

    rec = next(iter(synth.generate("sort_lengths", "en", 1, 5, max_len=6)))
    cols = {"id": rec["id"], "task": rec["task"], "lang": rec["lang"], **reward_columns(rec)}
    texts = [gold_completion(rec), "<answer>none</answer>"]
    group = RolloutGroup(
        prompts=[[{"role": "user", "content": rec["prompt"]}]] * 2, reward_kwargs={k: [v] * 2 for k, v in cols.items()},
        completions=[[{"role": "assistant", "content": t}] for t in texts], completions_ids=[[1, 2], [3]],
        completions_sequences=[[TrainingSequence([0, 1, 2], [0, 1, 1], [0.0, -1.0, -1.0], (0, 0))],
                               [TrainingSequence([0, 3], [0, 1], [0.0, -1.0], (0, 1)),
                                TrainingSequence([0, 3, 4], [0, 0, 1], [0.0, 0.0, -1.0], (0, 1))]],
        tool_call_counts=[0, 0], tool_failure_counts=[0, 0], model_version=0, group_id=0, env_rewards=[None, None],
        rollout_rewards=[None, None])
    cls = async_metrics.ServerRolloutLoop
    assert pickle.loads(pickle.dumps(cls)) is cls and issubclass(cls, _AsyncRolloutLoop)  # the child unpickles it
    from accelerate import PartialState

    PartialState()  # TRL's loop logs through accelerate's logger (the rollout child has the state too)
    loop = object.__new__(cls)  # TRL's scoring state only (no server, no dataset)
    loop.reward_funcs, loop.reward_func_names = [accuracy_fine, format_reward], ["accuracy_fine", "format"]
    loop._env_reward_types, loop._provides_rollout_reward, loop.tase_level = [], False, "fine"
    samples = asyncio.run(loop._score_group(group))
    assert len(samples) == 3
    m = [s.metrics for s in samples]
    assert m[0]["rewards/accuracy_fine"] == 1.0 and m[0]["tase/official_acc"] == 1.0 and m[0]["tase/strict_acc"] == 1.0
    assert m[1]["tase/official_acc"] == m[2]["tase/official_acc"] == 0.0  # both rows of the second conversation
    assert all(x["tase/zero_var_groups"] == 0.0 and x["tase/distinct_answers"] == 1.0 for x in m)
    assert m[0]["tase/task/sort_lengths/strict_acc"] == 1.0 and "tase/loophole_share" not in m[1]
    assert np.isclose(samples[0].advantage, -samples[1].advantage)


def test_server_worker_spawns_the_tase_loop():
    from trl.experimental.async_grpo.async_rollout_worker import _AsyncRolloutLoop

    from recipes.async_grpo.metrics import ServerRolloutLoop, carry_tase_metrics

    class Worker:  # the two attributes TRL's AsyncRolloutWorker.start reads
        _loop_cls, _loop_kwargs = _AsyncRolloutLoop, {}

    w = Worker()
    assert (carry_tase_metrics(w, "strict") and w._loop_cls is ServerRolloutLoop
            and w._loop_kwargs == {"tase_level": "strict", "tase_hooks": []})
    assert not carry_tase_metrics(w, "strict") and not carry_tase_metrics(None, "fine")  # once; no worker off rank 0


def _scored_loop(hooks: list, funcs: list):
    """TRL's real scoring state of the GPU path's rollout loop (no server, no dataset) with the features' rollout
    `hooks`, and a maker of one sort_lengths group of two completions (gold or wrong) with a given group id."""
    from collections import defaultdict

    from accelerate import PartialState
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence

    import synth
    from recipes.async_grpo import metrics as async_metrics
    from rewards.trl import reward_columns
    from synth.gold import gold_completion

    PartialState()
    loop = object.__new__(async_metrics.ServerRolloutLoop)
    loop.reward_funcs, loop.reward_func_names = funcs, [f.__name__ for f in funcs]
    loop._env_reward_types, loop._provides_rollout_reward, loop.tase_level = [], False, "fine"
    loop.tase_hooks, loop._counters, loop._rates = hooks, defaultdict(float), defaultdict(lambda: [0.0, 0.0])
    pushed: list = []
    loop._push_metrics = pushed.append
    rec = next(iter(synth.generate("sort_lengths", "en", 1, 5, max_len=6)))
    cols = {"id": rec["id"], "task": rec["task"], "lang": rec["lang"], **reward_columns(rec)}

    def group(gid: int, gold: tuple[bool, bool]):
        texts = [gold_completion(rec) if g else "<answer>none</answer>" for g in gold]
        return RolloutGroup(
            prompts=[[{"role": "user", "content": rec["prompt"]}]] * 2,
            reward_kwargs={k: [v] * 2 for k, v in cols.items()},
            completions=[[{"role": "assistant", "content": t}] for t in texts], completions_ids=[[1, 2], [3]],
            completions_sequences=[[TrainingSequence([0, 1, 2], [0, 1, 1], [0.0, -1.0, -1.0], "a")],
                                   [TrainingSequence([0, 3], [0, 1], [0.0, -1.0], "b")]],
            tool_call_counts=[0, 0], tool_failure_counts=[0, 0], model_version=0, group_id=gid,
            env_rewards=[None, None], rollout_rewards=[None, None])

    return loop, group, pushed


def test_the_worker_drops_uniform_groups_up_to_the_round_cap_then_pads_with_zero_advantage(capsys):
    """Dynamic sampling in the rollout worker (recipes/features/dynamic_sampling/worker.WorkerFilter, issue 79): a
    uniform group is dropped in _score_group (no sample reaches the trainer's queue) and its id reported; a mixed group
    passes as TRL scored it. With every group uniform, after `rounds` x `per_step` drops (then `rounds` per group
    delivered) a uniform group is delivered with advantage 0, in one line the first time: the trainer is slowed, never
    stalled. The counters ride out on the worker's metrics queue, summed per window (`_total`)."""
    import asyncio
    import queue

    from recipes.async_grpo.cpu_engine import WeightedReward
    from recipes.features.dynamic_sampling.worker import WorkerFilter
    from rewards.trl import accuracy_fine, format_reward

    dropped: queue.Queue = queue.Queue()
    filt = WorkerFilter("strict", rounds=1, per_step=2, dropped=dropped)
    loop, group, pushed = _scored_loop([filt], [WeightedReward(accuracy_fine, 1.0), WeightedReward(format_reward, 0.2)])
    out = [asyncio.run(loop._score_group(group(i, g))) for i, g in enumerate(
        [(True, False), (False, False), (False, False), (False, False), (False, False), (True, False)])]
    assert [len(s) for s in out] == [2, 0, 0, 2, 0, 2]  # mixed; 2 drops (1 x 2); padded; 1 drop per delivery; mixed
    assert [dropped.get_nowait() for _ in range(3)] == [1, 2, 4] and dropped.empty()
    assert all(s.advantage == 0.0 for s in out[3]) and out[0][0].advantage > 0 > out[0][1].advantage
    c = loop._counters
    assert (c["tase/dynamic/groups_drawn_total"], c["tase/dynamic/groups_kept_total"],
            c["tase/dynamic/groups_dropped_total"], c["tase/dynamic/groups_padded_total"]) == (6, 2, 4, 1)
    assert loop._rates["tase/dynamic/trained_uniform_share"] == [1.0, 3.0]
    assert pushed[-1] == {"tase/dynamic/prompts_consumed": 6.0}
    err = capsys.readouterr().err
    assert err.count("dynamic sampling: 1 uniform group(s) dropped per group delivered") == 1
    never = WorkerFilter("strict", rounds=0, per_step=2)  # max_rounds 0: never drop, uniform groups carry no loss
    loop, group, _ = _scored_loop([never], [WeightedReward(accuracy_fine, 1.0)])
    assert [s.advantage for s in asyncio.run(loop._score_group(group(0, (False, False))))] == [0.0, 0.0]


def _row_group(row: dict, texts: list[str], gid: int):  # noqa: ANN202 - a TRL RolloutGroup
    """A two-member TRL RolloutGroup of a synth row (recipes.shared.data.to_row) with the given completion texts,
    policy version 3, its lists shaped as TRL's worker fills them (env_rewards empty without env rewards)."""
    from trl.experimental.async_grpo.async_rollout_worker import RolloutGroup, TrainingSequence

    return RolloutGroup(
        prompts=[row["prompt"]] * 2, reward_kwargs={k: [v] * 2 for k, v in row.items() if k != "prompt"},
        completions=[[{"role": "assistant", "content": t}] for t in texts], completions_ids=[[1], [1]],
        completions_sequences=[[TrainingSequence([0, 1], [0, 1], [0.0, -1.0], "a")],
                               [TrainingSequence([0, 1], [0, 1], [0.0, -1.0], "b")]],
        tool_call_counts=[0, 0], tool_failure_counts=[0, 0], model_version=3, group_id=gid,
        env_rewards=[], rollout_rewards=[None, None])


def test_async_worker_hints_an_all_fail_group_and_the_hooks_after_it_judge_the_hinted_one():
    """guidance hint under trainer: async (recipes/features/guidance/worker.WorkerGuidance, issue 79), run through TRL's
    real _score_group with the features' hooks in the order recipes/features.rollout gives them: a freq_count group
    whose strict verdicts all fail is generated again (the loop's own _generate_one, here scripted: the hinted prompt
    gets one right answer) with the hint at the task's level, scored again, and its samples take the failed ones'
    place with the worker's policy version; dynamic sampling after it judges the hinted group (mixed: kept). A group
    with a right answer, and a failed group of a row that is not a synth row, are not generated again. The `success`
    schedule moves on the unhinted verdicts and its state reaches the trainer's copy; the `step` schedule follows the
    optimizer step the trainer sets; the channels stay out of a plain pickle (TRL's picklability check)."""
    import asyncio
    import pickle
    from types import SimpleNamespace

    from trl.experimental.async_grpo.async_rollout_worker import TrainingSequence

    import synth
    from recipes.async_grpo.cpu_engine import WeightedReward
    from recipes.features.dynamic_sampling.worker import WorkerFilter
    from recipes.features.guidance.hints import HintSchedule
    from recipes.features.guidance.worker import WorkerGuidance, WorkerSchedule
    from recipes.shared.data import to_row
    from rewards.trl import accuracy_strict
    from synth.core import HINT_PREFIX

    rec = next(r for r in synth.generate("freq_count", "en", 50, 1234, max_len=6) if r["answer"] == "2")
    ws = WorkerSchedule(HintSchedule({"freq_count": 2}, "success", start=1, window=1, up=0.5, down=0.0))
    hook = pickle.loads(pickle.dumps(WorkerGuidance(ws.sched, ws.queue, ws.step)))  # the child's copy, as spawned
    assert hook.updates is None and hook.step is None  # a plain pickle leaves the channels behind
    hook.updates, hook.step = ws.queue, ws.step
    loop, _, pushed = _scored_loop([hook, WorkerFilter("strict", rounds=1, per_step=1)],
                                   [WeightedReward(accuracy_strict, 1.0)])
    loop._model_version_value = SimpleNamespace(value=5)  # the worker's policy version now
    asked: list = []

    async def generate(prompt, tool_dict, tools, group_id=0):  # noqa: ANN001, ANN202 - vLLM's turn, scripted
        asked.append(prompt[-1]["content"])
        text = "<answer>2</answer>" if len(asked) % 2 else "<answer>7</answer>"
        return ([{"role": "assistant", "content": text}], [1], [TrainingSequence([0, 1], [0, 1], [0.0, -0.5], "h")],
                0, 0, None)

    loop._generate_one = generate

    row = to_row(rec, "sys")
    out = asyncio.run(loop._score_group(_row_group(row, ["<answer>7</answer>", "<answer>9</answer>"], 0)))
    assert len(asked) == 2 and all(HINT_PREFIX in a for a in asked)  # generated again, with the hint
    assert len(out) == 2 and all(HINT_PREFIX in s.prompt[-1]["content"] for s in out)
    assert [s.model_version for s in out] == [5, 5] and out[0].advantage > 0 > out[1].advantage
    c, r = loop._counters, loop._rates
    assert (c["tase/guide/groups_total"], c["tase/guide/groups_failed_total"], c["tase/guide/groups_hinted_total"],
            c["tase/dynamic/groups_kept_total"]) == (1, 1, 1, 1)  # the filter judged the hinted (mixed) group
    assert r["tase/guide/success_unhinted"] == [0.0, 2.0] and r["tase/guide/success_hinted"] == [1.0, 2.0]
    gauges = next(p for p in pushed if "tase/guide/hint_level" in p)
    assert gauges["tase/guide/hint_level"] == 1.0 and gauges["tase/guide/version_gap"] == 2.0
    assert gauges["tase/guide/freq_count/hint_level"] == 0.0  # the failure moved it one level stronger
    assert ws.sched.level("freq_count") == 1  # the trainer's copy, until it drains
    deadline = time.time() + 10
    while not ws.drain():  # a spawn queue's put lands after its feeder thread ran
        assert time.time() < deadline
        time.sleep(0.05)
    assert ws.sched.level("freq_count") == 0
    official = {**row, "id": "freq_count/english/7"}
    for g in (_row_group(row, ["<answer>2</answer>", "<answer>7</answer>"], 1), _row_group(official, ["7", "9"], 2)):
        assert [s.group_id for s in asyncio.run(loop._score_group(g))] in ([g.group_id] * 2, [])
    assert len(asked) == 2 and loop._counters["tase/guide/groups_hinted_total"] == 1  # neither generated again
    steps = WorkerSchedule(HintSchedule({"freq_count": 2}, "step", start=0, every=2))
    loop.tase_hooks = [WorkerGuidance(steps.sched, None, steps.step)]
    steps.at_step(2)  # the trainer's step end
    asyncio.run(loop._score_group(_row_group(row, ["<answer>7</answer>", "<answer>9</answer>"], 3)))
    assert pushed[-1]["tase/guide/hint_level"] == 1.0 and len(asked) == 4


def test_async_worker_gives_an_all_fail_group_the_gold_member_with_the_engines_log_probs(tiny_model):
    """guidance gold and both under trainer: async (recipes/features/guidance/worker.gold_group, issue 79), through
    TRL's real _score_group: a failed freq_count group's last member becomes the row's gold completion under the plain
    prompt, tokenized with the chat template as TRL's worker does, its behaviour log-probs the engine's prompt
    log-probs of the gold tokens (here scripted; tests/test_vllm.py checks the engine's against sampled ones); the
    group scored again is mixed, so the gold member gets the positive advantage and dynamic sampling keeps it. `both`
    hints first and gives the gold member to the hinted group that still fails; a group with a right answer gets
    none."""
    import asyncio
    from types import SimpleNamespace

    from transformers import AutoTokenizer
    from trl.experimental.async_grpo.async_rollout_worker import TrainingSequence

    import synth
    from recipes.async_grpo.cpu_engine import WeightedReward
    from recipes.features.dynamic_sampling.worker import WorkerFilter
    from recipes.features.guidance.hints import HintSchedule, gold_text
    from recipes.features.guidance.worker import WorkerGuidance
    from recipes.shared.data import to_row
    from rewards.trl import accuracy_strict
    from synth.core import HINT_PREFIX

    rec = next(r for r in synth.generate("freq_count", "en", 50, 1234, max_len=6) if r["answer"] == "2")
    row = to_row(rec, "sys")
    tok = AutoTokenizer.from_pretrained(tiny_model)
    asked, generated = [], []

    async def prompt_logprobs(prompt_ids, completion_ids):  # noqa: ANN001, ANN202 - the engine's, scripted
        asked.append((list(prompt_ids), list(completion_ids)))
        return [-0.25] * len(completion_ids)

    async def generate(prompt, tool_dict, tools, group_id=0):  # noqa: ANN001, ANN202 - the hinted retry fails again
        generated.append(prompt[-1]["content"])
        return ([{"role": "assistant", "content": "<answer>7</answer>"}], [1],
                [TrainingSequence([0, 1], [0, 1], [0.0, -0.5], "h")], 0, 0, None)

    for mode in ("gold", "both"):
        hook = WorkerGuidance(HintSchedule({"freq_count": 2}, "fixed", start=0), mode=mode)
        loop, _, _ = _scored_loop([hook, WorkerFilter("strict", rounds=1, per_step=1)],
                                  [WeightedReward(accuracy_strict, 1.0)])
        loop.tokenizer, loop.max_tokens, loop.chat_template, loop.chat_template_kwargs = tok, 64, None, {}
        loop._fork_threshold_tokens, loop._model_version_value = 1024, SimpleNamespace(value=5)
        loop.tase_prompt_logprobs, loop._generate_one = prompt_logprobs, generate
        asked.clear()
        generated.clear()
        out = asyncio.run(loop._score_group(_row_group(row, ["<answer>7</answer>", "<answer>9</answer>"], 0)))
        text = gold_text(row)
        want = [*tok(text, add_special_tokens=False)["input_ids"], tok.eos_token_id]
        plain = tok.apply_chat_template(row["prompt"], add_generation_prompt=True, return_dict=False)
        assert asked == [(list(plain), want)], (mode, asked)  # the plain prompt, the gold tokens and EOS
        assert len(out) == 2 and out[1].prompt == row["prompt"] and out[0].advantage < 0 < out[1].advantage
        seq = out[1]
        assert list(seq.input_ids) == [*plain, *want] and list(seq.old_log_probs)[-len(want):] == [-0.25] * len(want)
        c, r = loop._counters, loop._rates
        assert c["tase/guide/groups_gold_total"] == 1 and c["tase/guide/groups_guided_total"] == 1
        assert r["tase/guide/gold_share"] == [1.0, 2.0] and c["tase/dynamic/groups_kept_total"] == 1
        if mode == "both":  # hinted first (it failed again), then the gold member in the hinted group
            assert len(generated) == 2 and HINT_PREFIX in out[0].prompt[-1]["content"]
            assert c["tase/guide/groups_hinted_total"] == 1
        else:
            assert not generated and out[0].prompt == row["prompt"] and out[0].model_version == 3
        kept = asyncio.run(loop._score_group(_row_group(row, ["<answer>2</answer>", "<answer>9</answer>"], 1)))
        assert len(asked) == 1 and len(kept) == 2  # a group with a right answer: no gold member


def test_the_worker_logs_each_rewards_raw_and_weighted_mean():
    """Reward logging under async (recipes/features/reward_log/weighted.WorkerRewardLog): each sample carries its
    completion's raw reward and weight x raw under sync's keys (tase/reward/<name>/mean, /weighted), named for the
    function, not TRL's weighted name `format*0.2`; the collator's per-key average is the batch mean."""
    import asyncio

    from recipes.async_grpo.cpu_engine import WeightedReward
    from recipes.features.reward_log.weighted import WorkerRewardLog
    from rewards.trl import accuracy_fine, format_reward

    loop, group, _ = _scored_loop([WorkerRewardLog()], [WeightedReward(accuracy_fine, 1.0),
                                                       WeightedReward(format_reward, 0.2)])
    samples = asyncio.run(loop._score_group(group(0, (True, False))))
    m = [s.metrics for s in samples]
    assert m[0]["tase/reward/accuracy_fine/mean"] == 1.0 and m[1]["tase/reward/accuracy_fine/mean"] < 1.0
    for x in m:
        assert x["tase/reward/format/weighted"] == pytest.approx(0.2 * x["tase/reward/format/mean"])
        assert x["rewards/format*0.2"] == pytest.approx(x["tase/reward/format/weighted"])


def _exit_3() -> None:
    raise SystemExit(3)


def test_a_dead_rollout_worker_or_server_ends_the_wait_in_one_line():
    """Issue 80: TRL's trainer asks its rollout worker's health every few seconds while it waits for samples, but
    notices only an exception the child reported or a heartbeat stale for minutes. Guarded (recipes/async_grpo/
    trl_checks.guard_worker): a child process that died (here one that exits with code 3) is one TaseError line at
    the next check, and so is a vLLM server address where nothing listens; a child's reported exception is one line
    too, without TRL's chained traceback."""
    import multiprocessing as mp

    from trl.experimental.async_grpo.async_rollout_worker import AsyncRolloutWorker

    from recipes.async_grpo.gloo_transfer import free_port
    from recipes.async_grpo.trl_checks import guard_worker

    worker = AsyncRolloutWorker(model_name="m", dataset=None, reward_funcs=[], processing_class=None,
                                eos_token_ids=[0])  # TRL's real parent side; its child is never started here
    assert guard_worker(worker) and not guard_worker(None)
    worker._heartbeat_value.value = time.time()  # what start() and the child's loops do
    worker.check_health(300)  # not started, heartbeat fresh: healthy
    proc = mp.get_context("spawn").Process(target=_exit_3)
    proc.start()
    proc.join(60)
    worker._process = proc
    with pytest.raises(TaseError, match=r"^the rollout worker died while the trainer waited for samples \(exit code "
                                        r"3\); its error is above on stderr$"):
        worker.check_health(300)
    worker._failed_event.set()
    worker._exception_info_queue.put(("RuntimeError", "Unsupported CPU attention configuration: head_dim=16", "tb"))
    deadline = time.time() + 30
    while worker._exception_info_queue.empty() and time.time() < deadline:  # its feeder thread writes it
        time.sleep(0.01)
    with pytest.raises(TaseError, match=r"died while the trainer waited for samples: RuntimeError: Unsupported CPU "
                                        r"attention configuration: head_dim=16$"):
        worker.check_health(300)
    server = AsyncRolloutWorker(model_name="m", dataset=None, reward_funcs=[], processing_class=None,
                                eos_token_ids=[0])
    url = f"http://127.0.0.1:{free_port()}"
    guard_worker(server, url)
    with pytest.raises(TaseError, match=f"^the vLLM server at {url} no longer accepts connections"):
        server.check_health(300)
