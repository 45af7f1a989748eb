"""Front ends: the scrubber is self-contained HTML with a range slider; live binds a function."""

import io
import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from llm_roofline.course.widgets import (  # noqa: E402
    Scrubber,
    SmallMultiples,
    html_table,
    live,
    print_size,
    scrubber,
    small_multiples,
)
from llm_roofline.roofline import explore  # noqa: E402


def test_scrubber_is_html_with_a_range_slider_and_no_stray_figure():
    plt.close("all")
    html = scrubber(lambda ax, i: explore("H100", "bf16", i, ax=ax), [1, 32, 2048],
                    label="H100: ", fmt="I = {:g}", figsize=(4, 3), dpi=40)
    assert 'type="range"' in html.data
    assert html.data.count("data:image/png;base64") == 3  # one embedded frame per value
    assert re.search(r'value="once" id="_anim_radio1_\w+"\s*checked', html.data)  # stops at the end
    assert "font-awesome" not in html.data  # no CDN link: the book reads offline
    assert plt.get_fignums() == []


def test_scrubber_needs_values():
    with pytest.raises(ValueError, match="at least one frame"):
        scrubber(lambda ax, v: None, [])


def test_live_binds_controls_to_a_pure_function():
    seen = []
    widget = live(lambda chip, intensity: seen.append((chip, intensity)),
                  chip=["H100", "A100"], intensity=(1.0, 2048.0))
    assert [c.description for c in widget.children[:2]] == ["chip", "intensity"]
    widget.children[0].value = "A100"
    assert seen[-1][0] == "A100"


def test_html_table_formats_floats_and_missing_values():
    html = html_table([{"chip": "A<100", "ridge": 153.016, "fp8": None}]).data
    assert ">ridge</th>" in html and ">153.0</td>" in html
    assert ">\u2013</td>" in html and ">A&lt;100</td>" in html
    assert 'class="llm-table"' in html  # its first column stays in view while it scrolls


def test_tables_and_scrubbers_have_a_print_form():
    """The PDF builder takes text/latex for a table and image/png for a scrubber."""
    latex = html_table([{"chip": "A_100 & co", "ridge": 153.016, "fp8": None}])._repr_latex_()
    assert r"\begin{tabulary}{\linewidth}{LRR}" in latex and r"A\_100 \& co & 153.0 & -- \\" in latex
    shown = scrubber(lambda ax, v: ax.plot([0, v]), [1, 2, 3, 4, 5, 6, 7, 8], figsize=(2, 1.5))
    png = shown._repr_png_()
    assert png.startswith(b"\x89PNG")
    image = plt.imread(io.BytesIO(png), format="png")
    # 2 x 3 frames, drawn again for print at 150 dpi (at full size: a smaller one has no room)
    assert print_size(2, 1.5) == (2, 1.5) and print_size(7.2, 4.5) == pytest.approx((4.32, 2.7))
    assert image.shape[1] == 2 * 2 * 150 and image.shape[0] == 3 * 1.5 * 150
    from_html = plt.imread(io.BytesIO(Scrubber(shown.data)._repr_png_()), format="png")  # no print frames
    assert from_html.shape[1] == 2 * 2 * 96 and from_html.shape[0] == 3 * 1.5 * 96
    per_column = html_table([{"GB": 80.0, "ridge": 153.016}], floatfmt={"GB": "{:.0f}"}).data
    assert ">80</td>" in per_column and ">153.0</td>" in per_column
    with pytest.raises(ValueError, match="at least one row"):
        html_table([])


def test_scrubber_frames_are_sized_for_the_page():
    plt.close("all")
    html = scrubber(lambda ax, i: ax.plot([0, i]), [1, 2], fmt="x = {}")
    # 7.0 x 4.4 inches at 96 dpi: 672 px, unscaled in the ~700 px column of a laptop, and in a
    # phone's 368 px column its 9-pt text (12 px) still shows at 6.6 px
    import base64
    import struct
    png = base64.b64decode(re.search(r"data:image/png;base64,([^\"']+)", html.data)[1])
    width, height = struct.unpack(">II", png[16:24])
    assert (width, height) == (672, round(4.4 * 96))


