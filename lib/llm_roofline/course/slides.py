"""Lecture decks: one reveal.js deck per chapter, authored as a deck in ``slides/NN.md``.

An instructor runs ``make slides`` (``python -m llm_roofline.course.slides slides notebooks
_build/slides``) and gets ``_build/slides/<chapter>.slides.html`` for every deck source, and an
``index.html`` that lists them, to open in a browser and present (arrow keys to move, ``f`` for
full screen, ``s`` for the speaker view with the notes). Building needs ``npm`` (reveal.js) and
nbclient; the finished folder needs no network.

The source
    ``slides/NN.md`` is Markdown written for the lecture hall (``slides/README.md`` gives the
    format): a front matter naming the ``chapter`` (its notebook's stem) and the deck's
    ``title``; slides separated by a line holding only ``---``; each slide opens with a ``## ``
    heading (the title slide with ``# ``); ``Note:`` on a line of its own starts the speaker
    notes. ``![Figure 4.2. A one-line caption.](figure:4.2)`` shows the chapter's Figure 4.2.
    :func:`parse_deck` reads a source and :func:`check_deck` holds it against its chapter; every
    mistake is one ``ValueError`` line naming the deck, the slide and what is wrong.

The figures
    A chapter figure is drawn by the code cell just before the markdown cell that starts with
    ``**Figure N.M.**``. The chapter is executed once, in a fresh kernel (nbclient), inside a
    network namespace with only loopback where one can be made, so that it runs offline; only
    the cells of the figures a deck shows are drawn for the projector (:func:`fit_figure`):
    each fills the slide's figure box at its natural size, its smallest text at 24 px, or at
    22, 20 or 18 px where the texts would overlap at 24 (:data:`FIGURE_TEXT_PX`). The PNG
    records its smallest font, dpi and overlapping texts, which the deck's ``<img>`` carries
    (``data-min-px``, ``data-overlaps``) for the test. So the deck's figures are the chapter's,
    computed by the library of the day: one source of numbers.

Offline and legible
    reveal.js is installed from the npm registry at build time (``npm install --prefix <out>
    reveal.js@REVEAL_VERSION``), with its notes plugin, and MathJax 3 is copied from the
    ``sphinx-mathjax-offline`` package the book already uses; the deck loads both by relative
    paths and references no http(s) URL. The slide is 1280 x 720 CSS pixels, drawn at scale 1,
    body text 30 px, display equations larger (:data:`CSS`). Nothing is shrunk or split to fit:
    a deck is written to fit, and ``tests/test_slides.py`` renders every deck in Chromium and
    fails on anything past the slide's edge.
"""

from __future__ import annotations

import argparse
import copy
import dataclasses
import difflib
import html
import importlib.metadata
import json
import os
import re
import shutil
import subprocess
import sys
import tempfile
from pathlib import Path

import nbformat

from ..validate import (
    OneLineParser,
    boolean,
    destination,
    integer,
    names,
    read_bytes,
    read_json,
    replaceable,
    shorten,
    source_folder,
    unknown,
    write_output,
)

__all__ = [
    "REVEAL_VERSION", "FIGURE_BOX", "FIGURE_MIN_PX", "FIGURE_TEXT_PX", "FIGURE_PAD", "PNG_KEY",
    "CSS", "SLIDES_MIN", "SLIDES_MAX", "Slide", "Deck", "parse_deck", "read_deck",
    "chapter_figures", "check_deck", "render_markdown", "deck_html", "index_html",
    "figure_images", "fit_figure", "fit_for_slide", "use_slide_figures", "fitting",
    "png_record", "install_reveal", "install_mathjax", "build", "main", "MARK",
]

#: reveal.js from the npm registry, pinned; its UMD build is ``dist/reveal.js``, its notes
#: plugin ``dist/plugin/notes.js``.
REVEAL_VERSION = "6.0.2"

#: The box a figure is drawn in, CSS pixels: the 1280 x 720 slide less its padding, a one-line
#: heading and a caption of up to two lines.
FIGURE_BOX = (1200, 536)

#: The smallest figure text, in CSS pixels as the slide draws it, when nothing overlaps at it.
FIGURE_MIN_PX = 24

#: The sizes tried for a figure's smallest text, largest first: the first at which no two of
#: its texts overlap is kept (a figure crowded even at the last is drawn at it, and the test
#: reports it).
FIGURE_TEXT_PX = (24, 22, 20, 18)

#: The white margin around a slide's figure, inches (Matplotlib's 0.1 would be 20 px at the slides' dpi).
FIGURE_PAD = 0.03

#: The PNG text chunk in which a slide figure records its smallest font (pt), dpi and overlaps.
PNG_KEY = "llm-slides"

#: A deck's length, in slides: the issue's 12 to 25.
SLIDES_MIN, SLIDES_MAX = 12, 25

#: The projector's style: a 1280 x 720 slide, body text 30 px, display equations larger.
CSS = """
.reveal { font-size: 30px; }
.reveal .slides { text-align: left; }
html .reveal .slides section { height: 720px; padding: 22px 40px; box-sizing: border-box;
  overflow: hidden; }
.reveal .slides h1, .reveal .slides h2, .reveal .slides h3 { text-transform: none;
  letter-spacing: normal; line-height: 1.15; }
.reveal .slides h1 { font-size: 54px; margin: 40px 0 16px; }
.reveal .slides h2 { font-size: 42px; margin: 0 0 18px; }
.reveal .slides h3 { font-size: 34px; margin: 0 0 12px; }
.reveal .slides p, .reveal .slides li { font-size: 30px; line-height: 1.3; }
.reveal .slides p { margin: 0 0 16px; }
.reveal .slides ul, .reveal .slides ol { margin: 0 0 16px 1.1em; display: block; }
.reveal .slides li { margin: 0 0 12px; }
.reveal .slides li > ul, .reveal .slides li > ol { margin: 8px 0 0 1em; }
.reveal .slides table { font-size: 26px; margin: 0 0 16px; border-collapse: collapse; }
.reveal .slides td, .reveal .slides th { font-size: 26px; padding: 6px 14px; }
.reveal .slides code { font-size: 0.9em; }
.reveal .slides strong { font-weight: 700; }
/* A display equation, large: the derivation is read from the back of the room. */
.reveal .slides mjx-container[display="true"] { font-size: 145%; margin: 20px 0; }
.reveal .slides .llm-subtitle { color: #555; margin-bottom: 28px; }
.reveal .slides section.llm-title li { font-size: 28px; margin-bottom: 8px; }
/* A chapter figure: its heading, the figure at its natural size, its label and one-line caption. */
.reveal .slides figure { margin: 0; text-align: center; }
.reveal .slides figure img { display: block; margin: 0 auto; max-width: 100%; max-height: 536px;
  width: auto; height: auto; border: 0; box-shadow: none; }
.reveal .slides figcaption { font-size: 24px; line-height: 1.3; margin-top: 8px; color: #333;
  text-align: center; }
.reveal .slides figcaption .llm-label { font-weight: 700; }
.reveal .slides .llm-placeholder { height: 480px; border: 3px dashed #999; display: flex;
  align-items: center; justify-content: center; color: #666; }
"""

