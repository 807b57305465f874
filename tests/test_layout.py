"""The package is laid out by pipeline stage and imports run one way only:

    config → records → analysis → substrates → execute → report → cli

A module may import its own stage and earlier ones, never a later one (and nothing
imports the CLI). Checked twice: statically, on every import statement of every module
(function-level ones included), and dynamically, by importing each module in a fresh
interpreter and looking at which later-stage modules got loaded."""

from __future__ import annotations

import ast
import json
import subprocess
import sys
from collections import Counter
from pathlib import Path

import pytest

import thinwan

PACKAGE = Path(thinwan.__file__).parent
STAGES = ("config", "records", "analysis", "substrates", "execute", "report", "cli")
# Top-level modules outside the stage packages, and the stage they count as.
TOP_LEVEL = {
    "thinwan": -1,  # __init__: the version only
    "thinwan._native": 3,  # the simulator: a substrate
    "thinwan.__main__": len(STAGES) - 1,  # python -m thinwan: the CLI
}


def modules() -> list[str]:
    names = []
    for path in sorted(PACKAGE.rglob("*.py")):
        parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
        names.append(".".join(parts[:-1] if parts[-1] == "__init__" else parts))
    return names


def stage(module: str) -> int:
    """The stage index of a thinwan module."""
    if module in TOP_LEVEL:
        return TOP_LEVEL[module]
    top = module.split(".")[1]
    assert top in STAGES, f"{module}: not in a stage package ({', '.join(STAGES)}); add it to one"
    return STAGES.index(top)


def imports(module: str) -> list[tuple[int, str]]:
    """(line, imported thinwan module) of every import statement in ``module``."""
    path = PACKAGE.parent / (module.replace(".", "/") + ".py")
    if not path.exists():
        path = path.with_suffix("") / "__init__.py"
    package = module if path.name == "__init__.py" else module.rpartition(".")[0]
    found = []
    for node in ast.walk(ast.parse(path.read_text(), str(path))):
        if isinstance(node, ast.Import):
            found += [(node.lineno, a.name) for a in node.names if a.name.split(".")[0] == "thinwan"]
        elif isinstance(node, ast.ImportFrom):
            if node.level:
                base = package.split(".")[: len(package.split(".")) - node.level + 1]
                target = ".".join([*base, *([node.module] if node.module else [])])
            else:
                target = node.module or ""
            if target.split(".")[0] != "thinwan":
                continue
            # `from .x import y` may import a submodule y: count the deeper name when it is one.
            for alias in node.names:
                sub = f"{target}.{alias.name}"
                found.append((node.lineno, sub if sub in MODULES else target))
    return found


MODULES = modules()


def test_every_module_belongs_to_a_stage() -> None:
    for module in MODULES:
        stage(module)


def test_module_names_are_unique() -> None:
    """No two modules share a name (two records.py, two cli.py … read as one)."""
    names = Counter(m.rpartition(".")[2] for m in MODULES if m.count(".") >= 2)
    assert [n for n, k in names.items() if k > 1] == []


@pytest.mark.parametrize("module", MODULES)
def test_imports_follow_the_stage_order(module: str) -> None:
    here = stage(module)
    backwards = [
        f"line {line}: {target} ({STAGES[stage(target)]})"
        for line, target in imports(module)
        if target != "thinwan" and stage(target) > here
    ]
    assert backwards == [], f"{module} ({STAGES[here] if here >= 0 else 'top'}) imports a later stage"


def test_no_import_cycles() -> None:
    """No module reaches itself through imports, counting lazy and type-only ones (a
    cycle inside one stage is as hard to read as one across stages)."""
    edges = {m: {t for _, t in imports(m) if t != m and t in MODULES and not m.startswith(t + ".")} for m in MODULES}
    cycles = []
    for start in MODULES:
        stack, seen = [(start, (start,))], set()
        while stack:
            node, path = stack.pop()
            for nxt in edges[node]:
                if nxt == start:
                    cycles.append(" → ".join((*path, start)))
                elif nxt not in seen:
                    seen.add(nxt)
                    stack.append((nxt, (*path, nxt)))
    assert cycles == []


def test_nothing_imports_the_cli() -> None:
    users = [
        m for m in MODULES if stage(m) < STAGES.index("cli") and any(t.startswith("thinwan.cli") for _, t in imports(m))
    ]
    assert users == []


def test_importing_a_module_loads_no_later_stage() -> None:
    """Each module in a fresh interpreter: which thinwan modules does it pull in?"""
    probe = (
        "import importlib, json, sys\n"
        "out = {}\n"
        "for name in json.loads(sys.argv[1]):\n"
        "    before = set(sys.modules)\n"
        "    importlib.import_module(name)\n"
        "    out[name] = sorted(m for m in sys.modules if m.startswith('thinwan'))\n"
        "    for m in [m for m in sys.modules if m.startswith('thinwan')]:\n"
        "        del sys.modules[m]\n"
        "print(json.dumps(out))\n"
    )
    wanted = [m for m in MODULES if m not in ("thinwan.__main__", "thinwan._native")]
    done = subprocess.run(
        [sys.executable, "-c", probe, json.dumps(wanted)], capture_output=True, text=True, timeout=300
    )
    assert done.returncode == 0, done.stderr
    loaded = json.loads(done.stdout)
    problems = []
    for module, pulled in loaded.items():
        here = stage(module)
        later = [m for m in pulled if m in MODULES and m != "thinwan" and stage(m) > here]
        if later:
            problems.append(f"{module} loads {', '.join(later)}")
    assert problems == []
