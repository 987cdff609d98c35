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
from recipes.proof_stages.config import (
    HERE,
    RFT,
    ControlRun,
    control_follows,
    control_runs,
    control_steps,
    rft_data,
    seeded,
)
from recipes.proof_stages.inputs import Proof, config_reader, continued_options, flags, shown
from rewards.levels import accuracy_reward_name

DONE = "proof_trained.json"  # written in a training run's folder by the proof once the run's step returned 0


def trained(run: Path) -> bool:
    """Whether a training stage is done: the run said so, not merely that `model.safetensors` exists (a run killed
    inside its final save leaves one). Its step returned 0 (the proof's marker DONE, written after the recipe's
    final save), or, for a run finished before the marker, the recipes' last write: trainer_state.json at the top of
    the folder, whole, at its max_steps, after a whole model."""
    from recipes.shared.run_dir import final_state, weights_problem

    if (run / DONE).is_file():
        return True
    state = final_state(run)
    if state is None or weights_problem(run) is not None:
        return False
    planned = state.get("max_steps")
    return isinstance(planned, int) and 0 < planned <= state["global_step"]


def mark_trained(pr: Proof, run: Path, cmd: list[str]) -> None:
    """The marker of a finished training run (DONE): its command, written once its step returned 0."""
    if not pr.dry:
        (run / DONE).write_text(json.dumps({"command": cmd}, ensure_ascii=False) + "\n", encoding="utf-8")


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
                raise TaseError(f"{shown(link)} points to {link.resolve()}, not {target}; remove it or choose another "
                                "--out")
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
    step.header(1, f"official subset: {len(pr.cfg.files)} whole files linked into {shown(out / 'official')}")
    t = time.time()
    cmds = link_subset(pr.official, pr.cfg.files, out / "official", pr.dry)
    files = pr.cfg.transfer.files if pr.cfg.transfer else None
    if files:  # the untrained files of transfer:, sliced at evaluation (evaluate.py)
        print(f"# and the {len(files)} untrained files of transfer: into {shown(out / 'transfer_official')}")
        cmds += link_subset(pr.official, files, out / "transfer_official", pr.dry)
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
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(pr.sft_config), *flags(cfg.sft.options),
           "--exclude", pr.guard, "--output_dir", shown(out / "sft"),
           "--resume_from_checkpoint", "true"]  # a killed run continues
    if not pr.skip(2, "SFT warm-up", out / "sft" / DONE, cmd, "2 SFT warm-up", trained(out / "sft")):
        step(2, "SFT warm-up", cmd, stage="2 SFT warm-up")
        mark_trained(pr, out / "sft", cmd)
    if pr.start:
        stage_start(pr)


def stage_arms(pr: Proof) -> None:
    """The grpo stage of a unit (Proof.unit): its arms, from the origin (stage_train's docstring)."""
    cfg, out, step = pr.cfg, pr.out, pr.step
    k = pr.k("grpo")
    for name, arm in pr.arms.items():
        reward = accuracy_reward_name(arm.level)  # the arm's accuracy reward, named by rewards/levels.py
        options, note = arm.grpo_options(cfg), None
        if arm.lr_from is not None:  # the plain arm at the rate dynamic sampling in effect trains at
            lr = arm_learning_rate(pr, arm.lr_from)
            rate, share = lr_matched_rate(out / arm.lr_from, lr, pr.dry or trained(out / name))
            options = {**options, "learning_rate": rate}
            note = (f"# --learning_rate: {arm.lr_from}'s {lr:g} / {share}, the share of its groups with a learning "
                    f"signal (1 - mean frac_reward_zero_std of {shown(out / arm.lr_from / 'trainer_state.json')})")
        cmd = [pr.py, shown(HERE / "grpo.py"), "--config", shown(pr.grpo_config), "--model_name_or_path",
               shown(pr.origin), "--exclude", pr.guard, "--output_dir", shown(out / name), "--reward_funcs",
               reward, *cfg.grpo.reward_funcs, *flags(options), "--resume_from_checkpoint", "true"]
        if not pr.skip(k, f"GRPO {name}", out / name / DONE, cmd, f"{k} GRPO {name}", trained(out / name)):
            step.header(k, f"GRPO {name} ({reward} + {' + '.join(cfg.grpo.reward_funcs)})")
            if note:
                print(note)
            step.run(f"GRPO {name} ({reward} + {' + '.join(cfg.grpo.reward_funcs)})", cmd,
                     stage=f"{k} GRPO {name}")
            mark_trained(pr, out / name, cmd)


