"""Python side of bench/gpu_smoke.sh (the GPU smoke test of the recipes' CUDA path; docs/training.md).

    python bench/gpu_smoke.py preflight                          # CPU: can this Python write the assets?
    python bench/gpu_smoke.py assets DIR [--rows 64]             # CPU: tiny random Llama + training file
    python bench/gpu_smoke.py wheels --list L --folder W [--lock requirements.lock] [--names]
    python bench/gpu_smoke.py step [--record FILE] [--modules FILE] -- (SCRIPT.py | -m MODULE) [ARGS...]
    python bench/gpu_smoke.py env --out FILE [--list L]         # GPU name, torch/CUDA and package versions
    python bench/gpu_smoke.py check-load RUN_DIR --like MODEL  # saved weights load whole (ZeRO-3 gather)
    python bench/gpu_smoke.py summary --steps TSV --env FILE --out FILE

Nothing here imports torch at module level: `wheels` and `summary` run in a fraction of a second (the shell
script rewrites the summary after every step, so a run cut short by its time limit still leaves one), and
the GPU machine has no network, so everything the steps read was made on the CPU beforehand (`assets`).
"""
from __future__ import annotations

import argparse
import json
import os
import re
import sys
import time
from pathlib import Path
from typing import Any

ROOT = Path(__file__).resolve().parents[1]


def fail(msg: str) -> None:
    """Bad input: one line on stderr, exit 2 (the project's rule for every entry point)."""
    print(f"error: {msg}", file=sys.stderr)
    raise SystemExit(2)


# ---------------------------------------------------------------------------------------------------- assets
def make_assets(out: Path, rows: int = 64, tasks: tuple[str, ...] = ("all",), langs: tuple[str, ...] = ("all",),
                seed: int = 0) -> dict[str, Any]:
    """A tiny random Llama (bf16 safetensors) with the real SmolLM2 tokenizer, as tests/test_recipes.py builds
    it, and `rows` training records drawn by the recipes' own data path (all tasks x en/zh/ko, short), written
    as the JSONL files that `--train_data` and `eval run --data` read (train, sft, eval): the GPU machine has
    no synth resources."""
    import torch
    from transformers import AutoTokenizer, LlamaConfig, LlamaForCausalLM

    from common.models import resolve_model
    from recipes.shared.config import DataArgs
    from recipes.shared.data import iter_records

    tok = AutoTokenizer.from_pretrained(resolve_model("default"))
    cfg = LlamaConfig(vocab_size=len(tok), hidden_size=64, intermediate_size=128, num_hidden_layers=2,
                      num_attention_heads=4, num_key_value_heads=2, max_position_embeddings=2048,
                      tie_word_embeddings=True, bos_token_id=tok.bos_token_id, eos_token_id=tok.eos_token_id,
                      pad_token_id=tok.pad_token_id)
    torch.manual_seed(seed)
    model_dir = out / "model"
    LlamaForCausalLM(cfg).to(torch.bfloat16).save_pretrained(model_dir)
    tok.save_pretrained(model_dir)
    args = DataArgs(tasks=list(tasks), langs=list(langs), num_train_examples=rows, max_len=8, synth_seed=4242)
    records = list(iter_records(args))
    files = {"train": records, "eval": records[:32],
             # the SFT warm-up writes a LENGTH row's gold completion from synth's corpus (wordfreq & co.,
             # not on the GPU machine): its file leaves those rows out
             "sft": [r for r in records if r["type"] != "LENGTH"]}
    for name, rows_ in files.items():
        path = out / "data" / f"{name}.jsonl"
        path.parent.mkdir(parents=True, exist_ok=True)
        tmp = path.with_suffix(".tmp")
        tmp.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows_), encoding="utf-8")
        tmp.replace(path)
    return {"model": str(model_dir), **{name: len(rows_) for name, rows_ in files.items()},
            "tasks": sorted({r["task"] for r in records}), "langs": sorted({r["lang"] for r in records})}


