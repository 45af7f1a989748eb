"""The built website, opened in headless Chromium: every page loads with its title, images and math,
the scrubbers move, nothing is fetched from outside, and a screenshot of each page is saved."""

from __future__ import annotations

import contextlib
import functools
import http.server
import os
import shutil
import threading
from urllib.parse import urlparse

import pytest

from conftest import ROOT, SCREENSHOTS, toc_files

pytestmark = [pytest.mark.slow, pytest.mark.browser]

CHROMIUM_ARGS = [
    "--headless", "--no-sandbox", "--disable-gpu", "--disable-background-networking",
    "--disable-quic", "--no-first-run", "--disable-component-update", "--disable-sync",
]


def _chromium() -> str:
    path = os.environ.get("CHROMIUM") or shutil.which("chromium") or shutil.which("chromium-browser")
    if not path:
        message = "Debian's chromium is not installed (apt-get install chromium)"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    return path


@contextlib.contextmanager
def serving(folder):
    """A local HTTP server over ``folder`` for the test's duration; yields its base URL."""
    handler = functools.partial(_QuietHandler, directory=str(folder))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_address[1]}"
    finally:
        server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@contextlib.contextmanager
def launched_chromium():
    """Debian's Chromium driven by Playwright (skipped without either, failed under CI)."""
    try:
        from playwright import sync_api
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("playwright is not installed (requirements-dev.txt)")
        pytest.skip("playwright is not installed (requirements-dev.txt)")
    executable = _chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        try:
            yield b
        finally:
            b.close()


@pytest.fixture(scope="module")
def site(built_book):
    with serving(built_book) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with launched_chromium() as b:
        yield b


@pytest.fixture()
def page(browser, site):
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    pg.outside = []
    pg.errors = []
    local = urlparse(site).netloc

    def route(r):
        if urlparse(r.request.url).netloc in (local, "") or r.request.url.startswith("data:"):
            r.continue_()
        else:
            pg.outside.append(r.request.url)
            r.abort()

    pg.route("**/*", route)
    pg.on("pageerror", lambda e: pg.errors.append(str(e)))
    yield pg
    context.close()


# sphinx-thebe, which Jupyter Book 1.x always loads, adds its inline config script twice to each
# page; the second copy throws. Thebe (live code on the page) is off in this book, so it is harmless.
KNOWN_UPSTREAM_ERRORS = ("Identifier 'THEBE_JS_URL' has already been declared",)

RAW_MATH = ("$$", "\\[", "\\begin{", "\\frac{", "\\times")

# Text on the page outside code, so that TeX in a code listing is not taken for unrendered math.
VISIBLE_PROSE_JS = """() => {
  const root = document.querySelector('main') || document.body;
  const clone = root.cloneNode(true);
  clone.querySelectorAll('pre, code, script, style, mjx-container, .cell_input, .highlight')
       .forEach(n => n.remove());
  return clone.innerText;
}"""


WIDTHS = (1280, 400)  # a laptop and a phone

