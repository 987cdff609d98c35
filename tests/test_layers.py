"""Layering, checked on the source: what each library module imports (top-level and inside functions).

- every package imports only the floors below it, with no exception (docs/architecture.md):
  common/ (the floor) none of ours; rewards/ common/; synth/ common/ and rewards/; eval/ those three;
  recipes/ all of them. An import inside a function counts like one at the top;
- the module import graph of the library packages has no cycle.

An edge `a -> b` is drawn for `import b`, `from b import x` (to `b.x` when that is a module) and the
relative forms, wherever the statement stands (a lazy import inside a function is an edge), and for the
imports made by a call: `importlib.import_module(NAME)` and `__import__(NAME)` with NAME a string (relative
to `package=`), or an f-string starting `{__name__}.` (a package importing its parts by a computed name:
an edge to every module under it). A call whose target cannot be read off the source is listed by
`dynamic_imports` and allowed only on the top floor (recipes/ imports a user's reward module by name).
A parent package that Python imports on the way is not an edge of its own.
"""
from __future__ import annotations

import ast
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
PACKAGES = ("common", "rewards", "synth", "eval", "recipes")
# what each package may import besides itself: the floors below it, and nothing else of ours
ALLOWED = {
    "common": set(),
    "rewards": {"common"},
    "synth": {"common", "rewards"},
    "eval": {"common", "rewards", "synth"},
    "recipes": {"common", "rewards", "synth", "eval"},
}


def _modules(root: Path = ROOT) -> dict[str, Path]:
    mods = {}
    for pkg in PACKAGES:
        for path in sorted((root / pkg).rglob("*.py")):
            parts = list(path.relative_to(root).with_suffix("").parts)
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


def _is_import_call(node: ast.Call) -> bool:
    """`importlib.import_module(...)`, `import_module(...)` (imported from importlib) or `__import__(...)`."""
    f = node.func
    return ((isinstance(f, ast.Attribute) and f.attr == "import_module")
            or (isinstance(f, ast.Name) and f.id in ("import_module", "__import__")))


def _call_targets(node: ast.Call, mod: str, is_pkg: bool, mods: dict[str, Path]) -> list[str] | None:
    """The modules an import call may load, or None when the source does not say (a name built at run time)."""
    if not node.args:
        return None
    arg = node.args[0]
    if isinstance(arg, ast.Constant) and isinstance(arg.value, str):
        name = arg.value
        if name.startswith("."):
            pkg = next((k.value for k in node.keywords if k.arg == "package" and isinstance(k.value, ast.Constant)),
                       None)
            if not isinstance(pkg, str):
                return None
            level = len(name) - len(name.lstrip("."))
            name = ".".join([*pkg.split(".")[: len(pkg.split(".")) - (level - 1)], name.lstrip(".")]).rstrip(".")
        return [name]
    if (isinstance(arg, ast.JoinedStr) and len(arg.values) >= 2 and isinstance(arg.values[0], ast.FormattedValue)
            and isinstance(arg.values[0].value, ast.Name) and arg.values[0].value.id == "__name__"
            and isinstance(arg.values[1], ast.Constant) and str(arg.values[1].value).startswith(".")):
        return sorted(m for m in mods if m.startswith(mod + "."))  # a package importing its parts by name
    return None


def dynamic_imports(root: Path = ROOT) -> list[str]:
    """`module:line` of every import call whose target the source does not name (see the module docstring)."""
    out = []
    mods = _modules(root)
    for mod, path in mods.items():
        is_pkg = path.name == "__init__.py"
        for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
            if isinstance(node, ast.Call) and _is_import_call(node) and _call_targets(node, mod, is_pkg, mods) is None:
                out.append(f"{mod}:{node.lineno}")
    return out


def import_graph(root: Path = ROOT) -> dict[str, set[str]]:
    mods = _modules(root)
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
            elif isinstance(node, ast.Call) and _is_import_call(node):
                targets = _call_targets(node, mod, is_pkg, mods) or []
            for t in targets:
                while t and t not in mods and "." in t:
                    t = t.rsplit(".", 1)[0]
                if t in mods and t != mod:
                    graph[mod].add(t)
    return graph


def test_every_package_imports_only_the_floors_below_it():
    """No exception list: an upward import, at the top or inside a function, fails here."""
    bad = [
        f"{a} imports {b}"
        for a, bs in import_graph().items()
        for b in sorted(bs)
        if b.split(".")[0] != a.split(".")[0] and b.split(".")[0] not in ALLOWED[a.split(".")[0]]
    ]
    assert not bad, "; ".join(bad)