@pytest.mark.parametrize(
    "kwargs, message",
    [({"dpi": 0}, "dpi must be an integer from 20 to 600, got 0"),
     ({"dpi": 72.5}, "dpi must be an integer"),
     ({"fmt": "{x}"}, r"fmt must be a format string with one positional field.*'\{x\}'"),
     ({"fmt": "{} and {}"}, "one positional field"),
     ({"fmt": "{:d}"}, "that formats 0.5"),
     ({"fmt": "{"}, "unbalanced"),
     ({"fmt": 3}, "fmt must be a format string"),
     ({"figsize": (0, 3)}, "figsize width must be a finite number of inches >= 0.5"),
     ({"figsize": "big"}, "figsize must be")],
)
def test_scrubber_bad_input(kwargs, message):
    with pytest.raises(ValueError, match=message):
        scrubber(lambda ax, v: None, [0.5, 1.0], **kwargs)


def test_html_table_rejects_rows_with_different_keys():
    with pytest.raises(ValueError, match=r"row 1 lacks \['ridge'\] and adds \['peak'\]"):
        html_table([{"chip": "A100", "ridge": 153.0}, {"chip": "H100", "peak": 989.4}])
    with pytest.raises(ValueError, match="rows must be dicts"):
        html_table([{"chip": "A100"}, ("H100",)])
    # the same keys in another order are the same columns
    html = html_table([{"a": 1.0, "b": 2.0}, {"b": 4.0, "a": 3.0}]).data
    assert html.index(">3.0<") < html.index(">4.0<")
    assert 'overflow-x: auto' in html  # scrolls in its own box on a phone


def test_small_multiples_are_one_image_per_panel_that_wrap_and_print_as_a_grid():
    plt.close("all")
    seen = []

    def draw(ax, k):
        seen.append(k)
        ax.plot([0, k])
        ax.set_title(f"k = {k}")

    figure = small_multiples(draw, [1, 2, 3], alt="Three lines, one per k, rising with k.",
                             title="A & B")
    html = figure.data
    assert seen == [1, 2, 3] and not plt.get_fignums()  # each panel drawn once, then closed
    assert html.count("<img ") == 3 and 'width="335"' in html and "flex-wrap: wrap" in html
    assert 'aria-label="Three lines, one per k, rising with k."' in html and "A &amp; B" in html
    # printed: drawn again as one figure, two columns and two rows, at 150 dpi
    grid = plt.imread(io.BytesIO(figure._repr_png_()), format="png")
    assert grid.shape[:2] == (round(2 * 3.0 * 150), round(2 * 3.35 * 150))
    assert seen == [1, 2, 3, 1, 2, 3] and not plt.get_fignums()
    # from its HTML alone (a notebook's saved output), the panels' own images side by side
    saved = plt.imread(io.BytesIO(SmallMultiples(html)._repr_png_()), format="png")
    assert saved.shape[:2] == (2 * 300, 2 * 335)


@pytest.mark.parametrize(
    "kwargs, message",
    [({"panels": []}, "panels must hold 1 to 12 panel values, got 0"),
     ({"panels": range(13)}, "got 13"),
     ({"draw": "plot"}, "draw must be a function draw"),
     ({"alt": ""}, "alt must be a non-empty string"),
     ({"alt": "two\nlines"}, "alt must be"),
     ({"panel_size": (3, 0.1)}, "panel_size height must be"),
     ({"panel_size": "3x3"}, "panel_size must be"),
     ({"dpi": 0}, "dpi must be an integer from 20 to 600")],
)
def test_small_multiples_bad_input(kwargs, message):
    args = {"draw": lambda ax, k: None, "panels": [1], "alt": "One empty panel."} | kwargs
    with pytest.raises(ValueError, match=message):
        small_multiples(args.pop("draw"), args.pop("panels"), **args)
