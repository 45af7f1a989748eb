"""The live calculator page (book/calculator.md) in headless Chromium: its controls driven for 300
seeded random settings over every built-in model, accelerator and precision, its raw and displayed
numbers equal to ``llm_roofline.estimate``'s, the library's own error where the library refuses,
a link that restores the settings, file:// with no network, labels and the keyboard."""

from __future__ import annotations

import json
import re

import pytest

from conftest import HTML, SCREENSHOTS
from llm_roofline.course import webcalc
from test_browser import KNOWN_UPSTREAM_ERRORS, browser, page, site  # noqa: F401  (fixtures)
from test_webcalc import compare, compare_dp, dp_settings, library, library_dp, random_settings

pytestmark = [pytest.mark.slow, pytest.mark.browser]

URL = "/book/calculator.html"
SETTINGS = 300
DRIVEN_BY_PLAYWRIGHT = 24  # these through select_option/fill, the rest by setting values + input events
CONTROLS = ("model", "gpu", "n", "dp", "ep", "weight", "kv", "compute", "batch", "prompt", "output",
            "mbu", "mfu")

SET_CONTROLS_JS = """(state) => {
  for (const [key, value] of Object.entries(state)) {
    const input = document.getElementById('lc-' + key);
    if (input.value === value) continue;
    input.value = value;
    input.dispatchEvent(new Event('input', {bubbles: true}));
  }
}"""

DISPLAYED_JS = """() => Object.fromEntries([...document.querySelectorAll('#llm-calc [data-key]')]
    .map(e => [e.dataset.key, e.textContent]))"""


def _open(page, site):  # noqa: F811
    page.goto(site + URL, wait_until="load")
    page.wait_for_function("() => window.llmCalc && llmCalc.values && llmCalc.values()")


def _drive(page, setting: dict, playwright: bool) -> None:  # noqa: F811
    if not playwright:
        page.evaluate(SET_CONTROLS_JS, setting)
        return
    for key in CONTROLS:
        if key not in setting:
            continue
        locator = page.locator(f"#lc-{key}")
        if locator.input_value() == setting[key]:
            continue
        if key in ("batch", "prompt", "output", "mbu", "mfu"):
            locator.fill(setting[key])
        else:
            locator.select_option(setting[key])


_NUMBER = re.compile(r"^(-?[\d,]+(?:\.(\d+))?)\s*(.*)$")
_SCALE = {"s": 1.0, "ms": 1e-3, "µs": 1e-6, "ns": 1e-9, "GiB": 2.0**30, "%": 0.01, "": 1.0}


def _check_printed(text: str, want: float) -> None:
    """``text`` (e.g. ``"12.35 ms"``, ``"1,234"``) is ``want`` to the digits it prints."""
    match = _NUMBER.match(text.strip())
    assert match, f"not a number: {text!r}"
    scale = _SCALE[match.group(3)]
    shown = float(match.group(1).replace(",", "")) * scale
    half_digit = 0.5 * 10.0 ** -len(match.group(2) or "") * scale
    assert abs(shown - want) <= half_digit * (1 + 1e-9) + 1e-12 * abs(want), (text, want)


def _check_display(shown: dict, setting: dict) -> None:
    e, _ = library(setting)
    for key in ("ttft_s", "tpot_s", "throughput_tok_s", "e2e_s", "bandwidth_utilisation",
                "ttft_floor_s", "tpot_floor_s", "throughput_floor_tok_s", "e2e_floor_s"):
        _check_printed(shown[key], getattr(e, key))
    for phase in ("prefill", "decode"):  # the resource that sets each floor
        assert shown[f"resources.{phase}.limit"] == e.resources(phase)["limit"]
    for key in ("weights", "kv_cache", "activations", "reserve", "free", "capacity"):
        _check_printed(shown[f"memory.{key}"], getattr(e.memory, key))
    assert shown["decode_bound"] == f"{e.decode_bound}-bound"
    assert shown["fits"].startswith("Fits:" if e.fits else "Does not fit:")