def assets_problem() -> str | None:
    """Why this Python cannot write the prepared model and data, in one line, or None: `assets` needs torch and
    transformers (the project's environment: make install's .venv) and GNU Unifont (dot_matrix rows). Checked
    before --prepare downloads anything, so a missing piece is one line at once, not a traceback minutes later."""
    import importlib.util

    missing = [m for m in ("torch", "transformers", "yaml") if importlib.util.find_spec(m) is None]
    if missing:
        return (f"{sys.executable} has no {', '.join(missing)}: --prepare writes the model and data with the project's "
                "environment (make install creates .venv), or set PYTHON to a Python that has them")
    from common.errors import TaseError

    try:
        from synth.structural.glyphs import unifont_path

        unifont_path()
    except TaseError as e:
        return str(e)
    return None


# ---------------------------------------------------------------------------------------------------- wheels
def norm(name: str) -> str:
    """PEP 503 normalized project name (wheel files spell it with underscores)."""
    return re.sub(r"[-_.]+", "-", name).lower()


def read_list(path: Path) -> list[tuple[str, str, str]]:
    """bench/gpu_smoke_wheels.txt as (kind, name, version-or-spec): `carry NAME==VERSION` (a wheel in the
    prepared folder, installed on the GPU machine), `image NAME[>=MIN]` (the device image has it) or
    `omit NAME` (a project dependency the smoke test does without, the line's comment says why)."""
    out = []
    try:
        text = path.read_text(encoding="utf-8")
    except OSError as e:
        fail(f"{path}: cannot read ({e.strerror})")
    for n, line in enumerate(text.splitlines(), 1):
        line = line.split("#", 1)[0].strip()
        if not line:
            continue
        m = re.fullmatch(r"(carry|image|omit)\s+([A-Za-z0-9][A-Za-z0-9._-]*)\s*((?:==|>=)\s*\S+)?", line)
        if not m or (m[1] == "carry") != (m[3] or "").startswith("==") or (m[1] == "omit" and m[3]):
            fail(f"{path}:{n}: expected 'carry NAME==VERSION', 'image NAME[>=MIN]' or 'omit NAME', got {line!r}")
        out.append((m[1], m[2], (m[3] or "").replace(" ", "")))
    return out


def lock_versions(lock: Path) -> dict[str, str]:
    pins = {}
    for line in lock.read_text(encoding="utf-8").splitlines():
        if "==" in line and not line.startswith("#"):
            name, ver = line.strip().split("==", 1)
            pins[norm(name)] = ver
    return pins


def wheel_index(folder: Path) -> dict[str, list[tuple[str, Path]]]:
    """normalized name -> [(version, file)] of every wheel in `folder`."""
    found: dict[str, list[tuple[str, Path]]] = {}
    for w in sorted(folder.glob("*.whl")):
        parts = w.name[:-4].split("-")
        if len(parts) >= 5:
            found.setdefault(norm(parts[0]), []).append((parts[1], w.resolve()))
    return found


def wheel_problem(path: Path) -> str | None:
    """Why a wheel file is not whole, or None: a wheel is a zip whose central directory is at its end (a download
    cut short has none) and whose members carry CRCs (testzip reads them all: about a second for the carried set)."""
    import zipfile

    try:
        with zipfile.ZipFile(path) as z:
            bad = z.testzip()
    except (zipfile.BadZipFile, EOFError, OSError, ValueError) as e:
        return f"{path.name} is not a whole wheel ({path.stat().st_size if path.exists() else 0} bytes: {e})"
    return f"{path.name}: {bad} fails its CRC check (a corrupt download)" if bad else None


