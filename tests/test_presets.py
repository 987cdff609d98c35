"""Loss presets (recipes/features/presets/overlays.py, recipes/configs/presets/*.yaml): each runs one CPU GRPO step with
the options it names in force, the command line overrides a preset, and DAPO's soft overlong punishment is TRL's Eq. 13
reward."""
import json
import subprocess
import sys

import pytest
from conftest import ROOT, call_main, tree_env

TINY = ["--use_cpu", "true", "--bf16", "false", "--dtype", "float32", "--tasks", "sort_lengths", "--langs", "en",
        "--max_len", "6", "--num_train_examples", "4", "--num_generations", "2", "--per_device_train_batch_size", "2",
        "--max_completion_length", "6", "--logging_steps", "1", "--report_to", "none", "--seed", "0",
        "--gradient_checkpointing", "false", "--max_steps", "1", "--save_strategy", "no"]

EXPECT = {  # preset -> options the trainer must have run with (from training_args in tase_config.json)
    "gspo": {"importance_sampling_level": "sequence", "loss_type": "grpo", "beta": 0.0, "epsilon": 3e-4,
             "epsilon_high": 4e-4},
    "dr_grpo": {"loss_type": "dr_grpo", "scale_rewards": "none"},
    "dapo": {"loss_type": "dapo", "mask_truncated_completions": True, "epsilon_high": 0.28},
    "grpo": {"loss_type": "grpo", "scale_rewards": "group", "importance_sampling_level": "token", "beta": 0.04},
}


def test_every_shipped_preset_is_tested():
    from recipes.features.presets.overlays import preset_names

    assert preset_names() == sorted(EXPECT)


# The four one-step runs share one interpreter (recipes/grpo.py's main, called once per preset, each with its own
# output folder): the imports are paid once, the runs stay the real entry point. A script file, not `python -c`:
# the warm interpreter forks scripts (tests/warm_python.py), so the stack is not even imported once (~10 CPU-s).
RUN_ALL = """
import sys
from recipes.grpo import main
out, model, *rest = sys.argv[1:]
for preset in ("dapo", "dr_grpo", "grpo", "gspo"):
    code = main(["--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--preset", preset, "--model_name_or_path",
                 model, "--output_dir", f"{out}/{preset}", *rest])
    if code:
        raise SystemExit(f"preset {preset}: exit {code}")
"""


@pytest.fixture(scope="module")
def preset_runs(tiny_model, tmp_path_factory):
    out = tmp_path_factory.mktemp("presets")
    script = out / "run_all.py"
    script.write_text(RUN_ALL, encoding="utf-8")
    res = subprocess.run([sys.executable, str(script), str(out), str(tiny_model), *TINY], cwd=ROOT,
                         capture_output=True, text=True, timeout=600, env=tree_env())
    assert res.returncode == 0, res.stderr[-3000:]
    return out


@pytest.mark.slow  # the shared fixture: four one-step runs, ~35 s of CPU
@pytest.mark.parametrize("preset", sorted(EXPECT))
def test_preset_runs_one_cpu_step(preset, preset_runs):
    out = preset_runs / preset
    saved = json.loads((out / "tase_config.json").read_text())
    assert saved["tase"]["preset"] == preset
    for key, want in EXPECT[preset].items():
        assert (saved["training"][key] == pytest.approx(want) if isinstance(want, float)
                else saved["training"][key] == want), key
    logs = [json.loads(line) for line in (out / "metrics.jsonl").read_text().splitlines()]
    step = next(m for m in logs if "reward" in m)
    assert "rewards/accuracy_fine/mean" in step and "rewards/format/mean" in step
    names = saved["rewards"]["names"]
    for name, weight in zip(names, saved["rewards"]["weights"], strict=False):
        # per-reward logging (recipes/features/reward_log/weighted.py)
        assert step[f"tase/reward/{name}/mean"] == pytest.approx(step[f"rewards/{name}/mean"], abs=1e-6)
        assert step[f"tase/reward/{name}/weighted"] == pytest.approx(weight * step[f"rewards/{name}/mean"], abs=1e-6)
    assert sum(step[f"tase/reward/{n}/weighted"] for n in names) == pytest.approx(step["reward"], abs=1e-5)
    if preset == "dapo":  # the overlong reward rides along with weight 1, logged under its own name
        assert names[-1] == "soft_overlong" and saved["rewards"]["weights"][-1] == 1.0
        assert -1.0 <= step["rewards/soft_overlong/mean"] <= 0.0
    else:
        assert "soft_overlong" not in names


def test_command_line_overrides_preset_and_bad_preset_is_one_line(tmp_path):
    from recipes.grpo_core.args import parse

    base = ["--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--output_dir", str(tmp_path / "o"), "--dry-run"]
    tase, cfg, _ = parse([*base, "--preset", "gspo", "--epsilon", "0.1"])
    assert ((tase.preset, cfg.importance_sampling_level, cfg.epsilon, cfg.epsilon_high)
            == ("gspo", "sequence", 0.1, 4e-4))
    tase, cfg, _ = parse(base)  # no preset: the recipe's own loss
    assert (tase.preset, cfg.importance_sampling_level, cfg.epsilon_high) == (None, "token", None)
    code, err = call_main(["recipes/grpo.py", *base, "--preset", "ppo"])
    assert code == 2 and err.strip() == "error: preset ppo: unknown; choose from dapo, dr_grpo, grpo, gspo"
    code, err = call_main(["recipes/grpo.py", *base, "--preset", "dapo", "--trainer", "async"])
    assert code == 2 and "trainer: async does not support" in err and "loss_type" in err and "Traceback" not in err


def test_soft_overlong_is_dapo_eq13():
    from recipes.features.presets.overlays import soft_overlong

    f = soft_overlong(10, 4)  # no penalty up to 6 tokens, then -1/4 per token, -1 past 10
    assert f.__name__ == "soft_overlong"
    assert f(completion_ids=[[0] * 6, [0] * 8, [0] * 10, [0] * 11]) == [0.0, -0.5, -1.0, -1.0]
    assert soft_overlong(10).soft_punish_cache == 2  # default: a fifth of max_completion_length
    code, err = call_main(["recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml", "--dry-run",
                           "--soft_overlong", "true", "--soft_overlong_cache", "100", "--max_completion_length", "48"])
    assert code == 2 and "soft_overlong_cache must be an integer in [1, max_completion_length 48], got 100" in err


def test_weighted_log_returns_what_it_wraps_and_logs_the_contribution():
    from recipes.features.reward_log.weighted import WeightedLog, contribution, log_weighted

    def format(completions, **kw):  # noqa: A001 - a reward function named as ours is
        return [1.0, 0.5, None, 0.0]

    logged = {}
    w = WeightedLog(format, 0.2)
    assert w.__name__ == "format"
    assert w(completions=[None] * 4, log_metric=logged.__setitem__) == [1.0, 0.5, None, 0.0]
    assert logged == {"tase/reward/format/mean": 0.5, "tase/reward/format/weighted": pytest.approx(0.1)}
    assert contribution([None, None], 3.0) is None and w(completions=[], log_metric=logged.__setitem__) is not None

    async def judge(completions, **kw):
        return [0.0]

    wrapped = log_weighted([format, judge], [1.0, 0.5])
    assert isinstance(wrapped[0], WeightedLog) and wrapped[1] is judge  # TRL must still see the coroutine function
