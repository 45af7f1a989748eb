"""The lecture decks (`make slides`): their sources in `slides/NN.md`, and the built decks
opened in headless Chromium at 1280 x 720.

Fast (no kernel, no browser): the parser reads every deck source, holds it against its chapter
(12 to 25 slides, every `figure:N.M` a figure the chapter draws), and every number a deck writes
appears, written the same way, in its chapter's markdown (one source of numbers). A bad source
is one line naming the deck, the slide and what is wrong.

In Chromium (`browser`, `slow`): every deck is built as `make slides` builds it (each chapter run
once in a fresh kernel for its figures), then each slide is shown at 1280 x 720 and fails on a
text block of more than 45 words, a slide whose text ends with ":", a raw document name (a
notebook's stem, a `.ipynb` or `.md` file), anything past the slide's edge, a chapter figure
without its "Figure N.M" label, a figure whose texts overlap, unrendered math, and a script or
file fetched from outside. A screenshot of every slide is saved. A deck written to break each
rule shows that each check can fail.
"""

from __future__ import annotations

import re
import shutil
from pathlib import Path
from urllib.parse import urlparse

import nbformat
import pytest

from conftest import ROOT, SCREENSHOTS
from llm_roofline.course import slides
from test_bad_input import one_line

DECKS = ROOT / "slides"
MAX_WORDS = 45


def deck_sources() -> list[Path]:
    return sorted(p for p in DECKS.glob("*.md") if re.fullmatch(r"\d{2}", p.stem))


def chapter(deck) -> nbformat.NotebookNode:
    return nbformat.read(ROOT / "notebooks" / f"{deck.chapter}.ipynb", as_version=4)


# ---- the sources, without a kernel or a browser -------------------------------------------

# A number as a reader sees it: digits with thousands commas and decimals ("3,350", "0.5").
# "Figure 4.2", "Chapter 4", "Exercise 4.1" and "slide 3" are names, not quantities.
NUMBER = re.compile(r"(?<![\w.])\d+(?:,\d{3})*(?:\.\d+)?")
NAMES = re.compile(r"\b(?:Figures?|Chapters?|chapters?|Exercises?|Section|[Ss]lide|Equation)\s+\d+(?:\.\d+)?"
                   r"|figure:\d+\.\d+")


def numbers(text: str) -> set[str]:
    return set(NUMBER.findall(NAMES.sub(" ", text)))


def unsourced_numbers(deck, nb) -> list[str]:
    """The numbers a deck writes (slides, captions, notes) that its chapter's markdown does not."""
    prose = "\n".join(c.source for c in nb.cells if c.cell_type == "markdown")
    allowed = numbers(prose)
    out = []
    for s in deck.slides:
        for n in sorted(numbers("\n".join((s.heading, s.body, s.caption, s.notes))) - allowed):
            out.append(f"slide {s.number}: {n}")
    return out


def test_there_is_a_deck_for_each_of_the_first_five_chapters():
    stems = {p.stem for p in deck_sources()}
    assert {"01", "02", "03", "04", "05"} <= stems, stems


@pytest.mark.parametrize("path", deck_sources(), ids=lambda p: p.stem)
def test_a_deck_source_parses_and_fits_its_chapter(path):
    deck = slides.read_deck(path)
    nb = chapter(deck)
    slides.check_deck(deck, nb)  # 12 to 25 slides, every figure:N.M the chapter's
    assert deck.slides[0].heading and deck.slides[0].body, "the title slide lists the objectives"
    assert deck.figures, f"{path.name} shows none of its chapter's figures"
    bad = unsourced_numbers(deck, nb)
    assert not bad, f"{path.name}: numbers not in {deck.chapter}'s markdown: {bad}"


def test_a_number_not_in_the_chapter_is_found():
    deck = slides.read_deck(DECKS / "04.md")
    nb = chapter(deck)
    assert not unsourced_numbers(deck, nb)
    slide = deck.slides[1]
    wrong = slides.Deck(deck.name, deck.chapter, deck.title, (
        deck.slides[0], slides.Slide(2, slide.heading, slide.body + "\n- a step of 12,345.6 ms", ""),
        *deck.slides[2:]))
    assert unsourced_numbers(wrong, nb) == ["slide 2: 12,345.6"]
    assert numbers("Figure 4.2 shows 3,350 GB/s in chapter 3, slide 12") == {"3,350"}


