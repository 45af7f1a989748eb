"""The chapters' figures: pure functions whose bars and labels carry the library's numbers,
readable at the page's width (no text under 9 pt, at most 7.2 inches wide)."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import pytest  # noqa: E402
from matplotlib.text import Text  # noqa: E402

from llm_roofline.course import ch03, ch05, ch07  # noqa: E402

GiB = 2**30


def _texts(fig):
    return [t for t in fig.findobj(Text) if t.get_text().strip() and t.get_visible()]


FIGURES = [ch07.memory_bars, ch07.latency_curves, ch07.critical_curves, ch07.experts_read,
           ch03.roofline_grid, lambda: ch07.dashboard().figure]


@pytest.mark.parametrize("make", FIGURES)
def test_figures_read_at_the_page_width(make):
    fig = make()
    try:
        assert fig.get_size_inches()[0] <= 7.2
        small = [(t.get_text(), t.get_fontsize()) for t in _texts(fig) if t.get_fontsize() < 9]
        assert small == []
        for ax in fig.axes:
            if ax.axison:  # every drawn panel names what its x axis is
                assert ax.get_xlabel()
    finally:
        plt.close(fig)


def test_memory_bars_stack_the_library_numbers():
    fig = ch07.memory_bars()
    try:
        seventy = fig.axes[1]
        assert seventy.get_title() == "70B: llama-3-70b"
        # Llama-3-70B's 70,553,706,496 parameters at 2 bytes: 141,107,412,992 bytes
        bf16_weights = seventy.patches[0]
        assert bf16_weights.get_height() == pytest.approx(141_107_412_992 / GiB)
        labels = [t.get_text() for t in seventy.get_xticklabels()]
        # 131.4 GiB of weights alone exceed one H100's 72 usable GiB (0.9 x 80)
        assert labels[0].startswith("BF16\n") and labels[0].endswith("GPUs")
        assert sorted(t.get_text() for t in fig.legends[0].get_texts()) == [
            "KV cache", "activations", "usable memory of one NVIDIA H100 SXM", "weights"]
    finally:
        plt.close(fig)


def test_dashboard_reports_latency_only_when_it_fits():
    ax = ch07.dashboard(batch=32)
    fits = ax.texts[0].get_text()
    assert ": fits" in fits and "tokens/s" in fits and "TPOT" in fits
    plt.close(ax.figure)
    ax = ch07.dashboard(batch=256)  # 256 x 2,304 tokens of FP8 cache do not fit on two H100s
    full = ax.texts[0].get_text()
    assert "DOES NOT FIT" in full
    assert "tokens/s" not in full and "TPOT" not in full and "TTFT" not in full
    assert "needs" in full and "of 80 GiB" in full
    plt.close(ax.figure)


def test_dashboard_bar_is_the_memory_breakdown():
    ax = ch07.dashboard(batch=1, prompt=1024, output=256, precision="BF16", n_gpus=1)
    try:
        weights = ax.patches[0]
        # 70,553,706,496 parameters x 2 bytes, on one GPU
        assert weights.get_width() == pytest.approx(141_107_412_992 / GiB)
        kv = ax.patches[1]
        # 1,280 tokens x 2 (K, V) x 80 layers x 8 heads x 128 x 2 bytes
        assert kv.get_width() == pytest.approx(1280 * 2 * 80 * 8 * 128 * 2 / GiB)
        assert "DOES NOT FIT" in ax.texts[0].get_text()  # 131 GiB of weights on an 80 GiB GPU
    finally:
        plt.close(ax.figure)


def test_roofline_grid_says_when_a_chip_lacks_a_precision():
    fig = ch03.roofline_grid(chips=("A100", "H100"), dtypes=("bf16", "fp8"))
    try:
        a100_fp8 = fig.axes[1]
        assert not a100_fp8.axison
        assert "has no FP8 tensor math" in a100_fp8.texts[0].get_text()
        h100_fp8 = fig.axes[3].texts[0].get_text()
        assert "I = 64 FLOPs/byte" in h100_fp8  # 2 x 32 FLOPs per 1-byte weight
    finally:
        plt.close(fig)


@pytest.mark.parametrize(
    "call, message",
    [(lambda: ch07.dashboard(precision="FP4"), "unknown precision 'FP4'"),
     (lambda: ch07.dashboard(xmax=-1), "xmax must be a finite number > 0"),
     (lambda: ch03.roofline_grid(batch=0), "batch must be an integer"),
     (lambda: ch07.experts_read(largest=1), "largest must be an integer from 2"),
     (lambda: ch07.experts_read(models="mixtral-8x7b"), "models must be 1 to 4 model names"),
     (lambda: ch07.critical_curves(max_context="long"), "max_context must be an integer")],
)
def test_bad_input(call, message):
    with pytest.raises(ValueError, match=message):
        call()
    plt.close("all")


def test_kv_step_bars_by_hand():
    import matplotlib.pyplot as plt

    fig, ax = plt.subplots()
    ch05.kv_step_bars(ax, 1, 1024)  # Llama-3-8B, one sequence of 1,024 tokens
    weights, cache = (bar.get_height() for bar in ax.patches)
    # every weight but the embedding, which reads one row: (8,030,261,248 - 128,256 x 4,096
    # + 4,096) parameters x 2 bytes; the cache: 1,024 tokens x 2 x 32 layers x 8 x 128 x 2 bytes
    assert weights == pytest.approx((8_030_261_248 - 128_256 * 4_096 + 4_096) * 2 / 1e9, rel=1e-12)
    assert cache == pytest.approx(1_024 * 2 * 32 * 8 * 128 * 2 / 1e9, rel=1e-12)
    assert "1,024" in ax.get_title() and "H100" in ax.get_title()
    plt.close(fig)
