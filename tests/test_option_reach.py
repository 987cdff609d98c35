"""How many files one option crosses from the command line to the trainer (issue 78's goal: at most 5 each for
dynamic sampling and `reward_granularity`; docs/architecture.md, "How far one option reaches").

A file is crossed when its code spells one of the option's names (`dynamic_sampling`, `dynamic_sampling_max_rounds`,
... or `reward_granularity`): an identifier, attribute, keyword, import or string, docstrings and comments aside.
The path of a GRPO run is every recipes/ and eval/ module `recipes/grpo.py` imports, eagerly or lazily, with
everything they import (the async main and the features included), plus the launchers (launch/), the other
command lines that take the option. Drivers that only write a GRPO command line (demo, ablate, the proof) are not
on it; `reach(..., everywhere=True)` counts them too."""
from __future__ import annotations

import ast
import re
from pathlib import Path

from conftest import ROOT

SCANNED = ("recipes", "eval")


def _module_file(name: str) -> Path | None:
    """recipes.x.y -> recipes/x/y.py or recipes/x/y/__init__.py (None: not one of ours)."""
    if name.split(".")[0] not in SCANNED:
        return None
    base = ROOT.joinpath(*name.split("."))
    for p in (base.with_suffix(".py"), base / "__init__.py"):
        if p.is_file():
            return p
    return None


def _module_name(path: Path) -> str:
    parts = list(path.relative_to(ROOT).with_suffix("").parts)
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


def _imports(path: Path) -> set[Path]:
    """The files of our modules `path` imports anywhere in its code (a function's lazy import too), with the
    packages above them (importing recipes.a.b runs recipes/a/__init__.py)."""
    out: set[Path] = set()
    package = _module_name(path) if path.name == "__init__.py" else _module_name(path).rpartition(".")[0]
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        names: list[str] = []
        if isinstance(node, ast.Import):
            names = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            module = node.module or ""
            if node.level:
                module = ".".join([*package.split(".")[:len(package.split(".")) - node.level + 1], module]).strip(".")
            names = [module, *(f"{module}.{a.name}" for a in node.names)]
        for name in names:
            parts = name.split(".")
            out |= {p for i in range(1, len(parts) + 1) if (p := _module_file(".".join(parts[:i])))}
    return out


def closure(entry: str) -> set[Path]:
    """Every file of ours that running `entry` can import."""
    seen, todo = set(), [ROOT / entry]
    while todo:
        p = todo.pop()
        if p not in seen:
            seen.add(p)
            todo += sorted(_imports(p) - seen)
    return seen


def spells(path: Path, option: str) -> bool:
    """Whether the code of `path` spells the option (or a name of its family: option_*), docstrings and comments
    aside: Python by its syntax tree, shell by its lines that are not comments."""
    word = re.compile(rf"(?<![A-Za-z0-9]){option}(?![A-Za-z0-9])|(?<![A-Za-z0-9]){option}_[a-z_]+")
    text = path.read_text(encoding="utf-8")
    if path.suffix != ".py":
        return any(word.search(line) for line in text.splitlines() if not line.lstrip().startswith("#"))
    tree = ast.parse(text)
    docs = {id(n.body[0].value) for n in ast.walk(tree)
            if isinstance(n, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and n.body
            and isinstance(n.body[0], ast.Expr) and isinstance(n.body[0].value, ast.Constant)}
    for n in ast.walk(tree):
        found = (n.id if isinstance(n, ast.Name) else n.attr if isinstance(n, ast.Attribute)
                 else n.arg if isinstance(n, (ast.keyword, ast.arg)) and n.arg
                 else " ".join(filter(None, [getattr(n, "module", None), *(a.name for a in n.names)]))
                 if isinstance(n, (ast.Import, ast.ImportFrom))
                 else n.value if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs
                 else None)
        if found and word.search(found):
            return True
    return False


def launchers() -> list[Path]:
    return sorted(p for p in (ROOT / "launch").rglob("*") if p.is_file() and p.suffix in ("", ".sh", ".sbatch"))


def reach(option: str, everywhere: bool = False) -> list[str]:
    """The files one option crosses from the command line to the trainer (see the module docstring)."""
    files = ({p for d in SCANNED for p in (ROOT / d).rglob("*.py")} if everywhere else closure("recipes/grpo.py"))
    return sorted(p.relative_to(ROOT).as_posix() for p in [*files, *launchers()] if spells(p, option))


def test_dynamic_sampling_and_reward_granularity_cross_at_most_five_files():
    """The counts docs/architecture.md states, pinned: a new file on an option's path fails here (update the doc's
    numbers with the list, or keep the option in its home)."""
    ds = reach("dynamic_sampling")
    assert ds == ["recipes/features/__init__.py", "recipes/features/dynamic_sampling/__init__.py",
                  "recipes/features/dynamic_sampling/sampling.py",  # the list entry, the adapter, the trainer
                  "recipes/features/guidance/__init__.py", "recipes/features/guidance/trainer.py"], ds  # its user
    rg = reach("reward_granularity")
    assert rg == ["launch/cpu.sh", "launch/local.sh", "recipes/grpo_core/reward_funcs.py",
                  "recipes/shared/config.py"], rg
    assert len(ds) <= 5 and len(rg) <= 5
    # the drivers that write these options into a GRPO command line are off the path, and counted apart
    assert set(reach("dynamic_sampling", everywhere=True)) - set(ds) == {"recipes/demo.py",
                                                                        "recipes/proof_stages/config.py"}
    assert set(reach("reward_granularity", everywhere=True)) - set(rg) == {
        "recipes/ablate.py", "recipes/export.py", "recipes/proof_stages/config.py", "recipes/proof_stages/sections.py"}


def test_the_count_sees_each_way_of_spelling_an_option(tmp_path):
    """The counter is not blind: code, imports and flags count; a docstring or a comment does not."""
    cases = {"args.dynamic_sampling_max_rounds\n": True, "f(reward_granularity='fine')\n": True,
             "from recipes.features import dynamic_sampling\n": True, "x = ['--reward_granularity', 'coarse']\n": True,
             '"""Dynamic sampling: dynamic_sampling true."""\n# reward_granularity\n': False,
             "dynamic_samplingx = 1\n": False}
    for i, (code, want) in enumerate(cases.items()):
        p = tmp_path / f"m{i}.py"
        p.write_text(code)
        assert (spells(p, "dynamic_sampling") or spells(p, "reward_granularity")) == want, code
    assert ROOT / "recipes/features/dynamic_sampling/sampling.py" in closure("recipes/grpo.py")
    assert ROOT / "recipes/demo.py" not in closure("recipes/grpo.py")