_FIGURE_CAPTION = re.compile(r"\s*\*\*Figure (\d+\.\d+)\.\*\*")
_IMAGE = re.compile(r"!\[([^\]]*)\]\(([^)\s]*)\)")
_FIGURE_TARGET = re.compile(r"figure:(\d+)\.(\d+)")
_MYST = re.compile(r"\{(?:term|doc|ref|numref|eq|abbr|cite(?::[pt])?|glue(?::\w+)?)\}`"
                   r"|^\s*(?:```|:::)\s*\{", re.M)
_FENCE = re.compile(r"^\s*(`{3,}|~{3,})")
FRONT_KEYS = ("chapter", "title")


@dataclasses.dataclass(frozen=True)
class Slide:
    """One slide of a deck source: its number (1 is the title), heading, body and notes
    (Markdown), the chapter figure it shows (``"4.2"``) with that figure's caption, and the
    line of the source it starts on."""

    number: int
    heading: str
    body: str
    notes: str
    figure: str | None = None
    caption: str = ""
    line: int = 0


@dataclasses.dataclass(frozen=True)
class Deck:
    """A parsed deck source: its name (``slides/04.md``), the chapter's notebook stem, the
    title and the slides."""

    name: str
    chapter: str
    title: str
    slides: tuple[Slide, ...]

    @property
    def figures(self) -> list[str]:
        """The chapter figures the deck shows, in order (``["4.1", "4.2"]``)."""
        return [s.figure for s in self.slides if s.figure]


class _Error(ValueError):
    pass


def _fail(deck: str, what: str, slide: Slide | int | None = None, heading: str = "") -> _Error:
    """The one message of a bad deck: the deck, the slide (number and heading), what is wrong."""
    if isinstance(slide, Slide):
        slide, heading = slide.number, slide.heading
    short = heading if len(heading) <= 50 else heading[:49] + "…"
    where = "" if slide is None else f", slide {slide}" + (f" ({short})" if heading else "")
    return _Error(f"{deck}{where}: {what}")


def _front_matter(name: str, lines: list[str]) -> tuple[dict, int]:
    """The front matter's keys and the index of the line after it."""
    import yaml

    if not lines or lines[0].strip() != "---":
        raise _fail(name, "the source must open with a front matter: a line '---', "
                    "'chapter: NN_name' and 'title: ...', and a closing '---'")
    try:
        end = next(i for i in range(1, len(lines)) if lines[i].strip() == "---")
    except StopIteration:
        raise _fail(name, "the front matter has no closing '---' line") from None
    try:
        meta = yaml.safe_load("\n".join(lines[1:end])) or {}
    except yaml.YAMLError as err:
        problem = str(getattr(err, "problem", "") or type(err).__name__)
        raise _fail(name, f"the front matter is not valid YAML ({problem})") from None
    if not isinstance(meta, dict):
        raise _fail(name, f"the front matter must be keys and values ({', '.join(FRONT_KEYS)}), "
                    f"got {shorten(meta)}")
    for key in meta:
        if key not in FRONT_KEYS:
            raise _fail(name, f"unknown front-matter key {shorten(key)}; allowed: {', '.join(FRONT_KEYS)}")
    for key in FRONT_KEYS:
        if key not in meta:
            raise _fail(name, f"the front matter lacks the key {key!r} (it needs {', '.join(FRONT_KEYS)})")
        if not isinstance(meta[key], str) or not meta[key].strip():
            raise _fail(name, f"front-matter key {key!r} must be non-empty text, got {shorten(meta[key])}")
    if not re.fullmatch(r"\d{2}_[a-z0-9_]+", meta["chapter"]):
        raise _fail(name, f"front-matter key 'chapter' must be a notebook's stem such as "
                    f"'04_why_decode_is_bound', got {shorten(meta['chapter'])}")
    return {k: meta[k].strip() for k in FRONT_KEYS}, end + 1


def _split(lines: list[str], start: int) -> list[tuple[int, list[str]]]:
    """The slides' lines, split at lines holding only ``---`` outside fenced code."""
    chunks, current, first, fence = [], [], start, None
    for i in range(start, len(lines)):
        line = lines[i]
        m = _FENCE.match(line)
        if m:
            fence = None if fence and m.group(1)[0] == fence else (fence or m.group(1)[0])
        if fence is None and line.strip() == "---":
            chunks.append((first, current))
            current, first = [], i + 1
            continue
        current.append(line)
    chunks.append((first, current))
    return chunks


