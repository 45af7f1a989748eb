"""Graded assignments on nbgrader: each chapter's numeric exercises as autograded cells.

An instructor runs ``make assignments`` (``python -m llm_roofline.course.assignments
notebooks _build/nbgrader``) and gets an nbgrader course folder: its ``nbgrader_config.py``,
``source/<chapter>/<chapter>.ipynb`` (the instructor's version, with solutions and hidden
tests) and ``release/<chapter>/``, which nbgrader's own ``generate_assignment`` writes from the
source: the version handed to students, with no solution and no expected value.

How a chapter becomes an assignment
    The chapter notebook is kept cell for cell, except each exercise's worked solution (the run
    of cells tagged ``solution`` after it). A solution whose code ends in the self-check
    ``check("<id>", value)`` becomes two cells:

    * an *answer cell* (nbgrader: autograded answer), ``answer_<id> = None`` followed by the
      worked solution between ``### BEGIN SOLUTION`` and ``### END SOLUTION``, the check turned
      into ``answer_<id> = value``; the release keeps only ``answer_<id> = None`` and asks the
      student to compute it;
    * a *test cell* (nbgrader: autograder tests, locked, worth the :data:`POINTS` of the
      exercise's level, read from its title by :mod:`llm_roofline.course.syllabus`), whose
      hidden part compares the answer with the expected value, written into the cell as a
      number when the course is generated: it comes from the library's answer-check registry
      (:mod:`llm_roofline.course.registry`), the same value and relative tolerance the
      self-check uses, so there is one source of every answer. nbgrader removes the hidden part
      from the release.

    A solution without a numeric check (an explanation) is removed, as in the student edition,
    and so is one whose expected value depends on the reader's own machine (chapter 8 measures
    it): both stay self-study, with their worked solutions in the book. A design problem has no
    solution in the notebook: it stays as it is, with the code cell of its givens, followed by a
    *manually graded answer* cell (markdown, worth :data:`DESIGN_POINTS`) that the instructor
    grades in nbgrader's formgrader with the rubric of the instructor guide.
"""

from __future__ import annotations

import ast
import json
import math
import os
import re
import subprocess
import sys
from dataclasses import dataclass
from pathlib import Path

from ..validate import (
    OneLineParser,
    boolean,
    destination,
    names,
    read_json,
    replaceable,
    source_folder,
    what_is,
    write_output,
)
from .registry import _REGISTRY, Exercise
from .student import SOLUTION_TAG, strip_solutions
from .syllabus import exercises_of

__all__ = ["DESIGN_POINTS", "MARK", "POINTS", "UNLEVELLED", "Graded", "assignment", "main",
           "write_course"]

POINTS = {"warm-up": 1, "core": 2, "challenge": 3}
"""Points of an autograded exercise by its level (the syllabus states each chapter's total)."""

DESIGN_POINTS = 10
"""Points of a design problem, graded by hand: each rubric of the instructor guide sums to it."""

UNLEVELLED = "core"
"""The level counted for an exercise whose title names none (a chapter not yet levelled;
``tests/test_levels.py`` names the chapters allowed to be in that state)."""

MARK = "written by llm_roofline.course.assignments"
"""The course writer's signature: in ``nbgrader_config.py`` (a comment) and in each source
notebook's metadata (``"written_by"``). A file that carries it is replaced on the next run; any
other file in its place is left alone unless ``force`` (``--force``)."""

_NB_MARK = f'"written_by": "{MARK}"'

_CONFIG = '''"""nbgrader's configuration for the course (written by llm_roofline.course.assignments)."""
# {mark}
# No CourseDirectory.root: nbgrader takes the folder it runs in, so the course works wherever
# this folder is copied (run nbgrader in it, or start the hub's formgrader there).

c = get_config()  # noqa: F821 (nbgrader provides it)
c.CourseDirectory.course_id = "physics-of-llm-inference"
c.ClearSolutions.code_stub = {{"python": "# YOUR CODE HERE: compute the answer above"}}
# a chapter's cells take seconds; a shared course server grading many submissions at once
# may be slow: two minutes a cell before nbgrader gives up (its default is 30 s)
c.Execute.timeout = 120
'''

