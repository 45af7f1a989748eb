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
    network namespace with only loopback where one can be made, so that it runs offline; its
    figures are drawn with larger fonts (:data:`FIGURE_RC`) for the projector. A chapter whose
    tagged cells are all markdown is not executed.

Chapters without tags
    Chapters 01, 02 and 07 carry no slide tags yet (another contributor was editing them when the
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
    1280 x 720 CSS pixels, body text 28 px and no text under 24 px (:data:`CSS`), figures scaled to
    the slide's width; MyST roles and directive fences, which nbconvert's markdown does not know,
    are reduced to their text.
"""

from __future__ import annotations

import argparse
import copy
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

__all__ = [
    "SLIDE_TAGS", "REVEAL_VERSION", "FIGURE_RC", "CSS", "TEMPLATE",
    "slide_types", "is_tagged", "expected_slides", "deck_notebook", "export_deck",
    "install_reveal", "install_mathjax", "build", "main",
]

#: The cell tags that select a cell, and the nbconvert slide type each one becomes.
SLIDE_TAGS = ("slide", "subslide", "fragment")

#: reveal.js from the npm registry, pinned; its UMD build is ``dist/reveal.js``.
REVEAL_VERSION = "6.0.2"

#: Matplotlib settings for figures executed for the slides: labels readable from the back row.
FIGURE_RC = {"font.size": 16, "axes.titlesize": 17, "axes.labelsize": 16, "legend.fontsize": 14,
             "xtick.labelsize": 14, "ytick.labelsize": 14, "figure.dpi": 100}

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
.reveal .slides .jp-OutputArea-output img, .reveal .slides .jp-RenderedImage img {
  width: 100%; max-width: 1216px; max-height: 640px; object-fit: contain; }
.reveal .slides .jp-RenderedImage { width: 100%; }
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
{%- block html_head_css -%}
<style type="text/css">{{ resources.slides_css }}</style>
{%- endblock html_head_css -%}
{% block footer_js %}
<script src="{{ resources.reveal.url_prefix }}/dist/reveal.js"></script>
<script>
Reveal.initialize({
  controls: true, progress: true, hash: true, center: false, slideNumber: 'c/t',
  transition: 'none', width: 1280, height: 720, margin: 0
});
</script>
{% endblock footer_js %}
"""

_ROLE = re.compile(r"\{(?:term|doc|ref|numref|eq|abbr)\}`([^`<]*?)(?:\s*<[^`>]*>)?`")
_CITE = re.compile(r"\s*\{cite(?::[pt])?\}`[^`]*`")
_FENCE = re.compile(r"^\s*(`{3,}|:{3,})\s*\{[^}]*\}.*$|^\s*(`{3,}|:{3,})\s*$")
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


def expected_slides(nb) -> int:
    """How many slides the deck of this notebook has: its ``slide`` and ``subslide`` cells."""
    return sum(t in ("slide", "subslide") for t in _selection(nb))


def _plain_markdown(text: str) -> str:
    """MyST that nbconvert's markdown does not render, reduced to its text."""
    text = _CITE.sub("", text)
    text = _ROLE.sub(lambda m: m.group(1).strip(), text)
    lines = [ln for ln in text.split("\n")
             if not (_FENCE.match(ln) or _OPTION.match(ln.strip()) or _TARGET.match(ln.strip()))]
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


_EXECUTE = """
import sys, nbformat
from nbclient import NotebookClient
src, dst, cwd = sys.argv[1:4]
nb = nbformat.read(src, as_version=4)
NotebookClient(nb, timeout=180, startup_timeout=120, kernel_name="python3",
               resources={"metadata": {"path": cwd}}).execute()
nbformat.write(nb, dst)
"""


def _execute(nb, cwd: Path):
    """Run the notebook top to bottom in a fresh kernel, offline where possible; return it executed."""
    nb = copy.deepcopy(nb)
    setup = ("import matplotlib.pyplot as plt\n"
             f"plt.rcParams.update({FIGURE_RC!r})")
    nb.cells.insert(0, nbformat.v4.new_code_cell(setup))
    with tempfile.TemporaryDirectory() as tmp:
        src, dst = Path(tmp) / "in.ipynb", Path(tmp) / "out.ipynb"
        nbformat.write(nb, src)
        env = {k: v for k, v in os.environ.items() if k != "MPLBACKEND"}  # inline figures, not Agg
        cmd = [*_offline_prefix(), sys.executable, "-c", _EXECUTE, str(src), str(dst), str(cwd)]
        for attempt in range(2):  # a kernel that never answers (a busy machine) gets one more try
            try:
                proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=400)
                break
            except subprocess.TimeoutExpired:
                if attempt:
                    raise RuntimeError("executing the notebook timed out twice") from None
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
        cells.append(cell)
    deck.cells = cells
    return deck


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
        deck_nb, resources={"metadata": {"name": title}, "slides_css": CSS})
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


def build(notebooks: Path, out: Path, only: list[str] | None = None, execute: bool = True) -> list[Path]:
    """Write ``out/<chapter>.slides.html`` for every notebook in ``notebooks`` (or those in ``only``)."""
    out.mkdir(parents=True, exist_ok=True)
    install_reveal(out)
    install_mathjax(out)
    written = []
    for path in sorted(notebooks.glob("*.ipynb")):
        if only and path.stem not in only and path.name not in only:
            continue
        nb = nbformat.read(path, as_version=4)
        deck = deck_notebook(nb, cwd=path.parent, execute=execute)
        html = export_deck(deck, path.stem, reveal_prefix="node_modules/reveal.js")
        target = out / f"{path.stem}.slides.html"
        target.write_text(html, encoding="utf-8")
        mode = "tags" if is_tagged(nb) else "automatic"
        print(f"{target}: {expected_slides(nb)} slides ({mode})")
        written.append(target)
    return written


def main(argv: list[str] | None = None) -> int:
    """``python -m llm_roofline.course.slides NOTEBOOKS OUT [--only CHAPTER ...]``."""
    parser = argparse.ArgumentParser(prog="python -m llm_roofline.course.slides", description=__doc__,
                                     formatter_class=argparse.RawDescriptionHelpFormatter)
    parser.add_argument("notebooks", type=Path, help="the folder of chapter notebooks")
    parser.add_argument("out", type=Path, help="where the decks go (e.g. _build/slides)")
    parser.add_argument("--only", nargs="*", help="chapter names (e.g. 04_why_decode_is_bound)")
    parser.add_argument("--no-execute", action="store_true",
                        help="use the outputs stored in the notebook instead of executing it")
    args = parser.parse_args(argv)
    build(args.notebooks, args.out, args.only, execute=not args.no_execute)
    return 0


if __name__ == "__main__":
    sys.exit(main())