def parse_deck(text: str, name: str = "deck") -> Deck:
    """A deck source read into a :class:`Deck`; a bad one is one ``ValueError`` line naming
    ``name``, the slide and what is wrong (see ``slides/README.md`` for the format)."""
    if not isinstance(name, str):
        raise ValueError(f"name must be the deck's name, text, got {shorten(name)}")
    if not isinstance(text, str):
        raise ValueError(f"text must be the deck's Markdown source, text, got {shorten(text)}")
    lines = text.replace("\r\n", "\n").split("\n")
    meta, start = _front_matter(name, lines)
    slides = []
    for first, chunk in _split(lines, start):
        while chunk and not chunk[0].strip():
            chunk, first = chunk[1:], first + 1
        while chunk and not chunk[-1].strip():
            chunk = chunk[:-1]
        number = len(slides) + 1
        if not chunk:
            raise _fail(name, f"an empty slide (line {first + 1}: two '---' lines with nothing "
                        "between)", number)
        head = chunk[0]
        marker = "# " if number == 1 else "## "
        if not head.startswith(marker) or not head[len(marker):].strip():
            want = "the title slide must begin with a '# ' heading" if number == 1 else \
                "a slide must begin with a '## ' heading"
            raise _fail(name, f"{want}, got {shorten(head)} (line {first + 1})", number)
        heading = head[len(marker):].strip()
        rest = chunk[1:]
        notes_at = next((i for i, ln in enumerate(rest) if ln.strip() == "Note:"), None)
        body_lines = rest if notes_at is None else rest[:notes_at]
        notes = "" if notes_at is None else "\n".join(rest[notes_at + 1:]).strip()
        body = "\n".join(body_lines).strip()
        slide = Slide(number, heading, body, notes, line=first + 1)
        for ln in body_lines:
            if re.match(r"#{1,2} ", ln):
                raise _fail(name, f"a second heading {shorten(ln.strip())}: one heading a slide "
                            "(start a new slide with a '---' line)", slide)
        for part, what in ((heading, "heading"), (body, "text"), (notes, "notes")):
            if _MYST.search(part):
                raise _fail(name, f"MyST markup ({shorten(_MYST.search(part).group(0))}) in its {what}: "
                            "a deck is plain Markdown (write the words, not a role)", slide)
        images = _IMAGE.findall(body)
        if images:
            alt, target = images[0]
            m = _FIGURE_TARGET.fullmatch(target)
            if not m:
                raise _fail(name, f"image target {shorten(target)}: a deck shows only the chapter's "
                            "figures, as ![Figure N.M. caption](figure:N.M)", slide)
            label = f"{int(m.group(1))}.{int(m.group(2))}"
            if len(images) > 1 or _IMAGE.sub("", body).strip():
                raise _fail(name, f"figure:{label} must be alone on its slide with its heading "
                            "(one figure a slide; anything else goes to the notes)", slide)
            if not alt.startswith(f"Figure {label}. ") or not alt[len(f"Figure {label}. "):].strip():
                raise _fail(name, f"the alt text of figure:{label} must start with 'Figure {label}. ' "
                            f"and go on with a one-line caption, got {shorten(alt)}", slide)
            slide = dataclasses.replace(slide, figure=label, caption=alt[len(f"Figure {label}. "):].strip())
        slides.append(slide)
    if not slides:
        raise _fail(name, "the deck has no slides after its front matter")
    return Deck(name, meta["chapter"], meta["title"], tuple(slides))


def read_deck(path) -> Deck:
    """The deck source at ``path``, parsed (:func:`parse_deck`), named ``slides/NN.md``; its
    ``NN`` must be its chapter's number."""
    path = Path(path) if isinstance(path, str | os.PathLike) else path
    raw = read_bytes("deck", path, cap=2_000_000)
    name = f"{path.parent.name}/{path.name}" if path.parent.name else path.name
    try:
        text = raw.decode("utf-8")
    except UnicodeDecodeError as err:
        raise _fail(name, f"not UTF-8 text (byte {err.start})") from None
    deck = parse_deck(text, name)
    if re.fullmatch(r"\d{2}", path.stem) and not deck.chapter.startswith(path.stem + "_"):
        raise _fail(name, f"front-matter key 'chapter' is {deck.chapter!r}, which is not chapter "
                    f"{path.stem}: a deck is named for its chapter's number")
    return deck


def chapter_figures(nb) -> dict[str, int]:
    """Each figure of a chapter (``"4.2"``) and the index of the code cell that draws it: the
    cell just before the markdown cell that starts with ``**Figure 4.2.**``."""
    nb = _notebook("nb", nb)
    found = {}
    for i, cell in enumerate(nb.cells):
        m = _FIGURE_CAPTION.match(cell.source) if cell.cell_type == "markdown" else None
        if m and i > 0 and nb.cells[i - 1].cell_type == "code":
            found[m.group(1)] = i - 1
    return found


def check_deck(deck: Deck, nb) -> None:
    """Hold a deck against its chapter: its length in slides, and every ``figure:N.M`` a
    figure the chapter draws; a mistake is one ``ValueError`` line naming the deck and slide."""
    figures = chapter_figures(nb)
    count = len(deck.slides)
    if not SLIDES_MIN <= count <= SLIDES_MAX:
        raise _fail(deck.name, f"{count} slides; a deck has {SLIDES_MIN} to {SLIDES_MAX}")
    for slide in deck.slides:
        if slide.figure and slide.figure not in figures:
            have = ", ".join(sorted(figures, key=lambda f: tuple(map(int, f.split("."))))) or "none"
            raise _fail(deck.name, f"figure:{slide.figure}: chapter {deck.chapter} has no Figure "
                        f"{slide.figure} (its figures: {have})", slide)
    seen = [s.figure for s in deck.slides if s.figure]
    twice = sorted({f for f in seen if seen.count(f) > 1})
    if twice:
        raise _fail(deck.name, f"Figure {twice[0]} is shown twice: once a deck")


_MATH = re.compile(r"\$\$.+?\$\$|\$[^$\n]+?\$", re.S)


def render_markdown(text: str) -> str:
    """A slide's Markdown as HTML (CommonMark and tables), its ``$...$`` and ``$$...$$`` kept
    for MathJax as they are written."""
    from markdown_it import MarkdownIt

    maths: list[str] = []

    def keep(m):
        maths.append(m.group(0))
        return f"LLMMATH{len(maths) - 1}X"

    protected = _MATH.sub(keep, text)
    out = MarkdownIt("commonmark", {"html": False}).enable("table").render(protected)
    return re.sub(r"LLMMATH(\d+)X", lambda m: html.escape(maths[int(m.group(1))], quote=False), out)


