"""Every shell command in the documentation works as written (issue 66).

Each command in a fenced ```bash/```sh block of DOCS is either run here (RUNS: in one temporary folder, in the
order the table gives, with tiny sizes, and checked against what the docs say it prints), or listed in
tests/docs_commands_skip.yaml with the reason it cannot run in CI (a GPU, a SLURM cluster, the network, more than a
minute). A command in neither fails `test_every_documented_command_is_run_or_listed`, and so does an entry of either
list that no longer appears in the docs: both lists stay true as the docs change.

A run's command is the documented one with the listed rewrites only: `/path/to/Tase` is the fixture sample of the
official release, `default` (the model) the session's tiny random Llama where a real model adds nothing but time,
and sizes (`-n`, `--limit`, `--max_steps`) small. The commands share one folder, so a path the docs evaluate must be
one an earlier command made (runs/grpo_smollm2_cpu, models/tuned, heldout.jsonl, runs/rob/base ...).

A plain `python -m MODULE ...` or `python SCRIPT ...` runs in one shared interpreter (tests/docs_worker.py: runpy,
as `python` would, argv, folder and environment restored after each), so torch and transformers are imported once
rather than once per command; a shell line (bash, accelerate, a pipe) and a command whose output must be free of
library warnings (`quiet`) run in a fresh interpreter of their own.
"""
from __future__ import annotations

import json
import os
import re
import shlex
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parents[1]
DOCS = ("README.md", "docs/data.md", "docs/training.md", "docs/evaluation.md")
SKIP_FILE = ROOT / "tests" / "docs_commands_skip.yaml"
SKIP_KINDS = ("gpu", "slurm", "network", "slow", "release", "extra", "tool")  # why CI cannot run it (see the file)
FENCE = re.compile(r"^```(bash|sh|shell)\s*$")


def _strip_comment(line: str) -> str:
    """The line without a trailing shell comment (`#` at a word start, outside quotes)."""
    quote = ""
    for i, ch in enumerate(line):
        if quote:
            quote = "" if ch == quote else quote
        elif ch in "'\"":
            quote = ch
        elif ch == "#" and (i == 0 or line[i - 1].isspace()):
            return line[:i].rstrip()
    return line.rstrip()


def commands(text: str) -> list[str]:
    """The shell commands of a Markdown text's bash/sh blocks: backslash continuations joined, comments dropped,
    runs of spaces collapsed (the key both lists use)."""
    out: list[str] = []
    block, pending = False, ""
    for line in text.splitlines():
        if not block:
            block = bool(FENCE.match(line.strip()))
            continue
        if line.strip().startswith("```"):
            block, pending = False, ""
            continue
        body = _strip_comment(line)
        cont = body.endswith("\\")
        pending += " " + (body[:-1] if cont else body)
        if not cont:
            cmd = " ".join(pending.split())
            pending = ""
            if cmd:
                out.append(cmd)
    return out


def documented() -> dict[str, list[str]]:
    """Each documented command and the files that show it."""
    seen: dict[str, list[str]] = {}
    for doc in DOCS:
        for cmd in commands((ROOT / doc).read_text(encoding="utf-8")):
            seen.setdefault(cmd, []).append(doc)
    return seen


def skip_list() -> dict[str, str]:
    entries = yaml.safe_load(SKIP_FILE.read_text(encoding="utf-8")) or []
    return {" ".join(e["command"].split()): e["why"] for e in entries}


@dataclass(frozen=True)
class Run:
    """How the doc test runs one documented command: `subs` are (old, new) text replacements ({official} and
    {tiny} filled in at run time), `expect` a regular expression its output must hold, `makes` the files or folders
    it must leave (relative to the shared folder; a file: with `lines` lines where given), `code` its exit status."""

    subs: tuple[tuple[str, str], ...] = ()
    expect: str = ""
    makes: tuple[str, ...] = ()
    lines: int | None = None
    code: int = 0
    quiet: bool = False  # no library warning in its output (common/process.py QUIET; --verbose shows them)


