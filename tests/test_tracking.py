"""Training you can watch and extend (issue 38): the tase/ metrics of every logging step
(recipes/features/tracking/metrics.py), read back from TensorBoard's event files with TensorBoard's own reader, from a
W&B offline run and from metrics.jsonl; a user reward by import path; LoRA in GRPO and SFT and its merge by export;
QLoRA refused on CPU; `eval plot-training` on the run. One 3-step GRPO run (module fixture) carries most of the
assertions."""
from __future__ import annotations

import importlib.util
import itertools
import json
import math
import os
import struct
from pathlib import Path

import pytest

from tests.conftest import call_main
from tests.test_recipes import GRPO, PY, TINY_ARGS, metrics, run

EVERY = ("tase/official_acc", "tase/strict_acc", "tase/fine_credit", "tase/loophole_share", "tase/zero_var_groups",
         "tase/distinct_answers")
PER = tuple(f"tase/{kind}/{key}/{acc}" for kind, keys in (("task", ("sort_lengths", "freq_count")),
                                                          ("lang", ("en", "zh")))
            for key in keys for acc in ("official_acc", "strict_acc"))
HAS_WANDB = importlib.util.find_spec("wandb") is not None


def tag(answer: str) -> list[dict]:
    return [{"role": "assistant", "content": f"<answer>{answer}</answer>"}]


def batch() -> dict:
    """Two GRPO groups as TRL hands them to a reward function: a sort_lengths prompt (one gold answer, one listing
    every order: an official pass through a loophole) and a freq_count prompt (the same wrong number twice)."""
    perms = " ".join("".join(p) for p in itertools.permutations("ABC"))
    question = ["Sort A: x\nB: y\nC: z"] * 2 + ["How many a in a a?"] * 2
    return dict(prompts=[[{"role": "user", "content": q}] for q in question],
                completions=[tag("CAB"), tag(perms), tag("3"), tag("3")],
                type=["MATCH_ANSWER"] * 2 + ["NUMBER"] * 2, answer=["CAB", "CAB", "2", "2"], question=question,
                id=["s1", "s1", "f1", "f1"], task=["sort_lengths"] * 2 + ["freq_count"] * 2,
                lang=["en", "en", "zh", "zh"])


def test_batch_metrics_count_loopholes_groups_and_answers():
    from recipes.features.tracking.metrics import WatchedReward, batch_metrics, verdicts
    from rewards import get_reward_funcs

    b = batch()
    m = batch_metrics(verdicts(b["prompts"], b["completions"], b), level="strict")
    assert m["tase/official_acc"] == 0.5 and m["tase/strict_acc"] == 0.25
    assert m["tase/loophole_share"] == 0.5  # 2 official passes, 1 of them a loophole
    assert m["tase/zero_var_groups"] == 0.5  # the freq_count group: 0, 0
    assert m["tase/distinct_answers"] == 0.75  # (2/2 + 1/2) / 2
    assert m["tase/task/sort_lengths/official_acc"] == 1.0 and m["tase/task/sort_lengths/strict_acc"] == 0.5
    assert m["tase/lang/zh/official_acc"] == 0.0 and m["tase/lang/en/strict_acc"] == 0.5
    (fine,) = get_reward_funcs(["accuracy_fine"])
    assert m["tase/fine_credit"] == sum(fine(**b)) / 4
    # the zero-variance level is the trained accuracy: on the official verdict the sort_lengths group is all-pass
    assert batch_metrics(verdicts(b["prompts"], b["completions"], b), level="coarse")["tase/zero_var_groups"] == 1.0
    # the wrapper returns the wrapped reward unchanged, keeps its name, and logs through the log_metric hook
    logged: dict[str, float] = {}
    w = WatchedReward(fine, "strict")
    assert w(**b, log_metric=logged.__setitem__) == fine(**b) and w.__name__ == "accuracy_fine"
    assert logged == m
    # rows that are not TASE rows (no `type`): the wrapped reward still runs, the metrics go off once
    logged.clear()
    user = WatchedReward(lambda completions, **kw: [1.0] * len(completions), "strict")
    assert user(prompts=b["prompts"], completions=b["completions"], log_metric=logged.__setitem__) == [1.0] * 4
    assert logged == {} and "no `type` column" in user.off