def resolve_wheels(entries: list[tuple[str, str, str]], folder: Path | None,
                   lock: dict[str, str] | None) -> tuple[list[Path], list[str]]:
    """The wheel files to install for the `carry` entries, and a problem line for each one that does not
    resolve: no such wheel in the folder, another version there, or a pin that disagrees with the lock."""
    problems: list[str] = []
    files: list[Path] = []
    have = wheel_index(folder) if folder else {}
    for kind, name, spec in entries:
        if kind != "carry":
            continue
        want = spec[2:]
        if lock is not None and norm(name) in lock and lock[norm(name)] != want:
            problems.append(f"{name}: list pins {want}, requirements.lock has {lock[norm(name)]}")
        if folder is None:
            continue
        match = [f for v, f in have.get(norm(name), []) if v == want]
        if len(match) == 1:
            why = wheel_problem(match[0])
            if why:
                problems.append(f"{name}=={want}: {why}")
            files.append(match[0])
        elif match:  # pip installs one; two (say cp311 and cp312 builds) stop the whole install
            problems.append(f"{name}=={want}: {len(match)} wheels in {folder} ({', '.join(f.name for f in match)}; "
                            "prepare one Python version per folder)")
        elif have.get(norm(name)):
            problems.append(f"{name}=={want}: {folder} has {', '.join(f.name for _, f in have[norm(name)])}")
        else:
            problems.append(f"{name}=={want}: no wheel in {folder}")
    return files, problems


def cmd_wheels(a: argparse.Namespace) -> int:
    entries = read_list(a.list)
    if a.names:  # for `pip download`: NAME==VERSION of every carried package (deepspeed is built, not fetched)
        print("\n".join(f"{n}{s}" for k, n, s in entries if k == "carry"))
        return 0
    if a.folder is not None and not a.folder.is_dir():
        fail(f"{a.folder}: no such folder (run bash bench/gpu_smoke.sh --prepare first)")
    files, problems = resolve_wheels(entries, a.folder, lock_versions(a.lock) if a.lock else None)
    if problems:
        fail(f"{a.list.name}: {len(problems)} carried package(s) do not resolve: {'; '.join(problems)} "
             "(rerun bash bench/gpu_smoke.sh --prepare; carried pins follow requirements.lock)")
    for f in files:
        print(f)
    return 0


# ---------------------------------------------------------------------------------------------------- step
def peak_record(path: str, modules: str | None, status: int) -> None:
    """Peak GPU memory of this process (torch's allocator, every device it touched) and its exit status,
    written by rank 0 only (later ranks add .rankN); optionally the top-level modules it imported."""
    rank = int(os.environ.get("RANK", "0") or 0)
    target = path if rank == 0 else f"{path}.rank{rank}"
    rec: dict[str, Any] = {"status": status, "peak_gpu_mem_bytes": None, "peak_gpu_reserved_bytes": None}
    torch = sys.modules.get("torch")
    try:
        if torch is not None and torch.cuda.is_initialized():
            devs = range(torch.cuda.device_count())
            rec["peak_gpu_mem_bytes"] = max(torch.cuda.max_memory_allocated(d) for d in devs)
            rec["peak_gpu_reserved_bytes"] = max(torch.cuda.max_memory_reserved(d) for d in devs)
    except Exception as e:  # noqa: BLE001  (a broken CUDA context must not hide the step's own result)
        rec["peak_error"] = f"{type(e).__name__}: {e}"
    Path(target).write_text(json.dumps(rec) + "\n", encoding="utf-8")
    if modules:
        with open(modules if rank == 0 else f"{modules}.rank{rank}", "a", encoding="utf-8") as f:
            f.write("".join(sorted({m.split(".")[0] + "\n" for m in list(sys.modules) if m})))