OFFICIAL = ("/path/to/Tase", "{official}")
TINY_GRPO = ("--max_steps 2 --save_steps 2 --per_device_train_batch_size 2 --num_generations 2 "
             "--max_completion_length 8 --num_train_examples 8 --report_to none")
HF_TINY = "--backend hf --max-new-tokens 4"

# In running order: a later command reads what an earlier one wrote.
RUNS: dict[str, Run] = {
    # --- synth (README "Generating data", docs/training.md "TRL's own CLI")
    "python -m synth --task all --lang all -n 200 --seed 1 --out /tmp/a.jsonl":
        Run((("-n 200", "-n 20"), ("/tmp/a.jsonl", "a.jsonl")), lines=20),
    "python -m synth --task sort_lengths --lang ko -n 1000 --seed 3 --paraphrase --out sort_ko.jsonl":
        Run((("-n 1000", "-n 5"),), lines=5),
    "python -m synth --task all --lang all -n 50000 --mixture synth/data/mixture_default.yaml "
    "--exclude official:/path/to/Tase --out train.jsonl":
        Run((("-n 50000", "-n 10"), OFFICIAL), lines=10),
    "python -m synth --task sort_lengths --lang en -n 1000 --text-source unigram --out abl.jsonl":
        Run((("-n 1000", "-n 5"),), lines=5),
    "python -m synth stats --official /path/to/Tase": Run((OFFICIAL,), r"KS"),
    "python -m synth --task all --lang en -n 2000 --format conversational --out tase_train/train.jsonl":
        Run((("-n 2000", "-n 5"),), lines=5),
    "python -m synth --task all --lang en -n 2000 --paraphrase --format conversational --out tase_train/train.jsonl":
        Run((("-n 2000", "-n 5"),), lines=5),
    "python -m synth --task execute --lang all -n 1000 --seed 0 --out execute.jsonl":
        Run((("-n 1000", "-n 25"),), lines=25),
    "python -m synth --task component_count --lang all -n 200 --seed 1 --out runs/data/count.jsonl":
        Run((("-n 200", "-n 6"),), lines=6),
    ". .venv/bin/activate": Run(),
    # --- training (README "Training", docs/training.md quick start): the one chain, tiny model, a few steps
    "python recipes/sft_warmup.py --config recipes/configs/sft_smollm2_cpu.yaml":
        Run(((".yaml", ".yaml --model_name_or_path {tiny} --max_steps 1 --per_device_train_batch_size 2 "
                       "--num_train_examples 4 --report_to none"),), r"trained 1 step ",
            ("runs/sft_smollm2_cpu/config.json",), quiet=True),
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --model_name_or_path runs/sft_smollm2_cpu":
        Run((("runs/sft_smollm2_cpu", "runs/sft_smollm2_cpu " + TINY_GRPO),), r"step 2/2 \| loss",
            ("runs/grpo_smollm2_cpu/checkpoint-2", "runs/grpo_smollm2_cpu/metrics.jsonl"), quiet=True),
    # README "Use the data with TRL's own CLI": TRL's CLI from the warm-up above (the tiny model's), on tase_train
    "trl grpo --model_name_or_path runs/sft_smollm2_cpu --dataset_name tase_train --reward_funcs "
    "rewards.trl.accuracy_fine rewards.trl.format_reward --reward_weights 1.0 0.2 --output_dir runs/trl_cli "
    "--max_steps 2 --per_device_train_batch_size 4 --num_generations 4 --max_completion_length 64 --report_to none "
    "--use_cpu true --bf16 false":
        Run((("--max_steps 2 --per_device_train_batch_size 4 --num_generations 4 --max_completion_length 64",
              "--max_steps 1 --per_device_train_batch_size 2 --num_generations 2 --max_completion_length 8 "
              "--save_strategy no --logging_steps 1"),), r"'rewards/format_reward/mean'|'rewards/format/mean'"),
    "python recipes/export.py runs/grpo_smollm2_cpu --out models/tuned":
        Run(expect=r"exported \S+ -> models/tuned", makes=("models/tuned/config.json",), quiet=True),
    "python recipes/export.py runs/grpo_smollm2_cpu --out models/tuned-gguf --gguf q8_0":
        Run(expect=r"GGUF: models/tuned-gguf/model\.gguf \(q8_0, ",
            makes=("models/tuned-gguf/model.gguf", "models/tuned-gguf/Modelfile"), quiet=True),
    "python -m synth --task sort_lengths --lang en -n 96 --seed 4242 --out heldout.jsonl":
        Run((("-n 96", "-n 3"),), lines=3),
    "python recipes/select_checkpoint.py runs/grpo_smollm2_cpu --heldout heldout.jsonl":
        Run((("heldout.jsonl", "heldout.jsonl " + HF_TINY),), r"chosen: step \d"),
    "python -m eval plot-training runs/grpo_smollm2_cpu --out training.png":
        Run(expect=r"Plot: training\.png", makes=("training.png",)),
    # --- evaluation (README "Evaluation"): tiny model for `default`, hf for vllm, 1 row per file
    "python -m eval --help": Run(expect=r"usage: python -m eval"),
    "python -m eval run --help": Run(expect=r"--max-new-tokens"),
    "python -m eval run --model models/tuned --data execute.jsonl --out runs/eval/execute":
        Run((("execute.jsonl", "execute.jsonl --limit 1 " + HF_TINY),),
            r"--limit 1: 25 rows, at most 1 from each of 25 "
            r"files \(a JSONL's files are its task/subtask/language cells\)", quiet=True),
    "python -m eval run --model models/tuned --data execute.jsonl --backend vllm --out runs/eval/execute":
        Run((("--backend vllm", "--limit 1 " + HF_TINY),), r"overall"),  # the same settings: it resumes
    "python -m eval run --model runs/sft_smollm2_cpu --data heldout.jsonl --out runs/screen --num-samples 8 "
    "--temperature 1 --max-new-tokens 32":
        Run((("--num-samples 8", "--num-samples 2 --limit 1 --backend hf"),
             ("--max-new-tokens 32", "--max-new-tokens 4")),
            r"pass@2"),
    "python -m eval run --model default --data official:/path/to/Tase --backend hf --out runs/eval/base "
    "[--limit 100] [--cot]":
        Run((OFFICIAL, ("default", "{tiny}"), (" [--limit 100] [--cot]", " --limit 1 --max-new-tokens 4")),
            r"overall"),
    "python -m eval run --model models/tuned --data official:/path/to/Tase --backend vllm --out runs/eval/tuned":
        Run((OFFICIAL, ("--backend vllm", "--limit 1 " + HF_TINY)), r"overall"),
    "python -m eval run --model default --data official:/path/to/Tase --backend hf --out runs/eval/base --limit 1 "
    "--max-new-tokens 64":
        Run((OFFICIAL, ("default", "{tiny}"), ("--max-new-tokens 64", "--max-new-tokens 4")), r"overall"),  # resumes
    "python -m eval run --model models/tuned --data official:/path/to/Tase --out runs/eval/tuned --limit 1 "
    "--max-new-tokens 64":
        Run((OFFICIAL, ("--max-new-tokens 64", "--max-new-tokens 4 --backend hf")), r"overall"),  # resumes
    "python -m eval run --model default --data official:/path/to/Tase --out runs/eval/base --limit 100":
        Run((OFFICIAL, ("default", "{tiny}"), ("--limit 100", "--limit 1 " + HF_TINY)), r"overall"),  # resumes
    "python -m eval run --model default --data official:/path/to/Tase --tasks component_count --files english "
    "--out runs/eval/compc-en":
        Run((OFFICIAL, ("default", "{tiny}"), ("--files english", "--files english " + HF_TINY)),
            r"files: token_structure/component_count/english\.csv"),
    "python -m eval gold --data official:/path/to/Tase --out gold.jsonl":
        Run((OFFICIAL,), r"wrote \d+ gold predictions"),
    "python -m eval score --data official:/path/to/Tase --predictions gold.jsonl --out runs/eval/gold":
        Run((OFFICIAL,), r"overall 100\.0"),
    "python -m eval score --data official:/path/to/Tase --predictions preds.jsonl --out runs/eval/api-model":
        Run((OFFICIAL, ("preds.jsonl", "gold.jsonl")), r"overall 100\.0"),  # a predictions file: eval gold's
    "python -m eval compare runs/eval/base runs/eval/tuned [more ...] --out runs/eval/cmp [--n-boot 1000] [--seed 0]":
        Run(((" [more ...]", ""), ("[--n-boot 1000] [--seed 0]", "--n-boot 1000 --seed 0")), r"Table 1"),
    "python -m eval compare runs/eval/base runs/eval/tuned --out runs/eval/cmp":
        Run(expect=r"Table 1", makes=("runs/eval/cmp/comparison.md", "runs/eval/cmp/comparison.png")),
    "python -m eval export-lm-eval --data official:/path/to/Tase --out lm_eval_tasks":
        Run((OFFICIAL,), r"wrote \d+ lm-eval file tasks"),
    "python -m eval tokstats --model default --data official:/path/to/Tase":
        Run((OFFICIAL, ("default", "{tiny}")), r"(?i)fertility"),
    "python -m eval robustness run --model default --data official:/path/to/Tase --limit 50 --out runs/rob/base":
        Run((OFFICIAL, ("default", "{tiny}"), ("--limit 50", "--limit 1 --kinds case " + HF_TINY)), r"case"),
    "python -m eval robustness run --model models/tuned --data official:/path/to/Tase --limit 50 --out runs/rob/tuned":
        Run((OFFICIAL, ("--limit 50", "--limit 1 --kinds case " + HF_TINY)), r"case"),
    "python -m eval robustness report runs/rob/base runs/rob/tuned --out runs/rob/cmp":
        Run(expect=r"robustness\.md", makes=("runs/rob/cmp/robustness.png",)),
    # --- the paper recipe's plan, anywhere (no GPU, no weights)
    # planned in the shared interpreter (`python`: a fresh one took 44 s of the test's 233); the same dry run under
    # `accelerate launch` is tests/test_quiet_output.py's test_paper_recipe_dry_run_with_an_empty_hub_cache
    "accelerate launch recipes/grpo_qwen14b.py --dry-run": Run((("accelerate launch", "python"),), r"effective batch"),
    "accelerate launch recipes/grpo_qwen14b.py --dry-run --config recipes/configs/grpo_qwen14b_sync.yaml":
        Run((("accelerate launch", "python"),), r"effective batch"),
    "bash launch/slurm/grpo.sbatch --dry-run --nodes 3": Run(expect=r"vllm-serve"),
    "bash launch/slurm/grpo.sbatch --dry-run --cpu": Run(expect=r"CPU plan"),
    # --- option variants of the chain's GRPO run: their options resolve (dry run; the chain above trains)
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --trainer async":
        Run((("async", "async --dry-run"),), r"async"),
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --preset gspo":
        Run((("gspo", "gspo --dry-run"),), r"sequence"),
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml":
        Run(((".yaml", ".yaml --dry-run"),), r"effective batch"),
    "python recipes/grpo.py --config ... --report_to none":
        Run((("...", "recipes/configs/grpo_smollm2_cpu.yaml"), ("none", "none --dry-run")), r"effective batch"),
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --reward_funcs accuracy_fine format "
    "my_rewards:brevity --reward_weights 1.0 0.2 0.1":
        Run((("0.1", "0.1 --dry-run"),), r"my_rewards:brevity"),
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --held_out_rows 32 --eval_strategy steps "
    "--eval_steps 10 [--metric_for_best_model tase/heldout/official_acc]":
        Run((("[--metric_for_best_model tase/heldout/official_acc]",
              "--metric_for_best_model tase/heldout/official_acc --dry-run"),), r"effective batch"),
    "python recipes/grpo.py --config recipes/configs/grpo_smollm2_cpu.yaml --use_vllm true --vllm_mode colocate":
        Run((("colocate", "colocate --dry-run"),), r"effective batch"),
}

