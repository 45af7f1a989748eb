"""The book builds with warnings as errors, and the website it makes reads offline."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from conftest import ROOT, toc_files

pytestmark = pytest.mark.slow


class _Resources(HTMLParser):
    """What a page loads by itself: scripts, stylesheets, images, frames (not links a reader clicks)."""

    def __init__(self):
        super().__init__()
        self.loaded: list[str] = []

    def handle_starttag(self, tag, attrs):
        a = dict(attrs)
        if tag in ("script", "img", "iframe", "source", "video", "audio") and a.get("src"):
            self.loaded.append(a["src"])
        rel = set((a.get("rel") or "").split())
        if tag == "link" and a.get("href") and rel & {"stylesheet", "preload", "icon", "modulepreload"}:
            self.loaded.append(a["href"])


def test_every_toc_page_is_built(built_book):
    for entry in toc_files():
        assert (built_book / f"{entry}.html").exists(), f"{entry}.html missing from the built site"


def test_no_resource_comes_from_the_network(built_book):
    remote = re.compile(r"^(https?:)?//", re.I)
    pages = sorted(built_book.rglob("*.html"))
    assert pages
    for page in pages:
        parser = _Resources()
        parser.feed(page.read_text(errors="replace"))
        offenders = [u for u in parser.loaded if remote.match(u)]
        assert not offenders, f"{page.relative_to(built_book)} loads from the network: {offenders}"


def test_mathjax_is_bundled(built_book):
    assert (built_book / "_static" / "mathjax" / "tex-chtml.js").exists()
    index = (built_book / "book" / "index.html").read_text()
    assert "_static/mathjax/tex-chtml.js" in index


def test_stylesheets_import_nothing_remote(built_book):
    for css in built_book.rglob("*.css"):
        text = css.read_text(errors="replace")
        remote_import = re.search(r"@import\s+url\(\s*['\"]?https?:", text)
        assert not remote_import, f"{css.name} imports a remote stylesheet"


def test_references_are_author_year_and_disambiguated(built_book):
    """The list carries the labels the text cites (author, year), with a/b where one author has two
    works in a year, and no raw TeX; the text's citations are author-year, not numbers."""
    refs = (built_book / "book" / "references.html").read_text()
    labels = re.findall(r'<span class="label"><span class="fn-bracket">\[</span>(.*?)<span', refs)
    assert labels, "no labelled entries in the references"
    assert not [x for x in labels if x.strip().isdigit()], "the references are numbered"
    assert all(re.search(r", (19|20)\d\d[a-z]?$", x) for x in labels), labels
    assert len(set(labels)) == len(labels), f"two entries share a label: {labels}"
    for label in ("DeepSeek-AI, 2024a", "DeepSeek-AI, 2024b", "NVIDIA, 2024a", "NVIDIA, 2024b"):
        assert label in labels, f"{label} missing: {labels}"
    first = [x.split()[0].strip(",").lower() for x in labels]
    assert first == sorted(first), "the references are not in alphabetical order of authors"
    assert "\\emph" not in refs and "\\url" not in refs, "raw TeX in the references"
    glossary = (built_book / "book" / "glossary.html").read_text()
    assert re.search(r"\[<a [^>]*>Williams <em>et al.</em>, 2009</a>\]", glossary), "not cited author-year"


GLOSSARY_TERMS = ("arithmetic intensity", "roofline", "ridge point", "prefill", "decode", "KV cache", "GEMM",
                  "GEMV", "kernel", "tensor core", "SFU", "HBM", "MBU", "MFU", "TTFT", "TPOT",
                  "tensor parallelism", "all-reduce", "GQA", "MQA", "MLA", "MoE", "batch")


def test_glossary_defines_the_terms_pages_link(built_book):
    """A real glossary: every term the brief lists is a {term} target, and no {term} link is broken."""
    glossary = (built_book / "book" / "glossary.html").read_text()
    defined = {t.lower() for t in re.findall(r'<dt id="term-[^"]*">([^<]+)<', glossary)}
    missing = [t for t in GLOSSARY_TERMS if t.lower() not in defined]
    assert not missing, f"terms not in the glossary: {missing}"
    errata = (built_book / "book" / "errata.html").read_text()
    assert errata.count('href="glossary.html#term-') >= 10, "the errata links few glossary terms"


def test_no_page_prints_a_warning(built_book):
    """No executed output on any page is a warning (matplotlib's, NumPy's, the library's):
    stderr blocks are searched in every built page, the chapters' and the book pages'."""
    stderr = re.compile(r'<div class="output stderr[^"]*">(.*?)</div>', re.S)
    found = []
    for page in sorted(built_book.rglob("*.html")):
        if "_static" in page.parts:
            continue
        for block in stderr.findall(page.read_text(errors="replace")):
            if "Warning" in block:
                text = re.sub(r"<[^>]+>", "", block).strip()
                found.append(f"{page.relative_to(built_book)}: {text[:200]}")
    assert not found, "warnings printed into pages:\n" + "\n".join(found)


def test_the_build_logs_carry_no_kernel_warning(built_book):
    """The logs of `make book` (the PDF's and the website's) carry no warning from the kernels the
    build starts: ipykernel from 7.3 logs one over a localhost TCP connection for each (pinned below)."""
    logs = [ROOT / "_build" / name for name in ("build-pdf.log", "build.log")]
    found = [f"{log.name}: {line.strip()[:160]}" for log in logs if log.exists()
             for line in log.read_text(errors="replace").splitlines()
             if "without encryption" in line or "[IPKernelApp] WARNING" in line]
    assert (ROOT / "_build" / "build.log").exists()
    assert not found, "kernel warnings in the build logs:\n" + "\n".join(found)


def test_the_student_edition_is_a_download_of_the_site(built_book):
    """downloads/student-edition.zip: every chapter without its solution cells, and the
    requirements; the instructor guide links it."""
    import json
    import zipfile

    from conftest import notebooks

    archive = zipfile.ZipFile(built_book / "downloads" / "student-edition.zip")
    names = sorted(archive.namelist())
    assert names == sorted([f"student-edition/{p.name}" for p in notebooks()]
                           + ["student-edition/requirements.txt"])
    for name in names:
        if name.endswith(".ipynb"):
            cells = json.loads(archive.read(name))["cells"]
            assert not any("solution" in c["metadata"].get("tags", []) for c in cells), name
            assert any("hint(" in "".join(c["source"]) for c in cells), name  # hints stay
    guide = (built_book / "book" / "instructor_guide.html").read_text()
    assert 'href="../downloads/student-edition.zip"' in guide
