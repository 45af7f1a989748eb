"""The PDF edition (`make book` builds it before the website; `make pdf` alone): read back with
poppler, it holds every chapter and every numbered figure, no unresolved reference, no raw MyST,
no error from a cell, and nothing runs off the right edge of a page. The PDF is print: no display
object's repr, no instruction only a website or a running notebook can follow ("drag the slider",
"click", "launch buttons"), and no caption apart from its figure. The student edition
(`make pdf-student`) has no worked solutions. The website links the PDF it serves.

The builds are session fixtures (tests/conftest.py): the PDF is built once, and shares the
jupyter cache with the website's build, so whichever runs second reads the notebooks' outputs
from the cache instead of executing them again."""

from __future__ import annotations

import re
import subprocess
import tempfile
from collections import Counter
from functools import cache
from html.parser import HTMLParser
from pathlib import Path

import nbformat
import pytest

from conftest import notebooks

pytestmark = pytest.mark.slow

PAGES = range(180, 330)  # about 240 pages today; a page count outside this range is a lost or doubled part
MARGIN_PT = 18  # no word ends closer than this to the paper's right edge (a quarter inch)
TOLERANCE_PT = 3  # nor more than this past the text block's right edge
CAPTION = re.compile(r"^\*\*Figure (\d+\.\d+)\.\*\*")
WORD = re.compile(r'<word xMin="[\d.]+" yMin="[\d.]+" xMax="([\d.]+)" yMax="[\d.]+">(.*)</word>')


@cache
def _text(pdf: Path) -> str:
    return subprocess.run(["pdftotext", "-layout", str(pdf), "-"], capture_output=True, text=True,
                          check=True).stdout


def _pages(pdf: Path) -> int:
    info = subprocess.run(["pdfinfo", str(pdf)], capture_output=True, text=True, check=True).stdout
    return int(re.search(r"^Pages:\s+(\d+)", info, re.M).group(1))


def _flat(text: str) -> str:
    """One space between words: headings and captions may break across lines."""
    return re.sub(r"\s+", " ", text)


def _title(path: Path) -> str:
    nb = nbformat.read(path, as_version=4)
    first = next(c for c in nb.cells if c.cell_type == "markdown" and c.source.lstrip().startswith("# "))
    return first.source.lstrip().splitlines()[0][2:].strip().replace("`", "")  # code spans print plain


def _captions() -> list[str]:
    numbers = []
    for path in notebooks():
        for cell in nbformat.read(path, as_version=4).cells:
            match = CAPTION.match(cell.source) if cell.cell_type == "markdown" else None
            if match:
                numbers.append(match.group(1))
    return numbers


def test_page_count(built_pdf):
    assert _pages(built_pdf) in PAGES, f"{_pages(built_pdf)} pages, expected {PAGES.start} to {PAGES.stop}"


def test_every_chapter_title(built_pdf):
    text = _flat(_text(built_pdf))
    titles = [_title(path) for path in notebooks()]
    assert len(titles) >= 8
    missing = [t for t in titles if _flat(t) not in text]
    assert not missing, f"chapter titles missing from the PDF: {missing}"


def test_every_figure_with_its_number(built_pdf):
    text = _flat(_text(built_pdf))
    numbers = _captions()
    assert len(numbers) >= 16, numbers
    missing = [n for n in numbers if f"Figure {n}." not in text]
    assert not missing, f"figures missing from the PDF (by their caption's number): {missing}"


def test_no_unresolved_reference_raw_markup_or_cell_error(built_pdf):
    text = _text(built_pdf)
    for bad in ("??", "{term}", "{cite}", "{doc}", "{ref}", ":::", "{solution", "{exercise", "{only}",
                "Traceback", "Error:", "Error(", "Exception"):
        lines = [line.strip() for line in text.splitlines() if bad in line]
        assert not lines, f"{bad!r} in the PDF: {lines[:5]}"


