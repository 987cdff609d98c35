"""trainer: async cannot hang silently (issue 50): a weight sync whose peer stops answering ends in one line within
weight_sync_timeout (the real gloo transport of recipes/async_grpo/gloo_transfer.py, a peer that joins and never takes the
weights), the installed TRL is checked against the tested range, and the shipped async configs set the timeout."""
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

    vs = [Verdict("a", "sort_lengths", "en", 1.0, 1.0, 1.0, "ABC"), Verdict("a", "sort_lengths", "en", 1.0, 0.0, 0.5, "AB"),
          Verdict("a", "sort_lengths", "en", 0.0, 0.0, 0.0, "ABC"), Verdict("b", "freq_count", "zh", 0.0, 0.0, 0.2, "3"),
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
    assert carry_tase_metrics(w, "strict") and w._loop_cls is ServerRolloutLoop and w._loop_kwargs == {"tase_level": "strict"}
    assert not carry_tase_metrics(w, "strict") and not carry_tase_metrics(None, "fine")  # once; no worker off rank 0
