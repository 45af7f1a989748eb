"""The roofline model: attainable performance P = min(P_peak, I x B_mem).

I is the arithmetic intensity (FLOPs per byte moved to or from memory), P_peak the peak
compute (FLOP/s) and B_mem the memory bandwidth (bytes/s). The ridge point
I_ridge = P_peak / B_mem separates the memory-bound slope (I < I_ridge) from the
compute-bound roof (I >= I_ridge).

Every function takes either numbers (``peak``, ``bandwidth``) or a chip (an ``Accelerator``
or its name) with a ``dtype``: ``attainable(1, "H100")`` is ``attainable(1, 989.4e12, 3.35e12)``.
``dtype`` picks the chip's peak (``None``: BF16); with numbers the peak is already given, so
passing a ``dtype`` raises ``ValueError`` rather than being ignored.
Scalars give floats; NumPy arrays broadcast and give arrays.
"""

from __future__ import annotations

import numpy as np
import sympy as sp

from . import validate
from .hardware import Accelerator, get_accelerator
from .validate import boolean, shorten

__all__ = [
    "DEFAULT_DTYPE", "I_RIDGE", "P_ATTAINABLE", "attainable", "efficiency", "explore",
    "is_memory_bound", "plot", "regime", "ridge_point",
]

# The symbolic form, for derivations: P = Min(P_peak, I B_mem), I_ridge = P_peak / B_mem.
I, P_peak, B_mem = sp.symbols("I P_peak B_mem", positive=True)  # noqa: E741 (the book's I)
P_ATTAINABLE = sp.Min(P_peak, I * B_mem)
I_RIDGE = P_peak / B_mem

MEMORY_BOUND, COMPUTE_BOUND = "memory-bound", "compute-bound"


def _positive(name: str, value):
    """``value`` as a float or float array, if every entry is a positive, finite real number."""
    what = f"{name} must be positive and finite (a real number or an array of them)"
    if isinstance(value, str | bytes | bool | np.bool_) or value is None:
        raise ValueError(f"{what}, got {shorten(value)}")
    try:
        raw = np.asarray(value)
        if raw.dtype.kind not in "iufO":  # objects: exact numbers such as Fraction or SymPy's
            raise TypeError
        array = raw.astype(float)
    except (TypeError, ValueError, OverflowError):
        raise ValueError(f"{what}, got {shorten(value)}") from None
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        raise ValueError(f"{what}, got {shorten(array[bad].flat[0].item())}")
    return array


def _out(array, what: str = "the result"):
    """A 0-d result as a Python float, anything else as an array; a result that under- or
    overflows float64 (0 or infinity from positive finite inputs) is refused, not returned."""
    array = np.asarray(array, dtype=float)
    bad = ~(np.isfinite(array) & (array > 0))
    if bad.any():
        raise ValueError(f"{what} is {array[bad].flat[0].item()} for these inputs: they are "
                         "outside float64's range (give FLOP/s, bytes/s and FLOPs/byte)")
    return float(array) if np.ndim(array) == 0 else array


DEFAULT_DTYPE = "bf16"
"""The precision of a chip's peak when no ``dtype`` is given."""


def _no_dtype_with_numbers(dtype, what: str) -> None:
    if dtype is not None:
        raise ValueError(
            f"dtype={dtype!r} applies only to a chip; {what} is a number, which already "
            f"fixes the precision: drop dtype, or pass the chip's name"
        )


def _machine(peak, bandwidth, dtype: str | None) -> tuple[np.ndarray, np.ndarray]:
    """(peak FLOP/s, bandwidth B/s) from numbers, or from a chip and a dtype."""
    if isinstance(peak, (Accelerator, str)):
        if bandwidth is not None:
            raise ValueError("give either a chip and dtype, or peak and bandwidth, not both")
        chip = get_accelerator(peak)
        p = chip.peak(DEFAULT_DTYPE if dtype is None else dtype)
        return np.asarray(p), np.asarray(chip.bandwidth)
    if bandwidth is None:
        raise ValueError("bandwidth (bytes/s) is required when peak is a number")
    _no_dtype_with_numbers(dtype, "peak")
    return _positive("peak", peak), _positive("bandwidth", bandwidth)


