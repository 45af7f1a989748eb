"""Every exercise carries a level (warm-up, core or challenge) in its title; every chapter has a
challenge and, at the end of its exercises, a design problem without a solution."""

import json
from pathlib import Path

import pytest

from llm_roofline.course.syllabus import LEVELS, chapter_exercises, exercises_of, level_of

ROOT = Path(__file__).resolve().parents[1]
NOTEBOOKS = ROOT / "notebooks"
CHAPTERS = chapter_exercises(NOTEBOOKS)


def test_there_are_chapters_to_check():
    """Every chapter notebook is checked: none is exempt, so a new chapter must have levels too."""
    assert len(CHAPTERS) >= 8


@pytest.mark.parametrize("name", sorted(CHAPTERS))
def test_every_exercise_has_a_level_and_the_chapter_a_challenge(name):
    exercises = CHAPTERS[name]
    missing = [ex.label for ex in exercises if ex.level not in LEVELS]
    assert not missing, (f"{name}: exercises whose bold title does not start with 'Warm-up:', "
                         f"'Core:', 'Challenge:' or 'Design problem:': {missing}")
    worked = [ex for ex in exercises if ex.level == "challenge" and not ex.design]
    assert worked, f"{name}: no challenge exercise with a worked solution"
    design = [ex for ex in exercises if ex.design]
    assert len(design) == 1 and exercises[-1].design, (
        f"{name}: needs one design problem, the last of its exercises")


def test_the_parser_reads_the_title_level_check_and_design():
    nb = {"cells": [
        {"cell_type": "markdown", "metadata": {},
         "source": "````{exercise-start}\n:label: ex-a\n````\n**Core: Ridge.** What is it?\n"
                   "````{exercise-end}\n````"},
        {"cell_type": "markdown", "metadata": {"tags": ["solution"]},
         "source": "````{solution-start} ex-a\n````\nDivide."},
        {"cell_type": "code", "metadata": {"tags": ["solution"]}, "source": 'check("a-1", x)'},
        {"cell_type": "markdown", "metadata": {},
         "source": "````{exercise-start}\n:label: ex-b\n````\n**Warm-up: Bytes.** How many?"},
        {"cell_type": "markdown", "metadata": {},
         "source": "````{exercise-start}\n:label: ex-c\n````\n**A title.** No level."},
        {"cell_type": "code", "metadata": {}, "source": 'check("not-a-solution", 1)'},
        {"cell_type": "markdown", "metadata": {},
         "source": "````{exercise-start}\n:label: ex-d\n````\n**Design problem: Size it.** Choose."},
    ]}
    got = [(e.label, e.title, e.level, e.design, e.check_id) for e in exercises_of(nb)]
    assert got == [("ex-a", "Ridge.", "core", False, "a-1"),
                   ("ex-b", "Bytes.", "warm-up", False, None),
                   ("ex-c", "A title.", None, False, None),
                   ("ex-d", "Size it.", "challenge", True, None)]
    assert level_of("Challenge: Without overlap.") == ("challenge", False, "Without overlap.")
    assert level_of("Hard: x") == (None, False, "Hard: x")


def test_every_registered_check_of_a_chapter_is_found_by_the_parser():
    for name, exercises in CHAPTERS.items():
        nb = json.loads((NOTEBOOKS / f"{name}.ipynb").read_text())
        text = "".join("".join(c["source"]) for c in nb["cells"]
                       if "solution" in c["metadata"].get("tags", [])
                       or "{exercise-start}" in "".join(c["source"]))  # or a by-hand question
        found = {ex.check_id for ex in exercises if ex.check_id}
        assert found and all(f'check("{i}"' in text for i in found), name
