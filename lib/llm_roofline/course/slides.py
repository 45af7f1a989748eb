"""Lecture slides: a reveal.js deck per chapter, built offline with nbconvert's own slides exporter.

An instructor runs ``make slides`` (``python -m llm_roofline.course.slides notebooks
_build/slides``) and gets ``_build/slides/<chapter>.slides.html``, one deck per chapter, to open
in a browser and present (arrow keys to move, ``f`` for full screen). Building needs ``npm``
(reveal.js) and nbconvert (``requirements-dev.txt``); the finished folder needs no network.

How a chapter becomes a deck
    The chapter notebook chooses its slides with cell tags, so the deck follows the chapter when
    the chapter changes: a cell tagged ``slide`` starts a new slide, ``subslide`` a slide below
    the previous one, ``fragment`` appears on the current slide at the next key press. Every
    untagged cell is left out. The tags are turned into nbconvert's ``slideshow.slide_type``
    metadata in memory, at export time; the committed notebook carries the tags only.
    Code cells show their outputs (figures, tables), never their code.

    A chapter with a tagged code cell is executed first, in a fresh kernel (nbclient), inside a
    network namespace with only loopback where one can be made, so that it runs offline. Its
    figures are redrawn for the projector (:func:`fit_figure`): each fills the slide at its
    natural size, with its smallest text at :data:`FIGURE_MIN_PX` pixels, and records its
    smallest font and dpi in the PNG, from which the deck's ``<img>`` gets ``data-min-pt`` and
    ``data-dpi``. A chapter whose tagged cells are all markdown is not executed.

Chapters without tags
    Chapters 01, 02, 07 and 09 carry no slide tags yet (another contributor was editing them when the
    decks were added). For a notebook with no tag at all the deck falls back to an automatic
    selection, from the markdown alone: the title cell, every cell that opens with a section
    heading (``## ...``) other than the exercises, and the takeaways, each one slide. Tagging
    any cell of such a chapter switches it to the tagged selection.

Offline and legible
    reveal.js is installed from the npm registry at build time (``npm install --prefix
    <out> reveal.js@REVEAL_VERSION``) and MathJax 3 is copied from the ``sphinx-mathjax-offline``
    package the book already uses; the deck loads both by relative paths and references no
    http(s) URL for scripts, styles or fonts (nbconvert's reveal template would pull require.js,
    jQuery, mermaid and MathJax from CDNs: :data:`TEMPLATE` replaces those blocks). The slide is
    1280 x 720 CSS pixels, body text 28 px and no text under 24 px (:data:`CSS`); MyST roles and
    directive fences, which nbconvert's markdown does not know, are reduced to their text (a code
    block keeps its fences).

Fitting the slide
    Nothing is shrunk to fit: reveal.js draws the slide at scale 1. A figure is drawn for the
    slide (:func:`fit_figure`) and shown at its natural size, its smallest text 24 px. A cell too
    long for one slide continues on slides below it (:data:`PAGINATE_JS`, in the browser, once the
    math and the fonts are laid out), split between paragraphs, list items or table rows; such a
    slide carries the class ``llm-continued``, so that the deck still has one slide per tagged
    cell besides them.
"""

from __future__ import annotations

import argparse
import copy
import difflib
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
    read_json,
    replaceable,
    shorten,
    source_folder,
    unknown,
    write_output,
)

__all__ = [
    "SLIDE_TAGS", "REVEAL_VERSION", "FIGURE_BOX", "FIGURE_MIN_PX", "FIGURE_PAD", "PNG_KEY", "CSS",
    "PAGINATE_JS", "TEMPLATE", "fit_figure", "use_slide_figures", "png_record",
    "slide_types", "is_tagged", "expected_slides", "deck_notebook", "export_deck",
    "install_reveal", "install_mathjax", "build", "main", "MARK",
]

