"""The roofline: exact values from the article, broadcasting, the symbolic form, the plot."""

import matplotlib

matplotlib.use("Agg")

import matplotlib.pyplot as plt  # noqa: E402
import numpy as np  # noqa: E402
import pytest  # noqa: E402
import sympy as sp  # noqa: E402

from llm_roofline import roofline as rl  # noqa: E402
from llm_roofline.hardware import get_accelerator  # noqa: E402

H100_PEAK, H100_BW = 989.4e12, 3350e9


def test_article_case_b_decode_on_h100():
    assert rl.attainable(1, H100_PEAK, H100_BW) == 3.35e12
    assert round(100 * rl.efficiency(1, H100_PEAK, H100_BW), 2) == 0.34
    assert rl.attainable(1, "H100") == rl.attainable(1, get_accelerator("H100"), dtype="bf16")
    assert rl.regime(1, "H100") == "memory-bound" and rl.regime(2048, "H100") == "compute-bound"
    assert rl.regime(32, rl.ridge_point(H100_PEAK, H100_BW)) == "memory-bound"


def test_ridge_points():
    assert round(rl.ridge_point(312e12, 2039e9), 1) == 153.0
    assert round(rl.ridge_point("H100"), 1) == 295.3
    assert rl.ridge_point("H100", dtype="fp8") == get_accelerator("H100").ridge("fp8")


def test_roof_is_flat_above_the_ridge_and_exactly_met_at_it():
    ridge = rl.ridge_point(H100_PEAK, H100_BW)
    assert rl.attainable(ridge, H100_PEAK, H100_BW) == pytest.approx(H100_PEAK, rel=1e-15)
    assert rl.attainable(2048, H100_PEAK, H100_BW) == H100_PEAK
    assert rl.efficiency(4 * ridge, H100_PEAK, H100_BW) == 1.0
    assert rl.regime(ridge, ridge) == "compute-bound"  # I >= I_ridge is on the roof


def test_arrays_broadcast():
    intensity = np.array([1.0, 32.0, 2048.0])
    p = rl.attainable(intensity, "H100")
    assert p.shape == (3,)
    np.testing.assert_array_equal(p, [3.35e12, 32 * 3.35e12, H100_PEAK])
    # intensities down one axis, two chips' peaks across the other
    peaks, bandwidths = np.array([312e12, H100_PEAK]), np.array([2039e9, H100_BW])
    grid = rl.attainable(intensity[:, None], peaks, bandwidths)
    assert grid.shape == (3, 2) and grid[2, 0] == 312e12
    expected = ["memory-bound", "memory-bound", "compute-bound"]
    assert rl.regime(intensity, "H100").tolist() == expected
    np.testing.assert_array_equal(rl.is_memory_bound(intensity, 295.3), [True, True, False])
    assert isinstance(rl.attainable(2.0, "A100"), float)


def test_numeric_form_matches_the_symbolic_one():
    ridge = sp.solve(sp.Eq(rl.I * rl.B_mem, rl.P_peak), rl.I)
    assert ridge == [rl.I_RIDGE]
    values = {rl.P_peak: H100_PEAK, rl.B_mem: H100_BW}
    for i in (0.5, 1, 32, 295.3, 2048):
        assert float(rl.P_ATTAINABLE.subs({**values, rl.I: i})) == pytest.approx(
            rl.attainable(i, H100_PEAK, H100_BW), rel=1e-12)


@pytest.mark.parametrize("bad", [0, -1, np.inf, np.nan, [1, -2]])
def test_bad_intensity_is_named(bad):
    with pytest.raises(ValueError, match="intensity must be positive and finite"):
        rl.attainable(bad, H100_PEAK, H100_BW)


def test_bad_machine_arguments():
    with pytest.raises(ValueError, match="peak must be positive"):
        rl.attainable(1, -1e12, H100_BW)
    with pytest.raises(ValueError, match="bandwidth must be positive"):
        rl.ridge_point(H100_PEAK, 0)
    with pytest.raises(ValueError, match="bandwidth \\(bytes/s\\) is required"):
        rl.attainable(1, H100_PEAK)
    with pytest.raises(ValueError, match="not both"):
        rl.attainable(1, "H100", H100_BW)
    with pytest.raises(ValueError, match="no 'fp8' peak"):
        rl.efficiency(1, "A100", dtype="fp8")
    with pytest.raises(ValueError, match="ridge must be positive"):
        rl.regime(1, -5)