def test_nothing_runs_off_the_page(built_pdf):
    """No word ends in the right margin: code and outputs wrap, tables wrap their columns to the text
    block. The block's right edge is where justified lines end, the commonest right end of a word
    (pdftotext -bbox gives each word's box in points); a word may pass it by TOLERANCE_PT, and none
    may come within MARGIN_PT of the paper's edge."""
    out = subprocess.run(["pdftotext", "-bbox", str(built_pdf), "-"], capture_output=True, text=True,
                         check=True).stdout
    words, page, width = [], 0, None
    for line in out.splitlines():
        if m := re.search(r'<page width="([\d.]+)"', line):
            page, width = page + 1, float(m.group(1))
        elif m := WORD.search(line):
            words.append((page, width, float(m.group(1)), m.group(2)))
    assert page == _pages(built_pdf) and words
    edge = Counter(round(x) for _, _, x, _ in words).most_common(1)[0][0]
    assert edge < words[0][1] - MARGIN_PT
    over = [f"page {p}: {w!r} ends at {x:.0f} pt, the text block at {edge} pt, the paper at {wd:.0f}"
            for p, wd, x, w in words if x > edge + TOLERANCE_PT or x > wd - MARGIN_PT]
    assert not over, "words run into the right margin:\n" + "\n".join(over[:20])


DISPLAY_OBJECT = re.compile(r"<IPython\.|<ipywidgets\.|object at 0x[0-9a-f]+|<Figure size \d|"
                            r"<matplotlib\.|display object|interactive\(children=")
WEB_ONLY = {  # an instruction paper cannot follow -> the words that give it (case-insensitive)
    "drag": r"\bdrag(s|ged|ging)?\b",
    "click": r"\bclick(s|ed|ing)?\b",
    "hover": r"\bhover(s|ed|ing)?\b",
    "scroll": r"\bscroll(ing)? (down|up|back|to|through)\b",
    "launch buttons": r"\blaunch buttons?\b",
    "press play": r"\bpress(es)? play\b",
    "move the slider": r"\b(move|slide|use|moving|drag|set) the (\w+ )?sliders?\b",
    "slide a value": r"\bslide the\b",
    "the slider under the figure": r"\bsliders? (under|below|above|beneath)\b",
    "set by the slider": r"\b(set|chosen|picked) (by|with) the (\w+ )?sliders?\b",
    "the slider sets": r"\bthe (\w+ )?sliders? (sets|picks|stops|moves|changes)\b",
    "run the cell": r"\brun (the|this) (\w+ )?cells?\b",
}


def _parts(text: str) -> dict[str, str]:
    """The PDF's text by part: "front" (to chapter 1), "ch01".. one per chapter, "appendices".
    A chapter's first page carries a line that is only "CHAPTER" (an appendix's, "APPENDIX")."""
    starts = [(m.start(), m.group(1)) for m in re.finditer(r"^\s*(CHAPTER|APPENDIX)\s*$", text, re.M)]
    chapters = [at for at, kind in starts if kind == "CHAPTER"]
    appendix = next((at for at, kind in starts if kind == "APPENDIX"), len(text))
    bounds = [0, *chapters, appendix, len(text)]
    names = ["front", *(f"ch{i:02d}" for i in range(1, len(chapters) + 1)), "appendices"]
    return {name: text[a:b] for name, a, b in zip(names, bounds[:-1], bounds[1:], strict=True)}


def _web_only(text: str) -> list[str]:
    flat = _flat(text)
    return [f"{what}: ...{flat[max(0, m.start() - 60):m.end() + 40]}..."
            for what, pattern in WEB_ONLY.items() for m in re.finditer(pattern, flat, re.I)]


