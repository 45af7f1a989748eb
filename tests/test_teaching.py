"""Each chapter page reads as a teacher writes (DESIGN.md, "Voice"; tests/teaching_metrics.py
says what is measured and how): short sentences, few parentheses, little visible code, two
problems worked by hand, exercises in order of level, no verdict as a section's spine.

A chapter is held to these once it has been rewritten in the book's voice: TAUGHT lists those
chapters, and a chapter joins it in the commit that rewrites it."""

from __future__ import annotations

import nbformat
import pytest

from teaching_metrics import ROOT, measure

TAUGHT: list[str] = ["01", "02", "03", "04", "05", "06", "07", "08", "09"]

MEAN_SENTENCE = 20.0  # words
P90_SENTENCE = 36  # words
PARENTHESES_PER_1000 = 12.0
VISIBLE_CODE_LINES = 140
BY_HAND = 2


def _path(chapter: str):
    (path,) = (ROOT / "notebooks").glob(f"{chapter}_*.ipynb")
    return path


@pytest.mark.parametrize("chapter", TAUGHT)
def test_a_taught_chapter_reads_as_a_teacher_writes(chapter):
    m = measure(_path(chapter))
    problems = []
    if m.mean_sentence > MEAN_SENTENCE:
        problems.append(f"sentences average {m.mean_sentence:.1f} words (at most {MEAN_SENTENCE})")
    if m.p90_sentence > P90_SENTENCE:
        problems.append(f"90th-percentile sentence {m.p90_sentence:.0f} words (at most {P90_SENTENCE})")
    if m.parentheses_per_1000 > PARENTHESES_PER_1000:
        problems.append(f"{m.parentheses_per_1000:.1f} parentheses per 1,000 words "
                        f"(at most {PARENTHESES_PER_1000})")
    if m.visible_code_lines > VISIBLE_CODE_LINES:
        problems.append(f"{m.visible_code_lines} visible code lines (at most {VISIBLE_CODE_LINES})")
    if len(m.by_hand) < BY_HAND:
        problems.append(f"{len(m.by_hand)} exercises worked by hand (at least {BY_HAND}: 'by hand' in "
                        "the title, no code cell in the solution)")
    if not m.levels_in_order:
        problems.append("exercise levels out of order: " + ", ".join(e.level for e in m.exercises))
    if m.verdicts:
        problems.append(f"verdict lines: {m.verdicts}")
    assert not problems, f"{chapter}: " + "; ".join(problems)


def _notebook(tmp_path, *cells):
    nb = nbformat.v4.new_notebook()
    nb.cells = list(cells)
    path = tmp_path / "99_x.ipynb"
    nbformat.write(nb, path)
    return path


def test_the_measure_counts_sentences_parentheses_code_levels_and_hand_work(tmp_path):
    md, code = nbformat.v4.new_markdown_cell, nbformat.v4.new_code_cell
    path = _notebook(
        tmp_path,
        md("# Title\n\nWe read the weights once (all of them). Then we stop.\n\n"
           "- one item here\n- $x = 2$ and `code` count as one word each\n\n"
           "| a | b |\n|---|---|\n| 1 | 2 |\n\nVerdict: the claim holds."),
        code("x = 1\n\ny = 2"),
        code("z = 3", metadata={"tags": ["hide-input"]}),
        md("````{exercise-start}\n:label: ex-a\n````\n**Core: Bytes by hand.** How many?"),
        md("````{solution-start} ex-a\n:class: dropdown\n````\nTwo bytes.\n````{solution-end}\n````"),
        md("````{exercise-start}\n:label: ex-b\n````\n**Warm-up: By hand too.** Count."),
        md("````{solution-start} ex-b\n:class: dropdown\n````\nSee the code."),
        code("print(2)", metadata={"tags": ["solution"]}),
        md("````{solution-end}\n````"),
    )
    m = measure(path)
    assert m.sentences[:4] == [8, 3, 3, 8]  # 'We read ... them).', 'Then we stop.', the two items
    assert m.parentheses == 1
    assert m.visible_code_lines == 2  # the hide-input and solution cells are folded on the page
    assert [e.level for e in m.exercises] == ["core", "warm-up"] and not m.levels_in_order
    assert [e.label for e in m.by_hand] == ["ex-a"]  # ex-b's solution has a code cell
    assert m.verdicts == ["Verdict: the claim holds."]