def _slide_html(deck: Deck, slide: Slide, images: dict) -> str:
    notes = f'\n<aside class="notes">{render_markdown(slide.notes)}</aside>' if slide.notes else ""
    if slide.number == 1:
        heading = f"<h1>{render_markdown(slide.heading)[3:-5]}</h1>"
        body = render_markdown(slide.body)
        body = body.replace("<p>", '<p class="llm-subtitle">', 1) if body.startswith("<p>") else body
        return f'<section class="llm-title" data-slide="1">\n{heading}\n{body}{notes}\n</section>'
    heading = f"<h2>{render_markdown(slide.heading)[3:-5]}</h2>"
    if slide.figure:
        label = f"Figure {slide.figure}."
        alt = html.escape(f"{label} {slide.caption}")
        image = images.get(slide.figure)
        if image:
            record = image["record"]
            attrs = " ".join(f'data-{k}="{html.escape(str(record.get(r)))}"' for k, r in (
                ("min-pt", "min_pt"), ("dpi", "dpi"), ("min-px", "min_px"), ("overlaps", "overlaps")))
            shown = f'<img src="data:image/png;base64,{image["png"]}" alt="{alt}" {attrs}>'
        else:
            shown = (f'<div class="llm-placeholder" role="img" aria-label="{alt}">'
                     f"{html.escape(label)} (not drawn)</div>")
        caption = render_markdown(slide.caption)[3:-5]
        body = (f'<figure data-figure="{slide.figure}">{shown}\n<figcaption><span class="llm-label">'
                f"{label}</span> {caption}</figcaption></figure>")
        return (f'<section class="llm-figure" data-slide="{slide.number}">\n{heading}\n{body}'
                f"{notes}\n</section>")
    return (f'<section data-slide="{slide.number}">\n{heading}\n{render_markdown(slide.body)}'
            f"{notes}\n</section>")


_PAGE = """<!DOCTYPE html>
<html lang="en">
<head>
<meta charset="utf-8">
<meta name="generator" content="{mark}">
<meta name="viewport" content="width=device-width, initial-scale=1">
<title>{title}</title>
<link rel="stylesheet" href="{reveal}/dist/reveal.css">
<link rel="stylesheet" href="{reveal}/dist/theme/white.css">
<style>{css}</style>
<script>
window.MathJax = {{
  tex: {{inlineMath: [['$', '$']], displayMath: [['$$', '$$']], processEscapes: true}},
  chtml: {{minScale: 0.9}}
}};
</script>
<script src="mathjax/tex-chtml.js"></script>
</head>
<body>
<div class="reveal"><div class="slides">
{slides}
</div></div>
<script src="{reveal}/dist/reveal.js"></script>
<script src="{reveal}/dist/plugin/notes.js"></script>
<script>
const images = [...document.images].map(i => i.decode().catch(() => null));
const typeset = window.MathJax && MathJax.startup ? MathJax.startup.promise : null;
Promise.all([document.fonts.ready, typeset, ...images]).catch(e => console.error(e)).then(() =>
  Reveal.initialize({{
    controls: true, progress: true, hash: true, center: false, slideNumber: 'c/t',
    transition: 'none', width: 1280, height: 720, margin: 0, minScale: 0.2, maxScale: 2.0,
    plugins: [RevealNotes]
  }}));
</script>
</body>
</html>
"""


def deck_html(deck: Deck, images: dict | None = None, reveal_prefix: str = "node_modules/reveal.js") -> str:
    """The deck's HTML page: a ``<section>`` a slide with its notes in ``<aside class="notes">``,
    reveal.js and MathJax by relative paths. ``images`` maps a figure (``"4.2"``) to its
    ``{"png": base64, "record": {...}}`` (:func:`figure_images`); a figure missing from it is
    drawn as a labelled placeholder (a build without execution)."""
    images = images or {}
    slides = "\n".join(_slide_html(deck, s, images) for s in deck.slides)
    return _PAGE.format(mark=MARK, title=html.escape(deck.title), reveal=reveal_prefix, css=CSS,
                        slides=slides)


def index_html(decks: list[tuple[Deck, str]]) -> str:
    """The folder's ``index.html``: each deck's title, chapter, slide count and figures, linked."""
    rows = []
    for deck, file in decks:
        figures = ", ".join(deck.figures) or "none"
        rows.append(f'<li><a href="{html.escape(file)}">{html.escape(deck.title)}</a>: '
                    f"{len(deck.slides)} slides; figures {html.escape(figures)}</li>")
    return (f'<!DOCTYPE html>\n<html lang="en">\n<head>\n<meta charset="utf-8">\n'
            f'<meta name="generator" content="{MARK}">\n<title>Lecture decks</title>\n'
            "<style>body { font: 20px/1.5 sans-serif; max-width: 52em; margin: 2em auto; }</style>\n"
            "</head>\n<body>\n<h1>Lecture decks: the physics of LLM inference</h1>\n"
            "<p>Open a deck, press <kbd>f</kbd> for full screen, <kbd>s</kbd> for the speaker "
            "view with the notes, and the arrow keys to move.</p>\n<ol>\n"
            + "\n".join(rows) + "\n</ol>\n</body>\n</html>\n")


def _notebook(name: str, nb):
    """``nb`` as an nbformat 4 notebook (a dict is converted), or a one-line ``ValueError``."""
    what = f"{name} must be a notebook (nbformat 4: a 'cells' list of cells with a cell_type and a source)"
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError(f"{what}, got {shorten(nb)}")
    for i, cell in enumerate(nb["cells"]):
        if (not isinstance(cell, dict) or cell.get("cell_type") not in ("markdown", "code", "raw")
                or not isinstance(cell.get("source", ""), str | list)
                or not isinstance(cell.get("metadata", {}), dict)
                or not isinstance(cell.get("metadata", {}).get("tags", []), list)):
            raise ValueError(f"{what}; cell {i} is {shorten(cell)}")
    nb = nbformat.from_dict(nb)
    for cell in nb.cells:
        if isinstance(cell.get("source"), list):
            cell.source = "".join(map(str, cell.source))
        cell.setdefault("source", "")
        cell.setdefault("metadata", nbformat.from_dict({}))
    return nb



