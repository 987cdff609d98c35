"""recipes/proof.py's training stages: 1 the official subset linked into OUT/official, 2 the SFT warm-up, (with a
`start:` section) the start, a fixed-step SFT from the warm-up that the rest trains from, then the GRPO arms (one per
accuracy reward, or named arms with their own options), and (with a `control:` section) the more-SFT control for
one arm's train_runtime (control: follows, default the fine arm)."""
from __future__ import annotations

import json
import os
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

from common.errors import TaseError
from recipes.proof_config import HERE, START_DATA, control_follows, control_steps
from recipes.proof_inputs import Proof, config_reader, continued_options, flags, shown
from rewards.levels import accuracy_reward_name


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
    """The subset stage: the official files whole, with the release's ids."""
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
    """The sft stage, the warm-up; (the start: stage_start); the grpo stage, the arms from the warm-up (or the
    start): same config, seed, data and steps, only the accuracy reward differing, unless a named arm sets options
    of its own (over grpo.options; never the data)."""
    cfg, out, step = pr.cfg, pr.out, pr.step
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(pr.sft_config), *flags(cfg["sft"]["options"]),
           "--exclude", pr.guard, "--output_dir", shown(out / "sft"),
           "--resume_from_checkpoint", "true"]  # a killed run continues
    if not pr.skip(2, "SFT warm-up", out / "sft" / "model.safetensors", cmd, "2 SFT warm-up"):
        step(2, "SFT warm-up", cmd, stage="2 SFT warm-up")
    if pr.start:
        stage_start(pr)
    k = pr.k("grpo")
    for name, arm in pr.arms.items():
        reward = accuracy_reward_name(arm.level)  # the arm's accuracy reward, named by rewards/levels.py
        cmd = [pr.py, shown(HERE / "grpo.py"), "--config", shown(pr.grpo_config), "--model_name_or_path",
               shown(pr.origin), "--exclude", pr.guard, "--output_dir", shown(out / name), "--reward_funcs",
               reward, *cfg["grpo"]["reward_funcs"], *flags(arm.grpo_options(cfg)),
               "--resume_from_checkpoint", "true"]
        if not pr.skip(k, f"GRPO {name}", out / name / "model.safetensors", cmd, f"{k} GRPO {name}"):
            step(k, f"GRPO {name} ({reward} + {' + '.join(cfg['grpo']['reward_funcs'])})", cmd,
                 stage=f"{k} GRPO {name}")


def control_config_text(sft_config: Path, data: dict[str, Any], read: Callable[[str | Path], Any] | None = None,
                        what: str = "the GRPO arms' data options") -> str:
    """The control's (or the start's) recipe config: the sft recipe config's YAML (through `read`: the proof's
    reader has it already) with every data option replaced by `data` (the GRPO arms', or the start's), None written
    as null: an unset option (max_len, subtasks) cannot be given as a flag. `what` names the data in its header."""
    import yaml

    recipe = {**((read or config_reader())(sft_config) or {}), **data}
    return (f"# written by recipes/proof.py: {shown(sft_config)} with {what}\n"
            + yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))


def continued_sft(pr: Proof, k: int, section: dict[str, Any], name: str, title: str, config: Path,
                  data: dict[str, Any], what: str, source: Path, folder: Path, budget: list[str],
                  notes: list[str]) -> None:
    """Step k (`name`; `title` in full): sft_warmup.py continuing the model `source` with gold answers, the warm-up
    or the start stage before (a start stage) or what the arms train from (the control): --config `config`, written
    now as the sft recipe config with `data` (control_config_text), then the sft options but data and model and the
    section's own options (continued_options), then `budget` (the control's --max_train_seconds). Skipped when its
    model exists; the config is written only when it changes."""
    done = folder / "model.safetensors"
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(config), "--model_name_or_path",
           shown(source), *flags(continued_options(pr.cfg, section)), *budget, "--exclude", pr.guard,
           "--output_dir", shown(folder), "--resume_from_checkpoint", "true"]
    if pr.skip(k, name, done, cmd, f"{k} {name}"):
        return
    pr.step.header(k, title)
    print(f"# writes {shown(config)}: {shown(pr.sft_config)} with {what}: "
          + ", ".join(f"{key} {json.dumps(v)}" for key, v in data.items()))
    for line in notes:
        print(line)
    text = control_config_text(pr.sft_config, data, pr.read, what)
    if not pr.dry and (not config.is_file() or config.read_text(encoding="utf-8") != text):
        config.parent.mkdir(parents=True, exist_ok=True)
        config.write_text(text, encoding="utf-8")
    pr.step.run(name, cmd, stage=f"{k} {name}")