TRACEBACK = "Traceback (most recent call last)"
# what a library's warning looks like in a command's output: Python warnings, logging's WARNING lines (DeepSpeed's
# "[WARNING]", vLLM's "WARNING 11-28 ...", torch's "W1128 ..."), transformers' logger
LIBRARY_WARNING = re.compile(r"\w*Warning: |\[WARNING\]|^WARNING \d|^W\d{4} |^\s*warnings\.warn", re.M)


def test_every_documented_command_is_run_or_listed():
    """A documented command that this file does not run and the skip list does not name fails here, with the
    place to add it; so does a listed command the docs no longer show."""
    docs, skips = documented(), skip_list()
    assert set(RUNS).isdisjoint(skips), f"run and skipped at once: {sorted(set(RUNS) & set(skips))}"
    bad_kind = {c: w for c, w in skips.items() if w.split(":")[0] not in SKIP_KINDS}
    assert not bad_kind, f"{SKIP_FILE.name}: each `why` starts with one of {SKIP_KINDS} and a colon: {bad_kind}"
    unknown = [f"{c!r} (in {', '.join(d)})" for c, d in docs.items() if c not in RUNS and c not in skips]
    assert not unknown, ("documented commands that no test runs: add each to RUNS in tests/test_docs_commands.py "
                         f"(how to run it small) or to {SKIP_FILE.relative_to(ROOT)} (why CI cannot):\n  "
                         + "\n  ".join(unknown))
    stale = sorted((set(RUNS) | set(skips)) - set(docs))
    assert not stale, f"listed but no longer in {', '.join(DOCS)}; remove them: {stale}"