_INTRO = re.compile(r"Check numeric answers with `check\(\"<exercise id>\", your_answer\)`[^\n]*"
                    r"(?:\n(?!\n)[^\n]*)*")
"""The exercises' opening paragraph on the self-check, up to its blank line."""

_GRADED_INTRO = (
    "This is a graded assignment. Write each numeric answer into its `answer_<id>` variable, in "
    "the cell below the exercise; it is graded after you hand the notebook in, so no check of it is "
    "given here (the reading edition and the student edition have the self-checks).")


@dataclass(frozen=True)
class Graded:
    """One autograded exercise of an assignment."""

    id: str
    variable: str
    expected: float
    rtol: float
    unit: str
    points: int


def _checks(code: str) -> list[tuple[int, int, str, str]]:
    """``(first line, last line, id, value source)`` of each ``check("id", value)`` statement."""
    found = []
    for node in ast.walk(ast.parse(code)):
        call = node.value if isinstance(node, ast.Expr) else None
        if (isinstance(call, ast.Call) and isinstance(call.func, ast.Name)
                and call.func.id == "check" and len(call.args) == 2
                and isinstance(call.args[0], ast.Constant)):
            value = ast.get_source_segment(code, call.args[1])
            found.append((node.lineno, node.end_lineno, call.args[0].value, value))
    return sorted(found)


def _expected(exercise: Exercise) -> float | None:
    """The exercise's answer from the library, or None when it needs the reader's machine."""
    try:
        return float(exercise.expected())
    except ValueError:
        return None


def _answer_cell(code: str, graded: Graded) -> dict:
    lines = code.splitlines()
    for first, last, _, value in reversed(_checks(code)):
        indent = lines[first - 1][: len(lines[first - 1]) - len(lines[first - 1].lstrip())]
        lines[first - 1:last] = [f"{indent}{graded.variable} = {value}"]
    body = "\n".join(lines)
    source = (f"{graded.variable} = None  # your answer to {graded.id}, in {graded.unit}\n"
              f"### BEGIN SOLUTION\n{body}\n### END SOLUTION")
    return _cell("code", source, grade=False, solution=True, locked=False,
                 grade_id=f"{graded.id}-answer")


def _test_cell(graded: Graded) -> dict:
    tolerance = f"within {100 * graded.rtol:g} %" if graded.rtol else "exactly"
    source = (f"# Autograded: {graded.id}, {graded.points} point(s), {tolerance}.\n"
              f"assert {graded.variable} is not None, \"compute {graded.variable} in the cell above\"\n"
              "### BEGIN HIDDEN TESTS\n"
              "import math\n"
              f"assert math.isclose(float({graded.variable}), {graded.expected!r}, "
              f"rel_tol={graded.rtol!r}, abs_tol=0.0)\n"
              "### END HIDDEN TESTS")
    return _cell("code", source, grade=True, solution=False, locked=True,
                 grade_id=f"{graded.id}-check", points=graded.points)


def _cell(kind: str, source: str, **nbgrader) -> dict:
    cell = {"cell_type": kind, "metadata": {"nbgrader": {"schema_version": 3, "task": False,
                                                         **nbgrader}},
            "source": source}
    if kind == "code":
        cell |= {"execution_count": None, "outputs": []}
    return cell


def _design_answer_cell(label: str) -> dict:
    source = ("Your answer to the design problem: your choices, the numbers from the library that "
              "support each one, and what could change your mind. (Graded by hand, "
              f"{DESIGN_POINTS} points.)")
    return _cell("markdown", source, grade=True, solution=True, locked=False,
                 grade_id=f"{label}-answer", points=DESIGN_POINTS)