# What a reader cannot see: an element whose content is wider or taller than its box while the box
# hides the overflow (no scroll bar), anything that runs past the right edge of the window and is
# not inside a box of its own that scrolls, the page itself scrolling sideways, and images wider
# than the column. Inline elements are not boxes, so they clip nothing; MathJax's glyph parts and
# collapsed drop-downs (a solution behind its button) hide content on purpose and are not counted.
LAYOUT_JS = """() => {
  const main = document.querySelector('main') || document.body;
  const vw = document.documentElement.clientWidth;
  const visible = e => { const r = e.getBoundingClientRect(); const s = getComputedStyle(e);
    return r.width > 0 && r.height > 0 && s.visibility !== 'hidden' && s.display !== 'none'; };
  const skip = e => e.closest('.sr-only, .visually-hidden, script, style, '
                              + '.bd-sidebar-primary, .bd-sidebar-secondary, .cell_input .copybtn');
  // A box of its own that scrolls (a table's, a code cell's, an equation's), not the whole column.
  const column = '.bd-article-container, .bd-content, .bd-main, .bd-container, .bd-page-width, main, article';
  const scrolls = e => { for (let a = e.parentElement; a && a !== document.body; a = a.parentElement) {
      if (a.matches(column)) return false;
      const o = getComputedStyle(a).overflowX;
      if ((o === 'auto' || o === 'scroll') && a.getBoundingClientRect().right <= vw + 1) return true; }
    return false; };
  const name = e => (e.tagName.toLowerCase() + (e.className && typeof e.className === 'string'
                     ? '.' + e.className.trim().split(/\\s+/).slice(0, 2).join('.') : '')
                     + ': ' + (e.innerText || e.textContent || e.src || '').trim().slice(0, 70));
  const clipped = [], wide = [], images = [];
  for (const e of main.querySelectorAll('*')) {
    if (skip(e) || !visible(e)) continue;
    const r = e.getBoundingClientRect();
    if (r.right > vw + 1 && !scrolls(e)) wide.push(name(e) + ` (right edge ${Math.round(r.right)} px)`);
    // A collapsed drop-down (a solution, a hidden cell) hides its content behind a button: not cut off.
    if (e.matches('.toggle-hidden, details:not([open])')) continue;
    const s = getComputedStyle(e);
    if (s.display === 'inline' || s.display === 'contents') continue;  // overflow applies to boxes only
    if (e.tagName.startsWith('MJX-') && e.tagName !== 'MJX-CONTAINER') continue;  // MathJax's glyph parts
    const hidesX = s.overflowX === 'hidden' || s.overflowX === 'clip';
    const hidesY = (s.overflowY === 'hidden' || s.overflowY === 'clip') && e.tagName !== 'MJX-CONTAINER';
    if ((hidesX && e.scrollWidth > e.clientWidth + 2) || (hidesY && e.scrollHeight > e.clientHeight + 2)
        || (s.textOverflow === 'ellipsis' && e.scrollWidth > e.clientWidth + 2)) clipped.push(name(e));
  }
  const text = (document.querySelector('article.bd-article') || main).getBoundingClientRect();
  for (const img of main.querySelectorAll('img')) {
    if (!visible(img) || skip(img)) continue;
    const r = img.getBoundingClientRect();
    if (r.width > text.width + 1 && !scrolls(img)) images.push(name(img) + ` (${Math.round(r.width)} px)`);
  }
  const sideways = document.documentElement.scrollWidth > vw + 1;
  return {clipped, wide, images, sideways, pageWidth: document.documentElement.scrollWidth, vw};
}"""


def _ready(page):
    page.wait_for_function(
        "() => !window.MathJax || !MathJax.startup || MathJax.startup.promise", timeout=30000
    )
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")


@pytest.mark.parametrize("width", WIDTHS, ids=lambda w: f"{w}px")
@pytest.mark.parametrize("entry", toc_files())
def test_page_renders(page, site, entry, width):
    page.set_viewport_size({"width": width, "height": 900})
    page.goto(f"{site}/{entry}.html", wait_until="load")
    _ready(page)

    title = page.title()
    assert title and "404" not in title, f"{entry}: no title"
    assert page.locator("main h1").count() >= 1, f"{entry}: no heading"

    broken = page.evaluate(
        """() => [...document.images].filter(i => !i.complete || i.naturalWidth === 0)
                                      .map(i => i.src.slice(0, 80))"""
    )
    assert not broken, f"{entry}: broken images {broken}"

    if page.locator(".math").count():
        assert page.locator("mjx-container").count() > 0, f"{entry}: math left unrendered by MathJax"
    if width >= 1280:  # on a laptop every display equation fits the column; on a phone it may scroll
        overflowing = page.evaluate(
            """() => [...document.querySelectorAll('mjx-container[display="true"]')]
                      .filter(m => m.scrollWidth > m.clientWidth + 1).map(m => m.textContent.slice(0, 60))"""
        )
        assert not overflowing, f"{entry}: display math wider than the text column: {overflowing}"
    if width >= 1280 and entry.startswith("notebooks/"):  # a chapter's code fits its box (folded too)
        scrolling = page.evaluate(
            """() => [...document.querySelectorAll('main .cell_input pre')]
                      .filter(p => p.clientWidth > 0 && p.scrollWidth > p.clientWidth + 1)
                      .map(p => p.textContent.split('\\n').reduce((a, b) => a.length >= b.length ? a : b))"""
        )
        assert not scrolling, f"{entry}: code wider than its box (longest lines): {scrolling}"
    prose = page.evaluate(VISIBLE_PROSE_JS)
    leftovers = [t for t in RAW_MATH if t in prose]
    assert not leftovers, f"{entry}: raw TeX on the page: {leftovers}"
    raw_myst = [t for t in ("{term}", "{cite}", "{glue", "{exercise", "{doc}") if t in prose]
    assert not raw_myst, f"{entry}: raw MyST on the page: {raw_myst}"

    searches = page.evaluate(
        """() => [...document.querySelectorAll('input[type=search], .search-button-field, .search-button')]
                  .filter(e => { const r = e.getBoundingClientRect(); return r.width > 0 && r.height > 0
                                 && getComputedStyle(e).visibility !== 'hidden'; }).length"""
    )
    assert searches == 1, f"{entry} at {width} px: {searches} search boxes or buttons in view, want one"

    assert not page.outside, f"{entry}: requests to outside hosts: {page.outside}"
    errors = [e for e in page.errors if e not in KNOWN_UPSTREAM_ERRORS]
    assert not errors, f"{entry}: JavaScript errors: {errors}"

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / f"{entry.replace('/', '__')}-{width}.png"), full_page=True)

    layout = page.evaluate(LAYOUT_JS)
    problems = [f"cut off (content hidden in its box): {x}" for x in layout["clipped"]]
    problems += [f"past the window's right edge: {x}" for x in layout["wide"]]
    problems += [f"image wider than the column: {x}" for x in layout["images"]]
    if layout["sideways"]:
        problems.append(f"the page scrolls sideways ({layout['pageWidth']} px in a {layout['vw']} px window)")
    assert not problems, f"{entry} at {width} px: {len(problems)} problems:\n  " + "\n  ".join(problems[:25])


