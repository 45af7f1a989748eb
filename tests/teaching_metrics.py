"""How a chapter reads, measured (DESIGN.md, "Voice" and "A chapter notebook").

One measurement of a chapter notebook, used by tests/test_teaching.py and printed by
``python tests/teaching_metrics.py`` for every chapter:

- sentences of the prose: mean and 90th-percentile length in words;
- parentheses per 1,000 words of prose;
- code lines a website reader sees without unfolding anything;
- exercises: their levels in page order, and which are worked by hand (the title says
  "by hand" and the worked solution holds no code cell);
- lines that make the article's claim the spine of a section ("Verdict:").

What counts as prose: the text of markdown cells, without code (fenced or inline), math,
directive fences and options, tables, headings, HTML, figure captions' markup, URLs and the
target half of roles and links. A sentence ends at ``.``, ``?`` or ``!`` followed by a space
or the end of a line, at the end of a list item, a paragraph or a cell.
"""

from __future__ import annotations

import re
import statistics
import sys
from dataclasses import dataclass, field
from pathlib import Path

import nbformat

ROOT = Path(__file__).resolve().parents[1]

# Cells a website reader does not see without unfolding: removed, folded, or a worked solution
# (a dropdown that stays closed until the reader opens it).
HIDDEN_TAGS = {"remove-cell", "remove-input", "hide-input", "hide-cell", "solution"}
LEVELS = ("warm-up", "core", "challenge", "design problem")
EXERCISE_TITLE = re.compile(r"^\*\*(Warm-up|Core|Challenge|Design problem)\b[^*]*\*\*", re.I | re.M)
VERDICT = re.compile(r"\bVerdict\s*:", re.I)


@dataclass
class Exercise:
    label: str
    level: str
    title: str
    by_hand: bool = False
    solution_has_code: bool = False


@dataclass
class Metrics:
    words: int = 0
    sentences: list[int] = field(default_factory=list)
    parentheses: int = 0
    visible_code_lines: int = 0
    exercises: list[Exercise] = field(default_factory=list)
    verdicts: list[str] = field(default_factory=list)

    @property
    def mean_sentence(self) -> float:
        return statistics.fmean(self.sentences) if self.sentences else 0.0

    @property
    def p90_sentence(self) -> float:
        if not self.sentences:
            return 0.0
        ordered = sorted(self.sentences)
        return float(ordered[min(len(ordered) - 1, round(0.9 * (len(ordered) - 1)))])

    @property
    def parentheses_per_1000(self) -> float:
        return 1000 * self.parentheses / self.words if self.words else 0.0

    @property
    def by_hand(self) -> list[Exercise]:
        return [e for e in self.exercises if e.by_hand and not e.solution_has_code]

    @property
    def levels_in_order(self) -> bool:
        ranks = [LEVELS.index(e.level) for e in self.exercises]
        return ranks == sorted(ranks)


def _prose(markdown: str) -> str:
    """The running text of one markdown cell (see the module's docstring)."""
    text = re.sub(r"^(`{3,}|~{3,}).*?^\1\s*$", "\n\n", markdown, flags=re.S | re.M)  # code blocks
    text = re.sub(r"^\s*(`{3,}|:{3,})\{?[\w-]*\}?.*$", "\n\n", text, flags=re.M)  # directive fences
    text = re.sub(r"^:[\w-]+:.*$", "", text, flags=re.M)  # directive options
    text = re.sub(r"\$\$.*?\$\$", " X ", text, flags=re.S)  # display math
    text = re.sub(r"\$[^$\n]+\$", "X", text)  # inline math
    text = re.sub(r"\{[\w:-]+\}`([^`<]*?)\s*(?:<[^`]*>)?`", r"\1", text)  # roles: their text
    text = re.sub(r"`[^`]*`", "code", text)  # inline code
    text = re.sub(r"!?\[([^\]]*)\]\([^)]*\)", r"\1", text)  # links: their text
    text = re.sub(r"<[^>]+>", " ", text)  # HTML
    text = re.sub(r"^\s*\|.*$", "\n\n", text, flags=re.M)  # tables
    text = re.sub(r"^\s*#+ .*$", "\n\n", text, flags=re.M)  # headings
    text = re.sub(r"^\s*([-*+]|\d+\.)\s+", "\n\n", text, flags=re.M)  # a list item starts anew
    return text.replace("**", "").replace("*", "")


def _sentences(prose: str) -> list[int]:
    lengths = []
    for paragraph in re.split(r"\n\s*\n", prose):
        flat = " ".join(paragraph.split())
        # a sentence ends at . ? ! before a space and a capital, a digit, a quote or the end
        for sentence in re.split(r"(?<=[.?!])[\"')\]]*\s+(?=[A-Z0-9\"'(])", flat):
            n = len(re.findall(r"[A-Za-z0-9][\w'’.,/%×-]*", sentence))
            if n:
                lengths.append(n)
    return lengths


def measure(path: Path) -> Metrics:
    nb = nbformat.read(path, as_version=4)
    m = Metrics()
    current: Exercise | None = None
    in_solution = False
    for cell in nb.cells:
        tags = set(cell.metadata.get("tags", []))
        source = cell.source
        if cell.cell_type == "code":
            if not tags & HIDDEN_TAGS:
                m.visible_code_lines += sum(1 for line in source.splitlines() if line.strip())
            if in_solution and current is not None:
                current.solution_has_code = True
            continue
        if cell.cell_type != "markdown":
            continue
        start = re.search(r"\{exercise-start\}\s*\n:label:\s*(\S+)", source)
        if start:
            title = EXERCISE_TITLE.search(source)
            level = title.group(1).lower() if title else "core"
            current = Exercise(start.group(1), level, title.group(0) if title else "")
            current.by_hand = "by hand" in current.title.lower()
            m.exercises.append(current)
        if "{solution-start}" in source:
            in_solution = True
        if "{solution-end}" in source:
            in_solution = False
        m.verdicts += [line for line in source.splitlines() if VERDICT.search(line)]
        prose = _prose(source)
        m.sentences += _sentences(prose)
        m.words += len(re.findall(r"[A-Za-z0-9][\w'’.,/%×-]*", prose))
        m.parentheses += prose.count("(")
    return m


def chapters() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("[0-9][0-9]_*.ipynb"))


def report(path: Path) -> str:
    m = measure(path)
    levels = ", ".join(e.level for e in m.exercises)
    return (f"{path.stem}: {m.words} words, sentences mean {m.mean_sentence:.1f} p90 "
            f"{m.p90_sentence:.0f}, {m.parentheses_per_1000:.1f} parentheses/1,000 words, "
            f"{m.visible_code_lines} visible code lines, {len(m.by_hand)} by hand, levels "
            f"{'in order' if m.levels_in_order else 'OUT OF ORDER'} ({levels}), "
            f"{len(m.verdicts)} verdict lines")


if __name__ == "__main__":
    for p in (Path(a) for a in sys.argv[1:]) if len(sys.argv) > 1 else chapters():
        print(report(p))