@pytest.mark.parametrize(
    "call",
    [
        lambda: rl.ridge_point(H100_PEAK, H100_BW, dtype="fp8"),
        lambda: rl.ridge_point(H100_PEAK, H100_BW, dtype="bf16"),
        lambda: rl.attainable(1, H100_PEAK, H100_BW, dtype="fp8"),
        lambda: rl.efficiency(1, H100_PEAK, H100_BW, dtype="int8"),
        lambda: rl.regime(1, 295.3, dtype="fp8"),
    ],
)
def test_dtype_with_numbers_is_rejected_not_ignored(call):
    with pytest.raises(ValueError, match="dtype='.*' applies only to a chip"):
        call()


def test_no_dtype_means_bf16_for_a_chip():
    assert rl.ridge_point("H100") == rl.ridge_point("H100", dtype="bf16")
    assert rl.regime(300, "H100") == rl.regime(300, "H100", dtype="bf16") == "compute-bound"
    assert rl.regime(300, "H100", dtype="fp8") == "memory-bound"


def _rooflines(ax):
    return [line for line in ax.get_lines() if line.get_gid() == "roofline"]


def test_plot_draws_one_line_per_chip_and_precision():
    ax = rl.plot(["A100", "H100", "B200"], dtypes=("bf16", "fp8"),
                 operations={"decode": 1, "prefill": 2048, "measured": (32, 50e12)})
    assert len(_rooflines(ax)) == 5  # the A100 has no fp8
    assert ax.get_xscale() == "log" and ax.get_yscale() == "log"
    a100 = _rooflines(ax)[0]
    assert max(a100.get_ydata()) == pytest.approx(312.0)  # TFLOPS on y
    named_on_top = [t.get_text() for c in ax.child_axes for t in c.get_xticklabels()]
    assert named_on_top == ["decode", "prefill"]
    assert "measured" in [t.get_text() for t in ax.texts]
    plt.close(ax.figure)


def test_plot_on_given_axes_and_bad_range():
    fig, ax = plt.subplots()
    assert rl.plot("H100", ax=ax) is ax and len(_rooflines(ax)) == 1
    with pytest.raises(ValueError, match="imin"):
        rl.plot("H100", ax=ax, imin=100, imax=10)
    with pytest.raises(ValueError, match="has a peak for \\['fp8'\\]"):
        rl.plot(["A100", "M4 Max"], dtypes="fp8", ax=ax)
    with pytest.raises(ValueError, match="intensity of 'x'"):
        rl.plot("H100", ax=ax, operations={"x": -1})
    plt.close(fig)


def test_explore_reads_out_attainable_and_efficiency():
    ax = rl.explore("H100", "bf16", 1.0)
    readout = ax.texts[-1].get_text()
    assert "3.4 TFLOPS" in readout and "0.3%" in readout and "memory-bound" in readout
    plt.close(ax.figure)


def test_explore_takes_exact_intensities():
    """An intensity computed from dtypes is a Fraction; the readout must still format it."""
    from fractions import Fraction

    ax = rl.explore("H100", "fp8", Fraction(64))
    assert "I = 64 FLOPs/byte" in ax.texts[-1].get_text()
    plt.close(ax.figure)


def test_plot_legend_can_hide_ridges_and_moves_below_when_crowded():
    ax = rl.plot(["A100", "H100", "B200"], dtypes=("bf16", "fp8"), label_ridges=False)
    labels = [t.get_text() for t in ax.get_legend().get_texts()]
    assert labels[1] == "NVIDIA H100 SXM bf16" and not any("ridge" in t for t in labels)
    # five lines: the legend sits under the axes (anchored below y = 0), covering no line
    assert ax.get_legend().get_bbox_to_anchor().transformed(ax.transAxes.inverted()).y0 < 0
    plt.close(ax.figure)
    ax = rl.plot("H100")
    assert [t.get_text() for t in ax.get_legend().get_texts()] == ["NVIDIA H100 SXM bf16 (ridge 295)"]
    assert min(t.get_fontsize() for t in ax.get_legend().get_texts()) >= 9
    plt.close(ax.figure)
    with pytest.raises(ValueError, match="label_ridges must be true or false"):
        rl.plot("H100", label_ridges="no")
    plt.close("all")
