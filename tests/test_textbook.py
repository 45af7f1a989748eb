"""Each chapter reads as the main text of a course (DESIGN.md, "A chapter notebook"): every
figure numbered, captioned and described; every exercise with a hint a website reader can
open; no prose check or widget binding on the page. Static checks of the committed notebooks;
tests/run_notebook.py fails on any warning printed while a notebook runs, and
test_book.test_no_page_prints_a_warning on any in a built page."""

from __future__ import annotations

import ast
import re

import nbformat
import pytest

from conftest import notebooks
from llm_roofline.course.exercises import Hint, hint

CAPTION = re.compile(r"^\*\*Figure (\d+)\.(\d+)\.\*\* \S")
HINT_CELL = re.compile(r'^hint\("([a-z0-9-]+)"\)$')


def _chapter(path) -> int:
    return int(path.name[:2])


def _makes_a_figure(cell) -> bool:
    """A cell whose output on the page is a figure (a live widget's cell is not on the page)."""
    return (cell.cell_type == "code" and ("plt.show()" in cell.source or "scrubber(" in cell.source)
            and not re.search(r"^live\(", cell.source, re.M))


def _tags(cell) -> list[str]:
    return cell.metadata.get("tags", [])


def _hidden_in_lab(cell) -> bool:
    return bool(cell.metadata.get("jupyter", {}).get("source_hidden"))


def _only_checks(source: str) -> bool:
    """A cell that only asserts: ``states(...)`` and ``assert`` statements (and assignments
    they need), no output a reader looks at."""
    try:
        body = ast.parse(source).body
    except SyntaxError:
        return False
    calls = [n for n in body if isinstance(n, ast.Expr) and isinstance(n.value, ast.Call)]
    if not calls or not all(isinstance(c.value.func, ast.Name) and c.value.func.id == "states"
                            for c in calls):
        return False
    return all(isinstance(n, ast.Expr | ast.Assert | ast.Assign | ast.AugAssign) for n in body)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_every_figure_is_numbered_captioned_described_and_cited(path):
    nb = nbformat.read(path, as_version=4)
    chapter, numbers, problems = _chapter(path), [], []
    for i, cell in enumerate(nb.cells):
        if not _makes_a_figure(cell) or "solution" in _tags(cell):
            continue
        after = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
        match = CAPTION.match(after.source) if after is not None and \
            after.cell_type == "markdown" else None
        if not match or int(match.group(1)) != chapter:
            problems.append(f"cell {i}: no '**Figure {chapter}.k.** ...' caption cell after it")
            continue
        numbers.append(int(match.group(2)))
        alt = cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")
        if "scrubber(" not in cell.source and len(alt) < 40:
            problems.append(f"cell {i} (Figure {chapter}.{numbers[-1]}): alt text missing or "
                            "too short (mystnb.image.alt: what the figure shows, in a sentence)")
    if numbers != list(range(1, len(numbers) + 1)):
        problems.append(f"figures numbered {numbers}, not 1, 2, 3, ...")
    text = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown"
                     and not CAPTION.match(c.source))
    for k in numbers:
        if not re.search(rf"Figure {chapter}\.{k}\b", text):
            problems.append(f"Figure {chapter}.{k} is never referred to in the text")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_every_exercise_has_a_hint_before_its_solution(path):
    nb = nbformat.read(path, as_version=4)
    problems, ids = [], []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "markdown" or "{exercise-end}" not in cell.source:
            continue
        following = nb.cells[i + 1] if i + 1 < len(nb.cells) else None
        match = HINT_CELL.match(following.source.strip()) if following is not None and \
            following.cell_type == "code" else None
        if not match:
            problems.append(f"cell {i + 1}: expected a hint(\"<exercise id>\") cell after the "
                            "exercise, before its solution")
            continue
        if "remove-input" not in _tags(following):
            problems.append(f"cell {i + 1}: the hint cell needs the tag remove-input")
        ids.append(match.group(1))
        assert isinstance(hint(match.group(1)), Hint)  # registered, with its text
    assert not problems, "\n".join(problems)
    assert len(ids) == len(set(ids)), f"a hint shown twice: {ids}"


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_no_prose_check_or_widget_binding_on_the_page(path):
    """A cell of prose checks only (``states``, ``assert``) is removed from the website and
    collapsed in JupyterLab; so is a live widget's cell, which cannot run on the website
    (its kernel-free twin follows it)."""
    nb = nbformat.read(path, as_version=4)
    problems = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        plumbing = _only_checks(cell.source) or re.search(r"^live\(", cell.source, re.M)
        if plumbing and not ("remove-cell" in _tags(cell) and _hidden_in_lab(cell)):
            problems.append(f"cell {i}: {cell.source.strip().splitlines()[0][:60]!r} needs the "
                            "tag remove-cell and jupyter.source_hidden")
    assert not problems, "\n".join(problems)


def test_only_checks_tells_checks_from_computations():
    assert _only_checks('states(x, "1.0")\nassert y > 0')
    assert _only_checks('z = f(x)\nstates(z, "2")')
    assert not _only_checks("fig = plot(x)\nplt.show()")
    assert not _only_checks('print(x)\nstates(x, "1")')
    assert not _only_checks("x = 1")
