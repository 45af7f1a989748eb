"""Figures and tables of chapters 1 and 2: the paradox and the two phases.

Pure drawing and table shaping: every number comes in from the caller (the tally, the
formulas, the calculator); nothing here counts FLOPs or bytes.

- :func:`timeline`: a profiler-style trace of one ``generate`` call, one block per forward
  pass, as wide as its time and as tall as its achieved FLOP/s;
- :func:`decode_share`: the share of a call's time spent in decode against output length;
- :func:`snapshot`: a tally's two phases as a profiler's summary (time, share, FLOP/s, GB/s);
- :func:`phase_rows`: per operation, the FLOPs, bytes and intensity of a prefill and of a
  decode step side by side, as rows for ``widgets.html_table``;
- :func:`op_intensity`: the same intensities as a dot plot against a chip's ridge point;
- :func:`two_regimes`: the article's flowchart of the two phases, redrawn.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from .formulas import Cost, total
from .validate import choice, real

__all__ = ["PHASE_COLORS", "decode_share", "op_intensity", "phase_rows", "snapshot", "timeline",
           "two_regimes"]

PHASE_COLORS = {"prefill": "#d95f02", "decode": "#1b6ca8"}
"""One colour per phase, used by every figure of the two chapters."""

FLOP_UNITS = {"FLOP": 1.0, "kFLOP": 1e3, "MFLOP": 1e6, "GFLOP": 1e9, "TFLOP": 1e12}
BYTE_UNITS = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _axes(ax, figsize):
    import matplotlib.pyplot as plt

    if ax is None:
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

    passes, flops = list(passes), list(flops)
    if not passes:
        raise ValueError("passes must hold at least one forward pass, got none")
    if len(flops) != len(passes):
        raise ValueError(f"flops must have one value per pass ({len(passes)}), got {len(flops)}")
    ax = _axes(ax, (7, 3.6))
    start, top = 0.0, 0.0
    for i, (p, f) in enumerate(zip(passes, flops, strict=True)):
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


def decode_share(output_lens: Sequence[float], shares: Sequence[float], *, ax=None,
                 threshold: float | None = 0.95, label: str | None = None, color=None):
    """The share of one call's time spent in decode (``shares``, fractions) against output length.

    A log x-axis of output tokens; ``threshold`` draws a dashed horizontal line (None: none).
    """
    output_lens, shares = list(output_lens), list(shares)
    if len(output_lens) != len(shares) or not shares:
        raise ValueError(
            f"output_lens and shares must be non-empty and of one length, "
            f"got {len(output_lens)} and {len(shares)}"
        )
    for i, s in enumerate(shares):
        real(f"shares[{i}]", s, minimum=0.0, maximum=1.0)
    ax = _axes(ax, (7, 4))
    ax.plot(output_lens, [100 * s for s in shares], color=color or PHASE_COLORS["decode"],
            linewidth=2, label=label)
    if threshold is not None:
        threshold = real("threshold", threshold, minimum=0.0, maximum=1.0)
        ax.axhline(100 * threshold, color="0.4", linestyle="--", linewidth=1)
        ax.text(output_lens[0], 100 * threshold - 2, f"{100 * threshold:g} %", va="top",
                fontsize=10, color="0.3")
    ax.set_xscale("log")
    ax.set_ylim(0, 100)
    ax.set_xlabel("output tokens per request")
    ax.set_ylabel("time in decode (% of the call)")
    ax.grid(alpha=0.3)
    if label is not None:
        ax.legend(fontsize=10, loc="lower right")
    return ax


def snapshot(tally) -> list[dict]:
    """A ``Tally`` of one ``generate`` call as a profiler's summary, one row per quantity.

    Columns ``prefill`` and ``decode`` hold text: the passes, the tokens each pass fed, the
    measured time and its share of the call, the FLOPs and bytes counted, and the FLOP/s and
    bytes/s achieved (counted over measured). Rows, not columns, so it fits a phone.
    """
    passes = list(tally.passes)
    phases = ("prefill", "decode")
    missing = [ph for ph in phases if not any(p["phase"] == ph for p in passes)]
    if missing:
        raise ValueError(f"tally must hold passes of both phases; it has none of {missing}")
    wall = tally.seconds()
    columns = {}
    for ph in phases:
        mine = [p for p in passes if p["phase"] == ph]
        c, t = tally.total(ph), tally.seconds(ph)
        tokens = sorted({p["batch"] * p["n_new"] for p in mine})
        columns[ph] = [
            f"{len(mine):,}", " or ".join(f"{n:,}" for n in tokens), f"{1e3 * t:,.1f}",
            f"{100 * t / wall:.0f} %", f"{c.flops / 1e9:,.2f}", f"{c.flops / t / 1e9:,.2f}",
            f"{c.bytes / 1e6:,.0f}", f"{c.bytes / t / 1e9:,.2f}",
        ]
    labels = ["forward passes", "tokens per pass", "time (ms)", "share of the call", "GFLOP",
              "achieved GFLOP/s", "MB moved", "achieved GB/s"]
    return [{"": label, "prefill": columns["prefill"][i], "decode": columns["decode"][i]}
            for i, label in enumerate(labels)]


def _scale(units: Mapping[str, float], unit: str, field: str) -> float:
    return units[choice(field, unit, units)]


def phase_rows(prefill: Mapping[str, Cost], decode: Mapping[str, Cost], *,
               flop_unit: str = "MFLOP", byte_unit: str = "MB", totals: bool = True) -> list[dict]:
    """Per operation, prefill and decode side by side: FLOPs, bytes moved, FLOPs per byte.

    ``prefill`` and ``decode`` map operation names to :class:`~llm_roofline.formulas.Cost`
    (``Tally.costs`` or ``formulas.op_costs``), with the same operations. Operations that do
    nothing in both are left out; an intensity with no bytes is None (a dash in a table). The
    last row is the total of each phase when ``totals``.
    """
    if set(prefill) != set(decode):
        raise ValueError(
            f"prefill and decode must have the same operations; "
            f"differ in {sorted(set(prefill) ^ set(decode))}"
        )
    fs, bs = _scale(FLOP_UNITS, flop_unit, "flop_unit"), _scale(BYTE_UNITS, byte_unit, "byte_unit")

    def intensity(c: Cost):
        return c.intensity if c.bytes else None

    def row(op, p: Cost, d: Cost) -> dict:
        return {
            "operation": op,
            f"prefill {flop_unit}": p.flops / fs, f"prefill {byte_unit}": p.bytes / bs,
            "prefill FLOP/byte": intensity(p),
            f"decode {flop_unit}": d.flops / fs, f"decode {byte_unit}": d.bytes / bs,
            "decode FLOP/byte": intensity(d),
        }

    rows = [row(op, prefill[op], decode[op]) for op in prefill
            if prefill[op].flops or prefill[op].bytes or decode[op].flops or decode[op].bytes]
    if totals:
        rows.append(row("total", total(prefill), total(decode)))
    return rows


def op_intensity(prefill: Mapping[str, Cost], decode: Mapping[str, Cost], *, ax=None,
                 ridge: float | None = None, ridge_label: str = "ridge point",
                 ops: Sequence[str] | None = None):
    """Each operation's FLOPs per byte in prefill and in a decode step, on a log axis.

    ``ops`` picks operations (default: all of ``prefill``); those without FLOPs (embedding,
    KV-cache reads and writes) are left out. ``ridge`` draws a chip's ridge point as a
    vertical line: points left of it are memory-bound there.
    """
    unknown = [op for op in ops or () if op not in prefill]
    if unknown:
        raise ValueError(f"ops names operations prefill lacks: {unknown}; known: {', '.join(prefill)}")
    ops = [op for op in (ops or prefill) if prefill[op].flops and prefill[op].bytes]
    missing = [op for op in ops if op not in decode or not decode[op].bytes]
    if missing:
        raise ValueError(f"decode lacks operations that prefill has: {missing}")
    if not ops:
        raise ValueError("prefill has no operation with both FLOPs and bytes")
    ax = _axes(ax, (7, 0.32 * len(ops) + 1.2))
    y = range(len(ops))
    for phase, costs in (("prefill", prefill), ("decode", decode)):
        ax.plot([costs[op].intensity for op in ops], list(y), "o", color=PHASE_COLORS[phase],
                label=phase, markersize=6)
    if ridge is not None:
        ridge = real("ridge", ridge, minimum=0.0)
        ax.axvline(ridge, color="0.3", linestyle="--", linewidth=1)
        ax.text(ridge, 0.98, f"{ridge_label} ", fontsize=10, color="0.3", rotation=90,
                ha="right", va="top", transform=ax.get_xaxis_transform())
    ax.set_yticks(list(y), ops, fontsize=10)
    ax.set_ylim(len(ops) - 0.5, -0.7)
    ax.set_xscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=10, loc="best")
    return ax


def two_regimes(ax=None):
    """The article's flowchart of one request: prefill once (GEMM), then decode in a loop (GEMV)."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    ax = _axes(ax, (7, 5.6))
    ax.set_xlim(0, 10)
    ax.set_ylim(0, 10.4)
    ax.set_axis_off()
    pre, dec, grey = PHASE_COLORS["prefill"], PHASE_COLORS["decode"], "0.35"

    def box(x, y, w, h, title, body, color):
        ax.add_patch(FancyBboxPatch((x, y), w, h, boxstyle="round,pad=0.12", facecolor="white",
                                    edgecolor=color, linewidth=2))
        ax.text(x + w / 2, y + h - 0.35, title, ha="center", va="top", fontsize=10.5,
                color=color if color != grey else "black", fontweight="bold")
        ax.text(x + w / 2, y + h - 0.95, body, ha="center", va="top", fontsize=10,
                linespacing=1.4)

    def arrow(a, b, color=grey, text=None, at=(0, 0), ha="center"):
        ax.add_patch(FancyArrowPatch(a, b, arrowstyle="-|>", mutation_scale=14, color=color,
                                     linewidth=1.6))
        if text:
            ax.text(*at, text, fontsize=9.5, color=color, ha=ha, va="center")

    box(0.2, 8.6, 4.2, 1.5, "prompt", "$L$ tokens $x_1 \\ldots x_L$, all known", grey)
    box(0.2, 3.9, 4.2, 3.4, "PREFILL: one pass",
        "$X\\,[L \\times d] \\cdot W\\,[d \\times d']$\nGEMM: each weight read once,\n"
        "used by $L$ tokens\n→ compute-bound", pre)
    box(5.6, 3.9, 4.2, 3.4, "DECODE: a pass per token",
        "$x_t\\,[1 \\times d] \\cdot W\\,[d \\times d']$\nGEMV: every weight read\n"
        "for one token\n→ memory-bound", dec)
    box(5.6, 8.6, 4.2, 1.5, "sample the next token", "$x_{t+1} \\sim P(x \\mid x_{\\leq t})$", dec)
    box(1.6, 0.2, 6.8, 1.9, "KV cache", "keys and values of every token so far\n(grows by one per step)",
        grey)
    arrow((2.3, 8.45), (2.3, 7.45))
    arrow((4.55, 5.6), (5.45, 5.6), text="first\ntoken", at=(5.0, 6.3))
    arrow((7.2, 7.45), (7.2, 8.45), color=dec, text="logits", at=(7.05, 7.95), ha="right")
    arrow((8.2, 8.45), (8.2, 7.45), color=dec, text="next input\n(repeat)", at=(8.35, 7.95),
          ha="left")
    arrow((2.3, 3.75), (2.3, 2.25), text="writes $L$", at=(2.45, 3.0), ha="left")
    arrow((6.6, 3.75), (6.6, 2.25), color=dec, text="appends 1", at=(6.45, 3.0), ha="right")
    arrow((8.0, 2.25), (8.0, 3.75), color=dec, text="reads all", at=(8.15, 3.0), ha="left")
    return ax
