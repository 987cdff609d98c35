"""Behaviour checksums of a checkout, for refactors that must change nothing a user sees (issue 40).

    python bench/identity_snapshot.py --out DIR [--root CHECKOUT] [--n 4]
    diff <(jq -S . BEFORE/manifest.json) <(jq -S . AFTER/manifest.json)   # or: diff -r BEFORE AFTER

Runs the checkout at --root (default: this one; PYTHONPATH=ROOT, this interpreter) and writes DIR/manifest.json:
name -> sha256 of what the command printed or wrote, plus its exit code, and each output under DIR/raw/ for
a readable diff:
- `python -m synth` for every task x language x subtask the registry has (opt-in families too), -n N, a
  fixed seed, and one `--task all --lang all` run: the sha256 of the JSONL file (`synth.__main__.main(argv)`,
  what `python -m synth ARGV` runs, called for every cell in one interpreter: one start instead of ~80);
- `eval gold`, `eval score` (the gold predictions, and the same with every third completion emptied) and
  `eval compare` on tests/fixtures/tase_official_sample: results.json (its `versions` left out),
  samples.jsonl, comparison.json and the printed table;
- `--help` of `python -m synth`, `python -m eval` and each subcommand, every recipe script and launcher;
- every dry run: recipes/grpo.py (the CPU and the paper's sync config), recipes/grpo_qwen14b.py, recipes/proof.py,
  launch/cpu.sh, launch/local.sh (async, 8 GPUs), launch/slurm/grpo.sbatch (sync and async);
- the refusals of the recipes' option readers (issue 48): recipes/grpo.py (--dry-run) and recipes/proof.py on a bad
  YAML (invalid, a key twice, not a mapping, an unknown key, a value of the wrong type) and a bad command line, and
  recipes/ablate.py's refusals before anything trains (no config, a bad or fixed axis, an arm whose options do not
  parse, a bad config, an --out that is a user's file).
Paths of the checkout and of the scratch folder are written as <ROOT> and <TMP>; DeepSpeed's timestamped
"[date] [WARNING]" lines are left out. Nothing is written outside DIR and a scratch folder.
"""
from __future__ import annotations

import argparse
import hashlib
import json
import os
import re
import subprocess
import sys
import tempfile
from pathlib import Path

HERE = Path(__file__).resolve().parent.parent
FIXTURE = "tests/fixtures/tase_official_sample"
SEED = 7
MAIN_GUARD = re.compile(r'^if __name__ == "__main__":', re.M)  # at column 0, not in a docstring
TIMESTAMPED = re.compile(r"^\[\d{4}-\d\d-\d\d [^\]]*\] ")