#: The cell tags that select a cell, and the nbconvert slide type each one becomes.
SLIDE_TAGS = ("slide", "subslide", "fragment")

#: reveal.js from the npm registry, pinned; its UMD build is ``dist/reveal.js``.
REVEAL_VERSION = "6.0.2"

#: The box a figure is drawn in on a slide, CSS pixels: the 1280 x 720 slide less its padding and a margin.
FIGURE_BOX = (1190, 676)

#: The smallest figure text, in CSS pixels as the slide draws it (the deck's floor is 24 px).
FIGURE_MIN_PX = 24

#: The white margin around a slide's figure, inches (Matplotlib's 0.1 would be 20 px at the slides' dpi).
FIGURE_PAD = 0.03

#: The PNG text chunk in which a slide figure records its smallest font (pt) and its dpi.
PNG_KEY = "llm-slides"

#: The projector override: a 1280 x 720 slide, body text 28 px, nothing visible under 24 px.
CSS = """
.reveal { font-size: 28px; }
.reveal .slides { text-align: left; }
html .reveal .slides section { height: 720px; overflow-y: auto; padding: 16px 40px; box-sizing: border-box; }
/* nbconvert nests each slide in a stack: the inner section is the slide and takes the padding. */
html .reveal .slides > section.stack { padding: 0; overflow: visible; }
html .reveal .slides h1, html .reveal .slides h2, html .reveal .slides h3 { text-transform: none; }
/* Every element at least 24 px and at least its parent's size; MathJax sizes its own glyphs. */
:where(.reveal .slides) :where(:not(mjx-container, mjx-container *)) { font-size: max(24px, 1em); }
.reveal .slides h1 { font-size: 52px; } .reveal .slides h2 { font-size: 42px; }
.reveal .slides h3 { font-size: 34px; }
.reveal .slides p, .reveal .slides li, .reveal .slides .jp-RenderedHTMLCommon { font-size: 28px; }
.reveal .slides table { font-size: 26px; margin: 0; }
.reveal .slides td, .reveal .slides th { font-size: 26px; padding: 4px 10px; }
.reveal .slides code, .reveal .slides pre, .reveal .slides pre * { font-size: 26px; }
.reveal .slides pre { width: 100%; box-shadow: none; }
.reveal .slides sub, .reveal .slides sup { font-size: 24px; }
.reveal .slides .jp-RenderedHTMLCommon { --jp-content-font-size1: 28px; --jp-code-font-size: 26px; }
/* A figure is drawn at its natural size (fit_figure made it for the slide), never scaled up. */
.reveal .slides .jp-OutputArea-output img, .reveal .slides .jp-RenderedImage img {
  display: block; width: auto; height: auto; max-width: 100%; max-height: 688px; margin: 0 auto; }
.reveal .slides .jp-RenderedImage { width: 100%; margin: 0; padding: 0; }
/* JupyterLab's cell and output wrappers add no space of their own: the slide's padding is the margin. */
.reveal .slides .jp-Cell, .reveal .slides .jp-Cell-inputWrapper, .reveal .slides .jp-InputArea,
.reveal .slides .jp-Cell-outputWrapper, .reveal .slides .jp-OutputArea, .reveal .slides .jp-OutputArea-child,
.reveal .slides .jp-RenderedHTMLCommon { margin: 0; padding: 0; }
.reveal .slides .jp-RenderedHTMLCommon > :last-child { margin-bottom: 0; }
/* While PAGINATE_JS measures: every slide laid out at its width, its height whatever its content. */
.reveal.llm-measure .slides { width: 1280px !important; }
.reveal.llm-measure .slides > section { padding: 0 !important; }
.reveal.llm-measure .slides > section, .reveal.llm-measure .slides > section > section {
  display: block !important; position: relative !important; height: auto !important; visibility: hidden; }
"""

