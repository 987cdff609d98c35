"""Issue 80, the sync side: nothing accepted and ignored (a renamed option beside its new name, `transfer: null`,
`eval run --select` without `--limit`, an empty model name, strict_passk's K per folder), bench scripts checking
their arguments as the CLIs do, the launchers' numbers, and refusals a real start gave after the model loaded
(guidance gold) given by the dry run before anything loads. Each case as the issue found it."""
from __future__ import annotations

import json
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

from tests.conftest import ROOT, call_main, tree_env
from tests.test_launch_argv import calls, shim  # noqa: F401  (shim: the launchers' recording PATH)

GRPO_CPU = str(ROOT / "recipes" / "configs" / "grpo_smollm2_cpu.yaml")
TRANSFER = ROOT / "recipes" / "configs" / "proof_combine_transfer_cpu.yaml"


def one_line(code: int, err: str, want: str) -> None:
    lines = err.strip().splitlines()
    assert code == 2 and len(lines) == 1 and want in lines[0] and "Traceback" not in err, (code, err[-2000:])


# -- renamed options beside their new names ----------------------------------------------------------------------------

def test_a_yaml_holding_a_renamed_key_and_its_new_name_is_one_line(tmp_path):
    """dynamic_sampling_verdict is the former name of dynamic_sampling_granularity: the old one used to win silently."""
    cfg = yaml.safe_load(Path(GRPO_CPU).read_text(encoding="utf-8"))
    cfg.update(dynamic_sampling_verdict="coarse", dynamic_sampling_granularity="strict")
    p = tmp_path / "both.yaml"
    p.write_text(yaml.safe_dump(cfg), encoding="utf-8")
    code, err = call_main(["recipes/grpo.py", "--config", str(p), "--output_dir", str(tmp_path / "o"), "--dry-run"])
    one_line(code, err, f"--config {p}: dynamic_sampling_verdict is the former name of dynamic_sampling_granularity; "
                        "give one")
    code, err = call_main(["recipes/grpo.py", "--config", GRPO_CPU, "--output_dir", str(tmp_path / "o"), "--dry-run",
                           "--dynamic_sampling_verdict", "coarse", "--dynamic_sampling_granularity", "strict"])
    one_line(code, err, "--dynamic_sampling_verdict and --dynamic_sampling_granularity: dynamic_sampling_verdict is "
                        "the former name")
    assert not (tmp_path / "o").exists()


def test_ablate_and_the_cpu_launcher_refuse_a_former_flag_beside_its_new_one():
    from common.errors import TaseError
    from recipes.shared.parser import rename_flags

    with pytest.raises(TaseError, match="granularity is the former name of reward_granularity; give one"):
        rename_flags(["--granularity", "fine", "--reward_granularity=coarse"], {"granularity": "reward_granularity"})
    for args in (["--granularity", "fine", "--reward_granularity", "coarse"],
                 ["--reward_granularity", "coarse", "--granularity", "fine"]):
        res = subprocess.run(["bash", "launch/cpu.sh", *args, "--dry-run"], cwd=ROOT, capture_output=True, text=True,
                             timeout=60)
        assert res.returncode == 2 and not res.stdout, res
        assert res.stderr.strip().splitlines()[-1] == ("error: --granularity and --reward_granularity: granularity is "
                                                       "the former name of reward_granularity; give one")


def test_the_proof_arms_share_the_refusal():
    from common.errors import TaseError
    from recipes.proof_stages.config import rename_arm_keys
    from recipes.shared.parser import both_names

    with pytest.raises(TaseError) as e:
        rename_arm_keys("p.yaml", [{"name": "a", "accuracy": "fine", "reward_granularity": "coarse"}])
    assert str(e.value).endswith(both_names("accuracy", "reward_granularity"))


# -- `transfer: null` --------------------------------------------------------------------------------------------------

