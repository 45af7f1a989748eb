"""The layout shows the architecture: the physics library and the book's wing, one direction.

Walks every module's imports with ``ast`` (no import is executed), so a circle or a wrong
direction fails here even when Python would happen to import it.
"""

import ast
import importlib
import inspect
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parents[1]
PACKAGE = ROOT / "lib" / "llm_roofline"
COURSE = "llm_roofline.course"


def _module_name(path: Path) -> str:
    parts = path.relative_to(PACKAGE.parent).with_suffix("").parts
    return ".".join(parts[:-1] if parts[-1] == "__init__" else parts)


MODULES = {_module_name(p): p for p in sorted(PACKAGE.rglob("*.py"))}


def _resolve(importer: str, is_package: bool, level: int, module: str | None) -> str:
    if level == 0:
        return module or ""
    base = importer.split(".") if is_package else importer.split(".")[:-1]
    base = base[: len(base) - (level - 1)]
    return ".".join(base + ([module] if module else []))


def _imports(name: str) -> set[str]:
    """The package modules ``name`` imports, at any depth of its code (function bodies too)."""
    path = MODULES[name]
    found = set()
    for node in ast.walk(ast.parse(path.read_text())):
        if isinstance(node, ast.Import):
            targets = [a.name for a in node.names]
        elif isinstance(node, ast.ImportFrom):
            base = _resolve(name, path.name == "__init__.py", node.level, node.module)
            # "from . import x" imports the module x when there is one
            targets = [f"{base}.{a.name}" if f"{base}.{a.name}" in MODULES else base
                       for a in node.names]
        else:
            continue
        found |= {t for t in targets if t in MODULES and t != name}
    return found


GRAPH = {name: _imports(name) for name in MODULES}


def test_the_walk_sees_the_imports_it_should():
    """The walker itself: known edges are found (a walker that finds nothing would pass all)."""
    assert "llm_roofline.formulas" in GRAPH["llm_roofline.counts"]
    assert "llm_roofline.course.registry" in GRAPH["llm_roofline.course.ch04"]
    assert "llm_roofline.calculator" in GRAPH["llm_roofline.course.ch06"]
    assert {f"llm_roofline.course.ch0{n}" for n in range(1, 10)} <= GRAPH[
        "llm_roofline.course.exercises"]


def test_the_library_never_imports_the_books_wing():
    wrong = {(a, b) for a, deps in GRAPH.items() if not a.startswith(COURSE)
             for b in deps if b.startswith(COURSE)}
    assert not wrong, f"library modules importing the book's wing: {sorted(wrong)}"


def _cycles(graph: dict[str, set[str]]) -> list[list[str]]:
    """Every strongly connected component with more than one module (Tarjan)."""
    index, low, stack, on, out = {}, {}, [], set(), []

    def visit(v):
        index[v] = low[v] = len(index)
        stack.append(v)
        on.add(v)
        for w in graph[v]:
            if w not in index:
                visit(w)
                low[v] = min(low[v], low[w])
            elif w in on:
                low[v] = min(low[v], index[w])
        if low[v] == index[v]:
            component = []
            while True:
                w = stack.pop()
                on.discard(w)
                component.append(w)
                if w == v:
                    break
            if len(component) > 1:
                out.append(sorted(component))

    for v in graph:
        if v not in index:
            visit(v)
    return out


def test_no_import_circle_anywhere():
    assert _cycles(GRAPH) == []


def test_the_cycle_finder_finds_a_circle():
    assert _cycles({"a": {"b"}, "b": {"c"}, "c": {"a"}, "d": {"a"}}) == [["a", "b", "c"]]


def test_no_library_module_is_named_after_a_chapter():
    chapterish = re.compile(r"(^|_)(ch\d+|chapter|plots|exercises|widgets|prose|student|webcalc)")
    named = [n for n in MODULES if not n.startswith(COURSE) and chapterish.search(n.split(".")[-1])]
    assert named == []


def test_each_chapter_has_one_module_of_its_own():
    notebooks = sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))
    assert notebooks
    for nb in notebooks:
        assert f"{COURSE}.ch{nb.name[:2]}" in MODULES, f"no course module for {nb.name}"


def _public_modules():
    return [n for n in MODULES if not n.startswith(COURSE) and not n.split(".")[-1].startswith("_")]


@pytest.mark.parametrize("name", _public_modules())
def test_every_public_name_is_declared_and_documented(name):
    module = importlib.import_module(name)
    assert module.__doc__ and module.__doc__.strip(), f"{name} has no docstring"
    assert hasattr(module, "__all__"), f"{name} declares no __all__"
    for public in module.__all__:
        assert hasattr(module, public), f"{name}.__all__ names {public}, which it lacks"
        obj = getattr(module, public)
        if inspect.isfunction(obj) or inspect.isclass(obj):
            assert inspect.getdoc(obj), f"{name}.{public} has no docstring"
        if inspect.isclass(obj):
            for attr, member in vars(obj).items():
                if not attr.startswith("_") and (inspect.isfunction(member) or isinstance(member, property)):
                    assert inspect.getdoc(member), f"{name}.{public}.{attr} has no docstring"


def test_the_installed_command_and_the_module_both_run():
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts == {"llm-roofline": "llm_roofline.cli:main"}
    for argv in ([sys.executable, "-m", "llm_roofline", "gpus"],
                 [str(Path(sys.executable).with_name("llm-roofline")), "gpus"]):
        run = subprocess.run(argv, capture_output=True, text=True, timeout=120)
        assert run.returncode == 0 and "H100" in run.stdout, (argv, run.stderr)
