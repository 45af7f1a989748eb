"""Front ends: the scrubber is self-contained HTML with a range slider; live binds a function."""

import re

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402

from llm_roofline.roofline import explore  # noqa: E402
from llm_roofline.widgets import html_table, live, scrubber  # noqa: E402


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
    assert ">&ndash;</td>" in html and ">A&lt;100</td>" in html
    per_column = html_table([{"GB": 80.0, "ridge": 153.016}], floatfmt={"GB": "{:.0f}"}).data
    assert ">80</td>" in per_column and ">153.0</td>" in per_column
    with pytest.raises(ValueError, match="at least one row"):
        html_table([])
