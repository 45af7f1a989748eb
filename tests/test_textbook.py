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
    return (cell.cell_type == "code"
            and any(f in cell.source for f in ("plt.show()", "scrubber(", "small_multiples("))
            and not re.search(r"^live\(", cell.source, re.M))


def _alt_text(cell) -> str:
    """A figure's alt text: its cell's ``mystnb.image.alt``, or the ``alt`` of its
    ``small_multiples`` call (an HTML figure, whose images MyST-NB does not caption)."""
    for node in ast.walk(ast.parse(cell.source)):
        if isinstance(node, ast.Call) and getattr(node.func, "id", "") == "small_multiples":
            alt = next((k.value for k in node.keywords if k.arg == "alt"), None)
            return ast.literal_eval(alt) if alt is not None else ""
    return cell.metadata.get("mystnb", {}).get("image", {}).get("alt", "")


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
        if "scrubber(" not in cell.source and len(_alt_text(cell)) < 40:
            problems.append(f"cell {i} (Figure {chapter}.{numbers[-1]}): alt text missing or "
                            "too short (mystnb.image.alt, or small_multiples' alt: what the "
                            "figure shows, in a sentence)")
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


GLOSSARY_ENTRY_END = re.compile(r"Defined in \{doc\}`chapter (\d) <\.\./notebooks/(\d\d)_[a-z0-9_]+>`\.$")


def _glossary() -> list[tuple[list[str], int | None]]:
    """The glossary's entries: the names each defines and the chapter its last line names
    ("Defined in {doc}`chapter N <...>`."), or None where it names none."""
    from conftest import ROOT

    body = (ROOT / "book" / "glossary.md").read_text().split("```{glossary}")[1].split("```")[0]
    entries = []
    for block in re.split(r"\n\s*\n", body):
        lines = [line for line in block.splitlines() if line.strip() and not line.startswith(":")]
        if not lines:
            continue
        names = [line.strip() for line in lines if not line.startswith(" ")]
        match = GLOSSARY_ENTRY_END.search(lines[-1])
        assert not match or match.group(1) == str(int(match.group(2))), f"{names}: link and number disagree"
        entries.append((names, int(match.group(1)) if match else None))
    return entries


def _mentions(names: list[str]) -> re.Pattern:
    """A term's names in running text: acronyms as written, words in any case, plural too."""
    parts = []
    for name in names:
        words = r"\s+".join(re.escape(w) for w in name.split())
        parts.append(rf"\b{words}s?\b" if name.isupper() or re.search(r"\d", name)
                     else rf"(?i:\b{words}s?\b)")
    return re.compile("|".join(parts))


def _roles(source: str) -> set[str]:
    """The glossary terms a markdown cell links with {term}."""
    return {re.sub(r".*<(.*)>$", r"\1", r, flags=re.S).lower()
            for r in re.findall(r"\{term\}`([^`]*)`", source)}


def _prose(source: str) -> str:
    """A markdown cell's running text: no code block, directive fence or option, code span or
    role target (a fence that names a language opens code; a bare or directive fence does not)."""
    kept, code = [], None
    for line in source.splitlines():
        fence = re.match(r"^(`{3,}|~{3,})\s*(\{?)([\w-]*)", line)
        if code:
            code = None if fence and fence.group(1) == code and not fence.group(3) else code
        elif fence and fence.group(3) and not fence.group(2):
            code = fence.group(1)
        elif not fence and not line.startswith(":"):
            kept.append(line)
    return re.sub(r"`[^`\n]*`", " ", "\n".join(kept))


def test_every_glossary_entry_names_the_chapter_that_defines_it():
    entries = _glossary()
    assert len(entries) > 40, f"only {len(entries)} glossary entries found"
    missing = [names[0] for names, d in entries if d is None]
    assert not missing, ("glossary entries whose last line is not "
                         f"'Defined in {{doc}}`chapter N <...>`.': {missing}")
    problems = []
    for names, d in entries:
        nb = nbformat.read(notebooks()[d - 1], as_version=4)
        cells = [c.source for c in nb.cells if c.cell_type == "markdown"]
        if not any(_mentions(names).search(_prose(s)) or _roles(s) & {n.lower() for n in names}
                   for s in cells):
            problems.append(f"{names[0]}: chapter {d}, which the glossary says defines it, never names it")
    assert not problems, "\n".join(problems)


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_a_term_used_before_its_chapter_is_introduced_and_linked_forward(path):
    """Prerequisites in order: a chapter that uses a term a later chapter defines links it to
    the glossary where it first names it and, in the same cell, points to that chapter."""
    chapter = _chapter(path)
    cells = [c.source for c in nbformat.read(path, as_version=4).cells if c.cell_type == "markdown"]
    problems = []
    for names, d in _glossary():
        if d <= chapter:
            continue
        lowered, mentions = {n.lower() for n in names}, _mentions(names)
        for source in cells:
            hit = mentions.search(_prose(source))
            if not hit and not _roles(source) & lowered:
                continue
            linked = bool(_roles(source) & lowered)
            forward = re.search(rf"\{{doc\}}`[^`]*0{d}_|(?i:\bchapter {d}\b)", source)
            if not (linked and forward):
                lacks = [what for what, ok in (("a {term} link", linked),
                                               (f"a pointer to chapter {d}", forward)) if not ok]
                where = _prose(source)[max(0, hit.start() - 50):hit.end() + 30] if hit else source[:80]
                problems.append(f"{names[0]} (defined in chapter {d}), first named here without "
                                f"{' or '.join(lacks)}: ...{' '.join(where.split())}...")
            break
    assert not problems, "\n".join(problems)


# The characters of code a line holds at 1280 px without scrolling sideways (measured in
# Chromium: the text column holds 77; the narrower boxes of a worked solution and of a folded
# cell, 74). A wider line scrolls inside its box; test_browser checks the boxes themselves.
CODE_WIDTH, BOXED_CODE_WIDTH = 77, 74


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_visible_code_fits_its_box(path):
    nb = nbformat.read(path, as_version=4)
    long = []
    for i, cell in enumerate(nb.cells):
        if cell.cell_type != "code" or {"remove-cell", "remove-input"} & set(_tags(cell)):
            continue
        boxed = {"solution", "hide-input"} & set(_tags(cell))
        width = BOXED_CODE_WIDTH if boxed else CODE_WIDTH
        long += [f"cell {i}: {len(line)} > {width}: {line.strip()[:60]}"
                 for line in cell.source.splitlines() if len(line) > width]
    assert not long, "code lines wider than their box at 1280 px:\n" + "\n".join(long)
