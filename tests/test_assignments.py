"""The nbgrader course: each numeric exercise an autograded answer, graded by nbgrader itself.

The fast tests look at the source notebooks the writer makes; the slow one runs nbgrader's own
commands end to end in a temporary course: generate the release, submit it three ways, and
autograde the submissions.
"""

import copy
import json
import math
from pathlib import Path

import pytest

import llm_roofline.course.exercises  # noqa: F401  (every chapter registers its checks)
from llm_roofline.course.assignments import (
    DESIGN_POINTS,
    POINTS,
    UNLEVELLED,
    _nbgrader,
    assignment,
    write_course,
)
from llm_roofline.course.registry import _REGISTRY
from llm_roofline.course.syllabus import exercises_of

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CHAPTERS = sorted(p.stem for p in NOTEBOOKS.glob("[0-9][0-9]_*.ipynb"))


def _nbgrader_cells(nb, key, kind="code"):
    return [c for c in nb["cells"] if c["metadata"].get("nbgrader", {}).get(key)
            and c["cell_type"] == kind]


def _levels_by_hand(nb) -> dict[str, str]:
    """Each check id's level, read by hand: the bold title above the solution that checks it."""
    levels, level = {}, None
    for cell in nb["cells"]:
        text = "".join(cell["source"])
        if "{exercise-start}" in text:
            title = text.split("**")[1]
            level = next((v for k, v in (("Warm-up:", "warm-up"), ("Core:", "core"),
                                         ("Challenge:", "challenge")) if title.startswith(k)),
                         UNLEVELLED)
        for i in _REGISTRY:
            if f'check("{i}"' in text and "solution" in cell["metadata"].get("tags", []):
                levels[i] = level
    return levels


def test_points_by_level():
    assert POINTS == {"warm-up": 1, "core": 2, "challenge": 3} and UNLEVELLED == "core"


def _ids_checked_in(nb) -> list[str]:
    """Every exercise id a solution of the chapter checks, found by hand (a plain search)."""
    text = "".join("".join(c["source"]) for c in nb["cells"] if c["cell_type"] == "code")
    return sorted({i for i in _REGISTRY if f'check("{i}"' in text})


@pytest.mark.parametrize("name", CHAPTERS)
def test_every_numeric_exercise_is_autograded_against_the_registry(name):
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    source, graded = assignment(nb)
    machine_dependent = {"machine-2", "machine-3", "machine-4", "machine-5"}
    assert sorted(g.id for g in graded) == [i for i in _ids_checked_in(nb) if i not in machine_dependent]
    levels = _levels_by_hand(nb)
    assert [g.points for g in graded] == [POINTS[levels[g.id]] for g in graded]
    answers, tests = _nbgrader_cells(source, "solution"), _nbgrader_cells(source, "grade")
    assert len(answers) == len(tests) == len(graded)
    for g, answer, test in zip(graded, answers, tests, strict=True):
        exercise = _REGISTRY[g.id]
        assert g.expected == float(exercise.expected()) and g.rtol == exercise.rtol
        assert answer["source"].startswith(f"{g.variable} = None")
        assert "### BEGIN SOLUTION" in answer["source"] and f'check("{g.id}"' not in answer["source"]
        hidden = test["source"].split("### BEGIN HIDDEN TESTS")[1]
        assert repr(g.expected) in hidden and repr(g.expected) not in test["source"].split("###")[0]
        assert test["metadata"]["nbgrader"]["points"] == g.points and test["metadata"]["nbgrader"]["locked"]
    # no worked solution is left outside the answer cells
    assert not any("solution" in c["metadata"].get("tags", []) for c in source["cells"])


@pytest.mark.parametrize("name", CHAPTERS)
def test_each_design_problem_gets_a_manually_graded_answer_after_its_givens(name):
    nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
    source, _ = assignment(nb)
    design = [ex.label for ex in exercises_of(nb) if ex.design]
    manual = _nbgrader_cells(source, "grade", kind="markdown")
    assert [c["metadata"]["nbgrader"]["grade_id"] for c in manual] == [f"{d}-answer" for d in design]
    for label, cell in zip(design, manual, strict=True):
        meta = cell["metadata"]["nbgrader"]
        assert meta["solution"] and not meta["locked"] and meta["points"] == DESIGN_POINTS
        at = source["cells"].index(cell)
        above = [c for c in source["cells"][:at] if f":label: {label}" in "".join(c["source"])]
        between = source["cells"][source["cells"].index(above[0]) + 1:at]
        assert above and all(c["cell_type"] == "code" for c in between)  # only its givens


def test_a_solution_without_a_numeric_check_is_removed_not_graded():
    nb = {"nbformat": 4, "nbformat_minor": 5, "metadata": {}, "cells": [
        {"cell_type": "markdown", "metadata": {}, "source": "An exercise: explain."},
        {"cell_type": "markdown", "metadata": {"tags": ["solution"]}, "source": "Because."},
        {"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": "x = 1",
         "outputs": [], "execution_count": 1},
        {"cell_type": "markdown", "metadata": {}, "source": "After."},
    ]}
    source, graded = assignment(nb)
    assert graded == [] and [c["source"] for c in source["cells"]] == ["An exercise: explain.", "After."]