def arm_learning_rate(pr: Proof, name: str) -> float:
    """An arm's learning rate as the GRPO recipe's parser made it (its options over grpo options over the config)."""
    return float(pr.parsed.get(f"grpo:{name}", pr.parsed.get("grpo"))[1].learning_rate)


def logged(run: Path, key: str, what: str, why: str) -> list[float]:
    """Every number `key` has in the log_history of `run`'s trainer_state.json (both recipes save it); an unreadable
    file is one line naming `what` was read and `why` the proof needs it."""
    state = run / "trainer_state.json"
    try:
        history = json.loads(state.read_text(encoding="utf-8")).get("log_history") or []
    except (OSError, ValueError, AttributeError, RecursionError) as e:
        raise TaseError(f"{shown(state)}: cannot read the {run.name} arm's {what} "
                        f"({getattr(e, 'strerror', None) or e}); {why}") from None
    return [h[key] for h in history if isinstance(h, dict) and isinstance(h.get(key), (int, float))]


def lr_matched_rate(run: Path, lr: float, placeholder: bool) -> tuple[Any, str]:
    """The learning rate at which plain GRPO matches what dynamic sampling does to the dapo loss: that loss divides
    by the tokens of the whole generation batch, and a group whose completions all score alike adds tokens but no
    gradient; dynamic sampling fills the batch with groups that do score differently, so per token of signal it
    takes a step 1/share times larger, share = 1 - the mean frac_reward_zero_std the plain run `run` logged. Returns
    (rate, share as text); with `placeholder` and no log yet (dry run, or a finished matched arm), a placeholder."""
    state = run / "trainer_state.json"
    if placeholder and not state.is_file():
        return f"<{lr:g} / signal share of {shown(state)}>", "<its signal share>"
    zero = logged(run, "frac_reward_zero_std", "log", "the lr-matched arm takes its rate from it")
    if not zero:
        raise TaseError(f"{shown(state)}: no frac_reward_zero_std in its log_history (did the {run.name} arm log?); "
                        "the lr-matched arm takes its rate from it")
    share = 1.0 - sum(zero) / len(zero)
    if share <= 0:
        raise TaseError(f"{shown(state)}: every group of the {run.name} arm scored alike (frac_reward_zero_std 1): no "
                        "learning signal to match a rate to")
    return f"{lr / share:.6g}", f"{share:.4f}"


def control_config_text(sft_config: Path, data: dict[str, Any], read: Callable[[str | Path], Any] | None = None,
                        what: str = "the GRPO arms' data options") -> str:
    """The control's (or the start's) recipe config: the sft recipe config's YAML (through `read`: the proof's
    reader has it already) with every data option replaced by `data` (the GRPO arms', or the start's), None written
    as null: an unset option (max_len, subtasks) cannot be given as a flag. `what` names the data in its header."""
    import yaml

    recipe = {**((read or config_reader())(sft_config) or {}), **data}
    return (f"# written by recipes/proof.py: {shown(sft_config)} with {what}\n"
            + yaml.safe_dump(recipe, sort_keys=False, allow_unicode=True))