def test_the_web_only_words_are_caught_and_prose_is_not():
    """The word list on sentences the book had and has: each web-only one is caught, none of these
    descriptions of the website or of a running notebook is."""
    caught = ["Without a kernel, drag the slider under Figure 2.5 to change the prompt length.",
              "The sliders need a running kernel; on the website, use the launch buttons at the top.",
              "1.6 Move the sliders", "in JupyterLab they are collapsed: click it to show the code.",
              "on the H100's BF16 roofline, with the batch set by the slider.",
              "a readout of its regime; the slider sets the kernel's intensity.",
              "In JupyterLab or Colab, run the collapsed cell under this paragraph for live controls.",
              "Pick an accelerator and a precision, then slide the arithmetic intensity.",
              "The batch slider stops fitting beyond 212 users."]
    for sentence in caught:
        assert _web_only(sentence), sentence
    kept = ["In a running notebook, a cell here adds live sliders for both; the website and the PDF "
            "leave it out.", "Figure 4.5 takes the batch from 1 to 256 sequences, frame by frame.",
            "The pure function behind the roofline notebook's slider: the readout gives the TFLOPS.",
            "a slide longer than the screen scrolls.", "To run one with its live sliders:",
            "the website shows a kernel-free version of it: a scrubber, a slider over frames",
            "Outside IPython it prints nothing."]
    for sentence in kept:
        assert not _web_only(sentence) and not DISPLAY_OBJECT.search(sentence), sentence
    assert DISPLAY_OBJECT.search("C.5 Sources <IPython.core.display.HTML object>")


def test_no_display_object(built_pdf):
    """A cell's output prints as itself (a table, a figure, text), never as a Python repr."""
    lines = [line.strip() for line in _text(built_pdf).splitlines() if DISPLAY_OBJECT.search(line)]
    assert not lines, f"display objects printed as their repr: {lines[:5]}"


PARTS = ["front", *(f"ch{i:02d}" for i in range(1, len(notebooks()) + 1)), "appendices"]


@pytest.mark.parametrize("part", PARTS)
def test_no_web_only_instruction(built_pdf, part):
    """Paper has no slider to drag, nothing to click and no cell to run: each sentence that says so
    has a print form, or one wording true on both (a figure's frames, its panels). One test per
    part (``-k ch07``), so that a chapter's owner runs their own."""
    parts = _parts(_text(built_pdf))
    assert list(parts) == PARTS, f"the PDF's parts {list(parts)}, the book's {PARTS}"
    found = _web_only(parts[part])
    assert not found, f"{len(found)} web-only instructions in {part}:\n" + "\n".join(found)


ITEM = re.compile(r'<(image|text) top="(\d+)" left="(\d+)" width="(\d+)" height="(\d+)"[^>]*>'
                  r"(.*?)(?:</text>|$)", re.M)


@cache
def _layout(pdf: Path) -> dict[int, list[tuple]]:
    """Per page, each image and line of text as (kind, top, left, width, height, inner XML), in
    pixels from the page's top left (poppler's pdftohtml -xml, which writes the images beside
    its XML: in a folder of its own)."""
    with tempfile.TemporaryDirectory() as tmp:
        subprocess.run(["pdftohtml", "-xml", "-q", str(pdf), str(Path(tmp) / "pdf")],
                       capture_output=True, check=True)
        xml = (Path(tmp) / "pdf.xml").read_text(errors="replace")
    return {int(page.split('"')[0]): [(kind, *map(int, box), inner)
                                      for kind, *box, inner in ITEM.findall(page)]
            for page in re.split(r'<page number="', xml)[1:]}


def test_every_caption_is_under_its_figure(built_pdf):
    """A figure's caption never sits apart from its figure: on its page, an image ends above the
    caption's first line (_ext/printform.py forbids a page break between them)."""
    pages = _layout(built_pdf)
    captions = {page: [(m.group(1), top) for kind, top, *_, inner in items if kind == "text"
                       if (m := re.match(r"<b>Figure (\d+\.\d+)\.", inner.strip()))]  # bold: not prose
                for page, items in pages.items()}
    found, numbers = [n for page in captions.values() for n, _ in page], _captions()
    assert len(found) >= len(numbers), f"{len(found)} captions found, the notebooks hold {len(numbers)}"
    apart = [f"page {page}: Figure {n}" for page, items in pages.items() for n, top in captions[page]
             if not any(kind == "image" and t + h <= top + 2 for kind, t, _, _, h, _ in items)]
    assert not apart, "captions on a page with no figure above them:\n" + "\n".join(apart)