def title_slip(deck) -> list[str]:
    """How a deck's title slide disagrees with its front matter: the heading starts with the
    title (code marks aside; a subtitle may follow, as deck 04's ": I = B × L"), and each
    objective starts with a capital, as in every deck."""
    out = []
    heading = deck.slides[0].heading.replace("`", "")
    if not heading.startswith(deck.title):
        out.append(f"heading {heading!r} does not start with the title {deck.title!r}")
    for line in deck.slides[0].body.splitlines():
        if line.startswith("- ") and not line[2:3].isupper():
            out.append(f"objective not capitalised: {line[2:]!r}")
    return out


@pytest.mark.parametrize("path", deck_sources(), ids=lambda p: p.stem)
def test_the_title_slide_matches_the_front_matter(path):
    deck = slides.read_deck(path)
    assert not title_slip(deck), f"{path.name}: {title_slip(deck)}"


def test_a_title_slip_is_found():
    deck = slides.read_deck(DECKS / "09.md")
    first = deck.slides[0]
    slipped = slides.Deck(deck.name, deck.chapter, deck.title, (
        slides.Slide(1, "Serving at scale: layouts", first.body + "\n- size a layout", ""),
        *deck.slides[1:]))
    assert title_slip(slipped) == [
        f"heading 'Serving at scale: layouts' does not start with the title {deck.title!r}",
        "objective not capitalised: 'size a layout'"]


GOOD = """---
chapter: 04_why_decode_is_bound   # the notebook's stem
title: A deck
---

# A deck
Chapter 4

- one objective
""" + "".join(f"\n---\n\n## Slide {i}\n- a point\n\nNote:\nWhat we say.\n" for i in range(2, 12)) + """
---

## A figure
![Figure 4.2. A caption.](figure:4.2)
"""


def test_the_parser_reads_headings_notes_figures_and_math():
    deck = slides.parse_deck(GOOD, "slides/04.md")
    assert (deck.chapter, deck.title, len(deck.slides)) == ("04_why_decode_is_bound", "A deck", 12)
    assert deck.slides[1].heading == "Slide 2" and deck.slides[1].notes == "What we say."
    assert deck.slides[1].body == "- a point"
    assert deck.slides[-1].figure == "4.2" and deck.slides[-1].caption == "A caption."
    assert deck.figures == ["4.2"]
    html = slides.render_markdown("- $a_1 < b$ and $$x = \\frac{1}{2}$$")
    assert "$a_1 &lt; b$" in html and "$$x = \\frac{1}{2}$$" in html and "<em>" not in html
    # a fenced block's "---" is not a slide break
    fenced = GOOD.replace("- a point\n", "- a point\n```\n---\n```\n", 1)
    assert len(slides.parse_deck(fenced).slides) == 12


def test_the_built_page_carries_notes_labels_and_no_remote_asset():
    deck = slides.parse_deck(GOOD, "slides/04.md")
    page = slides.deck_html(deck)
    assert page.count("<section") == 12 and page.count('<aside class="notes">') == 10
    assert '<span class="llm-label">Figure 4.2.</span> A caption.' in page
    assert not re.search(r"""(?:src|href)=["']?(?:https?:)?//""", page)
    assert 'src="mathjax/tex-chtml.js"' in page and "dist/plugin/notes.js" in page