#: nbconvert's reveal template with every remote script replaced by local files.
TEMPLATE = """{%- extends 'index.html.j2' -%}
{%- block html_head_js -%}{%- endblock html_head_js -%}
{% block jupyter_widgets %}{% endblock jupyter_widgets %}
{%- block html_head_js_mathjax -%}
<script>
window.MathJax = {
  tex: {inlineMath: [['$', '$'], ['\\\\(', '\\\\)']], displayMath: [['$$', '$$'], ['\\\\[', '\\\\]']],
        processEscapes: true, processEnvironments: true},
  options: {ignoreHtmlClass: 'tex2jax_ignore', processHtmlClass: 'tex2jax_process'},
  chtml: {minScale: 0.9}
};
</script>
<script src="mathjax/tex-chtml.js"></script>
{%- endblock html_head_js_mathjax -%}
{% block data_png scoped %}
{%- set record = (output.metadata.get('image/png') or {}).get('slide_figure') -%}
<div class="jp-RenderedImage jp-OutputArea-output {{ extra_class }}">
<img src="data:image/png;base64,{{ output.data['image/png'] | escape_html }}"
{%- if record and record.min_pt %} data-min-pt="{{ record.min_pt }}" data-dpi="{{ record.dpi }}"
 data-overlaps="{{ record.overlaps or 0 }}"{% endif %}
 alt="{{ (record.alt if record and record.alt else 'A figure of the chapter') | escape_html }}">
</div>
{%- endblock data_png %}
{%- block html_head_css -%}
<style type="text/css">{{ resources.slides_css }}</style>
{%- endblock html_head_css -%}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script>
{{ resources.paginate_js }}
const images = [...document.images].map(i => i.decode().catch(() => null));
const typeset = window.MathJax && MathJax.startup ? MathJax.startup.promise : null;
// the deck starts even if the split fails: a long slide then scrolls, which the test reports
Promise.all([document.fonts.ready, typeset, ...images]).then(paginate).catch(e => console.error(e)).then(() =>
  Reveal.initialize({
    controls: true, progress: true, hash: true, center: false, slideNumber: 'c/t',
    transition: 'none', width: 1280, height: 720, margin: 0
  }));
</script>
{% endblock footer_js %}
"""

#: A slide taller than 720 px continues on slides below it (class ``llm-continued``), split between
#: blocks: paragraphs, headings, list items, table rows (the header repeated), outputs. It runs in
#: the browser once MathJax, the fonts and the images are ready, before reveal.js starts, so the
#: split is where the reader's browser breaks the lines. A block taller than a slide on its own
#: (which the test reports) is left whole.
PAGINATE_JS = """
async function paginate() {
  const reveal = document.querySelector('.reveal');
  reveal.classList.add('llm-measure');
  await document.fonts.ready;  // the slides' fonts start loading only once the slides are laid out
  const container = 'div, ul, ol, blockquote, table, tbody, details';
  const blocks = root => {
    const out = [];
    const walk = e => {
      for (const c of e.children) {
        if (c.matches('script, style, aside.notes, thead, .jp-Collapser, .jp-InputPrompt, .jp-OutputPrompt')
            || (c.matches('div') && !c.children.length && !c.textContent.trim())) continue;
        if (c.matches(container) && !c.matches('.jp-RenderedImage') && c.children.length) walk(c);
        else out.push(c);
      }
    };
    walk(root);
    return out;
  };
  const splitAt = (section, node) => {
    // a list, table or cell whose first block moves goes whole, leaving no empty box behind
    while (node.parentElement !== section && !node.previousElementSibling) node = node.parentElement;
    const path = [];
    for (let n = node; n !== section; n = n.parentElement) path.unshift(n);
    const next = section.cloneNode(false);
    next.removeAttribute('id');
    let into = next;
    path.forEach((n, i) => {
      if (i === path.length - 1) {
        for (let s = n; s; ) { const after = s.nextSibling; into.appendChild(s); s = after; }
        return;
      }
      const copy = n.cloneNode(false);
      copy.removeAttribute('id');
      if (n.tagName === 'TABLE' && n.tHead) copy.appendChild(n.tHead.cloneNode(true));
      if (n.tagName === 'OL') copy.start = (n.start || 1) + [...n.children].indexOf(path[i + 1]);
      into.appendChild(copy);
      for (let s = n.nextSibling; s; ) { const after = s.nextSibling; into.appendChild(s); s = after; }
      into = copy;
    });
    return next;
  };
  for (const first of document.querySelectorAll('.reveal .slides > section > section')) {
    let section = first;
    for (;;) {
      const top = section.getBoundingClientRect().top;
      const limit = 720 - parseFloat(getComputedStyle(section).paddingBottom);
      const all = blocks(section);
      const over = all.findIndex(b => b.getBoundingClientRect().bottom - top > limit);
      if (over <= 0) break;
      const next = splitAt(section, all[over]);
      next.classList.add('llm-continued');
      section.after(next);
      section = next;
    }
  }
  reveal.classList.remove('llm-measure');
}
"""