def test_extraction_joins_continuations_and_drops_comments():
    text = "x\n```bash\n# only a comment\na --b 'c # d' \\\n    --e f   # note\ng\n```\n```python\nh\n```\n"
    assert commands(text) == ["a --b 'c # d' --e f", "g"]


@pytest.fixture(scope="module")
def workspace(tmp_path_factory, tiny_model, fixture_root) -> dict[str, str]:
    """One folder the documented commands share, with the repository's folders they name by relative path, and
    the user's reward module docs/training.md shows beside its command."""
    ws = tmp_path_factory.mktemp("docs")
    for name in ("recipes", "synth", "launch", "bench", "tests", ".venv"):
        (ws / name).symlink_to(ROOT / name)
    m = re.search(r"```python\n(# my_rewards\.py.*?)```", (ROOT / "docs/training.md").read_text(encoding="utf-8"), re.S)
    assert m, "docs/training.md shows my_rewards.py"
    (ws / "my_rewards.py").write_text(m.group(1), encoding="utf-8")
    # this checkout's packages first, whatever folder the venv's editable install names
    env = dict(os.environ, PATH=f"{Path(sys.executable).parent}{os.pathsep}{os.environ['PATH']}",
               PYTHONPATH=os.pathsep.join(p for p in (str(ROOT), os.environ.get("PYTHONPATH", "")) if p))
    return {"dir": str(ws), "official": str(fixture_root), "tiny": str(tiny_model), "env": env}