SMALL_MULTIPLES_ONLY = {"notebooks/01_dormant_tensor_cores"}
"""Chapters whose sliders' kernel-free twins are small multiples only (DESIGN.md allows either)."""


@pytest.mark.parametrize("entry", [e for e in toc_files() if e.startswith("notebooks/")])
def test_scrubbers_move(page, site, entry):
    """Each kernel-free slider (matplotlib's to_jshtml) changes its frame when dragged."""
    page.goto(f"{site}/{entry}.html", wait_until="load")
    n = page.locator("div.animation").count()
    if n == 0:  # no scrubber: the page has no live sliders, or their twins are small multiples
        has_sliders = "live(" in (ROOT / f"{entry}.ipynb").read_text()
        assert not has_sliders or entry in SMALL_MULTIPLES_ONLY, (
            f"{entry}: a chapter's sliders need a kernel-free twin")
        return
    for i in range(n):
        anim = page.locator("div.animation").nth(i)
        anim.scroll_into_view_if_needed()
        img, slider = anim.locator("img").first, anim.locator("input.anim-slider").first
        before = img.get_attribute("src")
        last = slider.get_attribute("max")
        assert last and int(last) > 0, f"{entry}: scrubber {i} has a single frame"
        slider.evaluate(
            """(s, v) => { s.value = v; s.dispatchEvent(new Event('input'));
                          s.dispatchEvent(new Event('change')); }""",
            last,
        )
        page.wait_for_timeout(200)
        after = img.get_attribute("src")
        assert after and after != before, f"{entry}: scrubber {i} did not change its frame"


@pytest.mark.parametrize("entry", [e for e in toc_files() if e.startswith("notebooks/")
                                   and "small_multiples(" in (ROOT / f"{e}.ipynb").read_text()])
def test_small_multiples_stack_on_a_phone(page, site, entry):
    """Two panels to a row on a laptop; on a phone one, each at its own size (text unscaled)."""
    rows_js = """() => [...document.querySelectorAll('figure.small-multiples')].map(f =>
        [...f.querySelectorAll('img')].map(i => { const r = i.getBoundingClientRect();
            return {top: Math.round(r.top + window.scrollY), width: r.width, natural: i.naturalWidth}; }))"""
    for width, per_row in ((1280, 2), (400, 1)):
        page.set_viewport_size({"width": width, "height": 900})
        page.goto(f"{site}/{entry}.html", wait_until="load")
        figures = page.evaluate(rows_js)
        assert figures, f"{entry}: no small multiples on the page"
        for k, panels in enumerate(figures):
            tops = [p["top"] for p in panels]
            widest_row = max(tops.count(t) for t in set(tops))
            assert widest_row == per_row, (
                f"{entry} at {width} px: figure {k} puts {widest_row} panels in a row")
            shrunk = [p for p in panels if p["width"] < p["natural"] - 1]
            assert not shrunk, (
                f"{entry} at {width} px: figure {k}'s panels drawn smaller than their size: {shrunk}")
