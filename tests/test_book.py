"""The book builds with warnings as errors, and the website it makes reads offline."""

from __future__ import annotations

import re
from html.parser import HTMLParser

import pytest

from conftest import toc_files

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