@pytest.fixture(scope="module")
def worker(workspace):
    """The shared interpreter for plain python commands (tests/docs_worker.py), started once for the module."""
    proc = subprocess.Popen([sys.executable, str(ROOT / "tests" / "docs_worker.py")], cwd=workspace["dir"],
                            env=workspace["env"], stdin=subprocess.PIPE, stdout=subprocess.PIPE, text=True)
    yield proc
    proc.stdin.close()
    try:
        proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        proc.kill()
        proc.wait()


def in_worker(line: str, spec: Run) -> list[str] | None:
    """The arguments after `python` when the line can run in the shared interpreter, else None: a plain python
    command (no shell syntax) whose output need not be free of library warnings."""
    if spec.quiet or any(ch in line for ch in "|&;<>`$()*?~"):
        return None
    argv = shlex.split(line)
    return argv[1:] if argv[0] == "python" and len(argv) > 1 else None


def run_line(line: str, spec: Run, ws: dict, proc: subprocess.Popen) -> tuple[int, str]:
    """Exit status and output (stdout and stderr together) of one rewritten command."""
    argv = in_worker(line, spec)
    if argv is None:
        res = subprocess.run(["bash", "-c", line], cwd=ws["dir"], env=ws["env"], capture_output=True, text=True,
                             timeout=900)
        return res.returncode, res.stdout + res.stderr
    assert proc.poll() is None, "the shared interpreter ended early"
    proc.stdin.write(json.dumps({"argv": argv, "cwd": ws["dir"]}) + "\n")
    proc.stdin.flush()
    reply = json.loads(proc.stdout.readline())
    return reply["code"], reply["out"]