_ROLE = re.compile(r"\{(?:term|doc|ref|numref|eq|abbr)\}`([^`<]*?)(?:\s*<[^`>]*>)?`")
_CITE = re.compile(r"\s*\{cite(?::[pt])?\}`[^`]*`")
_FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*(.*?)\s*$")
_OPTION = re.compile(r"^:[\w-]+:.*$")
_TARGET = re.compile(r"^\(([\w-]+)\)=\s*$")


def slide_types(nb) -> list[str | None]:
    """Each cell's slide type from its tags (the first of :data:`SLIDE_TAGS` it carries), else None."""
    types = []
    for cell in nb.cells:
        tags = cell.get("metadata", {}).get("tags", [])
        types.append(next((t for t in SLIDE_TAGS if t in tags), None))
    return types


def is_tagged(nb) -> bool:
    """Whether the notebook selects its slides with tags (any cell tagged from :data:`SLIDE_TAGS`)."""
    return any(slide_types(nb))


def _automatic(nb) -> list[str | None]:
    """The fallback for an untagged chapter: title, section openings (not the exercises), takeaways."""
    types: list[str | None] = []
    for i, cell in enumerate(nb.cells):
        text = cell.source.lstrip() if cell.cell_type == "markdown" else ""
        heading = text.split("\n", 1)[0]
        chosen = cell.cell_type == "markdown" and (
            (i == 0 or heading.startswith("# ") or heading.startswith("## "))
            and not heading.startswith("## Exercises")
        )
        types.append("slide" if chosen else None)
    return types


def _selection(nb) -> list[str | None]:
    return slide_types(nb) if is_tagged(nb) else _automatic(nb)


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


def expected_slides(nb) -> int:
    """How many slides the deck of this notebook has: its ``slide`` and ``subslide`` cells."""
    return sum(t in ("slide", "subslide") for t in _selection(_notebook("nb", nb)))


def _without_directive_fences(lines: list[str]) -> list[str]:
    """The lines less the fences of MyST directives (```{note}, :::{admonition}), whose content
    stays; a code block's fences (```python ... ```) stay, and nothing inside it is touched."""
    out: list[str] = []
    stack: list[tuple[str, bool]] = []  # each open fence: its marker, and whether it is a directive's
    for ln in lines:
        m = _FENCE.match(ln)
        if m:
            marker, rest = m.groups()
            top = stack[-1] if stack else None
            if top and not rest and marker[0] == top[0][0] and len(marker) >= len(top[0]):
                stack.pop()
                if not top[1]:
                    out.append(ln)
                continue
            if not (top and not top[1]):  # a fence opens only outside a code block
                directive = rest.startswith("{")
                stack.append((marker, directive))
                if not directive:
                    out.append(ln)
                continue
        out.append(ln)
    return out