@pytest.mark.parametrize("edit,match", [
    (lambda t: t.replace("chapter: 04_why_decode_is_bound   # the notebook's stem\n", ""),
     "lacks the key 'chapter'"),
    (lambda t: t.replace("title: A deck\n", ""), "lacks the key 'title'"),
    (lambda t: t.replace("title: A deck\n", "title: A deck\ntheme: dark\n"),
     "unknown front-matter key 'theme'"),
    (lambda t: t.replace("chapter: 04_why_decode_is_bound", "chapter: why_decode"), "notebook's stem"),
    (lambda t: t[4:], "open with a front matter"),
    (lambda t: t.replace("# A deck\n", "## A deck\n"), "slide 1: the title slide must begin"),
    (lambda t: t.replace("## Slide 3\n", "Slide 3\n"), "slide 3: a slide must begin with a '## '"),
    (lambda t: t.replace("## Slide 3\n- a point\n", "## Slide 3\n- a point\n## Another\n"),
     "slide 3 (Slide 3): a second heading"),
    (lambda t: t.replace("![Figure 4.2. A caption.]", "![A caption.]"),
     "slide 12 (A figure): the alt text of figure:4.2 must start with 'Figure 4.2. '"),
    (lambda t: t.replace("![Figure 4.2. A caption.]", "![Figure 4.3. A caption.]"),
     "must start with 'Figure 4.2. '"),
    (lambda t: t.replace("(figure:4.2)", "(figure:4.2)\n\n- and a point"), "must be alone on its slide"),
    (lambda t: t.replace("(figure:4.2)", "(plot.png)"), "image target 'plot.png'"),
    (lambda t: t.replace("- a point", "- a {term}`roofline`", 1), "MyST markup"),
    (lambda t: t + "\n---\n\n---\n\n## After\n", "an empty slide"),
], ids=lambda x: x if isinstance(x, str) else "")
def test_a_bad_source_is_one_line_naming_the_deck_and_slide(edit, match):
    one_line(lambda: slides.parse_deck(edit(GOOD), "slides/04.md"), "slides/04.md", match)


def test_a_deck_is_held_against_its_chapter():
    nb = nbformat.read(ROOT / "notebooks" / "04_why_decode_is_bound.ipynb", as_version=4)
    assert slides.chapter_figures(nb) == {f"4.{i}": slides.chapter_figures(nb)[f"4.{i}"] for i in range(1, 7)}
    slides.check_deck(slides.parse_deck(GOOD, "slides/04.md"), nb)
    missing = GOOD.replace("4.2", "4.9")
    one_line(lambda: slides.check_deck(slides.parse_deck(missing, "slides/04.md"), nb),
             "slides/04.md, slide 12 (A figure): figure:4.9", "has no Figure 4.9", "4.1, 4.2, 4.3")
    short = GOOD.split("\n---\n\n## Slide 11")[0]
    one_line(lambda: slides.check_deck(slides.parse_deck(short, "slides/04.md"), nb),
             "slides/04.md: 10 slides; a deck has 12 to 25")
    long = GOOD + "".join(f"\n---\n\n## More {i}\n- x\n" for i in range(14))
    one_line(lambda: slides.check_deck(slides.parse_deck(long, "slides/04.md"), nb), "26 slides")


def test_the_build_refuses_a_bad_deck_before_it_writes(tmp_path):
    decks = tmp_path / "slides"
    decks.mkdir()
    (decks / "04.md").write_text(GOOD.replace("4.2", "4.9"))
    (decks / "README.md").write_text("not a deck")
    out = tmp_path / "out"
    one_line(lambda: slides.build(decks, ROOT / "notebooks", out), "slides/04.md, slide 12",
             "figure:4.9")
    (decks / "04.md").write_text(GOOD.replace("04_why_decode_is_bound", "04_why_decode"))
    one_line(lambda: slides.build(decks, ROOT / "notebooks", out),
             "slides/04.md: front-matter key 'chapter' is '04_why_decode'", "04_why_decode_is_bound")
    (decks / "04.md").write_text(GOOD.replace("04_why_decode_is_bound", "03_roofline"))
    one_line(lambda: slides.build(decks, ROOT / "notebooks", out), "not chapter 04")
    assert not out.exists()


# ---- the built decks, in Chromium ---------------------------------------------------------