def _offline_prefix() -> list[str]:
    """A new network namespace with only loopback (the kernel talks to us over it), when we may make one."""
    if shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
    return []


def _drawn(fig) -> tuple[list[tuple[float, object]], list[object]]:
    """What a draw of ``fig`` puts on the canvas: the font size (pt) and box (px) of every text,
    and the box (px) of every box drawn: a text's frame, a rectangle or rounded box of an axes."""
    import matplotlib.patches as mpatches
    import matplotlib.text as mtext

    texts: list[tuple[float, object]] = []
    shapes: list[object] = []
    original = mtext.Text.draw

    def draw(self, renderer):
        drawn = original(self, renderer)
        if self.get_visible() and self.get_text().strip():
            # the text's own box: an annotation's extent would take in its leader line too
            texts.append((float(self.get_fontsize()), mtext.Text.get_window_extent(self, renderer)))
            frame = self.get_bbox_patch()
            if frame is not None and frame.get_visible():
                shapes.append(frame.get_window_extent(renderer))
        return drawn

    mtext.Text.draw = draw
    try:
        fig.canvas.draw()
    finally:
        mtext.Text.draw = original
    renderer = fig.canvas.get_renderer()
    for legend in [*fig.legends, *(ax.get_legend() for ax in fig.axes)]:
        if legend is not None and legend.get_visible() and legend.get_frame_on():
            shapes.append(legend.get_frame().get_window_extent(renderer))
    for ax in fig.axes:
        for patch in ax.patches:
            if patch.get_visible() and isinstance(patch, mpatches.Rectangle | mpatches.FancyBboxPatch):
                shapes.append(patch.get_window_extent(renderer))
    return texts, shapes


def _drawn_texts(fig) -> list[tuple[float, object]]:
    """The font size (pt) and box (px) of every text a draw of ``fig`` puts on the canvas."""
    return _drawn(fig)[0]


def _overlaps(boxes, shapes=()) -> int:
    """How many pairs of text boxes overlap by more than a fifth of the smaller one or by more
    than 4 px each way (a long label crossing another), plus how many
    texts cut into a box they are not in (by half a pixel or more), or spill out of the box they
    are in (their centre's box, by more than a pixel)."""
    count = 0
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > 0 and h > 0 and (w * h > 0.2 * min(a.width * a.height, b.width * b.height)
                                    or (w > 4 and h > 4)):
                count += 1
        cx, cy = (a.x0 + a.x1) / 2, (a.y0 + a.y1) / 2
        for b in shapes:
            if b.x0 <= cx <= b.x1 and b.y0 <= cy <= b.y1:  # the box's own text: it must fit
                if a.x0 < b.x0 - 1 or a.x1 > b.x1 + 1 or a.y0 < b.y0 - 1 or a.y1 > b.y1 + 1:
                    count += 1
                continue
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > 0.5 and h > 0.5:
                count += 1
    return count


def _leave_room_for_legends(fig) -> None:
    """Keep the tight layout's axes clear of the figure's own legends (``fig.legend``), which it ignores."""
    renderer = fig.canvas.get_renderer()
    left, bottom, right, top = 0.0, 0.0, 1.0, 1.0
    for legend in fig.legends:
        if not legend.get_visible():
            continue
        box = legend.get_window_extent(renderer).transformed(fig.transFigure.inverted())
        if box.width >= 0.5:  # a row of entries below or above the axes
            if box.y0 + box.y1 < 1:
                bottom = max(bottom, min(box.y1, 0.4))
            else:
                top = min(top, max(box.y0, 0.6))
        elif box.x0 + box.x1 < 1:
            left = max(left, min(box.x1, 0.4))
        else:
            right = min(right, max(box.x0, 0.6))
    fig.get_layout_engine().set(rect=(left, bottom, right, top))


def _axes_to_the_right(fig, ax, renderer) -> bool:
    """Whether another visible axes of ``fig`` starts right of ``ax`` at a height ``ax`` spans."""
    box = ax.get_window_extent(renderer)
    for other in fig.axes:
        if other is ax or not other.get_visible():
            continue
        o = other.get_window_extent(renderer)
        if o.x0 >= box.x1 - 1 and min(o.y1, box.y1) - max(o.y0, box.y0) > 0:
            return True
    return False


def _legends_beside(fig) -> None:
    """Move each axes' legend that sits under its axes (the book's place for a long key, where a
    slide's larger axis labels would run into it) beside the axes, in one column: a slide is wide."""
    renderer = fig.canvas.get_renderer()
    for ax in fig.axes:
        legend = ax.get_legend()
        if legend is None or not legend.get_visible() or not legend.get_texts():
            continue
        if legend.get_window_extent(renderer).y1 > ax.get_window_extent(renderer).y0:
            continue  # on or beside the axes: left where it is
        if _axes_to_the_right(fig, ax, renderer):
            continue  # beside it would lie on the next panel (Figure 7.2's two keys)
        title = legend.get_title().get_text()
        ax.legend(legend.legend_handles, [t.get_text() for t in legend.get_texts()],
                  loc="center left", bbox_to_anchor=(1.02, 0.5), ncols=1,
                  fontsize=legend.get_texts()[0].get_fontsize(), title=title or None)