def _plain_markdown(text: str) -> str:
    """MyST that nbconvert's markdown does not render, reduced to its text."""
    text = _CITE.sub("", text)
    text = _ROLE.sub(lambda m: m.group(1).strip(), text)
    lines = [ln for ln in _without_directive_fences(text.split("\n"))
             if not (_OPTION.match(ln.strip()) or _TARGET.match(ln.strip()))]
    # "## Further reading" and what follows is for the book, not the room.
    out = []
    for ln in lines:
        if ln.strip().lower().startswith("## further reading"):
            break
        out.append(ln)
    return "\n".join(out).strip()


def _offline_prefix() -> list[str]:
    """A new network namespace with only loopback (the kernel talks to us over it), when we may make one."""
    if shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
    return []


def _drawn_texts(fig) -> list[tuple[float, object]]:
    """The font size (pt) and box (px) of every text a draw of ``fig`` puts on the canvas."""
    import matplotlib.text as mtext

    texts: list[tuple[float, object]] = []
    original = mtext.Text.draw

    def draw(self, renderer):
        if self.get_visible() and self.get_text().strip():
            texts.append((float(self.get_fontsize()), self.get_window_extent(renderer)))
        return original(self, renderer)

    mtext.Text.draw = draw
    try:
        fig.canvas.draw()
    finally:
        mtext.Text.draw = original
    return texts


def _overlaps(boxes) -> int:
    """How many pairs of the boxes overlap by more than a fifth of the smaller one."""
    count = 0
    for i, a in enumerate(boxes):
        for b in boxes[i + 1:]:
            w = min(a.x1, b.x1) - max(a.x0, b.x0)
            h = min(a.y1, b.y1) - max(a.y0, b.y0)
            if w > 0 and h > 0 and w * h > 0.2 * min(a.width * a.height, b.width * b.height):
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
    if fitted is None:
        fitted = size
    fig.set_size_inches(*fitted)
    overlaps = _overlaps([box for _, box in _drawn_texts(fig)])
    return {"min_pt": min_pt, "dpi": dpi, "alt": alt, "overlaps": overlaps}


def use_slide_figures(box: tuple[int, int] = FIGURE_BOX, min_px: float = FIGURE_MIN_PX) -> None:
    """In a running IPython kernel: every figure displayed from now on is fitted to a slide.

    Each figure goes through :func:`fit_figure` before it is drawn as PNG, and the PNG carries
    the figure's smallest font and dpi in a text chunk (:data:`PNG_KEY`, read by
    :func:`png_record`), so that the deck, and its test, know the size its text is drawn at.
    """
    import matplotlib.pyplot as plt
    from IPython import get_ipython
    from IPython.core.pylabtools import print_figure
    from matplotlib.figure import Figure

    from .widgets import SmallMultiples

    def png(fig):
        record = fit_figure(fig, box, min_px)
        return print_figure(fig, "png", base64=True, pad_inches=FIGURE_PAD,
                            metadata={PNG_KEY: json.dumps(record)})

    def grid(shown):  # small multiples: one figure on a slide, fitted as a whole
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
    nb = copy.deepcopy(nb)
    setup = "from llm_roofline.course.slides import use_slide_figures\nuse_slide_figures()"
    nb.cells.insert(0, nbformat.v4.new_code_cell(setup))
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
        done = nbformat.read(dst, as_version=4)
    done.cells.pop(0)
    return done


_KEPT_OUTPUTS = ("image/png", "image/svg+xml", "image/jpeg", "text/html", "text/latex", "text/markdown")


