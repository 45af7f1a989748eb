"""The syllabus page quotes each chapter's objectives and names the exercises that assess them:
both must match the notebooks, so the page cannot drift from the chapters."""

import json
import re
from pathlib import Path

from llm_roofline.course.assignments import DESIGN_POINTS
from llm_roofline.course.syllabus import chapter_exercises, objectives_of

ROOT = Path(__file__).resolve().parents[1]
PAGE = ROOT / "book" / "syllabus.md"


def _sections() -> dict[str, str]:
    """Chapter notebook name -> the text of its section on the syllabus page."""
    text = PAGE.read_text().split("## Chapter by chapter", 1)[1]
    out = {}
    for part in text.split("\n### ")[1:]:
        name = re.search(r"\{doc\}`\.\./notebooks/(\d\d_\w+)`", part).group(1)
        out[name] = part
    return out


PREFIX = {"warm-up": "Warm-up", "core": "Core", "challenge": "Challenge"}


def _normal(text: str) -> str:
    return " ".join(text.split())


def test_every_chapter_has_a_section():
    chapters = chapter_exercises(ROOT / "notebooks")
    assert sorted(_sections()) == sorted(chapters)


def test_objectives_are_the_notebooks_words_and_each_is_mapped_to_exercises():
    chapters = chapter_exercises(ROOT / "notebooks")
    for name, section in _sections().items():
        nb = json.loads((ROOT / "notebooks" / f"{name}.ipynb").read_text())
        bullets = re.findall(r"^- (.+)\n  (assessed by .+)$", section, re.M)
        assert [_normal(b) for b, _ in bullets] == [_normal(o) for o in objectives_of(nb)], name
        titles = {f"{'Design problem' if ex.design else PREFIX[ex.level]}: {ex.title}"
                  if ex.level else ex.title for ex in chapters[name]}
        for _, assessed in bullets:
            named = re.findall(r"\*\*(.+?)\*\*", assessed)
            assert named or "worked cells" in assessed, (name, assessed)
            unknown = [t for t in named if t not in titles]
            assert not unknown, f"{name}: the syllabus names exercises the chapter lacks: {unknown}"


def test_the_instructor_guide_has_a_rubric_for_each_design_problem_worth_its_points():
    guide = (ROOT / "book" / "instructor_guide.md").read_text()
    rubrics = guide.split("## Grading the design problems", 1)[1].split("\n## ", 1)[0]
    sections = {m.group(1): m.group(2) for m in
                re.finditer(r"^### Chapter (\d+): .*\n((?:.|\n)*?)(?=^### |\Z)", rubrics, re.M)}
    chapters = chapter_exercises(ROOT / "notebooks")
    with_design = {name[:2].lstrip("0") for name, exs in chapters.items() if any(e.design for e in exs)}
    assert set(sections) == with_design
    for chapter, text in sections.items():
        points = [int(p) for p in re.findall(r"^\|[^|\n]+\| (\d+) \|$", text, re.M)]
        assert sum(points) == DESIGN_POINTS and len(points) >= 4, f"chapter {chapter}: rubric points {points}"
        assert "*Reference answer.*" in text, f"chapter {chapter}: no reference answer"