# What a slide shows, measured in the page: its text blocks and their words (a formula counts as
# one word), its text's last character, its visible text (for raw document names), every visible
# element past the slide's edge, every image and whether it sits under a "Figure N.M" label.
CHECK_JS = """(index) => {
  const slide = Reveal.getSlides()[index];
  const at = Reveal.getIndices(slide);
  Reveal.slide(at.h, at.v);
  const visible = e => { const s = getComputedStyle(e); return e.getClientRects().length > 0
      && s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity) > 0; };
  const BLOCK = 'p, li, figcaption, td, th, h1, h2, h3, h4, blockquote, pre, div';
  const blocks = [];
  for (const b of slide.querySelectorAll(BLOCK)) {
    if (b.closest('aside.notes, mjx-container') || !visible(b)) continue;
    let words = 0;
    const walk = n => {
      for (const c of n.childNodes) {
        if (c.nodeType === Node.TEXT_NODE) words += c.textContent.split(/\\s+/).filter(Boolean).length;
        else if (c.nodeType === Node.ELEMENT_NODE) {
          if (c.matches('mjx-container')) words += 1;
          else if (!c.matches(BLOCK + ', ul, ol, table, aside')) walk(c);
        }
      }
    };
    walk(b);
    if (words) blocks.push({words, text: b.innerText.trim().slice(0, 60)});
  }
  const box = slide.getBoundingClientRect();
  const outside = [];
  for (const e of slide.querySelectorAll('*')) {
    if (e.closest('aside.notes, mjx-assistive-mml') || !visible(e)) continue;
    const r = e.getBoundingClientRect();
    if (!r.width || !r.height) continue;
    if (r.bottom > box.bottom + 0.5 || r.right > box.right + 0.5
        || r.left < box.left - 0.5 || r.top < box.top - 0.5)
      outside.push(`${e.tagName.toLowerCase()} "${(e.innerText || '').trim().slice(0, 40)}" at `
                   + [r.left, r.right, r.top, r.bottom].map(Math.round).join(', '));
  }
  const figures = [...slide.querySelectorAll('img, [role=img]')].map(img => {
    const figure = img.closest('figure');
    const label = figure && figure.dataset.figure;
    const caption = figure && figure.querySelector('figcaption');
    return {label: label || null, caption: caption ? caption.innerText.trim() : '',
            overlaps: parseInt(img.dataset.overlaps || '0'), px: parseFloat(img.dataset.minPx || 'NaN')};
  });
  const text = slide.innerText.trim();
  const scrolls = slide.scrollHeight > slide.clientHeight + 1 || slide.scrollWidth > slide.clientWidth + 1;
  const raw = text.includes('$$') || /\\\\frac\\{|\\\\times/.test(text);
  return {blocks, text, outside: outside.slice(0, 5), figures, scrolls, raw,
          scale: Reveal.getScale(), heading: (slide.querySelector('h1, h2') || {}).innerText || ''};
}"""

RAW_NAME = re.compile(r"\b\d{2}_[a-z0-9]+(?:_[a-z0-9]+)+\b|\S+\.ipynb\b|\b[\w-]+\.md\b")


def slide_problems(number: int, result: dict) -> list[str]:
    """Every rule a slide, as measured by CHECK_JS, breaks; one line each."""
    at = f"slide {number} ({result['heading'][:40]})"
    out = [f"{at}: a text block of {b['words']} words (at most {MAX_WORDS}): {b['text']!r}"
           for b in result["blocks"] if b["words"] > MAX_WORDS]
    if result["text"].endswith(":"):
        out.append(f"{at}: its text ends with ':' and nothing after it")
    out += [f"{at}: a raw document name {m!r}" for m in RAW_NAME.findall(result["text"])]
    out += [f"{at}: past the slide's edge: {e}" for e in result["outside"]]
    if result["scrolls"]:
        out.append(f"{at}: its content scrolls")
    if result["raw"]:
        out.append(f"{at}: unrendered math")
    for f in result["figures"]:
        if not f["label"] or not f["caption"].startswith(f"Figure {f['label']}."):
            out.append(f"{at}: a figure without its 'Figure N.M' label (caption {f['caption'][:40]!r})")
        elif f["overlaps"]:
            out.append(f"{at}: Figure {f['label']} has {f['overlaps']} pairs of overlapping texts")
    return out


@pytest.fixture(scope="module")
def browser():
    from test_browser import launched_chromium

    with launched_chromium() as b:
        yield b


def _npm():
    import os

    if not shutil.which("npm"):
        message = "npm is not installed (apt-get install nodejs npm): the decks install reveal.js with it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    _npm()
    out = tmp_path_factory.mktemp("slides")
    slides.build(DECKS, ROOT / "notebooks", out, execute=True, jobs=1)  # one kernel: chapter 1 times itself
    return out