def assignment(nb: dict) -> tuple[dict, list[Graded]]:
    """The instructor's source notebook of one chapter, and its autograded exercises.

    Each design problem gets a manually graded answer cell after its givens (not counted in the
    list returned, which holds the autograded exercises only)."""
    strip_solutions(nb)  # checks the notebook's shape, names a bad cell
    levels = {ex.check_id: ex.level for ex in exercises_of(nb) if ex.check_id}
    cells, graded, run = [], [], []
    design: str | None = None  # the label of a design problem whose answer cell is due

    def close_run():
        code = "\n".join("".join(c["source"]) if isinstance(c["source"], list) else c["source"]
                         for c in run if c["cell_type"] == "code")
        checks = _checks(code) if code else []
        if len(checks) == 1 and checks[0][2] in _REGISTRY:
            exercise = _REGISTRY[checks[0][2]]
            expected = _expected(exercise)
            level = levels.get(exercise.id) or UNLEVELLED
            if expected is not None and math.isfinite(expected):
                g = Graded(exercise.id, "answer_" + exercise.id.replace("-", "_"), expected,
                           exercise.rtol, exercise.unit, POINTS[level])
                cells.extend([_answer_cell(code, g), _test_cell(g)])
                graded.append(g)
        run.clear()

    for cell in nb["cells"]:
        if SOLUTION_TAG in (cell.get("metadata") or {}).get("tags", []):
            run.append(cell)
            continue
        if run:
            close_run()
        if design and cell["cell_type"] == "markdown":
            cells.append(_design_answer_cell(design))
            design = None
        problem = [ex for ex in exercises_of({"cells": [cell]}) if ex.design]
        if problem:
            design = problem[0].label
        cell = dict(cell)
        if cell["cell_type"] == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    if run:
        close_run()
    if design:
        cells.append(_design_answer_cell(design))
    ids = {g.id: g.variable for g in graded}
    for i, cell in enumerate(cells):
        if cell["cell_type"] == "markdown" and "nbgrader" not in cell.get("metadata", {}):
            text = "".join(cell["source"]) if isinstance(cell["source"], list) else cell["source"]
            changed = _graded_prose(text, ids)
            if changed != text:
                cells[i] = {**cell, "source": changed}
    return {**nb, "cells": cells}, graded


def _graded_prose(text: str, ids: dict[str, str]) -> str:
    """The markdown of a graded release: no ``check("<id>", ...)`` for a graded answer (the
    answer goes into its variable instead), and the self-check's introduction replaced."""
    if not ids:
        return text

    def answer(found):
        variable = ids.get(found.group(1))
        return f"`{variable}` in the answer cell below" if variable else found.group(0)

    text = re.sub(r"`check\(\"([\w.-]+)\",\s*[^`]*\)`", answer, text)
    return _INTRO.sub(_GRADED_INTRO, text)