def ridge_point(peak, bandwidth=None, *, dtype: str | None = None):
    """I_ridge = P_peak / B_mem in FLOPs/byte (peak in FLOP/s, bandwidth in bytes/s)."""
    p, b = _machine(peak, bandwidth, dtype)
    with np.errstate(all="ignore"):
        return _out(p / b, "the ridge point peak / bandwidth")


def attainable(intensity, peak, bandwidth=None, *, dtype: str | None = None):
    """P = min(P_peak, I x B_mem) in FLOP/s, for intensity I in FLOPs/byte."""
    p, b = _machine(peak, bandwidth, dtype)
    with np.errstate(all="ignore"):
        return _out(np.minimum(p, _positive("intensity", intensity) * b), "the attainable rate")


def efficiency(intensity, peak, bandwidth=None, *, dtype: str | None = None):
    """Attainable over peak, a fraction in (0, 1]: min(1, I / I_ridge)."""
    p, b = _machine(peak, bandwidth, dtype)
    with np.errstate(all="ignore"):
        return _out(np.minimum(p, _positive("intensity", intensity) * b) / p, "the efficiency")


def is_memory_bound(intensity, ridge, *, dtype: str | None = None):
    """True where I < I_ridge; ``ridge`` is a number (FLOPs/byte) or a chip."""
    if isinstance(ridge, (Accelerator, str)):
        ridge = get_accelerator(ridge).ridge(DEFAULT_DTYPE if dtype is None else dtype)
    else:
        _no_dtype_with_numbers(dtype, "ridge")
    below = _positive("intensity", intensity) < _positive("ridge", ridge)
    return bool(below) if below.ndim == 0 else below


def regime(intensity, ridge, *, dtype: str | None = None):
    """"memory-bound" where I < I_ridge, else "compute-bound" (an array of str for arrays)."""
    below = is_memory_bound(intensity, ridge, dtype=dtype)
    if isinstance(below, bool):
        return MEMORY_BOUND if below else COMPUTE_BOUND
    return np.where(below, MEMORY_BOUND, COMPUTE_BOUND)


