"""The slides' figure fitting, without a kernel or a browser (seconds).

tests/test_slides.py checks the built decks in Chromium; this file checks the pieces it relies
on: a figure redrawn for a slide keeps its text at 24 px or more and fits the box, the PNG
carries the record the deck's <img> is given."""

from __future__ import annotations

import json

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from IPython.core.pylabtools import print_figure  # noqa: E402

from llm_roofline.course import slides  # noqa: E402


def _book_figure(rows=1):
    fig, axes = plt.subplots(rows, 1, figsize=(7, 4.5 * rows), squeeze=False)
    for ax in axes.flat:
        ax.plot([1, 2, 4], [3, 1, 2], label="a line")
        ax.legend(fontsize=9)
        ax.set_title("a title", fontsize=10)
        ax.set_xlabel("x (units)")
    fig.tight_layout()
    return fig


@pytest.mark.parametrize("rows", [1, 2])
def test_a_fitted_figure_fills_the_box_with_its_smallest_text_at_24_px(rows):
    fig = _book_figure(rows)
    record = slides.fit_figure(fig)
    assert record["min_pt"] == 9 and record["alt"] == "Figure: " + "; ".join(["a title"] * rows)
    if rows == 1:
        assert record["overlaps"] == 0  # (two rows at 24 px in 676 px can crowd: counted, not failed)
    assert record["min_pt"] * record["dpi"] / 72 == pytest.approx(slides.FIGURE_MIN_PX)
    png = print_figure(fig, "png", base64=True, pad_inches=slides.FIGURE_PAD,
                       metadata={slides.PNG_KEY: json.dumps(record)})
    back = slides.png_record(png)
    assert back["min_pt"] == 9 and back["dpi"] == pytest.approx(record["dpi"])
    width, height = slides.FIGURE_BOX
    assert back["width"] <= width and back["height"] <= height  # drawn at its natural size
    assert back["width"] >= 0.9 * width or back["height"] >= 0.9 * height  # and filling the box
    plt.close(fig)


def test_a_png_without_the_record_has_none():
    fig = _book_figure()
    assert slides.png_record(print_figure(fig, "png", base64=True)) is None
    assert slides.png_record(b"not a png") is None
    plt.close(fig)


def test_a_crowded_figure_is_drawn_at_the_largest_size_where_no_texts_overlap():
    clean = _book_figure()
    record = slides.fit_for_slide(clean)
    assert (record["min_px"], record["overlaps"]) == (24, 0)
    crowded, ax = plt.subplots(figsize=(7, 4.5))
    for i in range(20):  # labels close together: they overlap at 24 and 22 px, not at 20
        ax.text(0.1, 0.05 + i * 0.035, f"label number {i}", fontsize=9, transform=ax.transAxes)
    record = slides.fit_for_slide(crowded)
    assert (record["min_px"], record["overlaps"]) == (20, 0)
    assert slides.fit_figure(crowded, min_px=24)["overlaps"] > 0  # what the smaller size avoids
    plt.close(clean)
    plt.close(crowded)


def test_a_text_that_runs_into_a_box_or_out_of_its_own_counts_as_overlapping():
    from matplotlib.patches import FancyBboxPatch

    fig, ax = plt.subplots(figsize=(7, 4.5))
    ax.set_axis_off()
    ax.add_patch(FancyBboxPatch((0.6, 0.4), 0.3, 0.2, boxstyle="round,pad=0.01",
                                transform=ax.transAxes))
    ax.text(0.75, 0.55, "inside", ha="center", va="center", fontsize=9, transform=ax.transAxes)
    assert slides.fit_figure(fig)["overlaps"] == 0
    ax.text(0.3, 0.45, "a long label that runs on into the box", fontsize=9, transform=ax.transAxes)
    assert slides.fit_figure(fig)["overlaps"] == 1
    ax.texts[-1].remove()
    ax.text(0.75, 0.45, "a label that is much wider than the box it sits in", ha="center", fontsize=9,
            transform=ax.transAxes)
    assert slides.fit_figure(fig)["overlaps"] == 1  # it spills out of the box it sits in
    plt.close(fig)


def test_a_legend_under_the_axes_moves_beside_them_on_a_slide():
    fig, ax = plt.subplots(figsize=(7, 5))
    for i in range(8):
        ax.plot([1, 2], [i, i + 1], label=f"a rather long name for line {i}")
    ax.set_xlabel("arithmetic intensity I (FLOPs/byte)")
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.12), ncols=2)
    fig.tight_layout()
    record = slides.fit_for_slide(fig)
    renderer = fig.canvas.get_renderer()
    legend, frame = ax.get_legend().get_window_extent(renderer), ax.get_window_extent(renderer)
    assert legend.x0 >= frame.x1 and len(ax.get_legend().get_texts()) == 8  # beside, all kept
    assert record["overlaps"] == 0 and not record["collapsed"]
    plt.close(fig)


def test_a_legend_under_a_panel_with_a_neighbour_on_its_right_stays_under_it():
    """Figure 7.2's shape: two panels side by side, a key under each. Beside the left panel its
    key would lie on the right panel's axis label; only the rightmost key moves beside."""
    fig, (left, right) = plt.subplots(1, 2, figsize=(7, 4), layout="constrained")
    for ax in (left, right):
        for i in range(3):
            ax.plot([1, 2], [i, i + 1], label=f"precision {i}, per user")
        ax.set_xlabel("batch (concurrent users)")
        ax.set_ylabel("tokens/s, all users")
        ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.2), ncols=2)
    slides.fit_for_slide(fig)
    renderer = fig.canvas.get_renderer()
    key = left.get_legend().get_window_extent(renderer)
    assert key.y1 <= left.get_window_extent(renderer).y0  # still under the left panel
    assert key.x1 <= right.get_window_extent(renderer).x0  # and clear of the right one
    key = right.get_legend().get_window_extent(renderer)
    assert key.x0 >= right.get_window_extent(renderer).x1  # the rightmost key moved beside
    plt.close(fig)


@pytest.mark.filterwarnings("ignore:Tight layout not applied")
def test_a_figure_whose_axis_label_is_longer_than_the_slide_is_high_counts_as_crowded():
    fig, ax = plt.subplots(figsize=(7, 5))
    ax.plot([1, 2], [1, 2])
    ax.set_ylabel("a y-axis label far too long to stand beside a plot on one slide", fontsize=10)
    ax.tick_params(labelsize=9)
    record = slides.fit_figure(fig, min_px=24)  # the label alone is taller than the box
    assert record["collapsed"] and record["overlaps"] >= 1
    plt.close(fig)
