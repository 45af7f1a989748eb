"""Chapter 8's two figures (``course.ch08.roofline_figure``, ``h100_figure``), drawn from the
reference run shipped with the library: readable at the page's width, no two texts on top of
each other, the ridge written with its value, the H100's axis in TFLOP/s, the cache roof named,
the large operations named, both decode steps of Figure 8.2 visible."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Annotation, Text  # noqa: E402

from llm_roofline import machine  # noqa: E402
from llm_roofline.course import ch08, slides  # noqa: E402
from llm_roofline.course.plots import WIDTH  # noqa: E402


@pytest.fixture(scope="module")
def reference():
    return ch08.load_reference()


@pytest.fixture
def fig81(reference):
    chip = machine.host_accelerator(reference["host"], name="reference")
    fig = ch08.roofline_figure(reference["rows"], reference["host"], chip)
    yield fig
    plt.close(fig)


@pytest.fixture
def fig82():
    fig = ch08.h100_figure(machine.chapter_models(), 128)
    yield fig
    plt.close(fig)


def _texts(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


def _legend(fig):
    return [t.get_text() for t in fig.axes[0].get_legend().get_texts()]


@pytest.mark.parametrize("which", ["fig81", "fig82"])
def test_the_figure_reads_at_the_page_width_with_no_texts_on_top_of_each_other(which, request):
    fig = request.getfixturevalue(which)
    assert fig.get_size_inches()[0] <= WIDTH + 1e-9
    assert [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_fontsize() < 9] == []
    texts, shapes = slides._drawn(fig)  # the slides' own count: text on text, or in a box
    assert slides._overlaps([box for _, box in texts], shapes) == 0
    canvas = fig.bbox
    for _, box in texts:  # nothing drawn off the figure
        assert box.x0 >= -1 and box.y0 >= -1 and box.x1 <= canvas.x1 + 1 and box.y1 <= canvas.y1 + 1


def test_figure_8_1_writes_the_ridge_from_the_measured_peak_and_bandwidth(fig81, reference):
    host = reference["host"]
    ridge = host["matmul_GFLOPS"] / host["read_GBps"]  # GFLOP/s over GB/s: FLOPs per byte
    assert 3 < ridge < 5  # the reference machine's: 88.2 / 22.7
    label = [t for t in fig81.findobj(Annotation) if t.get_text().startswith("ridge ")]
    assert [t.get_text() for t in label] == [f"ridge {ridge:.1f} FLOPs/byte"]
    x, y = label[0].xy  # its leader points at the ridge, on the roof (in GFLOP/s)
    assert x == pytest.approx(ridge) and y == pytest.approx(host["matmul_GFLOPS"])


def test_figure_8_1_names_its_roofs_and_the_band_a_cache_explains(fig81, reference):
    host = reference["host"]
    legend = _legend(fig81)
    assert any(t.startswith("DRAM roof") and f"{host['read_GBps']:.1f} GB/s" in t for t in legend)
    assert any(t.startswith("cache roof") and f"{host['cache_GBps']:.1f} GB/s" in t
               and "(4 MB)" in t for t in legend)  # the sweep's fastest read was the 4 MB one
    assert any("above the DRAM roof" in t and "cache" in t for t in legend)


def test_figure_8_1_names_the_operations_that_take_the_time(fig81, reference):
    texts = {t.get_text() for t in fig81.findobj(Annotation)}
    # the projections of a prefill of 128 tokens: q and o are 1024 x 1024 (2 * 128 * 1024^2
    # FLOPs over 4 * (1024^2 + 2 * 128 * 1024) bytes = 51.2), gate, up and down 1024 x 2816
    # (54.7); k and v, 1024 x 256, are 39.4 and take 4 % of the time: left unnamed
    assert "prefill: q, o, gate, up, down_proj" in texts
    assert "decode: all linear layers" in texts  # GEMVs: every one at 2 FLOPs per 4 bytes
    # an operation above the cache roof is named: at most the two farthest above (by hand:
    # its rate F / t over min(peak, I x the cache's read bandwidth))
    host = reference["host"]
    above = []
    for r in reference["rows"]:
        if r["flops"]:
            intensity = r["flops"] / (r["bytes_read"] + r["bytes_written"])
            roof = min(host["matmul_GFLOPS"], intensity * host["cache_GBps"]) * 1e9
            if r["flops"] / r["seconds"] > 1.1 * roof:
                above.append((r["flops"] / r["seconds"] / roof, f"{r['op']} ({r['phase']})"))
    named = {t for t in texts if t.endswith(("(prefill)", "(decode)"))}
    assert named == {name for _, name in sorted(above)[-2:]}
    assert "residual (prefill)" in named  # the reference run's: 3.9x its DRAM roof


def test_figure_8_2_draws_performance_in_tflops(fig82):
    ax = fig82.axes[0]
    assert "TFLOP/s" in ax.get_ylabel() and "GFLOP/s" not in ax.get_ylabel()
    roof = ax.get_lines()[0].get_ydata()
    assert roof.max() == pytest.approx(989.4)  # the H100's dense BF16 peak, in TFLOP/s
    assert ax.get_ylim()[1] < 1e4
    assert any("989.4 TFLOP/s" in t for t in _legend(fig82))
    labels = [t.get_text() for t in fig82.findobj(Annotation)]
    assert "ridge 295 FLOPs/byte" in labels  # 989.4 TFLOP/s / 3,350 GB/s = 295.3


def test_figure_8_2_says_it_plots_bf16_and_its_intensities_are_twice_fp32s(fig82):
    from llm_roofline.counts import op_costs, total

    assert "BF16" in fig82.axes[0].get_title()
    texts = {t.get_text().split("\n")[0]: t.get_text() for t in fig82.findobj(Annotation)}
    tiny = machine.chapter_models()["L"]
    fp32 = total(op_costs(tiny, 1, 128, 0, weight_dtype="fp32")).intensity
    shown = float(texts["tiny model prefill"].split("\n")[1].split()[0])
    assert shown == pytest.approx(2 * fp32, rel=0.02)  # 2 bytes a number where fp32 has 4


def test_figure_8_2_shows_both_decode_steps(fig82):
    ax = fig82.axes[0]
    texts = {t.get_text().split("\n")[0]: t for t in fig82.findobj(Annotation)}
    tiny, llama = texts["tiny model decode"], texts["Llama-3-8B decode"]
    # the two points are within 5 % of each other: their labels lie apart, each with a leader
    assert tiny.xy[0] == pytest.approx(llama.xy[0], rel=0.05)
    renderer = fig82.canvas.get_renderer()
    a, b = tiny.get_window_extent(renderer), llama.get_window_extent(renderer)
    assert not a.overlaps(b)
    # the tiny model's dot lies inside Llama-3-8B's hollow square, drawn over it
    marks = {}
    for c in ax.collections:
        for (x, y) in c.get_offsets():
            if abs(x / tiny.xy[0] - 1) < 0.1:
                marks[(round(x, 3), round(y, 3))] = c
    dot = marks[tuple(round(v, 3) for v in tiny.xy)]
    square = marks[tuple(round(v, 3) for v in llama.xy)]
    assert square.get_facecolor().size == 0 or square.get_facecolor()[0][3] == 0  # hollow
    assert square.get_sizes()[0] >= 4 * dot.get_sizes()[0]  # twice as wide, or more
    assert ax.collections.index(dot) > ax.collections.index(square)  # drawn later: on top


@pytest.mark.parametrize("options,name", [
    ({"unit": "MFLOP/s"}, "unit"),
    ({"label_ridge": "yes"}, "label_ridge"),
    ({"roof_label": ""}, "roof_label"),
    ({"cache_label": 3}, "cache_label"),
])
def test_plot_roofline_refuses_bad_options_naming_them(options, name):
    fig, ax = plt.subplots()
    try:
        with pytest.raises(ValueError, match=name):
            machine.plot_roofline(ax, 1e12, 1e11, **options)
    finally:
        plt.close(fig)


def test_ridge_text_rounds_as_the_figures_write_it():
    assert machine.ridge_text(88.19 / 22.72) == "ridge 3.9 FLOPs/byte"
    assert machine.ridge_text(989.4 / 3.35) == "ridge 295 FLOPs/byte"
    with pytest.raises(ValueError, match="ridge"):
        machine.ridge_text(-1)