def test_transfer_null_is_refused_not_silently_off(tmp_path):
    from common.errors import TaseError
    from recipes.proof_stages.config import load_config

    text = TRANSFER.read_text(encoding="utf-8")
    block = text[text.index("transfer:\n"):text.index("select:\n")]
    for empty in ("transfer: null\n", "transfer:\n", "transfer: {}\n"):
        p = tmp_path / "t.yaml"
        p.write_text(text.replace(block, empty), encoding="utf-8")
        with pytest.raises(TaseError, match="transfer: give harder: .* and/or files:"):
            load_config(str(p))
    p.write_text(text.replace(block, ""), encoding="utf-8")  # no key: no transfer sets
    assert load_config(str(p)).transfer is None


# -- eval run --select without --limit, an empty model name ---------------------------------------------------------

def test_eval_select_without_limit_is_refused(tmp_path, fixture_root):
    for how in ("stratified", "first", "spread"):
        code, err = call_main(["-m", "eval", "run", "--model", "default", "--data", f"official:{fixture_root}",
                               "--out", str(tmp_path / "e"), "--select", how, "--backend", "hf"])
        one_line(code, err, f"--select {how} chooses which rows --limit keeps; give --limit N")
    assert not (tmp_path / "e").exists()


def test_an_empty_model_name_is_refused_not_the_default_model(tmp_path, fixture_root):
    from common.models import ModelError, resolve_model

    for name in ("", "  "):
        with pytest.raises(ModelError, match="an empty name"):
            resolve_model(name)
    code, err = call_main(["recipes/grpo.py", "--config", GRPO_CPU, "--model_name_or_path", "", "--output_dir",
                           str(tmp_path / "g"), "--dry-run"])
    one_line(code, err, "model_name_or_path '': an empty name")
    code, err = call_main(["-m", "eval", "run", "--model", "", "--data", f"official:{fixture_root}", "--out",
                           str(tmp_path / "e"), "--limit", "1", "--backend", "hf"])
    one_line(code, err, "model '': an empty name")


# -- bench/strict_passk.py, bench/strict_gains.py ----------------------------------------------------------------------

def sampled(folder: Path, rows: list[dict], k: int, right_at: int) -> Path:
    """An `eval run --num-samples k` folder's samples.jsonl: each row right at sample `right_at` only (0: never)."""
    from rewards import score

    folder.mkdir(parents=True)
    lines = []
    for r in rows:
        every = [f"<answer>{r['answer']}</answer>" if j + 1 == right_at else "<answer>no idea</answer>"
                 for j in range(k)]
        lines.append({"id": r["id"], "valid": True,
                      "samples": [{"completion": c, "coarse": score(r, c).coarse} for c in every]})
    (folder / "samples.jsonl").write_text("".join(json.dumps(x) + "\n" for x in lines), encoding="utf-8")
    return folder


