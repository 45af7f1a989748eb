"""The drawn diagrams (llm_roofline.course.diagrams): legible at the page's width, sized from
the library's numbers, and refusing bad input with one clear ValueError."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from llm_roofline.course import diagrams  # noqa: E402
from llm_roofline.course.plots import WIDTH  # noqa: E402

DIAGRAMS = {
    "memory_hierarchy": lambda: diagrams.memory_hierarchy("H100 SXM"),
    "transformer_layer": lambda: diagrams.transformer_layer("llama-3-8b"),
    "gemm_vs_gemv": lambda: diagrams.gemm_vs_gemv(),
}


def _texts(fig):
    return [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]


@pytest.mark.parametrize("name", DIAGRAMS)
def test_a_diagram_fits_the_column_and_its_text_reads_on_a_phone(name):
    fig = DIAGRAMS[name]()
    try:
        assert fig.get_size_inches()[0] <= WIDTH + 1e-9
        assert min(t.get_fontsize() for t in _texts(fig)) >= diagrams.SMALL
        # nothing drawn outside the canvas: the tight box is no wider than the figure
        renderer = fig.canvas.get_renderer()
        assert fig.get_tightbbox(renderer).width <= fig.get_size_inches()[0] + 0.05
    finally:
        plt.close(fig)


def test_the_memory_hierarchy_carries_the_chips_numbers():
    words = " ".join(t.get_text() for t in _texts(diagrams.memory_hierarchy("H100 SXM")))
    # H100 SXM datasheet: 3,350 GB/s of HBM3, 989 dense BF16 TFLOP/s; 989.4 / 3.35 = 295
    assert "3,350" in words and "989 TFLOP/s" in words and "295 FLOPs" in words
    words = " ".join(t.get_text() for t in _texts(diagrams.memory_hierarchy("A100")))
    assert "2,039" in words and "312 TFLOP/s" in words  # A100 80GB: 2,039 GB/s, 312 TFLOP/s
    plt.close("all")


def test_the_layer_shows_llama_3_8b_shapes_and_bytes():
    words = " ".join(t.get_text() for t in _texts(diagrams.transformer_layer("llama-3-8b")))
    # hidden 4,096, MLP 14,336, 8 KV heads of 128: W_K is 4,096 x 1,024, 8.4 MB in BF16;
    # W_gate 4,096 x 14,336 x 2 bytes = 117 MB; a layer 4*4096^2*... summed by hand below
    layer = 2 * (2 * 4096 * 4096 + 2 * 4096 * 1024 + 3 * 4096 * 14336)
    assert "4,096×1,024" in words and "117 MB" in words
    assert f"{layer / 1e6:,.0f} MB" in words
    plt.close("all")


def test_gemm_against_gemv_counts_flops_per_byte():
    words = " ".join(t.get_text() for t in _texts(diagrams.gemm_vs_gemv(4096, 4096, 8)))
    assert "8 FLOP per byte" in words and "1 FLOP per byte" in words  # 2B FLOPs per 2 bytes
    plt.close("all")


@pytest.mark.parametrize("call, argument", [
    (lambda: diagrams.memory_hierarchy("H100 SXM", dtype="fp3"), "dtype"),
    (lambda: diagrams.transformer_layer("llama-3-8b", batch=0), "batch"),
    (lambda: diagrams.gemm_vs_gemv(batch=1), "batch"),
    (lambda: diagrams.box(plt.gca(), 0, 0, 1, 1, "x", kind="wall"), "kind"),
    (lambda: diagrams.canvas(width=20), "width"),
])
def test_bad_input_is_one_clear_error(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()
    plt.close("all")


def test_gemv_in_float32_is_half_a_flop_per_byte():
    # 2 FLOPs per 4-byte weight: 0.5, not rounded to 0
    words = " ".join(t.get_text() for t in _texts(diagrams.gemm_vs_gemv(512, 1536, 8, "fp32")))
    assert "0.5 FLOP per byte" in words and "4 FLOP per byte" in words
    assert "3.15 MB" in words  # 512 x 1,536 x 4 bytes
    plt.close("all")