def test_page_equals_the_library(page, site):  # noqa: F811
    _open(page, site)
    data = webcalc.data()
    settings = random_settings(2026, SETTINGS, data)
    assert {s["model"] for s in settings} == set(data["models"])
    assert {s["gpu"] for s in settings} == set(data["accelerators"])
    for key in ("weight", "kv", "compute"):
        assert {s[key] for s in settings} >= set(data["dtypes"]), key
    worst, refused, times = 0.0, 0, []
    for i, setting in enumerate(settings):
        _drive(page, setting, playwright=i < DRIVEN_BY_PLAYWRIGHT)
        values = page.evaluate("() => llmCalc.values()")
        times.append(page.evaluate("() => llmCalc.lastUpdateMs"))
        worst = max(worst, compare(setting, values))
        error = page.locator("#llm-calc .lc-error")
        if "error" in values:
            refused += 1
            assert error.is_visible() and error.inner_text() == values["error"]
            assert not page.locator("#llm-calc .lc-results").is_visible()  # no number shown
        else:
            assert not error.is_visible()
            _check_display(page.evaluate(DISPLAYED_JS), setting)
    assert refused >= 10, "the refused combinations were exercised"
    assert len(settings) - refused >= 200, "at least 200 settings with numbers"
    assert not [e for e in page.errors if e not in KNOWN_UPSTREAM_ERRORS]
    times.sort()
    print(json.dumps({"settings": len(settings), "refused": refused,
                      "largest_relative_difference": worst,
                      "update_ms_median": times[len(times) // 2],
                      "update_ms_p90": times[int(0.9 * len(times))], "update_ms_max": times[-1]}))


def test_data_parallel_layout_equals_the_library(page, site):  # noqa: F811
    """dp and ep on the page: DeepSeek-V3 DP8 x EP8 on 8 x H100 and 39 more settings, its raw
    and shown numbers equal to ``parallel.dp_ep_estimate``'s, the library's message where it
    refuses (ep neither 1 nor dp, a dense model with ep > 1), the controls that do not apply
    disabled, and the link that keeps dp and ep."""
    _open(page, site)
    settings = dp_settings(7, 40, webcalc.data())
    refused = 0
    for i, setting in enumerate(settings):
        _drive(page, setting, playwright=i < 4)
        values = page.evaluate("() => llmCalc.values()")
        compare_dp(setting, values)
        assert page.locator("#lc-n").is_disabled() and not page.locator("#lc-ep").is_disabled()
        error = page.locator("#llm-calc .lc-error")
        if "error" in values:
            refused += 1
            assert error.is_visible() and error.inner_text() == values["error"]
            continue
        e, shown = library_dp(setting), page.evaluate(DISPLAYED_JS)
        for key in ("ttft_s", "tpot_s", "throughput_tok_s", "ttft_floor_s", "tpot_floor_s",
                    "throughput_floor_tok_s"):
            _check_printed(shown[key], getattr(e, key))
        for key in ("weights", "kv_cache", "free"):
            _check_printed(shown[f"memory.{key}"], getattr(e.memory, key))
        assert shown["fits"].startswith("Fits:" if e.fits else "Does not fit:")
        if i == 0:  # DeepSeek-V3 DP8 x EP8: the all-to-all is a row of the decode step's table
            assert page.locator("#llm-calc .lc-breakdown th", has_text="all_to_all").count() == 1
            assert "#" in page.url and "dp=8" in page.url and "ep=8" in page.url
    assert 5 <= refused <= 30
    _drive(page, {"dp": "1"}, playwright=True)
    assert page.locator("#lc-ep").is_disabled() and not page.locator("#lc-n").is_disabled()
    assert "error" not in page.evaluate("() => llmCalc.values()")
    assert not [e for e in page.errors if e not in KNOWN_UPSTREAM_ERRORS]


def test_link_restores_the_settings(page, site, browser):  # noqa: F811
    _open(page, site)
    setting = {"model": "mixtral-8x7b", "gpu": "AMD Instinct MI300X", "n": "4", "dp": "1",
               "ep": "1", "weight": "int4",
               "kv": "fp8_e4m3", "compute": "auto", "batch": "48", "prompt": "3000",
               "output": "700", "mbu": "0.7", "mfu": "0.45"}
    _drive(page, setting, playwright=True)
    url = page.evaluate("() => location.href")
    assert "#" in url and "gpu=amd-instinct-mi300x" in url
    assert page.locator("#llm-calc a.lc-link").get_attribute("href") == url[url.index("#"):]
    other = browser.new_page()
    other.goto(url, wait_until="load")
    other.wait_for_function("() => window.llmCalc && llmCalc.values && llmCalc.values()")
    assert other.evaluate("() => llmCalc.state()") == setting
    assert other.evaluate("() => llmCalc.values()") == page.evaluate("() => llmCalc.values()")
    other.close()


def test_works_from_file_offline(browser, built_book):  # noqa: F811
    context = browser.new_context(viewport={"width": 1280, "height": 900})
    pg = context.new_page()
    outside, errors = [], []
    pg.route("**/*", lambda r: r.continue_() if r.request.url.startswith(("file:", "data:"))
             else (outside.append(r.request.url), r.abort()))
    pg.on("pageerror", lambda e: errors.append(str(e)))
    pg.goto((built_book / "book" / "calculator.html").as_uri() + "#model=llama-3-8b&b=4")
    pg.wait_for_function("() => window.llmCalc && llmCalc.values && llmCalc.values()")
    values = pg.evaluate("() => llmCalc.values()")
    assert values["model"] == "llama-3-8b" and values["batch"] == 4 and "error" not in values
    assert not outside and not [e for e in errors if e not in KNOWN_UPSTREAM_ERRORS]
    context.close()


def test_controls_are_labelled_and_keyboard_driven(page, site):  # noqa: F811
    _open(page, site)
    unlabelled = page.evaluate("""() => [...document.querySelectorAll('#llm-calc select, #llm-calc input')]
        .filter(e => !document.querySelector(`label[for="${e.id}"]`)).map(e => e.id)""")
    assert not unlabelled
    before = page.evaluate("() => llmCalc.values().tpot_s")
    page.focus("#lc-batch")
    page.keyboard.press("ArrowUp")  # a number field steps by 1
    assert page.evaluate("() => llmCalc.values().batch") == 33
    assert page.evaluate("() => llmCalc.values().tpot_s") != before
    page.focus("#lc-model")
    page.keyboard.press("Tab")
    assert page.evaluate("() => document.activeElement.id") == "lc-gpu"
    page.keyboard.press("ArrowDown")  # a select changes with the arrow keys
    assert page.evaluate("() => llmCalc.values().accelerator") == page.locator("#lc-gpu").input_value()
    assert page.evaluate("() => llmCalc.values().accelerator") != "NVIDIA H100 SXM"


def test_page_weight_and_screenshots(page, site):  # noqa: F811
    """The calculator's own files stay light; the page is photographed at desktop and phone width."""
    files = [HTML / "_static" / f for f in (webcalc.DATA_FILE, *webcalc.ASSETS)]
    sizes = {f.name: f.stat().st_size for f in files}
    assert sum(sizes.values()) < 300_000, sizes
    SCREENSHOTS.mkdir(parents=True, exist_ok=True)
    for width in (1280, 400):
        page.set_viewport_size({"width": width, "height": 900})
        _open(page, site)
        overflow = page.evaluate("() => document.querySelector('#llm-calc').scrollWidth - "
                                 "document.querySelector('#llm-calc').clientWidth")
        assert overflow <= 1, f"the calculator is wider than the page at {width} px"
        table = page.locator("#llm-calc .lc-table-wrap")
        assert table.evaluate("e => e.scrollWidth - e.clientWidth") <= 1, f"the table scrolls at {width} px"
        page.screenshot(path=str(SCREENSHOTS / f"calculator-{width}.png"), full_page=True)
    print(json.dumps({"bytes": sizes, "total_bytes": sum(sizes.values())}))