def _all_imports(path: Path) -> list[tuple[int, str]]:
    """(line, absolute module) of every import statement in a file, however nested (relative ones resolved)."""
    mod = ".".join(path.relative_to(ROOT).with_suffix("").parts)
    is_pkg = path.name == "__init__.py"
    if is_pkg:
        mod = mod.rsplit(".", 1)[0]
    out = []
    for node in ast.walk(ast.parse(path.read_text(encoding="utf-8"))):
        if isinstance(node, ast.Import):
            out += [(node.lineno, a.name) for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            src = _resolve(mod, is_pkg, node.level, node.module)
            out += [(node.lineno, f"{src}.{a.name}" if src else a.name) for a in node.names]
    return out


def test_the_floor_imports_nothing_of_ours():
    """common/ is the floor every package may import: it reads the standard library and third-party
    packages only, so it can never be part of a cycle with the packages above it."""
    ours = set(PACKAGES) - {"common"}
    bad = [f"{path.relative_to(ROOT)}:{line}: {name}" for path in sorted((ROOT / "common").rglob("*.py"))
           for line, name in _all_imports(path) if name.split(".")[0] in ours]
    assert not bad, "; ".join(bad)


def test_the_scan_sees_nested_and_relative_imports(tmp_path):
    """The layer check reads imports inside functions and relative ones: a lazy upward import fails it."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "synth" / "core.py").write_text("")
    (tmp_path / "eval" / "runner.py").write_text("")
    (tmp_path / "rewards" / "x.py").write_text(
        "def f():\n    from synth.core import spec\n\n\nclass C:\n    def g(self):\n"
        "        from ..eval import runner\n")
    assert import_graph(tmp_path)["rewards.x"] == {"synth.core", "eval.runner"}


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
    """No cycle in the graph above, lazy imports and importlib calls included."""
    cycles = _cycles(import_graph())
    assert not cycles, "import cycles: " + "; ".join(" <-> ".join(c) for c in cycles)


def test_the_scan_sees_a_registry_that_loads_its_parts_lazily(tmp_path):
    """The layout before issue 48: `synth.core` loaded `synth.tasks` inside a function, and the package imported
    its modules with `importlib.import_module(f"{__name__}.{m}")`, and each task imports `synth.core`. The AST
    alone saw no cycle there; with importlib calls read as edges it is one."""
    for pkg in PACKAGES:
        (tmp_path / pkg).mkdir()
        (tmp_path / pkg / "__init__.py").write_text("")
    (tmp_path / "synth" / "tasks").mkdir()
    (tmp_path / "synth" / "core.py").write_text("def available():\n    from . import tasks\n")
    (tmp_path / "synth" / "tasks" / "__init__.py").write_text(
        "import importlib\nimport pkgutil\n\nfor _m in pkgutil.iter_modules(__path__):\n"
        "    importlib.import_module(f\"{__name__}.{_m.name}\")\n")
    (tmp_path / "synth" / "tasks" / "a.py").write_text("from ..core import available\n")
    g = import_graph(tmp_path)
    assert g["synth.tasks"] == {"synth.tasks.a"}
    assert _cycles(g) == [["synth.core", "synth.tasks", "synth.tasks.a"]]
    assert dynamic_imports(tmp_path) == []


def test_import_calls_name_their_module_below_the_top_floor():
    """An import by a name built at run time is invisible to the checks above, so only recipes/ (nothing above
    it, and a user's `--reward_funcs module.func` is loaded there by name) may make one."""
    bad = [d for d in dynamic_imports() if d.split(".")[0] != "recipes"]
    assert not bad, "import calls with a computed module name: " + "; ".join(bad)


def test_the_task_package_imports_every_task_module():
    """`synth.tasks` imports its parts by name (no lazy loading): a task module left out of its import line
    would never register, so every module in the folder must be an edge of the package."""
    here = {f"synth.tasks.{p.stem}" for p in (ROOT / "synth" / "tasks").glob("*.py")
            if not p.stem.startswith("_")}
    assert here and here <= import_graph()["synth.tasks"]


def test_the_type_catalogue_sits_in_the_floor():
    """The scoring types' catalogue rows are the floor's (`common.types`), which the record checks, the guard
    and the readers read; rewards/ registers each type's behaviour (`rewards.types`) against its row. Both, and the
    task catalogue, are the floor's one registry shape (`common.registry`, issue 61)."""
    g = import_graph()
    assert g["common.types"] == {"common.registry"}
    assert g["common.registry"] == {"common.errors"}
    assert g["common.errors"] == set()
    assert g["common.record"] == {"common.languages", "common.registry", "common.types"}
    assert g["rewards.types"] == {"common.registry", "common.types", "rewards.base"}


def test_the_floor_works_without_rewards():
    """`common` answers for the scoring types (the record checks, `TYPES`, the guard's answer rule) in a process
    that never imported rewards: nothing in the floor waits for a floor above it to register."""
    import os
    import subprocess
    import sys

    code = ("import sys; from common.record import TYPES, UNLABELLED_TYPES, make_record; "
            "from common.readers import check_record; from common.guard import Guard; "
            "r = make_record(id='a', task='component_split', subtask='split', lang='en', type='SPLIT', "
            "prompt='Split cat into c and at.', answer='c, at'); check_record(r, 'row 1'); "
            "g = Guard.from_records([r]); "
            "print(TYPES, UNLABELLED_TYPES, len(g.answers), 'rewards' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env={**os.environ, "PYTHONPATH": str(ROOT)},
                         capture_output=True, text=True, check=True)
    assert out.stdout.split(" 1 ")[-1].strip() == "False", out.stdout
    assert out.stdout.startswith("('NUMBER', 'LENGTH', 'SHUFFLE', 'SPLIT', 'DIFF', 'MATCH_ANSWER', 'EXACT') "
                                 "('LENGTH', 'SHUFFLE') 1 ")


# The task catalogue and the task modules are the only library files that may name a task.
TASK_NAME_HOMES = ("synth/tasks/", "common/record.py")


def _string_literals(tree: ast.AST) -> list[tuple[int, str]]:
    """(line, text) of every string literal and f-string piece, docstrings left out (prose may name tasks)."""
    from tests.conftest import code_strings

    return [(n.lineno, n.value) for n in code_strings(tree)]


def test_task_names_only_in_task_modules_and_catalogue():
    """Per-task knowledge lives in synth/tasks/<task>.py (read through the registry) or the catalogue
    (common/record.py): no other library module holds a task name as a string literal."""
    import re

    from common.record import TASE_TASKS

    assert len(TASE_TASKS) == 10
    names = re.compile(r"\b(?:" + "|".join(TASE_TASKS) + r")\b")
    hits = []
    for _mod, path in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(TASK_NAME_HOMES):
            continue
        for line, text in _string_literals(ast.parse(path.read_text(encoding="utf-8"))):
            for m in names.finditer(text):
                hits.append(f"{rel}:{line}: {m.group(0)}")
    assert not hits, "task names outside synth/tasks/ and the catalogue: " + "; ".join(hits)


# Where a scoring type's name may stand as a string: its catalogue row, its scorer module (the registration),
# the task modules (`answer_types` declare which type a subtask's rows have) and the task catalogue, whose
# paper codes include "DIFF".
TYPE_NAME_HOMES = ("common/types.py", "common/record.py", "synth/tasks/")


def test_type_names_only_in_the_catalogue_and_the_scorer_modules():
    """A type's behaviour is found in its catalogue row (common/types.py) and its scorer module only: no other
    library module holds a type name as a string (the `_NEEDS_*` sets, the guard's answer types, the official
    evaluator's table and the per-type branches of the loopholes and gold builders used to)."""
    from common.types import TYPE_INFO
    from rewards.types import REGISTRY

    homes = {t.score.__module__.replace(".", "/") + ".py" for t in REGISTRY.values()}
    hits = []
    for _mod, path in _modules().items():
        rel = path.relative_to(ROOT).as_posix()
        if rel.startswith(TYPE_NAME_HOMES) or rel in homes:
            continue
        for line, text in _string_literals(ast.parse(path.read_text(encoding="utf-8"))):
            if text in TYPE_INFO:
                hits.append(f"{rel}:{line}: {text}")
    assert not hits, "scoring type names outside their homes: " + "; ".join(hits)


def test_importing_the_library_sets_no_process_state():
    """Process settings (OpenMP wait policy, csv field limit) are made by entry points, not at import."""
    import os
    import subprocess
    import sys

    code = ("import csv, os, sys; lim = csv.field_size_limit(); "
            "import common, common.readers, common.models, common.paths, common.process, common.guard; "
            "import synth, synth.readers, rewards, eval.data, eval.aggregate, eval.compare, eval.runner; "
            "import eval.__main__; "
            "import recipes.shared.config, recipes.shared.run_dir, recipes.shared.data, recipes.shared.model, "
            "recipes.grpo; print(os.environ.get('OMP_WAIT_POLICY'), csv.field_size_limit() == lim)")
    env = {k: v for k, v in os.environ.items() if k != "OMP_WAIT_POLICY"}
    env["PYTHONPATH"] = str(ROOT)
    out = subprocess.run([sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True)
    assert out.stdout.split() == ["None", "True"]


def test_rewards_reads_only_the_catalogue_from_synth():
    """rewards/ stays a pure bottom layer: of synth it may read only the stdlib-only catalogue."""
    bad = [f"{a} imports {b}" for a, bs in import_graph().items() if a.split(".")[0] == "rewards"
           for b in sorted(bs) if b.split(".")[0] == "synth" and b != "common.record"]
    assert not bad, "; ".join(bad)


def test_task_modules_declare_what_the_registry_is_asked():
    """Every registered task takes its subtasks from the catalogue and names an answer type for each;
    its languages agree with the catalogue's `no_lang` (only `mul`, or the real languages)."""
    from common.record import LANGS, TASKS, TYPES
    from synth.core import available

    for task, gen in available().items():
        assert gen.subtasks == TASKS[task].subtasks, task
        if TASKS[task].no_lang:
            assert gen.langs == ("mul",), task
        else:
            assert gen.langs and set(gen.langs) <= set(LANGS), task
        assert set(gen.answer_types) == set(gen.subtasks), task
        assert all(t in TYPES for t in gen.answer_types.values()), task