def plot(
    accelerators,
    dtypes=("bf16",),
    operations: dict | None = None,
    ax=None,
    imin: float = 0.25,
    imax: float = 4096.0,
    label_ridges: bool = True,
):
    """Draw rooflines on log-log axes: TFLOPS against FLOPs/byte; return the Axes.

    One line per (accelerator, dtype) the chip has a peak for (pairs it lacks are skipped),
    a dot at each ridge point, and each operation in ``operations`` as a dotted vertical
    line at its intensity, named above the axes (``{"decode": 1.0}``), or, with a measured
    rate in FLOP/s, as a labelled point (``{"my GEMV": (1.0, 2.1e12)}``). Roofline lines
    carry ``gid="roofline"``; their legend names the ridge unless ``label_ridges`` is false
    (a page whose exercise asks for a ridge). With more than four lines the legend goes
    below the axes, where it covers no line. Raises ``ValueError`` if no chip has any of
    the precisions.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, NullLocator

    if isinstance(accelerators, (Accelerator, str)):
        accelerators = [accelerators]
    if isinstance(dtypes, str):
        dtypes = (dtypes,)
    accelerators = validate.sequence("accelerators", accelerators, what="chips")
    dtypes = validate.names("dtypes", dtypes)
    if operations is not None:
        operations = validate.mapping("operations", operations,
                                      what="name -> intensity or (intensity, FLOP/s)", empty=True)
    if len(accelerators) * len(dtypes) > 64:
        raise ValueError(f"plot draws at most 64 rooflines (chips x precisions), got "
                         f"{len(accelerators)} x {len(dtypes)}")
    chips = [get_accelerator(a) for a in accelerators]
    if not any(chip.has(dtype) for chip in chips for dtype in dtypes):
        raise ValueError(f"none of {[c.name for c in chips]} has a peak for {list(dtypes)}")
    label_ridges = boolean("label_ridges", label_ridges)
    lo = validate.real("imin", imin, minimum=1e-30, maximum=1e30)
    hi = validate.real("imax", imax, minimum=1e-30, maximum=1e30)
    if lo >= hi:
        raise ValueError(f"imin ({imin}) must be below imax ({imax})")
    if validate.axes("ax", ax) is None:
        _, ax = plt.subplots(figsize=(7, 4.5))

    x = np.geomspace(lo, hi, 256)
    styles = ["-", "--", ":", "-."]
    for i, chip in enumerate(chips):
        color = f"C{i}"
        for j, dtype in enumerate(dtypes):
            if not chip.has(dtype):
                continue
            ridge = chip.ridge(dtype)
            y = attainable(x, chip, dtype=dtype) / 1e12
            label = f"{chip.name} {dtype}" + (f" (ridge {ridge:.0f})" if label_ridges else "")
            ax.plot(x, y, styles[j % len(styles)], color=color, label=label, gid="roofline")
            if lo <= ridge <= hi:
                ax.scatter([ridge], [chip.peak(dtype) / 1e12], color=color, zorder=3, s=18)

    marked = {}  # operations without a measured rate: a vertical line, named on top
    for name, spec in (operations or {}).items():
        if isinstance(spec, tuple) and len(spec) != 2:
            raise ValueError(f"operation {name!r} must be an intensity or (intensity, FLOP/s), "
                             f"got {shorten(spec)}")
        intensity, achieved = spec if isinstance(spec, tuple) else (spec, None)
        intensity = float(_positive(f"intensity of {name!r}", intensity))
        if achieved is None:
            ax.axvline(intensity, color="0.4", linestyle=":", linewidth=1)
            marked[name] = intensity
        else:
            y = float(_positive(f"achieved FLOP/s of {name!r}", achieved)) / 1e12
            ax.scatter([intensity], [y], marker="x", color="k", zorder=4)
            ax.annotate(name, (intensity, y), xytext=(4, 4), textcoords="offset points",
                        fontsize=9)

    ax.set_xscale("log", base=2)
    ax.xaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_yscale("log")
    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:g}"))
    ax.set_xlim(lo, hi)
    if marked:
        top = ax.secondary_xaxis("top")
        top.set_xticks(list(marked.values()), labels=list(marked), fontsize=9, color="0.3")
        top.xaxis.set_minor_locator(NullLocator())
        top.tick_params(length=0)
    ax.set_xlabel("arithmetic intensity I (FLOPs/byte)")
    ax.set_ylabel("attainable performance (TFLOPS)")
    ax.grid(True, which="major", alpha=0.3)
    if len(_rooflines(ax)) > 4:
        ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
                  frameon=False)
    else:
        ax.legend(fontsize=9, loc="lower right")
    return ax


def _rooflines(ax) -> list:
    return [line for line in ax.get_lines() if line.get_gid() == "roofline"]


def explore(accelerator, dtype: str, intensity: float, ax=None, label_ridges: bool = True):
    """One roofline with a kernel at ``intensity`` on it and a readout; return the Axes.

    The pure function behind the roofline notebook's slider: the readout gives the attainable
    TFLOPS, the efficiency (attainable / peak) and the regime.
    """
    chip = get_accelerator(accelerator)
    if np.ndim(intensity) != 0:
        raise ValueError(f"intensity must be one number (FLOPs/byte), got {shorten(intensity)}")
    p = attainable(intensity, chip, dtype=dtype)
    intensity = float(intensity)  # also for exact inputs, e.g. a Fraction from dtypes
    ax = plot([chip], (dtype,), ax=ax, label_ridges=label_ridges)
    ax.scatter([intensity], [p / 1e12], s=60, color="C3", zorder=5)
    readout = (
        f"I = {intensity:,g} FLOPs/byte\n"
        f"attainable {p / 1e12:,.1f} TFLOPS\n"
        f"efficiency {efficiency(intensity, chip, dtype=dtype):.1%}\n"
        f"{regime(intensity, chip, dtype=dtype)}"
    )
    # a single roofline leaves the upper left (above the slope) and the lower right (under
    # the roof) empty: the legend goes to one, the readout to the other, covering no data
    ax.legend(fontsize=9, loc="upper left")
    ax.text(0.98, 0.04, readout, transform=ax.transAxes, ha="right", va="bottom", fontsize=9,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9})
    ax.set_ylim(chip.peak(dtype) / 1e12 / 5000, chip.peak(dtype) / 1e12 * 3)
    return ax