def continued_sft(pr: Proof, k: int, options: dict[str, Any], name: str, title: str, config: Path,
                  data: dict[str, Any], what: str, source: Path, folder: Path, budget: list[str],
                  notes: list[str]) -> None:
    """Step k (`name`; `title` in full): sft_warmup.py continuing the model `source` with gold answers, the warm-up
    or the start stage before (a start stage) or what the arms train from (the control): --config `config`, written
    now as the sft recipe config with `data` (control_config_text), then the sft options but data and model and the
    section's own `options` (continued_options), then `budget` (the control's --max_train_seconds). Skipped when the
    run finished (trained); the config is written only when it changes."""
    cmd = [pr.py, shown(HERE / "sft_warmup.py"), "--config", shown(config), "--model_name_or_path",
           shown(source), *flags(continued_options(pr.cfg, options)), *budget, "--exclude", pr.guard,
           "--output_dir", shown(folder), "--resume_from_checkpoint", "true"]
    if pr.skip(k, name, folder / DONE, cmd, f"{k} {name}", trained(folder)):
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
    mark_trained(pr, folder, cmd)


def stage_start(pr: Proof) -> None:
    """The start (a `start:` section): sft_warmup.py from the warm-up with gold answers on the GRPO arms' data drawn
    with start: synth_seed (and its num_train_examples, skip_examples where given; OUT/start_config.yaml), for the
    steps its options give (e.g. max_steps; no time budget). Output OUT/start: the GRPO arms and the control train
    from it, and the comparisons measure them against it (SFT then GRPO). With a list of sections, each
    stage (OUT/start1, ..., OUT/start: start_stages) trains from the one before, the first from the warm-up. Their
    prompts are training sets of the sets stage, so the held-out guard covers them."""
    source, previous = pr.out / "sft", "the warm-up"
    for st in pr.starts:
        name, own = st.name, list(st.data)
        rows = ", ".join(f"{k} {v}" for k, v in st.data.items())
        continued_sft(pr, pr.k("start"), st.options, name, f"{name} (gold answers on the GRPO data with {rows}, "
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
    times = logged(run, "train_runtime", "train_runtime", f"the control trains for as long as the {arm} arm did")
    if not times or not times[-1] > 0:
        raise TaseError(f"{shown(state)}: no train_runtime in its log_history (did the {arm} arm finish?); the control "
             f"trains for as long as the {arm} arm did")
    return float(times[-1])


def control_budget(pr: Proof, run: ControlRun, done: bool) -> tuple[str, list[str], str]:
    """How long a control run trains: control: steps (--max_steps), else the followed arm's (of the run's seed)
    train_runtime (--max_train_seconds); returns (words, flags, note line)."""
    out, arm, steps = pr.out, seeded(control_follows(pr.cfg), run.seed), control_steps(pr.cfg)
    if steps is not None:  # control: steps, a fixed step count that reproduces on any machine
        return (f"{steps} steps", ["--max_steps", str(steps)],
                f"# --max_steps {steps} (control: steps): a fixed step count, no time budget")
    state = out / arm / "trainer_state.json"
    if not state.is_file() and (pr.dry or done):
        seconds = f"<train_runtime of {shown(state)}>"  # read once the followed arm has trained
    else:
        seconds = f"{train_runtime(out / arm):g}"
    return (f"for the {arm} arm's train_runtime", ["--max_train_seconds", seconds],
            f"# --max_train_seconds: the {arm} arm's train_runtime, from {shown(state)}")


def run_options(run: ControlRun, rate: Any = None) -> dict[str, Any]:
    """A control run's own options over control.options: its sweep rate (or `rate`, the first seed's chosen one, for
    a run of control: sweep_once) and its seed (seeds:), where it has them."""
    lr = run.lr if run.lr is not None else rate
    return {**({"learning_rate": lr} if lr is not None else {}),
            **({"seed": run.seed} if run.seed is not None else {})}


def control_options(pr: Proof, run: ControlRun) -> dict[str, Any]:
    """A control run's options: control.options, then its own (run_options)."""
    from recipes.proof_stages.selection import first_seed_rate

    assert pr.cfg.control is not None
    return {**pr.cfg.control.options, **run_options(run, first_seed_rate(pr, run.rate_of) if run.rate_of else None)}


def stage_control(pr: Proof) -> None:
    """The control stage, the more-SFT control: sft_warmup.py from the warm-up (or the start) with gold answers on
    the GRPO arms' data, for --max_train_seconds = the followed arm's train_runtime (control: follows, default
    fine): "GRPO vs more supervised data" at equal training time; or, with control: steps, for that fixed step
    count (--max_steps, no time budget), so that it reproduces on any machine. Its --config is
    OUT/control_config.yaml, the sft recipe config with every data option set to the GRPO arms' (the grpo config's,
    then grpo.options; an unset one as null, which no flag can say); then the sft options but data and model, then
    control.options. Its prompts are the GRPO arms', so the held-out guard (the sets stage) covers them. With
    control: learning_rates and/or seeds:, one run per rate and seed (control_runs), each its rate and seed as
    options of its own."""
    out = pr.out
    for run in control_runs(pr.cfg):
        length, budget, note = control_budget(pr, run, trained(out / run.folder))
        name = "more-SFT control" + ("" if run.folder == "control" else f" {run.folder}")
        continued_sft(pr, pr.k("control"), control_options(pr, run), name,
                      f"{name} (gold answers on the GRPO data, {length})", out / "control_config.yaml",
                      pr.data["grpo"], "the GRPO arms' data options", pr.origin, out / run.folder, budget, [note])


def rft_budget(pr: Proof) -> tuple[int, int, int]:
    """(completions, prompts, samples per prompt) of the RFT control: as many completions as the followed GRPO arm
    generated (its schedule: a generation batch of generation_batch_size completions every steps_per_generation x
    num_iterations micro-steps of max_steps x gradient_accumulation_steps; dynamic sampling's re-draws not
    counted), on its first prompts, num_generations samples per prompt (more per prompt when the GRPO data has
    fewer prompts than that needs)."""
    import math
    import re

    arm = control_follows(pr.cfg)  # its parsed options under any seed's name (the schedule is the same on each)
    g = next((v for key, v in pr.parsed.items() if re.fullmatch(rf"grpo:{re.escape(arm)}(_s\d+)?", key)),
             pr.parsed["grpo"])[1]
    events = math.ceil(g.max_steps * g.gradient_accumulation_steps / (g.steps_per_generation * g.num_iterations))
    completions = events * g.generation_batch_size
    prompts = min(math.ceil(completions / g.num_generations), pr.data["grpo"]["num_train_examples"])
    return completions, prompts, math.ceil(completions / prompts)


def rft_records(samples: Path, prompts: Path, dest: Path, dry: bool) -> int:
    """OUT/rft[_s<seed>]_data.jsonl: one training record per strict-correct sample of `samples` (an eval run's
    samples.jsonl on `prompts`), the prompt file's record with the sample as its `completion` (sft_warmup.py trains
    on a record's own completion); rewritten only when it changes. Returns the rows; with none it is written empty
    (rft_empty: that seed's RFT control is the model it would train from, as SFT on no rows would leave it)."""
    if dry:
        return 0
    recs = {}
    with prompts.open(encoding="utf-8") as fh:
        for line in fh:
            r = json.loads(line)
            recs[r["id"]] = r
    rows = []
    with samples.open(encoding="utf-8") as fh:
        for line in fh:
            x = json.loads(line)
            if x.get("strict") and x["id"] in recs:
                rows.append(json.dumps({**recs[x["id"]], "completion": x["completion"]}, ensure_ascii=False) + "\n")
    text = "".join(rows)
    if not dest.is_file() or dest.read_text(encoding="utf-8") != text:
        dest.write_text(text, encoding="utf-8")
    return len(rows)


def stage_rft(pr: Proof) -> None:
    """The rft stage (control: rft), rejection-sampling SFT: the GRPO arms' first prompts (OUT/data/rft_prompts.jsonl,
    `python -m synth` as the GRPO data), sampled by the model the arms train from with the GRPO config's
    temperature and completion length, as many completions as the followed arm generated (rft_budget); the
    strict-correct ones (rft_records) are SFT data for sft_warmup.py from that model, with the control's options
    and length (control_budget), one run per seed and rate as the control. Its prompts are the GRPO arms', so the
    held-out guard covers them."""
    from recipes.proof_stages.evaluate import training_set_cmds

    out, k, ev = pr.out, pr.k("rft"), pr.cfg.eval
    completions, n_prompts, per = rft_budget(pr)
    g = pr.parsed["grpo"][1]
    cmds, files = training_set_cmds(pr.py, "rft_prompts", {**pr.data["grpo"], "num_train_examples": n_prompts},
                                    pr.guard, out / "data")
    (prompts, cmd), = cmds
    later = pr.cfg.seeds is not None and pr.cfg.seeds[0] != pr.cfg.first_seed  # the first seed's unit wrote them
    if pr.dry and later and not prompts.exists():  # the plan shows their command once, in the first seed's unit
        pr.step.header(k, f"RFT prompts: {shown(prompts)}, written in the first seed's unit")
    elif not pr.skip(k, "RFT prompts", prompts, cmd, f"{k} RFT"):
        pr.step.header(k, f"RFT prompts: the GRPO arms' first {n_prompts} ({completions} completions as the "
                          f"{control_follows(pr.cfg)} arm generated, {per} per prompt)")
        pr.step.run("RFT prompts", cmd, stage=f"{k} RFT")
    for s in dict.fromkeys(r.seed for r in control_runs(pr.cfg, RFT)):
        samples = out / seeded("rft_samples", s)
        cmd = [pr.py, "-m", "eval", "run", "--model", shown(pr.origin), "--data", shown(prompts), "--out",
               shown(samples), "--backend", pr.backend, "--num-samples", str(per), "--temperature",
               f"{g.temperature:g}", "--max-new-tokens", str(g.max_completion_length), "--seed", str(s or 0),
               "--no-progress"]
        cmd += ["--dtype", ev.dtype] if ev.dtype else []
        data = rft_data(out, s)
        if not pr.skip(k, f"RFT samples {samples.name}", samples / "results.json", cmd, f"{k} RFT"):
            pr.step(k, f"RFT samples: {per} per prompt from {shown(pr.origin)} (temperature {g.temperature:g}; "
                       "resumes)", cmd, stage=f"{k} RFT")
        print(f"# writes {shown(data)}: the strict-correct samples of {shown(samples / 'samples.jsonl')}, each its "
              "prompt's record with the sample as completion")
        rows = rft_records(samples / "samples.jsonl", prompts, data, pr.dry)
        if not pr.dry:
            print(f"   {rows} strict-correct samples of {n_prompts * per}")
        if not pr.dry and not rows:
            print(f"# no sample is strict-correct: {seeded(RFT, s)} is {shown(pr.origin)} (SFT on no rows changes "
                  "nothing); its runs are not trained, selected or evaluated apart")
            continue
        for run in (r for r in control_runs(pr.cfg, RFT) if r.seed == s):
            length, budget, note = control_budget(pr, run, trained(out / run.folder))
            continued_sft(pr, k, control_options(pr, run), f"RFT {run.folder}",
                          f"RFT {run.folder} (its own strict-correct samples, {length})",
                          out / f"{seeded(RFT, s)}_config.yaml",
                          {**pr.data["grpo"], "train_data": shown(data), "num_train_examples": completions},
                          "the GRPO arms' data options, train_data its strict-correct samples", pr.origin,
                          out / run.folder, budget, [note])
