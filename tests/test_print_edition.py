"""The print edition's plumbing, without building anything: the website links the PDF only when
there is one (`make html` on a machine without TeX), and the calculator's worked example in the
PDF is the case the live page opens with. tests/test_pdf.py reads the built PDF itself."""

from __future__ import annotations

import re
import shlex
import sys
from pathlib import Path
from types import SimpleNamespace

from conftest import ROOT
from llm_roofline.hardware import get_accelerator

sys.path.insert(0, str(ROOT / "_ext"))
import pdfedition  # noqa: E402

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