def bench(script: str, *args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run([sys.executable, f"bench/{script}", *args], cwd=ROOT, capture_output=True, text=True,
                          env=tree_env(), timeout=120)


def test_strict_passk_applies_each_folders_own_k(tmp_path, fixture_root):
    """A folder of 2 samples and one of 8: the 8-sample folder's pass@8 is over its 8 samples (it used to get the
    smallest K, 2, and so a right answer at sample 5 counted nowhere)."""
    from synth.readers import load_data

    rows = [r for r in load_data(f"official:{fixture_root}") if r["task"] == "freq_count" and r["lang"] == "en"][:2]
    two = sampled(tmp_path / "two", rows, 2, 1)
    eight = sampled(tmp_path / "eight", rows, 8, 5)
    res = bench("strict_passk.py", "--data", f"official:{fixture_root}", str(two), str(eight))
    assert res.returncode == 0, res.stderr
    head = next(line for line in res.stdout.splitlines() if line.startswith("| model |"))
    assert head.startswith("| model | rows | K | strict pass@1 | strict pass@2 | strict pass@4 | strict pass@8 |")
    by = {line.split(" | ")[0][2:]: line for line in res.stdout.splitlines() if line.startswith("| t") or
          line.startswith("| e")}
    assert by["two"] == "| two | 2 | 2 | 50.00 | 100.00 | - | - | 50.00 | 100.00 |", by
    assert by["eight"] == "| eight | 2 | 8 | 12.50 | 25.00 | 50.00 | 100.00 | 12.50 | 100.00 |", by


@pytest.mark.parametrize("case", ["not json", "no id", "bad sample", "out folder", "out missing", "same names"])
def test_strict_passk_bad_input_is_one_line(tmp_path, fixture_root, case):
    f = tmp_path / "m"
    f.mkdir()
    line = {"not json": "{", "no id": json.dumps({"valid": True, "samples": [{}]}),
            "bad sample": json.dumps({"id": "x", "valid": True, "samples": [{"completion": 3}]})}.get(case, "")
    (f / "samples.jsonl").write_text(line + "\n", encoding="utf-8")
    args = ["--data", f"official:{fixture_root}", str(f)]
    if case == "out folder":
        args += ["--out", str(tmp_path)]
    if case == "out missing":
        args += ["--out", str(tmp_path / "no" / "t.md")]
    if case == "same names":
        (tmp_path / "b" / "m").mkdir(parents=True)
        args.append(str(tmp_path / "b" / "m"))
    res = bench("strict_passk.py", *args)
    want = {"not json": "line 1 is not JSON", "no id": "line 1 is not an `eval run` sample",
            "bad sample": "each of its samples needs a completion", "out folder": "is a folder",
            "out missing": "no folder", "same names": "folders must have distinct names"}[case]
    one_line(res.returncode, res.stderr, want)


@pytest.mark.parametrize("args, want", [
    (["--n-boot", "100000000"], "--n-boot: expected an integer from 1 to 1,000,000, got '100000000'"),
    (["--n-boot", "0"], "--n-boot: expected an integer from 1 to 1,000,000"),
    (["--seed", "-1"], "--seed: expected an integer >= 0"),
    (["--bogus"], "unrecognized arguments: --bogus"),
    (["--out", "/"], "--out /: is a folder"),
])
def test_strict_gains_checks_its_arguments_first(tmp_path, args, want):
    """--n-boot 100000000 hung (eval compare caps at 1,000,000); each bad argument is one line before any work."""
    res = bench("strict_gains.py", "--evals", str(tmp_path), "--base", "a", "b", *args)
    one_line(res.returncode, res.stderr, want)


def test_strict_gains_without_shared_rows_or_strict_verdicts_is_one_line(tmp_path, fixture_root):
    from synth.readers import load_data

    rows = [r for r in load_data(f"official:{fixture_root}") if r["task"] == "freq_count"][:4]

    def run_folder(name: str, part: list[dict], strict: bool) -> None:
        d = tmp_path / name
        d.mkdir()
        samples = [{"id": r["id"], "task": r["task"], "lang": r["lang"], "file": "f", "valid": True, "coarse": 1.0,
                    **({"strict": 1.0} if strict else {})} for r in part]
        (d / "samples.jsonl").write_text("".join(json.dumps(s) + "\n" for s in samples), encoding="utf-8")
        (d / "results.json").write_text(json.dumps({"overall": 1, "by_task": {}, "by_lang": {}, "micro": 1,
                                                    "n": len(part)}), encoding="utf-8")

    run_folder("a", rows[:2], True)
    run_folder("b", rows[2:], True)
    run_folder("old", rows[:2], False)
    res = bench("strict_gains.py", "--evals", str(tmp_path), "--base", "a", "b")
    one_line(res.returncode, res.stderr, "share no scored row: nothing to pair")
    res = bench("strict_gains.py", "--evals", str(tmp_path), "--base", "a", "old")
    one_line(res.returncode, res.stderr, "its samples carry no strict verdict")


# -- the launchers' numbers --------------------------------------------------------------------------------------------

def test_local_launcher_reads_08_as_eight_and_refuses_a_port_out_of_range(shim):  # noqa: F811
    """`--gpus 08` was octal to bash ("value too great for base") and the plan went on with the wrong count;
    `--port 99999` reached the server."""
    env, rec = shim
    res = subprocess.run(["bash", "launch/local.sh", "--gpus", "08", "--vllm-gpus", "09", "--async", "--dry-run"],
                         cwd=ROOT, env=env, capture_output=True, text=True, timeout=60)
    one_line(res.returncode, res.stderr, "--async needs at least one training GPU: 8 GPUs, 9 for vLLM")
    res = subprocess.run(["bash", "launch/local.sh", "--gpus", "08", "--async", "--dry-run"], cwd=ROOT, env=env,
                         capture_output=True, text=True, timeout=60)
    assert res.returncode == 0 and "value too great" not in res.stderr, res
    assert "# async on 8 GPUs: vLLM server on GPU(s) 0,1, FSDP2 trainer on GPU(s) 2,3,4,5,6,7" in res.stdout
    (dry,) = [c for c in calls(rec, "python") if "--dry-run" in c]
    assert dry[dry.index("--min_gpus") + 1] == "8"
    for port in ("99999", "0", "65536", "8000x"):
        res = subprocess.run(["bash", "launch/local.sh", "--port", port, "--dry-run"], cwd=ROOT, env=env,
                             capture_output=True, text=True, timeout=60)
        one_line(res.returncode, res.stderr, f"--port must be a whole number from 1 to 65535, got '{port}'")


# -- refusals before the model loads -----------------------------------------------------------------------------------

@pytest.mark.parametrize("extra, want", [
    (["--guidance", "gold", "--multi_objective_aggregation", "normalize_then_sum"],
     "guidance gold needs multi_objective_aggregation sum_then_normalize, got normalize_then_sum"),
    (["--guidance", "both", "--beta", "0.04", "--use_peft", "true"],
     "guidance both with beta > 0 needs a reference model; a PEFT adapter run has none"),
])
def test_guidance_gold_conflicts_are_refused_by_the_dry_run(tmp_path, extra, want):
    """Refused in the trainer's constructor, after the model loaded; now at parse time, the dry run included."""
    code, err = call_main(["recipes/grpo.py", "--config", GRPO_CPU, "--output_dir", str(tmp_path / "g"), *extra,
                           "--dry-run"])
    one_line(code, err, want)


@pytest.mark.slow
@pytest.mark.fresh_python  # torchrun itself the ranks' parent (a warm fork's parent is the warm server)
def test_torchrun_refusal_is_one_line_without_torchruns_traceback(tmp_path):
    """Two ranks refuse `--guidance hint` (one training process only): rank 0's line, once, and no ChildFailedError
    traceback of torchrun's after it (rank 0 ends the agent; the shell sees 137)."""
    torchrun = Path(sys.executable).parent / "torchrun"
    res = subprocess.run([sys.executable, str(torchrun), "--nproc_per_node", "2", "recipes/grpo.py", "--config",
                          GRPO_CPU, "--guidance", "hint", "--output_dir", str(tmp_path / "t"), "--max_steps", "1"],
                         cwd=ROOT, env=tree_env(OMP_NUM_THREADS="1"), capture_output=True, text=True, timeout=600)
    errors = [line for line in res.stderr.splitlines() if not line.startswith(("W", "*"))]
    assert res.returncode == -9 or res.returncode == 137, res.stderr[-3000:]
    assert errors == ["error: guidance runs with one training process, got 2: the hinted re-generation covers only "
                      "the failed groups, which TRL's cross-process gathers cannot take"], res.stderr[-3000:]
    assert "Traceback" not in res.stderr and not (tmp_path / "t").exists()


def test_a_curriculum_over_async_rewards_only_is_refused_by_the_dry_run(tmp_path, monkeypatch):
    """The curriculum reads verdicts from a synchronous reward; with async ones only it was refused after the model
    loaded (curriculum.watch), now by the feature's check."""
    (tmp_path / "async_rewards_issue80.py").write_text(
        "async def score(completions, **kwargs):\n    return [0.0] * len(completions)\n", encoding="utf-8")
    monkeypatch.syspath_prepend(str(tmp_path))
    code, err = call_main(["recipes/grpo.py", "--config", GRPO_CPU, "--train_data", "synth", "--streaming", "true",
                           "--curriculum", "true", "--tasks", "component_split", "--langs", "en", "--max_steps", "2",
                           "--reward_funcs", "async_rewards_issue80:score", "--format_reward", "false",
                           "--output_dir", str(tmp_path / "o"), "--dry-run"])
    one_line(code, err, "curriculum needs a synchronous reward function to read the verdicts from; every one is async")