def stage_start(pr: Proof) -> None:
    """The start (a `start:` section): sft_warmup.py from the warm-up with gold answers on the GRPO arms' data drawn
    with start: synth_seed (and its num_train_examples, skip_examples where given; OUT/start_config.yaml), for the
    steps its options give (e.g. max_steps; no time budget). Output OUT/start: the GRPO arms and the control train
    from it, and the comparisons measure them against it (issue 49: SFT then GRPO). With a list of sections, each
    stage (OUT/start1, ..., OUT/start: start_stages) trains from the one before, the first from the warm-up. Their
    prompts are training sets of the sets stage, so the held-out guard covers them."""
    source, previous = pr.out / "sft", "the warm-up"
    for name, sec in pr.starts:
        own = [k for k in START_DATA if k in sec]
        rows = ", ".join(f"{k} {sec[k]}" for k in own)
        continued_sft(pr, pr.k("start"), sec, name, f"{name} (gold answers on the GRPO data with {rows}, "
                      f"from {previous})", pr.out / f"{name}_config.yaml", pr.data[name],
                      f"the GRPO arms' data options, {rows} ({name}: {', '.join(own)})", source, pr.out / name, [],
                      [])
        source, previous = pr.out / name, name


def train_runtime(run: Path) -> float:
    """A finished run's training wall time: the `train_runtime` the Trainer logs when train() returns, kept in
    the log_history of the trainer_state.json both recipes save. A resumed run's covers its last invocation
    only. Missing or unreadable: one line (the control needs it to train for as long); `run`'s folder name is the
    arm's name."""
    state, arm = run / "trainer_state.json", run.name
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history") or []
    except (OSError, ValueError, AttributeError, RecursionError) as e:
        raise TaseError(f"{shown(state)}: cannot read the {arm} arm's train_runtime "
                        f"({getattr(e, 'strerror', None) or e}); the control trains for as long as the {arm} arm did")
    times = [h["train_runtime"] for h in history
             if isinstance(h, dict) and isinstance(h.get("train_runtime"), (int, float))]
    if not times or not times[-1] > 0:
        raise TaseError(f"{shown(state)}: no train_runtime in its log_history (did the {arm} arm finish?); the control "
             f"trains for as long as the {arm} arm did")
    return float(times[-1])


def stage_control(pr: Proof) -> None:
    """The control stage, the more-SFT control: sft_warmup.py from the warm-up (or the start) with gold answers on
    the GRPO arms' data, for --max_train_seconds = the followed arm's train_runtime (control: follows, default
    fine): "GRPO vs more supervised data" at equal training time; or, with control: steps, for that fixed step
    count (--max_steps, no time budget), so that it reproduces on any machine. Its --config is
    OUT/control_config.yaml, the sft recipe config with every data option set to the GRPO arms' (the grpo config's,
    then grpo.options; an unset one as null, which no flag can say); then the sft options but data and model, then
    control.options. Its prompts are the GRPO arms', so the held-out guard (the sets stage) covers them."""
    out, arm, steps = pr.out, control_follows(pr.cfg), control_steps(pr.cfg)
    if steps is not None:  # control: steps, a fixed step count that reproduces on any machine
        length, budget = f"{steps} steps", ["--max_steps", str(steps)]
        note = f"# --max_steps {steps} (control: steps): a fixed step count, no time budget"
    else:
        state, done = out / arm / "trainer_state.json", out / "control" / "model.safetensors"
        if not state.is_file() and (pr.dry or done.exists()):
            seconds = f"<train_runtime of {shown(state)}>"  # read once the followed arm has trained
        else:
            seconds = f"{train_runtime(out / arm):g}"
        length, budget = f"for the {arm} arm's train_runtime", ["--max_train_seconds", seconds]
        note = f"# --max_train_seconds: the {arm} arm's train_runtime, from {shown(state)}"
    continued_sft(pr, pr.k("control"), pr.cfg["control"], "more-SFT control",
                  f"more-SFT control (gold answers on the GRPO data, {length})", out / "control_config.yaml",
                  pr.data["grpo"], "the GRPO arms' data options", pr.origin, out / "control", budget, [note])