def fit_figure(fig, box: tuple[int, int] = FIGURE_BOX, min_px: float = FIGURE_MIN_PX,
               pad_inches: float = FIGURE_PAD) -> dict:
    """Resize a figure to be drawn at its natural size in ``box`` (CSS px), no text under ``min_px``.

    The chapter's figure keeps its fonts, lines and markers in points; what changes is the
    figure's size in inches and its dpi. The dpi is chosen so that the smallest text is
    ``min_px`` pixels, ``dpi = min_px * 72 / smallest pt``, and the size so that the image
    fills the box at that dpi: every point-sized thing grows on the slide by the same factor,
    as if the book's figure were redrawn for a bigger screen. A figure with no layout engine
    gets the tight one (its ``tight_layout()`` ran at the old size). The saved image may be
    larger or smaller than the figure (text outside the axes, white space cut): the size is
    adjusted until the saved image fills the box without passing it.
    Returns the smallest font (pt), the dpi, an alt text from the titles and how many pairs of
    texts overlap once the fonts have grown (a figure with too much text for a slide): the
    record :data:`PNG_KEY` carries.
    """
    import matplotlib.pyplot as plt  # noqa: F401  (a canvas for a bare Figure)

    sizes = [size for size, _ in _drawn_texts(fig)]
    titles = [t for t in (fig.get_suptitle(), *(a.get_title() for a in fig.axes)) if t]
    alt = "Figure: " + "; ".join(titles) if titles else ""
    if not sizes:
        return {"min_pt": None, "dpi": float(fig.dpi), "alt": alt}
    min_pt = min(sizes)
    dpi = min_px * 72 / min_pt
    own = fig.get_layout_engine() is None
    if own:
        fig.set_layout_engine("tight")
    _legends_beside(fig)
    pad = 2 * pad_inches
    fig.set_dpi(dpi)
    size, fitted = (box[0] / dpi - pad, box[1] / dpi - pad), None
    for _ in range(6):  # the saved image is the tight box, which does not scale with the figure
        fig.set_size_inches(*size)
        if own and fig.legends:
            _leave_room_for_legends(fig)
        fig.draw_without_rendering()
        tight = fig.get_tightbbox()
        across, down = box[0] / ((tight.width + pad) * dpi), box[1] / ((tight.height + pad) * dpi)
        if across >= 1 and down >= 1:
            fitted = size
            if min(across, down) < 1.02:
                break
        size = (size[0] * min(across, 1.1) * 0.995, size[1] * min(down, 1.1) * 0.995)
    never = fitted is None
    fig.set_size_inches(*(size if never else fitted))
    texts, shapes = _drawn(fig)
    overlaps = _overlaps([box for _, box in texts], shapes)
    # A layout that cannot fit the box at this text size (an axis label longer than the box is
    # high) shrinks the axes to nothing: the figure is too crowded for the slide, like overlaps.
    tight, (width, height) = fig.get_tightbbox(), fig.get_size_inches()
    renderer = fig.canvas.get_renderer()
    squeezed = [ax for ax in fig.axes if ax.get_visible() and ax.axison
                and min(ax.get_window_extent(renderer).width, ax.get_window_extent(renderer).height) < 80]
    collapsed = bool(never or tight.width > 1.5 * width or tight.height > 1.5 * height or squeezed)
    return {"min_pt": min_pt, "dpi": dpi, "alt": alt, "overlaps": int(overlaps + collapsed),
            "collapsed": collapsed}


def fit_for_slide(fig, box: tuple[int, int] = FIGURE_BOX, sizes=FIGURE_TEXT_PX) -> dict:
    """:func:`fit_figure` at the largest of ``sizes`` (px) at which no two texts overlap, or
    else at the smallest; the record gains ``min_px``, the size the smallest text is drawn at."""
    import warnings

    record: dict = {}
    with warnings.catch_warnings():  # a size tried and found too crowded may not lay out at all
        warnings.filterwarnings("ignore", message="Tight layout not applied")
        warnings.filterwarnings("ignore", message=".*not compatible with tight_layout")
        for px in sizes:
            record = fit_figure(fig, box, px)
            if not record.get("overlaps"):
                break
    return {**record, "min_px": px}


_FITTING = {"on": False}


def fitting(on: bool) -> None:
    """In a kernel where :func:`use_slide_figures` ran: fit the figures displayed from now on
    (``True``), or draw none at all (``False``: the cells whose figures no deck shows)."""
    _FITTING["on"] = boolean("on", on)


def use_slide_figures(box: tuple[int, int] = FIGURE_BOX) -> None:
    """In a running IPython kernel: while :func:`fitting` is on, every figure displayed is
    fitted to a slide (:func:`fit_for_slide`) and drawn as a PNG that carries its record in a
    text chunk (:data:`PNG_KEY`, read by :func:`png_record`); while it is off, no figure is
    drawn. Small multiples are drawn again as one figure and fitted as a whole."""
    import matplotlib.pyplot as plt
    from IPython import get_ipython
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    from .widgets import SmallMultiples

    def png(fig):
        if not _FITTING["on"]:
            return None
        record = fit_for_slide(fig, box)
        return print_figure(fig, "png", base64=True, pad_inches=FIGURE_PAD,
                            metadata={PNG_KEY: json.dumps(record)})

    def grid(shown):
        if not _FITTING["on"]:
            return None
        fig = shown.grid_figure()
        try:
            return png(fig)
        finally:
            plt.close(fig)

    plt.close(plt.figure())  # the backend loads with the first figure and sets its own formatter then
    formatters = get_ipython().display_formatter.formatters
    formatters["image/png"].for_type(Figure, png)
    formatters["image/png"].for_type(SmallMultiples, grid)
    formatters["text/html"].for_type(SmallMultiples, lambda shown: None)  # the PNG, not the panels


def png_record(data: str | bytes) -> dict | None:
    """The :data:`PNG_KEY` record of a PNG (base64 text or bytes) with its pixel size; None without
    one (not a PNG, a truncated one, not base64, a record that is not JSON). Another type is a
    one-line ``ValueError``."""
    import base64
    import binascii
    import struct

    if not isinstance(data, str | bytes | bytearray):
        raise ValueError(f"data must be a PNG as base64 text or bytes, got {shorten(data)}")
    try:
        raw = base64.b64decode(data, validate=False) if isinstance(data, str) else bytes(data)
    except (binascii.Error, ValueError):
        return None
    if raw[:8] != b"\x89PNG\r\n\x1a\n" or len(raw) < 24:
        return None
    width, height = struct.unpack(">II", raw[16:24])
    at = 8
    while at + 8 <= len(raw):
        length, kind = struct.unpack(">I4s", raw[at:at + 8])
        if kind == b"tEXt":
            key, _, value = raw[at + 8:at + 8 + length].partition(b"\0")
            if key.decode("latin-1") == PNG_KEY:
                try:
                    record = json.loads(value.decode("latin-1"))
                except (ValueError, RecursionError):
                    return None
                return {**record, "width": width, "height": height} if isinstance(record, dict) else None
        if kind == b"IEND":
            break
        at += 12 + length
    return None


