"""Layering, checked on the source: what each library module imports (top-level and inside functions).

- nothing in synth/ or rewards/ imports eval/ or recipes/ (the shared data layer is synth/; see
  docs/architecture.md);
- the module import graph of the library packages has no cycle.

An edge `a -> b` is drawn for `import b`, `from b import x` (to `b.x` when that is a module) and the
relative forms; a parent package that Python imports on the way is not an edge of its own.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("synth", "rewards", "eval", "recipes")
LOWER = ("synth", "rewards")
UPPER = ("eval", "recipes")


def _modules() -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((ROOT / pkg).rglob("*.py")):
            parts = list(path.relative_to(ROOT).with_suffix("").parts)
            if parts[-1] == "__init__":
                parts.pop()
            mods[".".join(parts)] = path
    return mods


def _resolve(mod: str, is_pkg: bool, level: int, name: str | None) -> str:
    if not level:
        return name or ""
    base = mod.split(".")
    base = base if is_pkg else base[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join([*base, *([name] if name else [])])


def import_graph() -> dict[str, set[str]]:
    mods = _modules()
    graph: dict[str, set[str]] = {m: set() for m in mods}
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            targets = []
            if isinstance(node, ast.Import):
                targets = [a.name for a in node.names]
            elif isinstance(node, ast.ImportFrom):
                src = _resolve(mod, is_pkg, node.level, node.module)
                subs = [f"{src}.{a.name}" for a in node.names if f"{src}.{a.name}" in mods]
                targets = subs if len(subs) == len(node.names) else [src, *subs]
            for t in targets:
                while t and t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != mod:
                    graph[mod].add(t)
    return graph


def test_lower_layers_do_not_import_upper():
    bad = [
        f"{a} imports {b}"
        for a, bs in import_graph().items()
        if a.split(".")[0] in LOWER
        for b in sorted(bs)
        if b.split(".")[0] in UPPER
    ]
    assert not bad, "; ".join(bad)


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Strongly connected components with more than one module (Tarjan)."""
    index: dict[str, int] = {}
    low: dict[str, int] = {}
    stack: list[str] = []
    on: set[str] = set()
    out: list[list[str]] = []

    def visit(v: str) -> None:
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in sorted(graph[v]):
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            comp = []
            while True:
                w = stack.pop()
                on.discard(w)
                comp.append(w)
                if w == v:
                    break
            if len(comp) > 1:
                out.append(sorted(comp))

    for v in sorted(graph):
        if v not in index:
            visit(v)
    return out


def test_no_import_cycles():
    cycles = _cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_type_registry_sits_at_the_bottom():
    """synth.record hands out the scoring types from rewards.types (lazily), and rewards/ reads the
    catalogue: that holds without a cycle only while rewards.types imports nothing of the library but
    rewards.base, and the catalogue reaches rewards only through it."""
    g = import_graph()
    assert g["rewards.types"] <= {"rewards.base"}
    assert g["rewards.base"] == set()
    assert {b for b in g["synth.record"] if b.startswith("rewards")} == {"rewards.types"}


# The task catalogue and the task modules are the only library files that may name a task.
TASK_NAME_HOMES = ("synth/tasks/", "synth/record.py")


def _string_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal and f-string piece, docstrings left out (prose may name tasks)."""
    docs = set()
    for node in ast.walk(tree):
        if isinstance(node, (ast.Module, ast.ClassDef, ast.FunctionDef, ast.AsyncFunctionDef)) and node.body:
            first = node.body[0]
            if isinstance(first, ast.Expr) and isinstance(first.value, ast.Constant):
                docs.add(id(first.value))
    return [(n.lineno, n.value) for n in ast.walk(tree)
            if isinstance(n, ast.Constant) and isinstance(n.value, str) and id(n) not in docs]


def test_task_names_only_in_task_modules_and_catalogue():
    """Per-task knowledge lives in synth/tasks/<task>.py (read through the registry) or the catalogue
    (synth/record.py): no other library module holds a task name as a string literal."""
    import re

    from synth.record import TASE_TASKS

    assert len(TASE_TASKS) == 10
    names = re.compile(r"\b(?:" + "|".join(TASE_TASKS) + r")\b")
    hits = []
    for mod, path in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(TASK_NAME_HOMES):
            continue
        for line, text in _string_literals(ast.parse(path.read_text(encoding="utf-8"))):
            for m in names.finditer(text):
                hits.append(f"{rel}:{line}: {m.group(0)}")
    assert not hits, "task names outside synth/tasks/ and the catalogue: " + "; ".join(hits)


def test_importing_the_library_sets_no_process_state():
    """Process settings (OpenMP wait policy, csv field limit) are made by entry points, not at import."""
    import os
    import subprocess
    import sys

    code = ("import csv, os, sys; lim = csv.field_size_limit(); "
            "import synth, synth.readers, rewards, eval.data, eval.aggregate, eval.compare, eval.runner; "
            "import eval.__main__; "
            "import recipes.config, recipes.run_dir, recipes.data, recipes.model, recipes.grpo; "
            "print(os.environ.get('OMP_WAIT_POLICY'), csv.field_size_limit() == lim)")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "True"]


def test_rewards_reads_only_the_catalogue_from_synth():
    """rewards/ stays a pure bottom layer: of synth it may read only the stdlib-only catalogue."""
    bad = [f"{a} imports {b}" for a, bs in import_graph().items() if a.split(".")[0] == "rewards"
           for b in sorted(bs) if b.split(".")[0] == "synth" and b != "synth.record"]
    assert not bad, "; ".join(bad)


def test_task_modules_declare_what_the_registry_is_asked():
    """Every registered task takes its subtasks from the catalogue and names an answer type for each;
    its languages agree with the catalogue's `no_lang` (only `mul`, or the real languages)."""
    from synth.core import available
    from synth.record import LANGS, TASKS, TYPES

    for task, gen in available().items():
        assert gen.subtasks == TASKS[task].subtasks, task
        if TASKS[task].no_lang:
            assert gen.langs == ("mul",), task
        else:
            assert gen.langs and set(gen.langs) <= set(LANGS), task
        assert set(gen.answer_types) == set(gen.subtasks), task
        assert all(t in TYPES for t in gen.answer_types.values()), task