def write_course(notebooks: Path, root: Path, chapters: list[str] | None = None,
                 *, release: bool = True, force: bool = False) -> dict[str, list[Graded]]:
    """Write the nbgrader course under ``root``; return each assignment's graded exercises.

    ``chapters``: notebook names without ``.ipynb`` (default: every chapter notebook in
    ``notebooks``). With ``release``, nbgrader's ``generate_assignment`` then writes
    ``release/``. ``root`` is the course's own folder: its ``source/`` and its
    ``nbgrader_config.py`` are rewritten, but only where they are the writer's own (marked by
    :data:`MARK`) or with ``force=True``; ``root`` may not be ``notebooks``, inside it or hold
    it. Every notebook is read and checked before anything is written; each file is written to
    a temporary file renamed into place. A bad argument is one ``ValueError`` naming it.
    """
    import llm_roofline.course.exercises  # noqa: F401  (every chapter registers its checks)

    release, force = boolean("release", release), boolean("force", force)
    notebooks = source_folder("notebooks folder", notebooks)
    try:
        found = sorted(p.stem for p in notebooks.glob("[0-9][0-9]_*.ipynb") if p.is_file())
    except OSError as err:
        raise ValueError(f"cannot read the notebooks folder {str(notebooks)!r}: "
                         f"{err.strerror or err}") from None
    root = destination("course folder", root, sources=[notebooks]).absolute()
    if chapters is None:
        chosen = found
        if not chosen:
            raise ValueError(f"no chapter notebooks (NN_name.ipynb) in {str(notebooks)!r}")
    else:
        chosen = names("chapters", chapters)
    course, texts = {}, {}
    for name in chosen:
        path = notebooks / f"{name}.ipynb"
        if "/" in name or os.sep in name or name in (".", ".."):
            raise ValueError(f"chapters: {name!r} is not a notebook name (no folders); known: "
                             f"{', '.join(found)}")
        kind = what_is(path)
        if kind not in ("a regular file", "a link to a regular file"):
            raise ValueError(f"chapters: {str(path)!r} is {kind}, not a notebook"
                             + (f"; known: {', '.join(found)}" if kind == "nothing" else ""))
        try:
            source, graded = assignment(read_json("notebook", path))
            source["metadata"] = {**(source.get("metadata") or {}), "written_by": MARK}
            texts[root / "source" / name / f"{name}.ipynb"] = json.dumps(
                source, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        except (ValueError, TypeError, KeyError, AttributeError, RecursionError) as err:
            reason = str(err).splitlines()[0] if str(err) else type(err).__name__
            raise ValueError(f"{str(path)!r} is not a valid chapter notebook: {reason}") from None
        course[name] = graded
    texts[root / "nbgrader_config.py"] = _CONFIG.format(mark=MARK)
    for path in texts:  # all refused before any is written
        marker = MARK if path.suffix == ".py" else _NB_MARK
        replaceable("course file", path, marker=marker, force=force)
        for folder in (path.parent, path.parent.parent):
            if what_is(folder) not in ("nothing", "a folder", "a link to a folder"):
                raise ValueError(f"course folder: {str(folder)!r} is {what_is(folder)}, not a folder")
    for path, text in texts.items():
        try:
            path.parent.mkdir(parents=True, exist_ok=True)
        except OSError as err:
            raise ValueError(f"cannot make the course folder {str(path.parent)!r}: "
                             f"{err.strerror or type(err).__name__}") from None
        write_output("course file", path, text, marker=MARK if path.suffix == ".py" else _NB_MARK,
                     force=True)
    if release:
        for name in course:
            _nbgrader(root, "generate_assignment", name, "--force")
    return course


def _nbgrader(root: Path, *args: str) -> str:
    """Run one of nbgrader's own commands in the course folder; its output, or an error."""
    # nbgrader runs alembic, installed beside this Python, as a command of its own
    env = {**os.environ, "PATH": os.pathsep.join([str(Path(sys.executable).parent),
                                                  os.environ.get("PATH", "")])}
    run = subprocess.run([sys.executable, "-m", "nbgrader", *args], cwd=root, env=env,
                         capture_output=True, text=True, timeout=1800)
    if run.returncode:
        raise RuntimeError(f"nbgrader {' '.join(args)} failed:\n{run.stdout}{run.stderr}")
    return run.stdout + run.stderr


class _Parser(OneLineParser):
    label = "llm_roofline.course.assignments"


def main(argv: list[str] | None = None) -> int:
    """``python -m llm_roofline.course.assignments NOTEBOOKS ROOT [--force]``: write the course."""
    parser = _Parser(
        prog="python -m llm_roofline.course.assignments",
        description="Write an nbgrader course (source and release) from the chapter notebooks.")
    parser.add_argument("notebooks", help="the folder of chapter notebooks")
    parser.add_argument("root", help="the course folder to write (e.g. _build/nbgrader)")
    parser.add_argument("--force", action="store_true",
                        help="replace files in ROOT that this command did not write")
    args = parser.parse_args(argv)
    try:
        course = write_course(args.notebooks, args.root, force=args.force)
    except ValueError as err:
        parser.error(str(err))
    except RuntimeError as err:  # nbgrader's own command failed: its last line says why
        lines = [line for line in str(err).splitlines() if line.strip()]
        parser.exit(1, f"{parser.label}: error: {lines[0]} {lines[-1] if len(lines) > 1 else ''}\n")
    for name, graded in course.items():
        points = sum(g.points for g in graded)
        print(f"{name}: {len(graded)} autograded exercises, {points} points")
    print(f"each design problem: a manually graded answer cell, {DESIGN_POINTS} points")
    print(f"nbgrader course written to {Path(args.root).absolute()} (release/ for students)")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())
