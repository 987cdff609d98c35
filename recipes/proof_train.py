"""recipes/proof.py's training stages: 1 the official subset linked into OUT/official, 2 the SFT warm-up, 3 one GRPO
arm per accuracy reward, 4 (with a `control:` section) the more-SFT control for the fine arm's train_runtime."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_inputs import DATA_KEYS, HERE, Proof, config_reader, flags, shown
from rewards.levels import FINE, accuracy_reward_name


def link_subset(official: Path, files: list[str], dest: Path, dry_run: bool) -> list[list[str]]:
    """Link the chosen files (and the release's data/final_token_*.json) into dest; returns the equivalent
    shell commands of what is still to do. A link pointing elsewhere, or another CSV there, is an error."""
    wanted = {dest / "tasks" / f: official / "tasks" / f for f in files}
    wanted.update({dest / "data" / c.name: c for c in sorted((official / "data").glob("final_token_*.json"))})
    extra = [p for p in sorted((dest / "tasks").glob("*/*/*.csv")) if p not in wanted]
    if extra:
        raise TaseError(f"{shown(dest)} holds {shown(extra[0])}, not in the config's files: it would be evaluated too; "
             "remove it or choose another --out")
    todo = []
    for link, target in wanted.items():
        if link.is_symlink() or link.exists():
            if link.resolve() != target.resolve():
                raise TaseError(f"{shown(link)} points to {link.resolve()}, not {target}; remove it or choose another --out")
            continue
        todo.append((link, target))
    cmds = []
    for link, target in todo:
        if ["mkdir", "-p", shown(link.parent)] not in cmds:
            cmds.append(["mkdir", "-p", shown(link.parent)])
        cmds.append(["ln", "-s", str(target), shown(link)])
        if not dry_run:
            link.parent.mkdir(parents=True, exist_ok=True)
            os.symlink(target, link)
    return cmds


def stage_subset(pr: Proof) -> None:
    """1. the official subset, whole files, release ids."""
    step, out = pr.step, pr.out
    step.header(1, f"official subset: {len(pr.cfg['files'])} whole files linked into {shown(out / 'official')}")
    t = time.time()
    cmds = link_subset(pr.official, pr.cfg["files"], out / "official", pr.dry)
    for cmd in cmds:
        step.show(cmd)
    if not cmds:
        print("   skipped: every link exists")
    step.add("1 official subset", time.time() - t)


def stage_train(pr: Proof) -> None:
    """2. SFT warm-up; 3. GRPO arms: same config, seed, data and steps; only the accuracy reward differs."""
    cfg, out, step = pr.cfg, pr.out, pr.step
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(pr.sft_config), *flags(cfg["sft"]["options"]),
           "--exclude", pr.guard, "--output_dir", shown(out / "sft"),
           "--resume_from_checkpoint", "true"]  # a killed run continues
    if not pr.skip(2, "SFT warm-up", out / "sft" / "model.safetensors", cmd, "2 SFT warm-up"):
        step(2, "SFT warm-up", cmd, stage="2 SFT warm-up")
    for arm in cfg["grpo"]["arms"]:
        reward = accuracy_reward_name(arm)  # the arm's accuracy reward, named by rewards/levels.py
        cmd = [pr.py, shown(HERE / "grpo.py"), "--config", shown(pr.grpo_config), "--model_name_or_path",
               shown(out / "sft"), "--exclude", pr.guard, "--output_dir", shown(out / arm), "--reward_funcs",
               reward, *cfg["grpo"]["reward_funcs"], *flags(cfg["grpo"]["options"]),
               "--resume_from_checkpoint", "true"]
        if not pr.skip(3, f"GRPO {arm}", out / arm / "model.safetensors", cmd, f"3 GRPO {arm}"):
            step(3, f"GRPO {arm} ({reward} + {' + '.join(cfg['grpo']['reward_funcs'])})", cmd,
                 stage=f"3 GRPO {arm}")


def control_config_text(sft_config: Path, data: dict[str, Any], read: Callable[[str | Path], Any] | None = None) -> str:
    """The control's recipe config: the sft recipe config's YAML (through `read`: the proof's reader has it
    already) with every data option replaced by `data` (the GRPO arms'), None written as null: an unset option
    (max_len, subtasks) cannot be given as a flag."""
    import yaml

    recipe = {**((read or config_reader())(sft_config) or {}), **data}
    return (f"# written by recipes/proof.py: {shown(sft_config)} with the GRPO arms' data options\n"
            + yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))


def train_runtime(run: Path) -> float:
    """A finished run's training wall time: the `train_runtime` the Trainer logs when train() returns, kept in
    the log_history of the trainer_state.json both recipes save. A resumed run's covers its last invocation
    only. Missing or unreadable: one line (the control needs it to train for as long)."""
    state = run / "trainer_state.json"
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history") or []
    except (OSError, ValueError, AttributeError, RecursionError) as e:
        raise TaseError(f"{shown(state)}: cannot read the fine arm's train_runtime ({getattr(e, 'strerror', None) or e}); "
             "the control trains for as long as the fine arm did")
    times = [h["train_runtime"] for h in history
             if isinstance(h, dict) and isinstance(h.get("train_runtime"), (int, float))]
    if not times or not times[-1] > 0:
        raise TaseError(f"{shown(state)}: no train_runtime in its log_history (did the fine arm finish?); the control "
             "trains for as long as the fine arm did")
    return float(times[-1])


def stage_control(pr: Proof) -> None:
    """4. the more-SFT control: sft_warmup.py from the warm-up with gold answers on the GRPO arms' data, for
    --max_train_seconds = the fine arm's train_runtime: "GRPO vs more supervised data" at equal training time.
    Its --config is OUT/control_config.yaml, the sft recipe config with every data option set to the GRPO
    arms' (the grpo config's, then grpo.options; an unset one as null, which no flag can say); then the sft
    options but data and model, then control.options. Its prompts are the GRPO arms', so the held-out guard
    (stage 5) covers them."""
    cfg, out, k = pr.cfg, pr.out, pr.k("control")
    data = pr.data["grpo"]
    control_config, done = out / "control_config.yaml", out / "control" / "model.safetensors"
    opts = {key: v for key, v in cfg["sft"]["options"].items() if key not in DATA_KEYS + ("model_name_or_path",)}
    opts.update(cfg["control"]["options"])
    state = out / FINE / "trainer_state.json"
    if not state.is_file() and (pr.dry or done.exists()):
        seconds = f"<train_runtime of {shown(state)}>"  # read once the fine arm has trained
    else:
        seconds = f"{train_runtime(out / FINE):g}"
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(control_config), "--model_name_or_path",
           shown(out / "sft"), *flags(opts), "--max_train_seconds", seconds, "--exclude", pr.guard,
           "--output_dir", shown(out / "control"), "--resume_from_checkpoint", "true"]
    if pr.skip(k, "more-SFT control", done, cmd, f"{k} more-SFT control"):
        return
    pr.step.header(k, "more-SFT control (gold answers on the GRPO data, for the fine arm's train_runtime)")
    print(f"# writes {shown(control_config)}: {shown(pr.sft_config)} with the GRPO arms' data options: "
          + ", ".join(f"{key} {json.dumps(v)}" for key, v in data.items()))
    print(f"# --max_train_seconds: the fine arm's train_runtime, from {shown(state)}")
    text = control_config_text(pr.sft_config, data, pr.read)
    if not pr.dry and (not control_config.is_file() or control_config.read_text(encoding="utf-8") != text):
        control_config.parent.mkdir(parents=True, exist_ok=True)
        control_config.write_text(text, encoding="utf-8")
    pr.step.run("more-SFT control", cmd, stage=f"{k} more-SFT control")