class Snapshot:
    """Runs commands in one checkout and records what they print or write."""

    def __init__(self, root: Path, out: Path, tmp: Path):
        self.root, self.out, self.tmp = root, out, tmp
        self.manifest: dict[str, dict] = {}
        (out / "raw").mkdir(parents=True, exist_ok=True)
        self.env = {**os.environ, "PYTHONPATH": str(root), "PYTHON": sys.executable, "TASE_VERBOSE": "0",
                    "PYTHONHASHSEED": "0", "TOKENIZERS_PARALLELISM": "false"}

    def clean(self, text: str) -> str:
        text = text.replace(str(self.tmp), "<TMP>").replace(str(self.root), "<ROOT>")
        return "".join(l for l in text.splitlines(keepends=True) if not TIMESTAMPED.match(l))

    def run(self, args: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
        cmd = [sys.executable if a == "PY" else a for a in args]
        return subprocess.run(cmd, cwd=self.root, env=self.env, capture_output=True, text=True, timeout=timeout)

    def record(self, name: str, text: str, rc: int | None = None, stderr: str = "") -> None:
        text = self.clean(text)
        entry = {"sha256": hashlib.sha256(text.encode()).hexdigest()}
        if rc is not None:
            entry["rc"] = rc
        self.manifest[name] = entry
        safe = re.sub(r"[^A-Za-z0-9_.=-]+", "_", name)
        (self.out / "raw" / f"{safe}.txt").write_text(text, encoding="utf-8")
        if stderr:
            (self.out / "raw" / f"{safe}.stderr.txt").write_text(self.clean(stderr), encoding="utf-8")

    def in_one_process(self, module: str, argvs: list[list[str]], timeout: int = 1800) -> list[dict]:
        """`module.main(argv)` for each argv, in one fresh interpreter of the checkout (what `python -m module
        ARGV` runs, without paying the interpreter and imports per call): each call's stdout and exit code."""
        code = (
            "import contextlib, importlib, io, json, sys\n"
            f"mod = importlib.import_module({module!r})\n"
            "out = []\n"
            "for argv in json.loads(sys.stdin.read()):\n"
            "    buf, err = io.StringIO(), io.StringIO()\n"
            "    with contextlib.redirect_stdout(buf), contextlib.redirect_stderr(err):\n"
            "        try:\n"
            "            rc = mod.main(argv)\n"
            "        except SystemExit as e:\n"
            "            rc = e.code if isinstance(e.code, int) else (0 if e.code is None else 1)\n"
            "    out.append({'stdout': buf.getvalue(), 'stderr': err.getvalue(), 'rc': rc or 0})\n"
            "sys.__stdout__.write(json.dumps(out))\n")
        res = subprocess.run([sys.executable, "-c", code], cwd=self.root, env=self.env, input=json.dumps(argvs),
                             capture_output=True, text=True, timeout=timeout)
        if res.returncode:
            raise SystemExit(f"error: {module} in one process failed: {res.stderr.strip()[-600:]}")
        return json.loads(res.stdout)

    def command(self, name: str, args: list[str], timeout: int = 600) -> subprocess.CompletedProcess:
        res = self.run(args, timeout)
        self.record(name, res.stdout, res.returncode, res.stderr)
        return res

    def file(self, name: str, path: Path, drop_keys: tuple[str, ...] = ()) -> None:
        if not path.exists():
            self.record(name, "<missing>")
            return
        text = path.read_text(encoding="utf-8")
        if drop_keys:
            data = json.loads(text)
            for k in drop_keys:
                data.pop(k, None)
            text = json.dumps(data, indent=1, sort_keys=True, ensure_ascii=False)
        self.record(name, text)

    # --- the checks ---------------------------------------------------------------------------------------

    def synth(self, n: int) -> None:
        code = ("import json; from synth.core import available, combos; "
                "print(json.dumps([c for t in available() for c in combos(t, 'all')]))")
        res = self.run(["PY", "-c", code])
        if res.returncode:
            raise SystemExit(f"error: cannot list the synth cells: {res.stderr.strip()[-400:]}")
        cells = json.loads(res.stdout)
        self.record("synth/cells", json.dumps(cells))
        jobs = []
        for task, lang, sub in [*cells, ("all", "all", "")]:
            path = self.tmp / f"synth_{task}_{lang}_{sub or 'none'}.jsonl"
            argv = ["--task", task, "--lang", lang, *(["--subtask", sub] if sub else []), "-n", str(n),
                    "--seed", str(SEED), "--out", str(path), "--no-progress"]
            jobs.append((f"synth/{task}/{lang}/{sub}", path, argv))
        results = self.in_one_process("synth.__main__", [argv for _, _, argv in jobs])
        for (name, path, _), res in zip(jobs, results, strict=False):
            self.record(name, path.read_text(encoding="utf-8") if path.exists() else "", res["rc"], res["stderr"])

    def evaluation(self) -> None:
        data = f"official:{FIXTURE}"
        gold = self.tmp / "gold.jsonl"
        self.command("eval/gold", ["PY", "-m", "eval", "gold", "--data", data, "--out", str(gold)])
        self.file("eval/gold.jsonl", gold)
        mixed = self.tmp / "mixed.jsonl"
        if gold.exists():
            lines = gold.read_text(encoding="utf-8").splitlines()
            rows = [json.loads(l) for l in lines if l.strip()]
            for i, r in enumerate(rows):
                if i % 3 == 0:
                    r["completion"] = ""
            mixed.write_text("".join(json.dumps(r, ensure_ascii=False) + "\n" for r in rows), encoding="utf-8")
        for name, preds in (("gold", gold), ("mixed", mixed)):
            out = self.tmp / f"score_{name}"
            self.command(f"eval/score/{name}", ["PY", "-m", "eval", "score", "--data", data, "--predictions",
                                                str(preds), "--out", str(out)])
            self.file(f"eval/score/{name}/results.json", out / "results.json", drop_keys=("versions",))
            self.file(f"eval/score/{name}/samples.jsonl", out / "samples.jsonl")
        cmp = self.tmp / "compare"
        self.command("eval/compare", ["PY", "-m", "eval", "compare", str(self.tmp / "score_gold"),
                                      str(self.tmp / "score_mixed"), "--out", str(cmp), "--n-boot", "200"])
        self.file("eval/compare/comparison.json", cmp / "comparison.json")
        # the refusals stay byte-identical: a second score into the same folder, bad data, a missing file
        self.command("eval/score/refuse_existing", ["PY", "-m", "eval", "score", "--data", data, "--predictions",
                                                    str(gold), "--out", str(self.tmp / "score_gold")])
        self.command("eval/score/refuse_missing", ["PY", "-m", "eval", "score", "--data",
                                                   str(self.tmp / "nope.jsonl"), "--predictions", str(gold),
                                                   "--out", str(self.tmp / "score_nope")])

    def helps(self) -> None:
        self.command("help/synth", ["PY", "-m", "synth", "--help"])
        res = self.command("help/eval", ["PY", "-m", "eval", "--help"])
        subs = re.search(r"\{([a-z_,-]+)\}", res.stdout)
        subs = subs.group(1).split(",") if subs else []
        for sub, res in zip(subs, self.in_one_process("eval.__main__", [[sub, "--help"] for sub in subs]),
                            strict=False):
            self.record(f"help/eval/{sub}", res["stdout"], res["rc"], res["stderr"])
        for script in sorted((self.root / "recipes").glob("*.py")):
            # a script: it has a main guard (a module that only mentions __main__ in a docstring is not)
            if MAIN_GUARD.search(script.read_text(encoding="utf-8")) and script.stem != "grpo_qwen14b":
                self.command(f"help/recipes/{script.stem}", ["PY", f"recipes/{script.name}", "--help"])
        for launcher in ("launch/cpu.sh", "launch/local.sh", "launch/slurm/grpo.sbatch"):
            self.command(f"help/{launcher}", ["bash", launcher, "--help"])

    def refusals(self) -> None:
        yamls = {"invalid": "a: [\n", "twice": "learning_rate: 1.0e-5\nlearning_rate: 2.0e-5\n", "list": "- 1\n",
                 "empty": "", "unknown": "bogus_option: 1\n", "wrongtype": "num_generations: many\n",
                 "wronglist": "tasks: dot_matrix\n", "badchoice": "lr_scheduler_type: nope\n"}
        for name, text in yamls.items():
            (self.tmp / f"{name}.yaml").write_text(text, encoding="utf-8")
        cfg = "recipes/configs/grpo_smollm2_cpu.yaml"
        for name in yamls:
            self.command(f"refuse/grpo_yaml_{name}",
                         ["PY", "recipes/grpo.py", "--config", str(self.tmp / f"{name}.yaml"), "--dry-run"])
        for name, args in (("abbrev", ["--learning_rat", "1e-5"]), ("badint", ["--num_generations", "x"]),
                           ("unknown", ["--bogus_option", "1"]), ("noconfig", ["--config"]),
                           ("missing", ["--config", str(self.tmp / "nope.yaml")]),
                           ("trainer", ["--trainer", "both"])):
            self.command(f"refuse/grpo_{name}", ["PY", "recipes/grpo.py", *(["--config", cfg] if name not in (
                "noconfig", "missing") else []), *args, "--dry-run"])
        for name in ("invalid", "twice", "list", "unknown"):
            self.command(f"refuse/proof_yaml_{name}", ["PY", "recipes/proof.py", "--dry-run", "--config",
                                                        str(self.tmp / f"{name}.yaml"), "--official", FIXTURE])
        user_file = self.tmp / "user_file.txt"
        user_file.write_text("mine\n", encoding="utf-8")
        ablate = ["PY", "recipes/ablate.py", "--eval-data", f"official:{FIXTURE}"]
        combine = "recipes/configs/grpo_combine_cpu.yaml"
        out = ["--out", str(self.tmp / "ablate")]
        for name, args in (("noargs", []), ("noconfig", ["--config", str(self.tmp / "nope.yaml"), *out]),
                           ("fixed", ["--config", combine, "--vary", "seed=1,2", *out]),
                           ("malformed", ["--config", combine, "--vary", "loss_type", *out]),
                           ("twice", ["--config", combine, "--reward_granularity", "coarse", "--vary",
                                      "reward_granularity=fine,coarse", *out]),
                           ("badarm", ["--config", combine, "--vary", "num_generations=4,x", *out]),
                           ("unknown", ["--config", combine, "--vary", "bogus_option=1,2", *out]),
                           ("dupkey", ["--config", str(self.tmp / "twice.yaml"), "--vary", "loss_type=dapo,dr_grpo",
                                       *out]),
                           ("userfile", ["--config", combine, "--out", str(user_file)])):
            self.command(f"refuse/ablate_{name}", ablate[:2] + args + (ablate[2:] if name != "noargs" else []))

    def dry_runs(self) -> None:
        self.command("dry/grpo_cpu", ["PY", "recipes/grpo.py", "--config", "recipes/configs/grpo_smollm2_cpu.yaml",
                                      "--output_dir", str(self.tmp / "grpo_out"), "--dry-run"])
        self.command("dry/grpo_qwen14b_sync", ["PY", "recipes/grpo.py", "--config",
                                               "recipes/configs/grpo_qwen14b_sync.yaml", "--dry-run"])
        self.command("dry/grpo_qwen14b", ["PY", "-m", "accelerate.commands.launch", "--num_processes", "1",
                                          "recipes/grpo_qwen14b.py", "--dry-run"])
        self.command("dry/proof", ["PY", "recipes/proof.py", "--dry-run", "--official", FIXTURE, "--out",
                                   str(self.tmp / "proof")])
        self.command("dry/launch_cpu", ["bash", "launch/cpu.sh", "--dry-run", "--steps", "3"])
        self.command("dry/launch_local_async", ["bash", "launch/local.sh", "--dry-run", "--async", "--gpus", "8"])
        self.command("dry/slurm", ["bash", "launch/slurm/grpo.sbatch", "--dry-run", "--nodes", "4"])
        self.command("dry/slurm_async", ["bash", "launch/slurm/grpo.sbatch", "--dry-run", "--async", "--nodes", "4"])


def main(argv: list[str] | None = None) -> int:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--out", required=True, type=Path, help="a new folder for manifest.json and raw/")
    p.add_argument("--root", type=Path, default=HERE, help="the checkout to run (default: this one)")
    p.add_argument("-n", "--n", type=int, default=4, help="records per synth cell (default 4)")
    p.add_argument("--only", nargs="*", choices=("synth", "eval", "help", "dry", "refuse"), default=None,
                   help="run only these groups (default: all)")
    args = p.parse_args(argv)
    if args.out.exists() and any(args.out.iterdir()):
        print(f"error: {args.out}: not empty; give a new folder", file=sys.stderr)
        return 2
    root = args.root.resolve()
    groups = set(args.only or ("synth", "eval", "help", "dry", "refuse"))
    with tempfile.TemporaryDirectory(prefix="tase-identity-") as tmp:
        snap = Snapshot(root, args.out.resolve(), Path(tmp))
        for group, fn in (("synth", lambda: snap.synth(args.n)), ("eval", snap.evaluation),
                          ("help", snap.helps), ("dry", snap.dry_runs), ("refuse", snap.refusals)):
            if group in groups:
                fn()
                print(f"{group}: done ({len(snap.manifest)} entries so far)", flush=True)
    (args.out / "manifest.json").write_text(json.dumps(snap.manifest, indent=1, sort_keys=True) + "\n")
    print(f"{len(snap.manifest)} entries -> {args.out / 'manifest.json'}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