def hide_unlisted(list_path: Path) -> list[str]:
    """CPU rehearsal of the GPU machine's environment: every installed package that the wheel list neither
    carries nor expects from the image becomes unfindable (import fails, `find_spec` is None as if it were
    not installed, so TRL and transformers take their "not available" branches). A step that still runs
    this way needs nothing beyond the list. Returns the hidden top-level module names."""
    from importlib import metadata
    from importlib.machinery import PathFinder

    allowed = {norm(n) for _, n, _ in read_list(list_path)} | {"tase-grpo", "pip", "setuptools"}
    allowed |= {norm(n) for n in os.environ.get("GPU_SMOKE_IMAGE_EXTRA", "").split(",") if n}
    hidden = sorted(top for top, dists in metadata.packages_distributions().items()
                    if not any(norm(d) in allowed for d in dists) and top not in sys.stdlib_module_names)

    import site
    import sysconfig

    installed = {os.path.realpath(p) for p in [*site.getsitepackages(), sysconfig.get_paths()["purelib"],
                                              sysconfig.get_paths()["platlib"]]}

    class HiddenFinder(PathFinder):
        """Top-level names of hidden packages are not looked up in site-packages; other folders on sys.path
        (setuptools' vendored copies, the repository) still are."""

        @classmethod
        def find_spec(cls, name, path=None, target=None):  # type: ignore[override]
            if path is None and name in blocked:
                path = [p for p in sys.path if os.path.realpath(p or ".") not in installed]
            return PathFinder.find_spec(name, path, target)

    blocked = set(hidden)
    sys.meta_path[:] = [HiddenFinder if f is PathFinder else f for f in sys.meta_path]
    for name in [m for m in sys.modules if m.partition(".")[0] in blocked]:
        del sys.modules[name]
    return hidden


def cmd_step(a: argparse.Namespace, rest: list[str]) -> int:
    """Run a recipe script or `-m module` in this process (as `python X` would) and record its peak GPU
    memory on the way out, whatever the exit: accelerate launches this file in place of the recipe."""
    import runpy

    if not rest:
        fail("step: nothing to run (expected -- SCRIPT.py ARGS or -- -m MODULE ARGS)")
    if not a.record:
        fail("step: no --record FILE and GPU_SMOKE_RECORD is unset (gpu_smoke.sh's step sets it)")
    if os.environ.get("GPU_SMOKE_IMAGE_SIM"):
        hide_unlisted(Path(os.environ["GPU_SMOKE_IMAGE_SIM"]))
    status = 1
    try:
        if rest[0] == "-m":
            if len(rest) < 2:
                fail("step: -m needs a module name")
            sys.argv = [rest[1], *rest[2:]]
            sys.path[0] = os.getcwd()  # what `python -m` puts first (this wrapper's own folder was there)
            runpy.run_module(rest[1], run_name="__main__", alter_sys=True)
        else:
            script = Path(rest[0])
            sys.argv = [str(script), *rest[1:]]
            sys.path[0] = str(script.resolve().parent)  # as `python recipes/x.py` puts recipes/ first, not bench/
            runpy.run_path(str(script), run_name="__main__")
        status = 0
    except SystemExit as e:
        status = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)
        if e.code is not None and not isinstance(e.code, int):
            print(e.code, file=sys.stderr)
    finally:
        peak_record(a.record, a.modules, status)
    return status


# ---------------------------------------------------------------------------------------------------- env
def dist_version(name: str) -> str | None:
    from importlib import metadata

    try:
        return metadata.version(name)
    except metadata.PackageNotFoundError:
        return None


