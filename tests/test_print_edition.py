"""The print edition's plumbing, without building anything: the website links the PDF only when
there is one (`make html` on a machine without TeX), and the calculator's worked example in the
PDF is the case the live page opens with; a scrubber's shared legend and the captions the PDF keeps
with their figures. tests/test_pdf.py reads the built PDF itself."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from docutils import nodes

from conftest import ROOT
from llm_roofline.hardware import get_accelerator

sys.path.insert(0, str(ROOT / "_ext"))
import pdfedition  # noqa: E402
import printform  # noqa: E402

LATEX_DOCS = [("book/index", "physics-of-llm-inference.tex", "The physics of LLM inference", "", "manual")]


def _app(tmp_path: Path):
    outdir = tmp_path / "_build" / "html"
    return SimpleNamespace(outdir=str(outdir), builder=SimpleNamespace(format="html"),
                           config=SimpleNamespace(latex_documents=LATEX_DOCS),
                           env=SimpleNamespace(found_docs={"book/index", "genindex"}))


def _context(app, pagename: str) -> dict:
    depth = pagename.count("/")
    context = {"pathto": lambda target, resource: "../" * depth + target}
    pdfedition._link(app, pagename, "page.html", context, None)
    return context


def test_no_pdf_no_link_and_no_stale_copy(tmp_path):
    app = _app(tmp_path)
    stale = Path(app.outdir) / "downloads" / "physics-of-llm-inference.pdf"
    stale.parent.mkdir(parents=True)
    stale.write_bytes(b"%PDF old")
    assert pdfedition._copy(app, app.env) == ["book/index", "genindex"], "pages keep a link to no PDF"
    assert not stale.exists(), "a PDF from an earlier build is still served"
    assert pdfedition._copy(app, app.env) == [], "pages are rewritten with nothing changed"
    assert _context(app, "book/index")["pdf_edition"] is None


def test_the_built_pdf_is_copied_and_linked(tmp_path):
    app = _app(tmp_path)
    built = tmp_path / "_build" / "latex" / "physics-of-llm-inference.pdf"
    built.parent.mkdir(parents=True)
    built.write_bytes(b"%PDF new")
    assert pdfedition._copy(app, app.env) == ["book/index", "genindex"], "pages keep no link to the PDF"
    assert (Path(app.outdir) / "downloads" / built.name).read_bytes() == b"%PDF new"
    served = "downloads/physics-of-llm-inference.pdf"
    assert _context(app, "notebooks/03_roofline")["pdf_edition"] == "../" + served
    assert _context(app, "genindex")["pdf_edition"] == served


def test_the_sidebar_lists_the_link_template():
    config = (ROOT / "_config.yml").read_text()
    assert "pdf-edition.html" in config and (ROOT / "_ext" / "templates" / "pdf-edition.html").is_file()


def test_the_worked_example_is_the_live_pages_opening_case():
    """The settings the page opens with (calculator.js, FIELDS' defaults) are the example's arguments."""
    js = (ROOT / "book" / "_calculator" / "calculator.js").read_text()
    field = re.compile(r'^\s*\["(\w+)", "\w+", "[^"]*", "(?:select|number)", .*, "([^"]*)"\],$', re.M)
    defaults = dict(field.findall(js))
    page = (ROOT / "book" / "calculator.md").read_text()
    argv = shlex.split(re.search(r"^```\{calculator-example\} (.*)$", page, re.M).group(1))
    args = dict(zip(argv[1::2], argv[2::2], strict=False))
    expected = {"--model": defaults["model"], "--n-gpus": defaults["n"], "--dtype": defaults["weight"],
                "--kv-dtype": defaults["kv"], "--batch": defaults["batch"], "--prompt": defaults["prompt"],
                "--output": defaults["output"], "--mbu": defaults["mbu"], "--mfu": defaults["mfu"]}
    for option, value in expected.items():
        assert args.get(option) == value, f"{option}: the example has {args.get(option)}, the page {value}"
    assert get_accelerator(args["--gpu"]).name == defaults["gpu"]
    assert defaults["compute"] == "auto" and "--compute-dtype" not in args


def test_a_scrubbers_shared_legend_is_under_its_frames_not_on_them():
    """``scrubber(..., legend={...})``: the frames draw no key of their own; one key sits under the
    page's frame (outside its Axes) and once under the printed grid, which grows by its height."""
    import io

    import matplotlib

    matplotlib.use("Agg")
    import matplotlib.pyplot as plt
    import pytest

    from llm_roofline.course.widgets import print_size, scrubber

    def draw(ax, v):
        ax.plot([0, 1], [0, v], label="line")
        ax.scatter([0.5], [v / 2], label="point")

    values = [1, 2, 3, 4, 5, 6]
    plain = plt.imread(io.BytesIO(scrubber(draw, values, figsize=(4, 3))._repr_png_()), format="png")
    keyed = scrubber(draw, values, figsize=(4, 3), legend={"ncols": 2})
    grid = plt.imread(io.BytesIO(keyed._repr_png_()), format="png")
    width, height = (round(x * 150) for x in print_size(4, 3))
    assert plain.shape[:2] == (3 * height, 2 * width)
    assert grid.shape[1] == 2 * width and 3 * height + 20 < grid.shape[0] < 3 * height + 150
    key = plt.imread(io.BytesIO(keyed.print_key), format="png")
    assert key.shape[0] < 150 and key.shape[1] < 2 * width, "the key is one short strip"
    # the strip under the frames is not blank: the legend is drawn there
    assert (grid[3 * height + 5:, :, :3] < 0.5).any()
    with pytest.raises(ValueError, match="legend must be a dict of Figure.legend's keyword arguments"):
        scrubber(draw, values, legend="below")
    with pytest.raises(ValueError, match="the first frame has no labelled artist"):
        scrubber(lambda ax, v: ax.plot([0, v]), values, legend={})


def test_a_caption_is_the_paragraph_that_starts_with_a_bold_figure_number():
    """_ext/printform.py keeps these paragraphs on their figure's page; MyST may begin a
    paragraph with an empty text node, and a figure's number in prose is not a caption."""
    def para(*children):
        return nodes.paragraph("", "", *children)

    assert printform.is_caption(para(nodes.strong("", "Figure 3.3."), nodes.Text(" Rooflines.")))
    assert printform.is_caption(para(nodes.Text(""), nodes.strong("", "Figure 12.10."), nodes.Text(" A")))
    assert not printform.is_caption(para(nodes.Text("See "), nodes.strong("", "Figure 3.3.")))
    assert not printform.is_caption(para(nodes.strong("", "Figure 3.3 shows")))
    assert not printform.is_caption(para(nodes.Text("Figure 3.3. in plain text")))