def deck_notebook(nb, *, cwd: Path | None = None, execute: bool = True):
    """The notebook the exporter sees: only the selected cells, with ``slideshow`` metadata set.

    Executes the notebook first (see the module's docstring) when a selected cell is code and
    ``execute`` is true. Code cells keep only rich outputs (figures, HTML tables).
    """
    types = _selection(nb)
    if execute and any(t and c.cell_type == "code" for t, c in zip(types, nb.cells, strict=True)):
        nb = _execute(nb, cwd or Path.cwd())
    deck = copy.deepcopy(nb)
    deck.metadata.pop("widgets", None)
    cells = []
    for cell, kind in zip(deck.cells, types, strict=True):
        if kind is None:
            continue
        cell.metadata["slideshow"] = {"slide_type": kind}
        if cell.cell_type == "markdown":
            cell.source = _plain_markdown(cell.source)
        elif cell.cell_type == "code":
            cell.outputs = [o for o in cell.get("outputs", [])
                            if o.get("output_type") in ("display_data", "execute_result")
                            and any(m in o.get("data", {}) for m in _KEPT_OUTPUTS)]
            for o in cell.outputs:
                o["data"] = {m: v for m, v in o["data"].items() if m in _KEPT_OUTPUTS or m == "text/plain"}
                record = png_record(o["data"]["image/png"]) if "image/png" in o["data"] else None
                if record:
                    o.setdefault("metadata", {}).setdefault("image/png", {})["slide_figure"] = record
        cells.append(cell)
    deck.cells = cells
    return deck


def _figure_records(deck) -> list[dict]:
    """The :data:`PNG_KEY` record of every figure in the deck notebook, in order."""
    return [o["metadata"]["image/png"]["slide_figure"]
            for cell in deck.cells if cell.cell_type == "code" for o in cell.outputs
            if "slide_figure" in o.get("metadata", {}).get("image/png", {})]


def export_deck(deck_nb, title: str, reveal_prefix: str = "reveal.js") -> str:
    """The deck's HTML from nbconvert's SlidesExporter, with the local template, reveal.js and CSS."""
    from jinja2 import DictLoader
    from nbconvert import SlidesExporter

    exporter = SlidesExporter(
        extra_loaders=[DictLoader({"llm_slides.html.j2": TEMPLATE})],
        template_file="llm_slides.html.j2",
        exclude_input=True, exclude_input_prompt=True, exclude_output_prompt=True,
        reveal_url_prefix=reveal_prefix, reveal_theme="white", reveal_transition="none",
        reveal_width="1280", reveal_height="720",
        require_js_url="", jquery_url="", mathjax_url="mathjax/tex-chtml.js", font_awesome_url="",
    )
    html, _ = exporter.from_notebook_node(
        deck_nb, resources={"metadata": {"name": title}, "slides_css": CSS, "paginate_js": PAGINATE_JS})
    return html


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
    if not (package / "dist" / "reveal.js").exists():
        raise RuntimeError(f"reveal.js {REVEAL_VERSION} has no dist/reveal.js in {package}")
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


def _marked(html: str) -> str:
    meta = f'<meta name="generator" content="{MARK}">'
    at = html.find("<head>")
    return (html[:at + 6] + "\n" + meta + html[at + 6:]) if at >= 0 else f"<!-- {MARK} -->\n{html}"


def _read_notebook(path: Path):
    try:
        return _notebook("notebook", read_json("notebook", path))
    except ValueError as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{str(path)!r} is not a valid notebook: {reason}") from None