def cmd_env(a: argparse.Namespace) -> int:
    """What ran the smoke test: GPU, driver, torch and CUDA, and each listed package's version with where
    it came from (the image or the carried wheels); `image` entries below their minimum are problems."""
    import platform

    import torch

    info: dict[str, Any] = {"python": platform.python_version(), "torch": torch.__version__,
                            "cuda": torch.version.cuda, "cuda_available": torch.cuda.is_available(),
                            "gpu": None, "gpu_count": torch.cuda.device_count(), "packages": {}, "problems": []}
    if torch.cuda.is_available():
        p = torch.cuda.get_device_properties(0)
        info.update(gpu=torch.cuda.get_device_name(0), gpu_mem_bytes=p.total_memory,
                    capability=f"{p.major}.{p.minor}", bf16=torch.cuda.is_bf16_supported(),
                    nccl=".".join(map(str, torch.cuda.nccl.version())) if hasattr(torch.cuda, "nccl") else None)
    site = os.environ.get("GPU_SMOKE_SITE")
    if a.list:
        from packaging.version import Version

        for kind, name, spec in read_list(a.list):
            ver = dist_version(name)
            where = "missing"
            if ver is not None:
                from importlib import metadata

                loc = os.path.realpath(str(metadata.distribution(name).locate_file("")))
                where = "carried" if site and loc.startswith(os.path.realpath(site)) else "image"
            if kind == "omit":  # the steps do without it; its version is of no interest
                continue
            info["packages"][name] = {"version": ver, "from": where, "want": spec or None}
            if ver is None:
                info["problems"].append(f"{name}: not installed")
            elif spec.startswith(">=") and Version(ver) < Version(spec[2:]):
                info["problems"].append(f"{name} {ver} < {spec[2:]} (needs a carried wheel)")
            elif spec.startswith("==") and ver != spec[2:]:
                info["problems"].append(f"{name} {ver} is imported, not the carried {spec[2:]}")
    Path(a.out).write_text(json.dumps(info, indent=1) + "\n", encoding="utf-8")
    print(json.dumps({k: info[k] for k in ("gpu", "torch", "cuda", "problems")}))
    if not info["cuda_available"] and not a.cpu:
        fail(f"torch {torch.__version__} sees no CUDA device")
    if info["problems"]:
        fail("; ".join(info["problems"]))
    return 0


# ---------------------------------------------------------------------------------------------------- check-load
def cmd_check_load(a: argparse.Namespace) -> int:
    """The weights a run saved load as a whole model: every tensor of the reference model (the prepared tiny
    Llama) present with its full shape (ZeRO-3 saves 0-element placeholders when its gather is skipped),
    finite, and a forward pass on CUDA gives finite logits."""
    import torch
    from safetensors.torch import load_file
    from transformers import AutoModelForCausalLM

    run, like = Path(a.run), Path(a.like)
    files = sorted(run.glob("model*.safetensors"))
    if not files:
        fail(f"{run}: no model*.safetensors")
    saved: dict[str, Any] = {}
    for f in files:
        saved.update(load_file(str(f)))
    ref = {k: v.shape for k, v in load_file(str(like / "model.safetensors")).items()}
    bad = [f"{k}: saved {tuple(saved[k].shape)}, expected {tuple(s)}" for k, s in ref.items()
           if k in saved and saved[k].shape != s]
    missing = sorted(set(ref) - set(saved))
    if missing or bad:
        fail(f"{run}: " + "; ".join(([f"missing {', '.join(missing[:5])}"] if missing else []) + bad[:5]))
    nonfinite = [k for k, v in saved.items() if v.is_floating_point() and not torch.isfinite(v).all()]
    if nonfinite:
        fail(f"{run}: non-finite values in {', '.join(nonfinite[:5])}")
    device = "cuda" if torch.cuda.is_available() else "cpu"
    model, info = AutoModelForCausalLM.from_pretrained(run, dtype=torch.bfloat16, output_loading_info=True)
    if info.get("missing_keys") or info.get("mismatched_keys"):
        fail(f"{run}: from_pretrained reports missing {info.get('missing_keys')} mismatched "
             f"{info.get('mismatched_keys')}")
    model.to(device).eval()
    with torch.no_grad():
        logits = model(torch.tensor([[1, 2, 3, 4]], device=device)).logits
    if not torch.isfinite(logits).all():
        fail(f"{run}: forward pass gives non-finite logits")
    print(json.dumps({"run": str(run), "tensors": len(saved), "dtype": str(next(iter(saved.values())).dtype),
                      "device": device}))
    return 0


# ---------------------------------------------------------------------------------------------------- summary
def last_line(log: Path) -> str | None:
    """The error's last line: the last non-empty line of the step's log that is not a progress bar."""
    try:
        lines = log.read_text(encoding="utf-8", errors="replace").replace("\r", "\n").splitlines()
    except OSError:
        return None
    for line in reversed(lines):
        line = line.strip()
        if line and "it/s]" not in line and "s/it]" not in line:
            return line[-500:]
    return None


