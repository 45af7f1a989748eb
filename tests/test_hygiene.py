"""The repository's own rules: toc and notebooks agree, notebooks are clean, chapters have their parts."""

from __future__ import annotations

import json
import re

import pytest
import yaml

from conftest import ROOT, notebooks, toc_files
from llm_roofline.course.syllabus import exercises_of


def test_every_toc_entry_exists():
    for entry in toc_files():
        candidates = [ROOT / f"{entry}{suffix}" for suffix in (".md", ".ipynb")]
        assert any(p.exists() for p in candidates), f"_toc.yml names {entry!r}, which does not exist"


def test_every_notebook_and_page_is_in_the_toc():
    listed = set(toc_files())
    pages = [*notebooks(), *(ROOT / "book").glob("*.md")]
    for path in pages:
        name = str(path.relative_to(ROOT).with_suffix(""))
        assert name in listed, f"{name} is not in _toc.yml, so the book would not show it"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_notebook_is_committed_clean(path):
    nb = json.loads(path.read_text())
    assert nb["metadata"]["kernelspec"]["name"] == "python3"
    for i, cell in enumerate(nb["cells"]):
        if cell["cell_type"] == "code":
            assert not cell.get("outputs"), f"{path.name}: cell {i} carries outputs"
            assert cell.get("execution_count") is None, f"{path.name}: cell {i} has an execution count"


def _source(cell) -> str:
    src = cell["source"]
    return src if isinstance(src, str) else "".join(src)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_chapter_has_exercises_solutions_takeaways_and_citations(path):
    """DESIGN.md's chapter shape: exercises with tagged solutions, a takeaways box, citations."""
    cells = json.loads(path.read_text())["cells"]
    exercises, solutions = set(), set()
    inside_solution = False
    for i, cell in enumerate(cells):
        text = _source(cell)
        tags = set(cell.get("metadata", {}).get("tags", []))
        exercises.update(re.findall(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)", text))
        started = re.findall(r"\{solution-start\}\s*(\S+)", text)
        solutions.update(started)
        if started:
            inside_solution = True
        if inside_solution:
            assert "solution" in tags, f"{path.name}: cell {i} is in a solution but lacks the 'solution' tag"
        if "{solution-end}" in text:
            inside_solution = False
    # a design problem has no solution in the notebook: its rubric is in the instructor guide
    design = {ex.label for ex in exercises_of(json.loads(path.read_text())) if ex.design}
    assert len(exercises - design) >= 4, (
        f"{path.name}: {len(exercises - design)} exercises, a chapter needs at least 4")
    assert exercises - design == solutions, (
        f"{path.name}: exercises without solutions: {exercises - design - solutions}")
    assert not design & solutions, f"{path.name}: design problems with a solution: {design & solutions}"
    markdown = "\n".join(_source(c) for c in cells if c["cell_type"] == "markdown")
    assert re.search(r"takeaway", markdown, re.I), f"{path.name}: no takeaways box"
    assert "{cite" in markdown, f"{path.name}: cites nothing"


def test_requirements_pin_jupyter_book_1():
    reqs = (ROOT / "requirements.txt").read_text()
    pin = re.search(r"^jupyter-book==(\d+)\.", reqs, re.M)
    assert pin and pin.group(1) == "1", "Jupyter Book 2.x has no _config.yml: pin 1.x"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_notebook_installs_the_library_on_colab(path):
    """Colab opens a notebook alone: a hidden first code cell installs llm_roofline when it is missing."""
    cells = json.loads(path.read_text())["cells"]
    first_code = next(c for c in cells if c["cell_type"] == "code")
    assert 'find_spec("llm_roofline")' in _source(first_code) and "%pip install" in _source(first_code)
    assert "remove-cell" in first_code["metadata"].get("tags", [])


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_colab_installs_from_the_configured_repository(path):
    """The install URL in each notebook follows repository.url in _config.yml (a fork changes both)."""
    url = yaml.safe_load((ROOT / "_config.yml").read_text())["repository"]["url"]
    cells = json.loads(path.read_text())["cells"]
    first_code = _source(next(c for c in cells if c["cell_type"] == "code"))
    assert f"git+{url}" in first_code, f"{path.name}: the Colab cell does not install from {url}"


def _provided_by_install_cell(first_code: str) -> set[str]:
    """Import names the Colab cell makes available: the library, its dependencies and the extras named."""
    import tomllib

    project = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]
    spec = re.search(r"llm-roofline(\[[^\]]*\])?\s*@", first_code)
    requirements = list(project["dependencies"])
    for extra in re.findall(r"[\w-]+", spec.group(1) or "") if spec else []:
        requirements += project.get("optional-dependencies", {}).get(extra, [])
    names = {re.match(r"[A-Za-z0-9_.-]+", r).group(0).lower().replace("-", "_") for r in requirements}
    return names | {"llm_roofline", "ipython", "ipykernel"}  # a Jupyter kernel brings IPython


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_colab_cell_installs_everything_the_notebook_imports(path):
    """Colab runs the notebook with only what its hidden cell installs (tests/test_launch.py runs it)."""
    import sys

    cells = json.loads(path.read_text())["cells"]
    code = [_source(c) for c in cells if c["cell_type"] == "code"]
    provided = _provided_by_install_cell(code[0])
    imported = set()
    for src in code:
        imported |= set(re.findall(r"^\s*(?:import|from)\s+([A-Za-z_]\w*)", src, re.M))
    missing = sorted(m for m in imported
                     if m not in sys.stdlib_module_names and m.lower() not in provided)
    assert not missing, f"{path.name} imports {missing}, which its Colab install cell does not install"