_STUCK = 75  # the exit status of an execution whose kernel stopped answering (see _execute)

_EXECUTE = f"""
import sys, nbformat
from nbclient import NotebookClient
from nbclient.exceptions import CellTimeoutError, DeadKernelError
src, dst, cwd = sys.argv[1:4]
nb = nbformat.read(src, as_version=4)
try:
    NotebookClient(nb, timeout=60, startup_timeout=60, kernel_name="python3",
                   resources={{"metadata": {{"path": cwd}}}}).execute()
except (CellTimeoutError, DeadKernelError, TimeoutError) as e:
    print(f"the kernel stopped answering: {{e!r}}"[:2000], file=sys.stderr)
    sys.exit({_STUCK})
nbformat.write(nb, dst)
"""


def _execute(nb, cwd: Path):
    """Run the notebook top to bottom in a fresh kernel, offline where possible; return it executed."""
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.ipynb", Path(tmp) / "out.ipynb"
        nbformat.write(nb, src)
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # inline figures, not Agg
        cmd = [*_offline_prefix(), sys.executable, "-c", _EXECUTE, str(src), str(dst), str(cwd)]
        # A kernel that stops answering (ipykernel 7 with nbclient, now and then on a busy two-core
        # machine: the kernel idles while the client waits for a message) gets one more try. No
        # cell of a chapter takes a minute, nor a chapter 150 s with another beside it, so a cell
        # past 60 s or a run past 150 s is taken as stuck.
        for attempt in range(2):
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=150)
            except subprocess.TimeoutExpired:
                proc = None
            if proc is not None and proc.returncode != _STUCK:
                break
            if attempt:
                raise RuntimeError("executing the notebook got stuck twice (a kernel that stopped answering)")
        if proc.returncode != 0:
            raise RuntimeError(f"executing the notebook failed:\n{(proc.stdout + proc.stderr)[-4000:]}")
        return nbformat.read(dst, as_version=4)


_SETUP = ("from llm_roofline.course import slides as _llm_slides\n"
          "_llm_slides.use_slide_figures()\n_llm_slides.fitting(False)")
_KEY = "llm_slides_figure"


def figure_images(nb, figures, *, cwd: Path | None = None, name: str = "deck",
                  chapter: str = "the chapter") -> dict:
    """The chapter's ``figures`` (``["4.1", "4.2"]``), drawn for the projector: the notebook is
    executed once in a fresh kernel, and only the cells that draw these figures are fitted.
    Returns each figure's ``{"png": base64, "record": {...}}``; a figure whose cell draws no
    figure a slide can show (a slider, a table) is one ``ValueError`` naming ``name``."""
    nb = _notebook("nb", nb)
    cells = chapter_figures(nb)
    wanted = {cells[f]: f for f in figures}
    if not wanted:
        return {}
    run = copy.deepcopy(nb)
    run.metadata.pop("widgets", None)
    new = [nbformat.v4.new_code_cell(_SETUP)]
    for i, cell in enumerate(run.cells):
        if i in wanted:
            cell.metadata[_KEY] = wanted[i]
            new += [nbformat.v4.new_code_cell("_llm_slides.fitting(True)"), cell,
                    nbformat.v4.new_code_cell("_llm_slides.fitting(False)")]
        else:
            new.append(cell)
    run.cells = new
    done = _execute(run, cwd or Path.cwd())
    images = {}
    for cell in done.cells:
        label = cell.get("metadata", {}).get(_KEY)
        if not label:
            continue
        for output in cell.get("outputs", []):
            data = output.get("data", {}).get("image/png")
            record = png_record(data) if data else None
            if record:
                images[label] = {"png": "".join(data.split()), "record": record}
        if label not in images:
            raise ValueError(f"{name}: Figure {label} of {chapter} "
                             "draws no figure a slide can show (a slider's frames or a table): "
                             "choose another figure for the slide")
    return images


def install_reveal(out: Path) -> Path:
    """reveal.js from the npm registry into ``out/node_modules``; returns the package's folder."""
    package = out / "node_modules" / "reveal.js"
    manifest = package / "package.json"
    if manifest.exists() and json.loads(manifest.read_text()).get("version") == REVEAL_VERSION:
        return package
    npm = shutil.which("npm")
    if not npm:
        raise RuntimeError("npm is not installed (Debian: apt-get install nodejs npm)")
    subprocess.run([npm, "install", "--prefix", str(out), "--no-audit", "--no-fund", "--no-save",
                    "--loglevel=error", f"reveal.js@{REVEAL_VERSION}"], check=True)
    for part in ("dist/reveal.js", "dist/plugin/notes.js"):
        if not (package / part).exists():
            raise RuntimeError(f"reveal.js {REVEAL_VERSION} has no {part} in {package}")
    return package


def install_mathjax(out: Path) -> Path:
    """MathJax 3 from the sphinx-mathjax-offline package, copied to ``out/mathjax``."""
    target = out / "mathjax"
    if (target / "tex-chtml.js").exists():
        return target
    dist = importlib.metadata.distribution("sphinx-mathjax-offline")
    source = Path(dist.locate_file("sphinx-mathjax-offline/static/mathjax"))
    if not (source / "tex-chtml.js").exists():
        raise RuntimeError(f"MathJax 3 not found in the sphinx-mathjax-offline package ({source})")
    shutil.copytree(source, target, dirs_exist_ok=True)
    return target