def step_detail(cmd: str) -> dict[str, Any]:
    """What a step's output folder shows beyond its exit status: optimizer steps and the last loss, grad_norm
    and reward (metrics.jsonl of a GRPO run, trainer_state.json of SFT), or the rows `eval run` scored; with
    `nonfinite` naming a logged loss or grad_norm that is NaN or infinite (bf16 trouble)."""
    import math

    toks = cmd.split()
    out = next((Path(toks[i + 1]) for i, t in enumerate(toks[:-1]) if t in ("--output_dir", "--out")), None)
    if out is None:
        return {}
    logs: list[dict[str, Any]] = []
    try:
        if (out / "metrics.jsonl").is_file():
            logs = [json.loads(line) for line in (out / "metrics.jsonl").read_text(encoding="utf-8").splitlines()
                    if line.strip()]
        elif (out / "trainer_state.json").is_file():
            logs = json.loads((out / "trainer_state.json").read_text(encoding="utf-8")).get("log_history", [])
        results = (json.loads((out / "results.json").read_text(encoding="utf-8"))
                   if (out / "results.json").is_file() else None)
    except (OSError, ValueError):
        return {"detail_error": f"{out}: unreadable metrics"}
    det: dict[str, Any] = {}
    steps = [entry for entry in logs if "loss" in entry]
    if steps:
        last = steps[-1]
        det.update(optimizer_steps=last.get("step"), **{k: last[k] for k in ("loss", "grad_norm", "reward",
                   "frac_reward_zero_std", "learning_rate") if k in last})
        bad = [f"{k} {e[k]} at step {e.get('step')}" for e in steps for k in ("loss", "grad_norm")
               if isinstance(e.get(k), float) and not math.isfinite(e[k])]
        if bad:
            det["nonfinite"] = "; ".join(bad[:3])
    if results is not None:
        det.update(rows=results.get("n"), complete=results.get("complete"))
    return det


def summarize(steps_tsv: Path, env_file: Path | None, started: float, budget: float) -> dict[str, Any]:
    """The summary JSON: the machine (env step), then per step its name, ok or the error's last line, wall
    seconds and peak GPU memory, in the order they ran."""
    env: dict[str, Any] = {}
    if env_file and env_file.is_file():
        env = json.loads(env_file.read_text(encoding="utf-8"))
    steps = []
    for line in steps_tsv.read_text(encoding="utf-8").splitlines() if steps_tsv.is_file() else []:
        name, rc, wall, log, record, cmd = line.split("\t", 5)
        rec: dict[str, Any] = {}
        if record and Path(record).is_file():
            rec = json.loads(Path(record).read_text(encoding="utf-8") or "{}")
        step: dict[str, Any] = {"name": name, "ok": rc == "0", "wall_s": float(wall) if wall else None,
                                "peak_gpu_mem_bytes": rec.get("peak_gpu_mem_bytes"),
                                "peak_gpu_reserved_bytes": rec.get("peak_gpu_reserved_bytes"), "cmd": cmd}
        if rc.startswith("skipped"):
            step.update(ok=False, skipped=rc.split(":", 1)[1].strip() if ":" in rc else "skipped")
        elif rc != "0":
            step["rc"] = int(rc) if rc.lstrip("-").isdigit() else rc
            step["error"] = ("timed out (step time limit)" if rc == "124" else None) or last_line(Path(log))
        detail = step_detail(cmd)
        if detail:
            step["detail"] = detail
        if detail.get("nonfinite") and step["ok"]:
            step.update(ok=False, error=f"non-finite {detail['nonfinite']}")
        if step["peak_gpu_mem_bytes"] is not None:
            step["peak_gpu_mem_mib"] = round(step["peak_gpu_mem_bytes"] / 2**20, 1)
        steps.append(step)
    return {"gpu": env.get("gpu"), "gpu_mem_bytes": env.get("gpu_mem_bytes"), "torch": env.get("torch"),
            "cuda": env.get("cuda"), "nccl": env.get("nccl"), "python": env.get("python"),
            "packages": env.get("packages"), "all_ok": bool(steps) and all(s["ok"] for s in steps),
            "wall_s": round(time.time() - started, 1), "budget_s": budget, "steps": steps}


