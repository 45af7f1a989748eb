"""Each chapter's exercises as data: label, title, level and answer-check id, read from the notebook.

An exercise's *level* is written at the start of the bold first sentence that serves as its
title (CONTRIBUTING.md, "Recipe: add an exercise"):

* ``**Warm-up: ...**``: one step, a formula of the chapter applied as given;
* ``**Core: ...**``: the chapter's main skill, a few steps or a library call to choose;
* ``**Challenge: ...**``: several ideas combined, or a derivation the chapter does not spell out;
* ``**Design problem: ...**``: an open-ended challenge with no single answer and no solution in
  the notebook; its rubric and reference answer are in the instructor guide.

The same text is what a reader sees in the website and in JupyterLab, and what this module,
the nbgrader course (:mod:`llm_roofline.course.assignments`, points by level) and the syllabus
page read, so the three cannot disagree.
"""

from __future__ import annotations

import json
import re
from dataclasses import dataclass
from pathlib import Path

__all__ = ["DESIGN_MINUTES", "LEVELS", "MINUTES", "PREFIXES", "READING_WPM", "ExerciseInfo",
           "chapter_exercises", "exercise_minutes", "exercises_of", "level_of", "objectives_of",
           "reading_minutes"]

LEVELS = ("warm-up", "core", "challenge")
"""The levels, easiest first."""

PREFIXES = {"Warm-up": "warm-up", "Core": "core", "Challenge": "challenge",
            "Design problem": "challenge"}
"""The title's first words, before a colon, and the level each one means."""

MINUTES = {"warm-up": 10, "core": 20, "challenge": 30}
"""Suggested minutes of student work per exercise, by level (an unlevelled one counts as core)."""

DESIGN_MINUTES = 60
"""Suggested minutes for a design problem: choosing, computing and writing it up."""

READING_WPM = 90
"""Words per minute of careful reading of a technical page, running its cells as one goes: the
pace of the book's cold reads, in which fresh readers took 1.2 to 2 times what 120 words a minute
predicted for chapters 1-3 and 7-9."""

_LABEL = re.compile(r"\{exercise-start\}[^\n]*\n:label:\s*(\S+)")
_TITLE = re.compile(r"^\*\*(.+?)\*\*", re.MULTILINE)
_CHECK = re.compile(r"""\bcheck\(\s*["']([^"']+)["']""")


@dataclass(frozen=True)
class ExerciseInfo:
    """One exercise of a chapter, as its notebook writes it."""

    label: str  # the directive's :label:, e.g. "ex-roofline-fp8-ridge"
    title: str  # the bold first sentence without its level, e.g. "FP8 ridge."
    level: str | None  # "warm-up", "core" or "challenge"; None when the title names none
    design: bool  # a design problem: open-ended, graded by a rubric, no solution in the notebook
    check_id: str | None  # the id its solution checks with check("<id>", value), or else the id
    # its question names (a problem worked by hand has no code in its solution), if any


def level_of(title: str) -> tuple[str | None, bool, str]:
    """``(level, design, rest)`` of a bold title: ``"Core: FP8 ridge."`` -> core, False, "FP8 ridge."."""
    head, sep, rest = title.partition(":")
    if sep and head.strip() in PREFIXES:
        return PREFIXES[head.strip()], head.strip() == "Design problem", rest.strip()
    return None, False, title.strip()


def _text(source) -> str:
    return source if isinstance(source, str) else "".join(source)


def exercises_of(nb: dict) -> list[ExerciseInfo]:
    """The exercises of a notebook (nbformat 4 JSON as a dict), in order."""
    found: list[dict] = []
    for cell in nb["cells"]:
        text = _text(cell["source"])
        label = _LABEL.search(text) if cell["cell_type"] == "markdown" else None
        if label:
            title = _TITLE.search(text[label.end():])
            asked = _CHECK.findall(text[label.end():])  # a by-hand problem names its check
            found.append({"label": label.group(1), "title": title.group(1) if title else "",
                          "check_id": None, "asked": asked[0] if asked else None})
            continue
        tags = (cell.get("metadata") or {}).get("tags", [])
        if found and "solution" in tags and found[-1]["check_id"] is None:
            ids = _CHECK.findall(text) if cell["cell_type"] == "code" else []
            if ids:
                found[-1]["check_id"] = ids[-1]
    out = []
    for ex in found:
        level, design, rest = level_of(ex["title"])
        out.append(ExerciseInfo(ex["label"], rest, level, design, ex["check_id"] or ex["asked"]))
    return out


def chapter_exercises(notebooks: Path | str) -> dict[str, list[ExerciseInfo]]:
    """Every chapter notebook's exercises (``NN_name`` -> exercises), from a folder of notebooks."""
    folder = Path(notebooks)
    return {p.stem: exercises_of(json.loads(p.read_text(encoding="utf-8")))
            for p in sorted(folder.glob("[0-9][0-9]_*.ipynb"))}


def exercise_minutes(exercises: list[ExerciseInfo]) -> int:
    """Suggested minutes of work for a chapter's exercises: :data:`MINUTES` by level, and
    :data:`DESIGN_MINUTES` for a design problem."""
    return sum(DESIGN_MINUTES if ex.design else MINUTES[ex.level or "core"] for ex in exercises)


def _is_solution(cell: dict) -> bool:
    return "solution" in (cell.get("metadata") or {}).get("tags", [])


def reading_minutes(nb: dict) -> int:
    """Minutes to read a chapter up to its exercises, running its cells: its prose's words at
    :data:`READING_WPM`, and half a minute per visible code cell (a whole minute, rounded up)."""
    words, cells = 0, 0
    for cell in nb["cells"]:
        text = _text(cell["source"])
        if _LABEL.search(text) or _is_solution(cell):
            break  # the exercises start: their time is exercise_minutes
        tags = (cell.get("metadata") or {}).get("tags", [])
        if cell["cell_type"] == "markdown":
            words += len(re.findall(r"[A-Za-z0-9]+", text))
        elif "remove-cell" not in tags:
            cells += 1
    return -(-(words + READING_WPM * cells // 2) // READING_WPM)


def objectives_of(nb: dict) -> list[str]:
    """The learning objectives of a chapter, in its own words: the bullets under "You will
    learn to" in its first cell, each joined onto one line."""
    text = _text(nb["cells"][0]["source"])
    _, _, rest = text.partition("You will learn to")
    items, current = [], None
    for line in rest.splitlines()[1:]:
        if line.startswith("- "):
            current = [line[2:].strip()]
            items.append(current)
        elif line.startswith("  ") and current is not None:
            current.append(line.strip())
        elif line.strip() == "" or current is not None:
            if items:
                break
    return [" ".join(parts) for parts in items]