MARK = "written by llm_roofline.course.slides"
"""The decks' signature (a ``<meta name="generator">`` in each deck's head): a deck that
carries it is replaced on the next build; any other file of its name is left alone unless
``force``."""


def _read_notebook(path: Path):
    try:
        return _notebook("notebook", read_json("notebook", path))
    except ValueError as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{str(path)!r} is not a valid notebook: {reason}") from None




def _sources(decks: Path) -> list[Path]:
    """The deck sources of a folder: ``NN.md`` files (its README and other files are not decks)."""
    return sorted(p for p in decks.glob("*.md") if re.fullmatch(r"\d{2}", p.stem))


def build(decks, notebooks, out, only: list[str] | None = None, execute: bool = True,
          jobs: int | None = None, *, force: bool = False) -> list[Path]:
    """Write ``out/<chapter>.slides.html`` for every deck source ``decks/NN.md`` (or those in
    ``only``: ``"04"`` or ``"04_why_decode_is_bound"``), and ``out/index.html``.

    Every argument is checked, every deck parsed and held against its chapter (:func:`check_deck`)
    before anything is installed, executed or written: ``out`` may not be ``decks`` or
    ``notebooks``, inside one or hold one; a deck replaces only a deck it wrote (:data:`MARK`)
    unless ``force``. The chapters run in ``jobs`` kernels at once (default: one per CPU, at
    most four); ``execute=False`` draws each figure as a labelled placeholder instead.
    """
    from concurrent.futures import ThreadPoolExecutor

    execute, force = boolean("execute", execute), boolean("force", force)
    if jobs is not None:
        jobs = integer("jobs", jobs, maximum=64)
    decks = source_folder("decks", decks)
    notebooks = source_folder("notebooks", notebooks)
    out = destination("out", out, sources=[decks, notebooks])
    found = _sources(decks)
    if not found:
        raise ValueError(f"no deck sources (NN.md, such as 04.md) in {str(decks)!r}: no deck to build")
    parsed = [read_deck(path) for path in found]
    if only is not None:
        only = names("only", only)
        known = [p.stem for p in found] + [d.chapter for d in parsed]
        for name in only:
            if name not in known:
                raise unknown("deck in only", name, sorted(known),
                              difflib.get_close_matches(name, known, n=2))
        parsed = [d for p, d in zip(found, parsed, strict=True) if p.stem in only or d.chapter in only]
    chapters = {}
    for deck in parsed:
        path = notebooks / f"{deck.chapter}.ipynb"
        if not path.is_file():
            stems = sorted(p.stem for p in notebooks.glob("*.ipynb"))
            close = difflib.get_close_matches(deck.chapter, stems, n=1)
            hint = f"; did you mean {close[0]!r}?" if close else ""
            raise _fail(deck.name, f"front-matter key 'chapter' is {deck.chapter!r}, but "
                        f"{str(notebooks)!r} holds no {deck.chapter}.ipynb{hint}")
        chapters[deck.name] = (path, _read_notebook(path))
        check_deck(deck, chapters[deck.name][1])
    targets = {deck.name: out / f"{deck.chapter}.slides.html" for deck in parsed}
    for target in [*targets.values(), out / "index.html"]:
        replaceable("deck", target, marker=MARK, force=force)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot make out {str(out)!r}: {err.strerror or type(err).__name__}") from None
    install_reveal(out)
    install_mathjax(out)

    def draw(deck):
        path, nb = chapters[deck.name]
        if not execute:
            return {}
        return figure_images(nb, deck.figures, cwd=path.parent, name=deck.name, chapter=deck.chapter)

    written = []
    with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
        for deck, images in zip(parsed, pool.map(draw, parsed), strict=True):
            target = write_output("deck", targets[deck.name], deck_html(deck, images),
                                  marker=MARK, force=True)
            sizes = [i["record"].get("min_px") for i in images.values()]
            smallest = f", smallest figure text {min(sizes)} px" if sizes else ""
            print(f"{target}: {len(deck.slides)} slides, figures {', '.join(deck.figures) or 'none'}"
                  f"{smallest}")
            for label, image in images.items():
                if image["record"].get("overlaps"):
                    print(f"  Figure {label}: {image['record']['overlaps']} pairs of texts overlap even "
                          f"at {image['record'].get('min_px')} px; a slide wants a simpler figure")
            written.append(target)
    index = [(deck, targets[deck.name].name) for deck in parsed]
    write_output("index", out / "index.html", index_html(index), marker=MARK, force=True)
    return written


class _Parser(OneLineParser):
    label = "llm_roofline.course.slides"


def main(argv: list[str] | None = None) -> int:
    """``python -m llm_roofline.course.slides DECKS NOTEBOOKS OUT [--only NN ...] [--force]``."""
    parser = _Parser(prog="python -m llm_roofline.course.slides", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("decks", help="the folder of deck sources, NN.md (slides)")
    parser.add_argument("notebooks", help="the folder of chapter notebooks (notebooks)")
    parser.add_argument("out", help="where the decks go (e.g. _build/slides)")
    parser.add_argument("--only", nargs="*", help="decks by number or chapter (e.g. 04)")
    parser.add_argument("--no-execute", action="store_true",
                        help="draw each figure as a labelled placeholder instead of running the chapter")
    parser.add_argument("--jobs", type=int, default=None,
                        help="chapters executed at once (default: one per CPU, at most four)")
    parser.add_argument("--force", action="store_true",
                        help="replace files in OUT of a deck's name that this command did not write")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        build(args.decks, args.notebooks, args.out, args.only, execute=not args.no_execute,
              jobs=args.jobs, force=args.force)
    except ValueError as err:
        message = re.sub(r"^(unknown deck in )?only\b", lambda m: (m.group(1) or "") + "--only",
                         str(err))
        parser.error(re.sub(r"^jobs\b", "--jobs", message))
    except (RuntimeError, subprocess.CalledProcessError) as err:
        lines = [line for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        parser.exit(1, f"{parser.label}: error: {lines[0]} {lines[-1] if len(lines) > 1 else ''}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