def cmd_summary(a: argparse.Namespace) -> int:
    out = Path(a.out)
    doc = {"mode": a.mode, **summarize(Path(a.steps), Path(a.env) if a.env else None, a.started, a.budget)}
    tmp = out.with_suffix(".tmp")
    tmp.write_text(json.dumps(doc, indent=1) + "\n", encoding="utf-8")
    tmp.replace(out)
    return 0


def main(argv: list[str] | None = None) -> int:
    argv = list(sys.argv[1:] if argv is None else argv)
    rest: list[str] = []
    if "--" in argv:
        i = argv.index("--")
        argv, rest = argv[:i], argv[i + 1:]
    p = argparse.ArgumentParser(prog="bench/gpu_smoke.py", description=__doc__.split("\n\n")[0])
    p.error = lambda message: fail(message)  # type: ignore[method-assign]
    sub = p.add_subparsers(dest="cmd", required=True)
    sub.add_parser("preflight", help="can this Python write the assets (torch, transformers, GNU Unifont)?")
    s = sub.add_parser("assets")
    s.add_argument("dir", type=Path)
    s.add_argument("--rows", type=int, default=64)
    s = sub.add_parser("wheels")
    s.add_argument("--list", type=Path, default=ROOT / "bench" / "gpu_smoke_wheels.txt")
    s.add_argument("--folder", type=Path)
    s.add_argument("--lock", type=Path)
    s.add_argument("--names", action="store_true")
    s = sub.add_parser("step")
    s.add_argument("--record", default=os.environ.get("GPU_SMOKE_RECORD"),
                   help="where to write the exit status and peak GPU memory (default: $GPU_SMOKE_RECORD, set by "
                        "gpu_smoke.sh's step for each command)")
    s.add_argument("--modules")
    s = sub.add_parser("env")
    s.add_argument("--out", required=True)
    s.add_argument("--list", type=Path)
    s.add_argument("--cpu", action="store_true", help="CPU rehearsal: no CUDA is no failure")
    s = sub.add_parser("check-load")
    s.add_argument("run")
    s.add_argument("--like", required=True)
    s = sub.add_parser("summary")
    s.add_argument("--steps", required=True)
    s.add_argument("--env")
    s.add_argument("--out", required=True)
    s.add_argument("--started", type=float, default=time.time())
    s.add_argument("--budget", type=float, default=480.0)
    s.add_argument("--mode", default="gpu", choices=["gpu", "cpu-rehearsal"])
    for sp in sub.choices.values():
        sp.error = p.error  # type: ignore[method-assign]
    a = p.parse_args(argv)
    if a.cmd == "step":
        return cmd_step(a, rest)
    if rest:
        fail(f"{a.cmd}: unexpected arguments after --")
    if a.cmd == "preflight":
        why = assets_problem()
        if why:
            fail(why)
        return 0
    if a.cmd == "assets":
        if a.rows < 32:
            fail(f"--rows must be >= 32 (eval runs on 32 rows), got {a.rows}")
        why = assets_problem()
        if why:
            fail(why)
        from common.errors import TaseError

        try:
            info = make_assets(a.dir, a.rows)
        except TaseError as e:  # a synth resource missing: one line, not a traceback
            fail(str(e))
        print(json.dumps(info))
        return 0
    return {"wheels": cmd_wheels, "env": cmd_env, "check-load": cmd_check_load, "summary": cmd_summary}[a.cmd](a)


if __name__ == "__main__":
    raise SystemExit(main())
