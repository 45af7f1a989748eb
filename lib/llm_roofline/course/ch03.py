"""Chapter 3, the roofline model (``notebooks/03_roofline``): its small multiples and answer checks.

- :func:`roofline_grid`: a batch's decode linear layers on several chips and precisions;
- the answer checks ``roofline-1`` ... ``roofline-5``, and the hint of the design problem
  (``roofline-ridge-40``).
"""

from __future__ import annotations

import math
from collections.abc import Sequence

from ..dtypes import bytes_per_element, canonical
from ..hardware import get_accelerator
from ..roofline import explore
from ..validate import integer, names, sequence
from .plots import PAGE, WIDTH
from .registry import register, register_hint

__all__ = ["roofline_grid"]


def roofline_grid(chips: Sequence[str] = ("A100", "H100", "B200", "MI300X"),
                  dtypes: Sequence[str] = ("bf16", "fp8"), batch: int = 32):
    """Small multiples: a batch-``batch`` decode's linear layers on each chip and precision.

    Rows are chips, columns precisions; the kernel's intensity is ``2 * batch`` FLOPs per
    ``bytes_per_element(dtype)`` bytes (2 FLOPs per weight per token). A chip without tensor
    math at a precision gets a panel that says so. All panels share one pair of axis limits,
    so that they can be compared by eye. Returns the figure.
    """
    import matplotlib.pyplot as plt

    batch = integer("batch", batch)
    chips = [get_accelerator(chip) for chip in sequence("chips", chips, what="accelerators")]
    dtypes = names("dtypes", dtypes)
    for dtype in dtypes:
        canonical(dtype)  # an unknown precision is named before any figure is made
    if len(chips) > 12 or len(dtypes) > 8:
        raise ValueError(f"roofline_grid draws at most 12 chips by 8 precisions (a figure the "
                         f"page can hold), got {len(chips)} by {len(dtypes)}")
    # a phone shows this 7.2-in figure at half size: 13-pt text keeps it near 9 CSS px
    big = {key: 13 for key in PAGE}
    with plt.rc_context(big):
        fig, axes = plt.subplots(len(chips), len(dtypes), figsize=(WIDTH, 3.1 * len(chips)),
                                 squeeze=False)
        for row, chip in zip(axes, chips, strict=True):
            accelerator = get_accelerator(chip)
            for ax, dtype in zip(row, dtypes, strict=True):
                if accelerator.has(dtype):
                    intensity = 2 * batch / float(bytes_per_element(dtype))
                    explore(accelerator, dtype, intensity, ax=ax)
                    ax.legend().remove()
                    for text in ax.texts:
                        text.set_fontsize(12)
                else:
                    ax.text(0.5, 0.5, f"{accelerator.name}\nhas no {dtype.upper()} tensor math",
                            ha="center", va="center", transform=ax.transAxes, fontsize=13)
                    ax.set_axis_off()
                ax.set_title(f"{accelerator.name.replace('NVIDIA ', '')}, {dtype.upper()}")
                ax.set_xlabel("I (FLOPs/byte)")
                ax.set_ylabel("TFLOPS")
        # one pair of limits for every panel that has a roofline, so that the panels can be
        # compared by eye: along a row the roof rises, down a column the slope moves up
        # and down with the bandwidth (on log-log axes every slope has the same steepness)
        drawn = [ax for ax in axes.flat if ax.axison]
        if drawn:
            for get, put in (("get_xlim", "set_xlim"), ("get_ylim", "set_ylim")):
                lows, highs = zip(*(getattr(ax, get)() for ax in drawn), strict=True)
                for ax in drawn:
                    getattr(ax, put)(min(lows), max(highs))
        fig.tight_layout()
    return fig


# notebooks/03_roofline: the roofline model -----------------------------------------


def _roofline_1() -> float:
    from ..hardware import get_accelerator

    return get_accelerator("H100 SXM").ridge("fp8")


def _roofline_2() -> float:
    from ..roofline import attainable

    return attainable(64, "A100", dtype="bf16") / 1e12