@pytest.mark.slow
def test_nbgrader_grades_a_right_an_empty_and_a_wrong_submission(tmp_path):
    name = "03_roofline"
    graded = write_course(NOTEBOOKS, tmp_path, [name])[name]
    total = sum(g.points for g in graded)
    assert len(graded) >= 2

    release = json.loads((tmp_path / "release" / name / f"{name}.ipynb").read_text())
    text = json.dumps(release)
    assert "BEGIN SOLUTION" not in text and "HIDDEN TESTS" not in text
    for g in graded:  # neither the value nor the solution's own code reaches the student
        assert repr(g.expected) not in text and f'check("{g.id}"' not in text
    manual = _nbgrader_cells(release, "grade", kind="markdown")  # the design problem's answer
    assert [c["metadata"]["nbgrader"]["points"] for c in manual] == [DESIGN_POINTS]

    source = json.loads((tmp_path / "source" / name / f"{name}.ipynb").read_text())
    solved = {c["metadata"]["nbgrader"]["grade_id"]:
              c["source"].replace("### BEGIN SOLUTION\n", "").replace("\n### END SOLUTION", "")
              for c in _nbgrader_cells(source, "solution")}

    def submit(student, answers):
        nb = copy.deepcopy(release)
        for cell in _nbgrader_cells(nb, "solution"):
            cell["source"] = answers.get(cell["metadata"]["nbgrader"]["grade_id"], cell["source"])
        folder = tmp_path / "submitted" / student / name
        folder.mkdir(parents=True)
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))

    wrong = graded[1]
    submit("right", solved)
    submit("empty", {})
    submit("wrong", solved | {f"{wrong.id}-answer": solved[f"{wrong.id}-answer"]
                              + f"\n{wrong.variable} = 2 * {wrong.variable}"})
    _nbgrader(tmp_path, "autograde", name, "--force")

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{tmp_path / 'gradebook.db'}") as gradebook:
        scores = {s: gradebook.find_submission(name, s).score for s in ("right", "empty", "wrong")}
    assert math.isclose(scores["right"], total)
    assert scores["empty"] == 0
    assert math.isclose(scores["wrong"], total - wrong.points)


def test_the_release_has_no_check_call_for_a_graded_answer():
    for name in CHAPTERS:
        source, graded = assignment(json.loads((NOTEBOOKS / f"{name}.ipynb").read_text()))
        text = json.dumps(source)
        for g in graded:  # in the prose, the answer cells and the tests alike
            assert f'check(\\"{g.id}\\"' not in text and f"check('{g.id}'" not in text, (name, g.id)
            assert f"`{g.variable}` in the answer cell below" in text, (name, g.id)
        if graded:
            assert "Check numeric answers with" not in text


@pytest.mark.slow
def test_a_copy_of_the_course_in_another_folder_grades(tmp_path):
    """The course travels: written in one folder, copied to another, the original removed,
    nbgrader's autograde in the copy gives a right submission its points and a blank one 0."""
    name = "05_kv_cache"
    first, copy_ = tmp_path / "built", tmp_path / "elsewhere" / "course"
    graded = write_course(NOTEBOOKS, first, [name])[name]
    total = sum(g.points for g in graded)
    config = (first / "nbgrader_config.py").read_text()
    assert str(first) not in config and "CourseDirectory.root" not in config.split("\nc = ")[1]
    import shutil

    shutil.copytree(first, copy_)
    shutil.rmtree(first)
    release = json.loads((copy_ / "release" / name / f"{name}.ipynb").read_text())
    text = json.dumps(release)
    for g in graded:
        assert f'check(\\"{g.id}\\"' not in text
    source = json.loads((copy_ / "source" / name / f"{name}.ipynb").read_text())
    solved = {c["metadata"]["nbgrader"]["grade_id"]:
              c["source"].replace("### BEGIN SOLUTION\n", "").replace("\n### END SOLUTION", "")
              for c in _nbgrader_cells(source, "solution")}
    for student, answers in (("right", solved), ("blank", {})):
        nb = copy.deepcopy(release)
        for cell in _nbgrader_cells(nb, "solution"):
            cell["source"] = answers.get(cell["metadata"]["nbgrader"]["grade_id"], cell["source"])
        folder = copy_ / "submitted" / student / name
        folder.mkdir(parents=True)
        (folder / f"{name}.ipynb").write_text(json.dumps(nb))
    _nbgrader(copy_, "autograde", name, "--force")
    assert not first.exists()

    from nbgrader.api import Gradebook

    with Gradebook(f"sqlite:///{copy_ / 'gradebook.db'}") as gradebook:
        scores = {s: gradebook.find_submission(name, s).score for s in ("right", "blank")}
    assert math.isclose(scores["right"], total) and total > 0
    assert scores["blank"] == 0