def read_wandb_history(run_dir: Path) -> list[dict]:
    """The history records of a W&B offline run (run-*.wandb: LevelDB log blocks of protobuf Records, the
    format `wandb sync` uploads)."""
    from wandb.proto import wandb_internal_pb2 as pb

    (path,) = run_dir.glob("wandb/offline-run-*/run-*.wandb")
    buf, block, pos, records, cur = path.read_bytes(), 32768, 7, [], b""
    assert buf[:4] == b":W&B"
    while pos + 7 <= len(buf):
        if block - pos % block < 7:  # a block's tail too short for a header is padding
            pos += block - pos % block
            continue
        _, n, kind = struct.unpack("<IHB", buf[pos:pos + 7])
        cur, pos = cur + buf[pos + 7:pos + 7 + n], pos + 7 + n
        if kind in (1, 4):  # FULL or LAST fragment
            records.append(cur)
            cur = b""
    out = []
    for data in records:
        r = pb.Record()
        r.ParseFromString(data)
        if r.WhichOneof("record_type") == "history":
            out.append({i.key or "/".join(i.nested_key): json.loads(i.value_json) for i in r.history.item})
    return out


@pytest.fixture(scope="module")
def watched_run(tiny_model, tmp_path_factory) -> Path:
    """3 GRPO steps with LoRA, our accuracy + format + a user reward by import path, reported to TensorBoard (and
    W&B offline where installed)."""
    out = tmp_path_factory.mktemp("watch") / "grpo"
    args = [a for a in TINY_ARGS if a not in ("--report_to", "none")]
    langs = args.index("--langs")
    args[langs + 1:langs + 2] = ["en", "zh"]
    res = run([*GRPO, "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "3",
               "--save_strategy", "no", "--report_to", "tensorboard,wandb" if HAS_WANDB else "tensorboard",
               "--reward_funcs", "accuracy_strict", "format", "tests.user_rewards:brevity",
               "--use_peft", "true", "--lora_r", "4", *args],
              # W&B's switches only where it runs: transformers reads WANDB_MODE at import, so a run given it starts a
              # fresh interpreter rather than forking the warm one (tests/warm_python.py)
              env={**os.environ, **({"WANDB_MODE": "offline", "WANDB_SILENT": "true"} if HAS_WANDB else {})})
    assert res.returncode == 0, res.stderr[-3000:]
    return out


def finite_per_step(rows: list[dict], keys: tuple[str, ...], prefix: str = "") -> None:
    for k in keys:
        vals = [r[prefix + k] for r in rows if prefix + k in r]
        assert vals and all(isinstance(v, (int, float)) and math.isfinite(v) for v in vals), (k, vals)


def test_tase_metrics_reach_tensorboard_and_metrics_jsonl(watched_run, tmp_path):
    from tensorboard.backend.event_processing.event_accumulator import EventAccumulator

    logs = [m for m in metrics(watched_run) if "reward" in m]
    assert [m["step"] for m in logs] == [1, 2, 3]
    for m in logs:  # every step: the six shares, and the user reward beside ours
        assert set(EVERY) <= set(m) and "rewards/brevity/mean" in m and "rewards/accuracy_strict/mean" in m
    finite_per_step(logs, EVERY + PER)
    (events,) = {p.parent for p in watched_run.glob("runs/*/events.out.tfevents.*")}
    acc = EventAccumulator(str(events))
    acc.Reload()
    tags = set(acc.Tags()["scalars"])
    for k in EVERY + PER:
        assert f"train/{k}" in tags, (k, sorted(tags))
        assert all(math.isfinite(e.value) for e in acc.Scalars(f"train/{k}"))
    assert [e.step for e in acc.Scalars("train/tase/official_acc")] == [1, 2, 3]
    # keys in metrics.jsonl and in the event files are the same (TensorBoard's are prefixed train/)
    assert {k for m in logs for k in m if k.startswith("tase/")} == {t[6:] for t in tags if t.startswith("train/tase/")}
    # LoRA: the run saved an adapter; export merges it into a plain safetensors model
    assert (watched_run / "adapter_model.safetensors").is_file() and not (watched_run / "model.safetensors").exists()
    exp = tmp_path / "merged"
    res = run([PY, "recipes/export.py", str(watched_run), "--out", str(exp)])
    assert res.returncode == 0 and "LoRA merged" in res.stdout, res.stderr[-2000:]
    assert (exp / "model.safetensors").is_file() and not list(exp.glob("adapter*"))
    from transformers import AutoModelForCausalLM

    model = AutoModelForCausalLM.from_pretrained(exp, use_safetensors=True)
    assert not any("lora" in n for n, _ in model.named_parameters())


