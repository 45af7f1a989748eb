"""The built website, opened in headless Chromium: every page loads with its title, images and math,
the scrubbers move, nothing is fetched from outside, and a screenshot of each page is saved."""

from __future__ import annotations

import functools
import http.server
import os
import shutil
import threading
from urllib.parse import urlparse

import pytest

from conftest import SCREENSHOTS, toc_files

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


@pytest.fixture(scope="module")
def site(built_book):
    handler = functools.partial(_QuietHandler, directory=str(built_book))
    server = http.server.ThreadingHTTPServer(("127.0.0.1", 0), handler)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()


class _QuietHandler(http.server.SimpleHTTPRequestHandler):
    def log_message(self, *args):
        pass


@pytest.fixture(scope="module")
def browser():
    try:
        from playwright import sync_api
    except ImportError:
        if os.environ.get("CI") == "true":
            pytest.fail("playwright is not installed (requirements-dev.txt)")
        pytest.skip("playwright is not installed (requirements-dev.txt)")
    executable = _chromium()
    with sync_api.sync_playwright() as p:
        b = p.chromium.launch(executable_path=executable, args=CHROMIUM_ARGS, headless=True)
        yield b
        b.close()


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


@pytest.mark.parametrize("entry", toc_files())
def test_page_renders(page, site, entry):
    page.goto(f"{site}/{entry}.html", wait_until="load")
    page.wait_for_function(
        "() => !window.MathJax || !MathJax.startup || MathJax.startup.promise", timeout=30000
    )
    page.evaluate("() => window.MathJax && MathJax.startup ? MathJax.startup.promise : null")

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
    overflowing = page.evaluate(
        """() => [...document.querySelectorAll('mjx-container[display="true"]')]
                  .filter(m => m.scrollWidth > m.clientWidth + 1).map(m => m.textContent.slice(0, 60))"""
    )
    assert not overflowing, f"{entry}: display math wider than the text column: {overflowing}"
    prose = page.evaluate(VISIBLE_PROSE_JS)
    leftovers = [t for t in RAW_MATH if t in prose]
    assert not leftovers, f"{entry}: raw TeX on the page: {leftovers}"

    assert not page.outside, f"{entry}: requests to outside hosts: {page.outside}"
    errors = [e for e in page.errors if e not in KNOWN_UPSTREAM_ERRORS]
    assert not errors, f"{entry}: JavaScript errors: {errors}"

    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    page.screenshot(path=str(SCREENSHOTS / (entry.replace("/", "__") + ".png")), full_page=True)


@pytest.mark.parametrize("entry", [e for e in toc_files() if e.startswith("notebooks/")])
def test_scrubbers_move(page, site, entry):
    """Each kernel-free slider (matplotlib's to_jshtml) changes its frame when dragged."""
    page.goto(f"{site}/{entry}.html", wait_until="load")
    n = page.locator("div.animation").count()
    assert n >= 1, f"{entry}: a chapter's sliders need a kernel-free scrubber on the website"
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
