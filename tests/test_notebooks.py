"""A solution's names: the student edition runs without its solution cells.

Every chapter notebook is executed top to bottom, offline, in a fresh kernel by
tests/test_launch.py, in an environment holding only what the notebook's install cell installs."""

from __future__ import annotations

import ast

import nbformat
import pytest

from conftest import notebooks


def _bound_and_read(source: str) -> tuple[set[str], set[str]]:
    """The names a code cell binds (assignments, imports, definitions, parameters, loop and
    comprehension variables) and the names it reads."""
    code = "\n".join(line[:len(line) - len(line.lstrip())] + "pass"  # a magic: %pip, !ls
                     if line.lstrip().startswith(("%", "!")) else line for line in source.splitlines())
    bound, read = set(), set()
    for node in ast.walk(ast.parse(code)):
        if isinstance(node, ast.Name):
            (read if isinstance(node.ctx, ast.Load) else bound).add(node.id)
        elif isinstance(node, ast.FunctionDef | ast.AsyncFunctionDef | ast.ClassDef):
            bound.add(node.name)
        elif isinstance(node, ast.Import | ast.ImportFrom):
            bound |= {(a.asname or a.name).split(".")[0] for a in node.names}
        elif isinstance(node, ast.arg):
            bound.add(node.arg)
    return bound, read


def solution_names_used_later(nb) -> list[str]:
    """Where the student edition (the notebook without its cells tagged ``solution``) would stop:
    a later cell reading a name that only a solution binds."""
    from llm_roofline.course.student import SOLUTION_TAG

    before, only_in_solutions, problems = set(), set(), []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code":
            continue
        bound, read = _bound_and_read(cell.source)
        if SOLUTION_TAG in cell.metadata.get("tags", []):
            only_in_solutions |= bound - before
            continue
        missing = sorted((read - bound) & only_in_solutions - before)
        problems += [f"cell {i} reads {name!r}, which only a worked solution binds" for name in missing]
        before |= bound
    return problems


def test_the_dataflow_check_finds_a_name_only_a_solution_binds():
    cell = nbformat.v4.new_code_cell
    nb = nbformat.v4.new_notebook(cells=[
        cell("import math\nx = 1"),
        cell("answer = math.sqrt(x)\ndef f(y):\n    return y", metadata={"tags": ["solution"]}),
        cell("print(answer, f(2), [y for y in range(3)])"),
        cell("y = 3\nprint(x + y)"),
    ])
    assert solution_names_used_later(nb) == [
        "cell 2 reads 'answer', which only a worked solution binds",
        "cell 2 reads 'f', which only a worked solution binds"]


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_student_edition_needs_no_solution(path):
    """Without its solution cells a notebook still runs: no later cell reads a name that only a
    worked solution binds. (The full notebook runs in test_launch.py and in the book's build; the student
    edition differs from it only by the solution cells, so this dataflow check stands in for a
    third execution of every notebook.)"""
    problems = solution_names_used_later(nbformat.read(path, as_version=4))
    assert not problems, f"the student edition of {path.name} would fail:\n" + "\n".join(problems)