def rewritten(cmd: str, spec: Run, ws: dict) -> str:
    line = cmd
    for old, new in spec.subs:
        assert old in line, f"rewrite {old!r} no longer matches {cmd!r}"
        line = line.replace(old, new, 1)
    return line.format(official=ws["official"], tiny=ws["tiny"])


@pytest.mark.slow
@pytest.mark.parametrize("cmd", list(RUNS), ids=[f"{i:02d} {c[:72]}" for i, c in enumerate(RUNS)])
def test_documented_command_works(cmd, workspace, worker):
    if cmd not in documented():
        pytest.fail(f"not in the docs any more; remove it from RUNS: {cmd!r}")
    spec = RUNS[cmd]
    line = rewritten(cmd, spec, workspace)
    code, out = run_line(line, spec, workspace, worker)
    assert code == spec.code, f"{line}\nexit {code}:\n{out[-3000:]}"
    assert TRACEBACK not in out, out[-3000:]
    if spec.quiet:
        noise = [m.group(0) for m in LIBRARY_WARNING.finditer(out)]
        assert not noise, f"{line}\nlibrary warnings a user cannot act on: {noise}\n{out[-3000:]}"
    assert re.search(spec.expect, out), f"{line}\nexpected {spec.expect!r} in:\n{out[-3000:]}"
    ws = Path(workspace["dir"])
    for made in spec.makes:
        assert (ws / made).exists(), f"{line}\ndid not make {made}:\n{out[-3000:]}"
    if spec.lines is not None:
        dest = ws / re.search(r"--out (\S+)", line).group(1)
        got = len(dest.read_text(encoding="utf-8").splitlines())
        assert got == spec.lines, f"{line}\nwrote {got} lines, not {spec.lines}"


def python_blocks(text: str) -> list[str]:
    return re.findall(r"^```python\n(.*?)^```", text, re.S | re.M)


def test_readme_python_snippets_run_as_written(fixture_root):
    """The README's Python snippets run as shown (the release path the fixture sample), each in a fresh namespace,
    and a line that shows what it gives in a `# Score(...)` comment gives that Score (`...`: the fields it elides)."""
    text = (ROOT / "README.md").read_text(encoding="utf-8")
    blocks = python_blocks(text)
    shown = "".join(blocks)
    for api in ("synth.generate", "rewards.score", "load_official"):
        assert api in shown, f"the README's Python shows {api}"
    script = (
        "import sys, json, re\n"
        "blocks = json.loads(sys.argv[1])\n"
        "for b in blocks:\n"
        "    ns = {}\n"
        "    exec(compile(b, 'README snippet', 'exec'), ns)\n"
        "    for expr, want in re.findall(r'^(\\S.*?)\\s*#\\s*(Score\\(.*\\))\\s*$', b, re.M):\n"
        "        expr = expr.split('=', 1)[1] if re.match(r'\\w+ = ', expr) else expr\n"
        "        got = repr(eval(expr, ns))\n"
        "        head = want[:-len(', ...)')] if want.endswith(', ...)') else want\n"
        "        assert got.startswith(head) and (head != want or got == want), (got, want)\n"
        "        print('checked', want)\n")
    blocks = [b.replace("/path/to/Tase", str(fixture_root)) for b in blocks]
    res = subprocess.run([sys.executable, "-c", script, json.dumps(blocks)], cwd=ROOT, capture_output=True,
                         text=True, timeout=300)
    assert res.returncode == 0, res.stdout[-2000:] + res.stderr[-3000:]
    assert "checked Score(coarse=1.0" in res.stdout
