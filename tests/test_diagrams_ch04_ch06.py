"""Chapters 4-6's drawn diagrams: they fit the column, their smallest text reads on a phone, and
the numbers they print are the hand computations (not the library's output read back)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from llm_roofline.course import diagrams  # noqa: E402
from llm_roofline.course.plots import WIDTH  # noqa: E402

DIAGRAMS = {
    "shared_weight_read": lambda: diagrams.shared_weight_read("llama-3-70b", 4),
    "kv_cache_growth": lambda: diagrams.kv_cache_growth("llama-3-8b"),
    "continuous_batching": lambda: diagrams.continuous_batching(),
}


def _words(fig):
    return " ".join(t.get_text() for t in fig.findobj(Text) if t.get_visible())


@pytest.mark.parametrize("name", DIAGRAMS)
def test_a_diagram_fits_the_column_and_reads_on_a_phone(name):
    fig = DIAGRAMS[name]()
    try:
        texts = [t for t in fig.findobj(Text) if t.get_visible() and t.get_text().strip()]
        assert fig.get_size_inches()[0] <= WIDTH + 1e-9
        assert min(t.get_fontsize() for t in texts) >= diagrams.SMALL
        renderer = fig.canvas.get_renderer()
        assert fig.get_tightbbox(renderer).width <= fig.get_size_inches()[0] + 0.05
    finally:
        plt.close(fig)


def test_one_weight_read_serves_the_batch():
    words = _words(diagrams.shared_weight_read("llama-3-70b", 4))
    # Llama-3-70B: 70.55e9 parameters, 141 GB in BF16; 2 x 70.55e9 x 4 = 564 GFLOP; I = 4
    assert "141 GB" in words and "564 GFLOP" in words and "= 4 FLOP per byte = B" in words
    words = _words(diagrams.shared_weight_read("llama-3-70b", 4, dtype="fp8"))
    assert "= 8 FLOP per byte" in words  # one byte per weight: 2B
    plt.close("all")


def test_the_cache_grows_a_token_a_step():
    words = _words(diagrams.kv_cache_growth("llama-3-8b", prompt=3, steps=4))
    # Llama-3-8B: 2 x 32 layers x 8 KV heads x 128 x 2 bytes = 131,072 bytes per token
    assert "131 kB" in words
    assert "reads 3 × 131 kB = 0.39 MB" in words and "reads 6 × 131 kB = 0.79 MB" in words
    plt.close("all")


def test_the_timeline_prints_the_two_step_times():
    words = _words(diagrams.continuous_batching())
    assert "a decode step takes" in words and "2,048-token prompt takes" in words
    plt.close("all")


@pytest.mark.parametrize("call, argument", [
    (lambda: diagrams.shared_weight_read(batch=1), "batch"),
    (lambda: diagrams.kv_cache_growth(steps=9), "steps"),
    (lambda: diagrams.continuous_batching(batch=0), "batch"),
])
def test_bad_input_is_one_clear_error(call, argument):
    with pytest.raises(ValueError, match=argument):
        call()
    plt.close("all")