def _roofline_3() -> float:
    from ..hardware import get_accelerator

    return math.ceil(get_accelerator("H200").ridge("bf16"))


def _roofline_4() -> float:
    from ..dtypes import bytes_per_element

    return float(bytes_per_element("bf16") / bytes_per_element("int4", 128, "fp16"))


def _h100(dtype: str) -> float:
    from ..hardware import get_accelerator

    return get_accelerator("H100 SXM").ridge(dtype)


register(
    "roofline-1", _roofline_1, unit="FLOPs/byte",
    hint="the ridge is the dense FP8 peak (FLOP/s) over the bandwidth (byte/s).",
    mistakes=(
        (lambda: _h100("bf16"), "that is the BF16 ridge: use the FP8 tensor peak."),
        (lambda: 2 * _h100("fp8"), "that ridge uses the sparsity figure: the dense peak is half of it."),
    ),
)


register(
    "roofline-2", _roofline_2, unit="TFLOPS",
    hint="below the ridge the roof is the slope, I x B_mem; mind GB/s versus TFLOPS.",
    mistakes=(
        (lambda: 1e3 * _roofline_2(), "that is in GFLOPS: 1 TFLOPS is 1,000 GFLOPS."),
        (lambda: _peak_a100(), "that is the peak: 64 FLOPs/byte is below the A100's ridge, on the slope."),
    ),
)


register(
    "roofline-3", _roofline_3, unit="sequences", rtol=0.0,
    hint="count a decode step's FLOPs per byte of BF16 weights at batch B; then find the "
         "first whole B at or above the H200's BF16 ridge.",
    mistakes=(
        (lambda: _roofline_3() - 1, "a batch below the ridge is still memory-bound: round up, not down."),
        (lambda: math.ceil(_h100("bf16")), "that is the H100's ridge: the H200 has more bandwidth."),
    ),
)


register(
    "roofline-4", _roofline_4, unit="times faster",
    hint="a memory-bound kernel's time is bytes / bandwidth: compare the bytes per weight.",
    mistakes=(
        (lambda: 4.0, "half a byte per weight is not all: count one 2-byte scale per 128 weights."),
        (lambda: 1 / _roofline_4(), "that is how much slower bf16 is: divide bf16's bytes by int4's."),
    ),
)


def _roofline_5() -> float:
    # serial load-then-compute: P / P_peak = k / (1 + k) at I = k * I_ridge; 0.75 needs k = 3.
    # W8A8 decode: I = 2 B (2 FLOPs per 1-byte weight per token), FP8 ridge; a whole batch
    return math.ceil(3 * _h100("fp8") / 2)


register(
    "roofline-5", _roofline_5, unit="sequences",
    hint="without overlap the times add: at I = k x I_ridge the kernel gets k / (1 + k) of the "
         "peak; solve for 3/4, multiply by the H100's FP8 ridge, and turn the intensity into a "
         "batch (2 FLOPs per 1-byte weight per token), rounded up.",
    mistakes=(
        (lambda: 3 * _h100("fp8"), "that is the intensity: with 1-byte weights I = 2B, so halve it."),
        (lambda: 0.75 * _h100("fp8") / 2, "that is below the ridge, where even an overlapped kernel "
                                          "gets less than the peak: the serial kernel needs more."),
        (lambda: 9 * _h100("fp8") / 2, "9 times the ridge gives 90 % of the peak: solve k / (1 + k) "
                                       "for 75 %."),
        (lambda: _h100("fp8") / 2, "at the ridge a serial kernel gets only half the peak."),
    ),
)


register_hint(
    "roofline-ridge-40",
    "start from the chip itself: with the H100's bandwidth, a ridge of 40 FLOPs/byte fixes its "
    "BF16 peak (ridge x bandwidth). Then put each operation's intensity (a decode step at batch "
    "B sits at I = B in BF16, a prompt's prefill at its length) next to 40 and next to the "
    "H100's ridge, and ask which side each one falls on for each chip.",
)


def _peak_a100() -> float:
    from ..hardware import get_accelerator

    return get_accelerator("A100").peak("bf16") / 1e12