def show(browser, folder: Path, file: str, shots: Path | None = None) -> tuple[int, list[str]]:
    """Open a built deck at 1280 x 720; (its slide count, every problem of every slide)."""
    from test_browser import serving

    with serving(folder) as server:
        context = browser.new_context(viewport={"width": 1280, "height": 720})
        page = context.new_page()
        fetched, errors = [], []
        local = urlparse(server).netloc

        def route(r):
            url = r.request.url
            if urlparse(url).netloc == local or url.startswith(("data:", "blob:")):
                r.continue_()
            else:
                fetched.append(url)
                r.abort()

        page.route("**/*", route)
        page.on("pageerror", lambda e: errors.append(str(e)))
        try:
            page.goto(f"{server}/{file}", wait_until="load")
            page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=30_000)
            page.evaluate("MathJax.startup.promise")
            total = page.evaluate("Reveal.getTotalSlides()")
            problems = [f"fetched from outside: {u}" for u in fetched]
            problems += [f"script error: {e}" for e in errors]
            for i in range(total):
                result = page.evaluate(CHECK_JS, i)
                assert result["scale"] == pytest.approx(1.0, abs=0.01), "the slide is not drawn at 1280 x 720"
                problems += slide_problems(i + 1, result)
                if shots:
                    page.screenshot(path=str(shots / f"{Path(file).name.split('.')[0]}-{i + 1:02d}.png"))
        finally:
            context.close()
    return total, problems


@pytest.mark.slow
@pytest.mark.browser
@pytest.mark.parametrize("path", deck_sources(), ids=lambda p: p.stem)
def test_every_deck_reads_at_1280_by_720(browser, decks, path):
    deck = slides.read_deck(path)
    shots = SCREENSHOTS / "slides"
    shots.mkdir(parents=True, exist_ok=True)
    for old in shots.glob(f"{deck.chapter}-*.png"):
        old.unlink()
    total, problems = show(browser, decks, f"{deck.chapter}.slides.html", shots)
    assert slides.SLIDES_MIN <= total <= slides.SLIDES_MAX, f"{path.name}: {total} slides"
    assert total == len(deck.slides)
    assert not problems, f"{path.name}:\n" + "\n".join(problems[:30])
    print(f"\n{path.name}: {total} slides, figures {', '.join(deck.figures)}")


BAD = """---
chapter: 04_why_decode_is_bound
title: A bad deck
---

# A bad deck
Chapter 4

- one objective

---

## Too many words
""" + " ".join(["word"] * 46) + """

---

## Ends with a colon
- the list below is missing:

---

## A raw name
- open 04_why_decode_is_bound in JupyterLab, or notes.md

---

## Too long
""" + "".join(f"- point {i}\n" for i in range(30)) + """
---

## A figure
![Figure 4.2. A caption.](figure:4.2)
"""


@pytest.mark.slow
@pytest.mark.browser
def test_each_check_fails_on_a_deck_that_breaks_it(browser, tmp_path):
    _npm()
    out = tmp_path / "out"
    out.mkdir()
    slides.install_reveal(out)
    slides.install_mathjax(out)
    # written as the build writes it (the build itself refuses a deck of 6 slides), with a figure
    # that has lost its label
    page = out / "bad.slides.html"
    page.write_text(slides.deck_html(slides.parse_deck(BAD, "bad.md")).replace(
        '<span class="llm-label">Figure 4.2.</span> A caption.', "A caption."))
    total, problems = show(browser, out, page.name)
    text = "\n".join(problems)
    assert total == 6
    assert "slide 2 (Too many words): a text block of 46 words" in text
    assert "slide 3 (Ends with a colon): its text ends with ':'" in text
    assert "slide 4 (A raw name): a raw document name '04_why_decode_is_bound'" in text
    assert "slide 4 (A raw name): a raw document name 'notes.md'" in text
    assert "slide 5 (Too long): past the slide's edge" in text
    assert "slide 6 (A figure): a figure without its 'Figure N.M' label" in text
    assert not [p for p in problems if p.startswith("slide 1 ")], problems
    overlapping = {"heading": "x", "blocks": [], "text": "x", "outside": [], "scrolls": False,
                   "raw": False, "figures": [{"label": "4.2", "caption": "Figure 4.2. x", "overlaps": 3}]}
    assert slide_problems(7, overlapping) == ["slide 7 (x): Figure 4.2 has 3 pairs of overlapping texts"]
