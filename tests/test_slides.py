"""The lecture slides (`make slides`), opened in headless Chromium at 1280 x 720: every deck loads
offline (nothing fetched but its own files), has one slide per cell tagged `slide` or `subslide`,
renders its math, and shows no text under 24 px. A screenshot of each slide is saved.

For speed one deck (FULL) is built as `make slides` builds it, executed in a fresh kernel so its
figures are drawn; the others are exported from the committed notebooks without executing them
(their figure slides are empty, their text and slide count the same)."""

from __future__ import annotations

import re
import shutil
import time
from urllib.parse import urlparse

import nbformat
import pytest

from conftest import ROOT, SCREENSHOTS, notebooks
from test_browser import launched_chromium, serving

pytestmark = [pytest.mark.slow, pytest.mark.browser]

FULL = "04_why_decode_is_bound"
# Chapters that carry no slide tags (another contributor's notebooks): their decks use the
# automatic selection of llm_roofline.course.slides (title, section openings, takeaways).
AUTOMATIC = {"01_dormant_tensor_cores", "02_two_phases", "07_calculator"}
MIN_PX = 24
DURATIONS: dict[str, float] = {}


def _tagged_slides(path) -> int:
    """Slides a tagged chapter must have: its cells tagged `slide` or `subslide`, counted here."""
    nb = nbformat.read(path, as_version=4)
    return sum(bool({"slide", "subslide"} & set(c.metadata.get("tags", []))) for c in nb.cells)


@pytest.fixture(scope="module")
def decks(tmp_path_factory):
    import os

    from llm_roofline.course import slides

    if not shutil.which("npm"):
        message = "npm is not installed (apt-get install nodejs npm): the decks install reveal.js with it"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    out = tmp_path_factory.mktemp("slides")
    start = time.perf_counter()
    slides.build(ROOT / "notebooks", out, execute=False)
    slides.build(ROOT / "notebooks", out, only=[FULL], execute=True)
    DURATIONS["build"] = time.perf_counter() - start
    return out


@pytest.fixture(scope="module")
def server(decks):
    with serving(decks) as url:
        yield url


@pytest.fixture(scope="module")
def browser():
    with launched_chromium() as b:
        yield b


def test_every_chapter_has_a_deck_without_remote_assets(decks):
    remote = re.compile(r"""<(?:script|link|img|iframe|source)\b[^>]*"""
                        r"""(?:src|href)=["']?(?:https?:)?//""", re.I)
    font = re.compile(r"""@import\s+url\(\s*["']?https?:"""
                      r"""|url\(\s*["']?https?:[^)]*\.(?:woff2?|ttf|otf|css)""", re.I)
    for path in notebooks():
        html = (decks / f"{path.stem}.slides.html").read_text(encoding="utf-8")
        assert not remote.search(html), f"{path.stem}: a script, style or image from the network"
        assert not font.search(html), f"{path.stem}: a font or style sheet from the network"
        assert 'src="mathjax/tex-chtml.js"' in html and "node_modules/reveal.js/dist/reveal.js" in html


# What a slide shows under MIN_PX: every visible text node's element (MathJax's glyph parts
# aside: the formula's container is checked instead), at the size it is drawn (times Reveal's scale).
SMALL_TEXT_JS = """(args) => {
  const [index, minPx] = args;
  const slide = Reveal.getSlides()[index];
  const at = Reveal.getIndices(slide);
  Reveal.slide(at.h, at.v, slide.querySelectorAll('.fragment').length);
  const scale = Reveal.getScale();
  const small = [];
  const visible = e => { const s = getComputedStyle(e); return e.getClientRects().length > 0
      && s.visibility !== 'hidden' && s.display !== 'none' && parseFloat(s.opacity) > 0; };
  const walker = document.createTreeWalker(slide, NodeFilter.SHOW_TEXT);
  let text = 0;
  for (let n = walker.nextNode(); n; n = walker.nextNode()) {
    if (!n.textContent.trim()) continue;
    let e = n.parentElement;
    if (e.closest('script, style, aside.notes')) continue;
    const math = e.closest('mjx-container');
    if (math) e = math;
    if (!visible(e)) continue;
    text += 1;
    const px = parseFloat(getComputedStyle(e).fontSize) * scale;
    if (px < minPx - 0.25) small.push(`${px.toFixed(1)} px: ${e.tagName.toLowerCase()} `
                                      + `"${n.textContent.trim().slice(0, 50)}"`);
  }
  const raw = slide.innerText.includes('$$') || /\\\\frac\\{|\\\\times/.test(slide.innerText);
  return {small, text, raw, scale};
}"""


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.stem)
def test_deck_offline_counted_and_legible(browser, server, decks, path):
    from llm_roofline.course import slides

    start = time.perf_counter()
    if path.stem in AUTOMATIC:
        expected = slides.expected_slides(nbformat.read(path, as_version=4))
    else:
        expected = _tagged_slides(path)
    assert expected > 0, f"{path.stem} selects no slides"

    context = browser.new_context(viewport={"width": 1280, "height": 720})
    page = context.new_page()
    outside, errors = [], []
    local = urlparse(server).netloc

    def route(r):
        url = r.request.url
        if urlparse(url).netloc == local or url.startswith(("data:", "file:", "blob:")):
            r.continue_()
        else:
            outside.append(url)
            r.abort()

    page.route("**/*", route)
    page.on("pageerror", lambda e: errors.append(str(e)))
    try:
        page.goto(f"{server}/{path.stem}.slides.html", wait_until="load")
        page.wait_for_function("window.Reveal && Reveal.isReady()", timeout=20_000)
        page.wait_for_function("window.MathJax && MathJax.startup && MathJax.startup.promise", timeout=20_000)
        page.evaluate("MathJax.startup.promise")
        total = page.evaluate("Reveal.getTotalSlides()")
        assert total == expected, f"{path.stem}: {total} slides, {expected} selected cells"
        shots = SCREENSHOTS / "slides"
        shots.mkdir(parents=True, exist_ok=True)
        small, raw = [], []
        for i in range(total):
            result = page.evaluate(SMALL_TEXT_JS, [i, MIN_PX])
            assert result["scale"] == pytest.approx(1.0, abs=0.01), "the slide is not drawn at 1280 x 720"
            small += [f"slide {i + 1}: {s}" for s in result["small"]]
            if result["raw"]:
                raw.append(i + 1)
            page.screenshot(path=str(shots / f"{path.stem}-{i + 1:02d}.png"))
        assert not outside, f"{path.stem} fetched from outside: {outside}"
        assert not errors, f"{path.stem}: script errors {errors}"
        assert not raw, f"{path.stem}: unrendered math on slides {raw}"
        assert not small, f"{path.stem}: text under {MIN_PX} px at 1280 x 720:\n" + "\n".join(small[:20])
    finally:
        context.close()
    print(f"\n{path.stem}: {total} slides, checked in {time.perf_counter() - start:.1f} s "
          f"(decks built in {DURATIONS.get('build', 0):.0f} s)")