@pytest.mark.skipif(not HAS_WANDB,
                    reason='wandb is not installed (pip install -e ".[track]"; not in requirements.lock)')
def test_tase_metrics_reach_wandb_offline(watched_run):
    hist = [h for h in read_wandb_history(watched_run) if "train/tase/official_acc" in h]
    assert [h["train/global_step"] for h in hist] == [1, 2, 3]
    finite_per_step(hist, EVERY, prefix="train/")
    finite_per_step(hist, PER, prefix="train/")


def grpo_error(argv: list[str], script: str = "recipes/grpo.py") -> str:
    """The recipe's main in this process (tests/conftest.py call_main): exit 2 with one stderr line, returned."""
    code, err = call_main([script, *argv])
    err = err.strip()
    assert code == 2 and len(err.splitlines()) == 1 and "Traceback" not in err, err
    return err


@pytest.mark.parametrize("spec, expect", [
    ("accuracy_finest", "unknown reward function"),
    ("tests.no_such_module:f", "cannot import tests.no_such_module"),
    ("tests.user_rewards.nope", "has no 'nope'"),
    ("tests.user_rewards:NOT_A_FUNCTION", "is a int, not a function"),
])
def test_bad_reward_funcs_are_one_line(tiny_model, tmp_path, spec, expect):
    base = ["--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "o"), *TINY_ARGS]
    assert expect in grpo_error([*base, "--reward_funcs", "format", spec])
    assert expect in grpo_error([*base, "--reward_funcs", spec, "--dry_run", "true"])
    assert not (tmp_path / "o").exists()


def test_qlora_without_gpu_and_missing_trackers_are_one_line(tiny_model, tmp_path):
    base = ["--model_name_or_path", str(tiny_model), "--output_dir", str(tmp_path / "o"), *TINY_ARGS]
    assert "needs a CUDA GPU" in grpo_error([*base, "--use_peft", "true", "--load_in_4bit", "true"])
    assert "needs a CUDA GPU" in grpo_error([*base, "--use_peft", "true", "--load_in_8bit", "true"])
    assert "add --use_peft true" in grpo_error([*base, "--load_in_4bit", "true"])
    assert "needs a CUDA GPU" in grpo_error(["--config", "recipes/configs/sft_smollm2_cpu.yaml", "--model_name_or_path",
                                             str(tiny_model), "--output_dir", str(tmp_path / "o"), "--use_peft", "true",
                                             "--load_in_4bit", "true"], script="recipes/sft_warmup.py")
    if importlib.util.find_spec("trackio") is None:
        assert "the trackio package is not installed" in grpo_error([*base, "--report_to", "trackio"])
    # a name transformers does not know: one line before training (it raised a ValueError traceback when the
    # trainer built its callbacks); the SFT warm-up too
    unknown = "error: report_to nosuchtracker: unknown tracker; one of none, all, azure_ml"
    assert grpo_error([*base, "--report_to", "tensorboard,nosuchtracker"]).startswith(unknown)
    assert grpo_error(["--config", "recipes/configs/sft_smollm2_cpu.yaml", "--model_name_or_path", str(tiny_model),
                       "--output_dir", str(tmp_path / "o"), "--report_to", "nosuchtracker"],
                      script="recipes/sft_warmup.py").startswith(unknown)
    long = tmp_path / ("x" * 300)  # ENAMETOOLONG: a traceback from os.stat before
    assert grpo_error(["--config", "recipes/configs/sft_smollm2_cpu.yaml", "--model_name_or_path", str(tiny_model),
                       "--output_dir", str(long)], script="recipes/sft_warmup.py") == \
        f"error: output_dir {long}: it is a name longer than the file system allows"
    assert not (tmp_path / "o").exists()


def test_sft_trains_a_lora_adapter(tiny_model, tmp_path):
    out = tmp_path / "sft"
    res = run([PY, "recipes/sft_warmup.py", "--config", "recipes/configs/sft_smollm2_cpu.yaml",
               "--model_name_or_path", str(tiny_model), "--output_dir", str(out), "--max_steps", "1",
               "--num_train_examples", "8", "--use_peft", "true", "--lora_r", "4"])
    assert res.returncode == 0, res.stderr[-3000:]
    cfg = json.loads((out / "adapter_config.json").read_text())
    assert cfg["peft_type"] == "LORA" and cfg["r"] == 4 and (out / "adapter_model.safetensors").is_file()
    assert list(out.glob("runs/*/events.out.tfevents.*"))  # the shipped config's tracker: TensorBoard


def test_plot_training_draws_runs_into_one_png(watched_run, tmp_path, capsys):
    """`eval plot-training` on the 3-step run and on an older log without tase/ keys (its accuracy read from
    rewards/accuracy_coarse/mean); a folder without metrics.jsonl is one line, exit 2, and writes nothing."""
    from eval.__main__ import main

    old = tmp_path / "old_run"
    old.mkdir()
    (old / "metrics.jsonl").write_text("".join(json.dumps(r) + "\n" for r in (
        {"step": 1, "reward": 0.2, "rewards/accuracy_coarse/mean": 0.1, "frac_reward_zero_std": 0.5},
        {"step": 2, "reward": 0.4, "rewards/accuracy_coarse/mean": 0.3, "frac_reward_zero_std": 0.25},
        {"step": 3, "train_runtime": 9.0})) + '{"step": 4, "rew')  # a torn last line: a killed run
    png = tmp_path / "curves.png"
    assert main(["plot-training", str(watched_run), str(old), "--out", str(png)]) == 0
    assert f"Plot: {png}" in capsys.readouterr().out
    assert png.read_bytes()[:8] == b"\x89PNG\r\n\x1a\n" and png.stat().st_size > 20_000
    from eval.plot_training import curve, read_run

    rows = read_run(old)
    assert [r["step"] for r in rows] == [1, 2]
    assert curve(rows, ("tase/official_acc", "rewards/accuracy_coarse/mean"))[0] == "rewards/accuracy_coarse/mean"
    assert curve(read_run(watched_run), ("tase/official_acc",))[1] == [1, 2, 3]
    # the loophole share of official passes is left out at a step without one (logged as 0, undefined there)
    rows = [{"step": 1, "tase/official_acc": 0.5, "tase/loophole_share": 0.5},
            {"step": 2, "tase/official_acc": 0.0, "tase/loophole_share": 0.0},
            {"step": 3, "tase/official_acc": 0.25, "tase/loophole_share": 1.0}]
    assert curve(rows, ("tase/loophole_share",))[1:] == ([1, 3], [0.5, 1.0])
    assert main(["plot-training", str(tmp_path / "nothing"), "--out", str(tmp_path / "x.png")]) == 2
    err = capsys.readouterr().err.strip()
    assert err.startswith("error:") and "no metrics.jsonl" in err and len(err.splitlines()) == 1
    assert not (tmp_path / "x.png").exists()
