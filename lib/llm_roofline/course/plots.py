"""The figures every chapter shares: the page's Matplotlib settings and the trace of a
``generate`` call.

A chapter's own figures live in its module (``course.ch04`` for chapter 4); what two or more
chapters draw lives here. Every figure is sized for the book's content column (about 700 px
wide): at most 7.2 inches wide, with no text under 9 pt.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..validate import axes, boolean, choice, mapping, real, sequence

__all__ = ["GiB", "PAGE", "PHASE_COLORS", "WIDTH", "axes_or_new", "timeline"]

GiB = 2**30


#: Matplotlib settings for a figure read at the page's width: no text under 9 pt
PAGE = {"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9,
        "ytick.labelsize": 9, "legend.fontsize": 9, "figure.titlesize": 10}

WIDTH = 7.2
"""A full-width figure, inches: about 700 px at the inline backend's 100 dpi."""

PHASE_COLORS = {"prefill": "#d95f02", "decode": "#1b6ca8"}
"""One colour per phase, used by every figure of the two chapters."""


def axes_or_new(ax, figsize):
    """``ax``, or the Axes of a new figure of ``figsize`` when ``ax`` is None."""
    import matplotlib.pyplot as plt

    if axes("ax", ax) is None:
        _, ax = plt.subplots(figsize=figsize)
    return ax


def timeline(passes: Sequence[Mapping], flops: Sequence[float], *, ax=None, log: bool = False):
    """One ``generate`` call as a trace: each forward pass a block from its start to its end.

    ``passes`` are ``Tally.passes`` (each with ``phase`` and ``seconds``), in the order they
    ran; ``flops[i]`` is the FLOPs of pass ``i``. A block's width is the pass's time (ms) and
    its height the FLOP/s it achieved (GFLOP/s), so its area is its FLOPs: prefill is one
    thick block, decode a row of thin low ones. ``log`` puts the FLOP/s on a log axis.
    """
    from matplotlib.patches import Patch, Rectangle

    passes = sequence("passes", passes, what="Tally.passes dicts", empty=True)
    flops = sequence("flops", flops, what="FLOPs", empty=True)
    log = boolean("log", log)
    if not passes:
        raise ValueError("passes must hold at least one forward pass, got none")
    if len(flops) != len(passes):
        raise ValueError(f"flops must have one value per pass ({len(passes)}), got {len(flops)}")
    ax = axes_or_new(ax, (7, 3.6))
    start, top = 0.0, 0.0
    for i, (p, f) in enumerate(zip(passes, flops, strict=True)):
        p = mapping(f"passes[{i}]", p, what="phase and seconds")
        phase = choice(f"passes[{i}]['phase']", p.get("phase"), PHASE_COLORS)
        seconds = real(f"passes[{i}]['seconds']", p.get("seconds"), minimum=0.0, open_min=True)
        f = real(f"flops[{i}]", f, minimum=0.0)
        rate = f / seconds / 1e9
        ax.add_patch(Rectangle((1e3 * start, 0.0), 1e3 * seconds, rate, facecolor=PHASE_COLORS[phase],
                               edgecolor="white", linewidth=0.3, label=phase))
        start += seconds
        top = max(top, rate)
    ax.set_xlim(0, 1e3 * start)
    if log:
        ax.set_yscale("log")
        low = min(f / p["seconds"] / 1e9 for p, f in zip(passes, flops, strict=True) if f > 0)
        ax.set_ylim(low / 2, 2 * top)
    else:
        ax.set_ylim(0, 1.1 * top)
    ax.set_xlabel("time since the call began (ms)")
    ax.set_ylabel("achieved GFLOP/s")
    phases = [ph for ph in PHASE_COLORS if any(p["phase"] == ph for p in passes)]
    ax.legend(handles=[Patch(color=PHASE_COLORS[ph], label=ph) for ph in phases],
              loc="upper right", fontsize=10)
    ax.grid(axis="y", alpha=0.3)
    return ax