def build(notebooks: Path, out: Path, only: list[str] | None = None, execute: bool = True,
          jobs: int | None = None, *, force: bool = False) -> list[Path]:
    """Write ``out/<chapter>.slides.html`` for every notebook in ``notebooks`` (or those in ``only``).

    The chapters run in ``jobs`` kernels at once (default: one per CPU, at most four). Every
    argument is checked, and every notebook read, before anything is installed or written:
    ``out`` may not be ``notebooks``, inside it or hold it; a deck replaces only a deck it wrote
    (:data:`MARK`) unless ``force``; each is written to a temporary file renamed into place.
    """
    from concurrent.futures import ThreadPoolExecutor

    execute, force = boolean("execute", execute), boolean("force", force)
    if jobs is not None:
        jobs = integer("jobs", jobs, maximum=64)
    notebooks = source_folder("notebooks", notebooks)
    out = destination("out", out, sources=[notebooks])
    found = sorted(p for p in notebooks.glob("*.ipynb") if p.is_file())
    if only is not None:
        only = names("only", only)
        known = {p.stem for p in found} | {p.name for p in found}
        for name in only:
            if name not in known:
                raise unknown("chapter in only", name, sorted(p.stem for p in found),
                              difflib.get_close_matches(name, sorted(known), n=2))
    paths = [path for path in found if not only or path.stem in only or path.name in only]
    if not paths:
        raise ValueError(f"no notebooks (*.ipynb) in {str(notebooks)!r}: no deck to build")
    read = {path: _read_notebook(path) for path in paths}  # every one checked before any work
    for path in paths:
        replaceable("deck", out / f"{path.stem}.slides.html", marker=MARK, force=force)
    try:
        out.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot make out {str(out)!r}: {err.strerror or type(err).__name__}") from None
    install_reveal(out)
    install_mathjax(out)

    def prepare(path):
        nb = read[path]
        return path, nb, deck_notebook(nb, cwd=path.parent, execute=execute)

    written = []
    with ThreadPoolExecutor(max_workers=jobs or min(4, os.cpu_count() or 1)) as pool:
        for path, nb, deck in pool.map(prepare, paths):
            html = export_deck(deck, path.stem, reveal_prefix="node_modules/reveal.js")
            target = write_output("deck", out / f"{path.stem}.slides.html", _marked(html),
                                  marker=MARK, force=True)
            mode = "tags" if is_tagged(nb) else "automatic"
            print(f"{target}: {expected_slides(nb)} slides ({mode})")
            for n, record in enumerate(_figure_records(deck), 1):
                if record.get("overlaps"):
                    print(f"  figure {n} ({record.get('alt') or 'untitled'}): {record['overlaps']} pairs of "
                          "texts overlap at projector size; a slide wants a simpler figure")
            written.append(target)
    return written


class _Parser(OneLineParser):
    label = "llm_roofline.course.slides"


def main(argv: list[str] | None = None) -> int:
    """``python -m llm_roofline.course.slides NOTEBOOKS OUT [--only CHAPTER ...] [--force]``."""
    parser = _Parser(prog="python -m llm_roofline.course.slides", description=__doc__,
                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", help="the folder of chapter notebooks")
    parser.add_argument("out", help="where the decks go (e.g. _build/slides)")
    parser.add_argument("--only", nargs="*", help="chapter names (e.g. 04_why_decode_is_bound)")
    parser.add_argument("--no-execute", action="store_true",
                        help="use the outputs stored in the notebook instead of executing it")
    parser.add_argument("--jobs", type=int, default=None,
                        help="chapters executed at once (default: one per CPU, at most four)")
    parser.add_argument("--force", action="store_true",
                        help="replace files in OUT of a deck's name that this command did not write")
    args = parser.parse_args(argv)
    if args.jobs is not None and args.jobs < 1:
        parser.error(f"--jobs must be at least 1, got {args.jobs}")
    try:
        build(args.notebooks, args.out, args.only, execute=not args.no_execute, jobs=args.jobs,
              force=args.force)
    except ValueError as err:
        message = re.sub(r"^(unknown chapter in )?only\b", lambda m: (m.group(1) or "") + "--only",
                         str(err))
        parser.error(re.sub(r"^jobs\b", "--jobs", message))
    except (RuntimeError, subprocess.CalledProcessError) as err:
        lines = [line for line in str(err).splitlines() if line.strip()] or [type(err).__name__]
        parser.exit(1, f"{parser.label}: error: {lines[0]} {lines[-1] if len(lines) > 1 else ''}\n")
    return 0


if __name__ == "__main__":
    sys.exit(main())