def _overlap(a: tuple, b: tuple) -> bool:
    """Two boxes (kind, top, left, width, height, ...) share over half a line's height and a few
    pixels across."""
    down = min(a[1] + a[4], b[1] + b[4]) - max(a[1], b[1])
    across = min(a[2] + a[3], b[2] + b[3]) - max(a[2], b[2])
    return down > 0.5 * min(a[4], b[4]) and across > 4


def test_no_text_runs_into_the_footer(built_pdf):
    """Nothing is printed over a page's foot line (its number and running title): a figure and a
    caption kept together that are taller than the page would run into it, so an image is at most
    0.85 of the page's height (_config.yml)."""
    over = []
    for page, items in _layout(built_pdf).items():
        texts = [item for item in items if item[0] == "text"]
        numbers = [item for item in texts if re.fullmatch(r"\s*(<b>)?[0-9ivxlc]+(</b>)?\s*", item[5])]
        if not numbers:
            continue
        foot = max(numbers, key=lambda item: item[1])
        line = [item for item in texts if abs(item[1] - foot[1]) <= 2]
        over += [f"page {page}: {re.sub(r'<[^>]+>', '', item[5])[:60]!r}" for item in texts
                 if item not in line and any(_overlap(item, f) for f in line)]
    assert not over, "text over the foot of its page:\n" + "\n".join(over[:20])


def test_the_calculator_prints_a_worked_example(built_pdf):
    """The live page's print form: the library's own report, computed when the book was built."""
    text = _flat(_text(built_pdf))
    for words in ("llm-roofline estimate --model llama-3-70b", "memory per GPU", "KV cache",
                  "TTFT, whole batch", "TPOT, each user", "throughput, all users",
                  "per kernel, one decode step", "down_proj", "website"):
        assert words in text, f"{words!r} missing from the calculator's worked example"


def test_student_edition_has_no_solutions(built_pdf, built_student_pdf):
    """`make pdf-student`: no solution heading and no solution's answer check, but every exercise's
    hint; the title page says which edition it is."""
    full, student = _text(built_pdf), _text(built_student_pdf)
    solutions = len(re.findall(r"Solution to", full))
    assert solutions >= 8 * 4, f"only {solutions} solutions in the full PDF"
    assert "Solution to" not in student, [line for line in student.splitlines() if "Solution to" in line][:5]
    # a solution in code checks its computed value (one worked by hand is prose, its check hidden);
    # an exercise's text shows the call with `answer`
    checked = re.compile(r'check\("[a-z0-9-]+", (?!answer\b|my_answer\b|your_answer\b)')
    assert len(checked.findall(full)) >= solutions // 3 and not checked.findall(student)
    assert student.count("Hint") == full.count("Hint") > 0, "the student edition lost hints"
    assert "(student edition)" in _flat(student)
    assert _pages(built_student_pdf) < _pages(built_pdf)


class _Links(HTMLParser):
    """Every link to a PDF on a page."""

    def __init__(self):
        super().__init__()
        self.hrefs: list[str] = []

    def handle_starttag(self, tag, attrs):
        href = dict(attrs).get("href") or ""
        if tag == "a" and href.endswith(".pdf"):
            self.hrefs.append(href)


def test_the_website_links_the_pdf_it_serves(built_pdf, built_book):
    served = built_book / "downloads" / built_pdf.name
    assert served.read_bytes() == built_pdf.read_bytes(), "the site serves another PDF than the one built"
    for page in (built_book / "book" / "index.html", built_book / "notebooks" / "03_roofline.html",
                 built_book / "genindex.html"):
        parser = _Links()
        parser.feed(page.read_text())
        assert parser.hrefs, f"no link to the PDF in {page.relative_to(built_book)}"
        for href in parser.hrefs:
            assert (page.parent / href).resolve() == served.resolve(), f"{page.name}: {href}"
