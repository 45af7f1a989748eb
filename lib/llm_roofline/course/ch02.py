"""Chapter 2, the two phases (``notebooks/02_two_phases``): its figures, tables and answer checks.

Pure drawing and table shaping: every number comes in from the caller (the tally, the counts,
the calculator); nothing here counts FLOPs or bytes.

- :func:`phase_rows`: per operation, the FLOPs, bytes and intensity of a prefill and of a
  decode step side by side, as rows for ``widgets.html_table``;
- :func:`op_intensity`: the same intensities as a dot plot against a chip's ridge point;
- :func:`intensity_view`: that plot as a figure of its own, for the live widget;
- :func:`two_regimes`: the article's flowchart of the two phases, redrawn;
- the answer checks ``phases-1`` ... ``phases-4``, and the design problem's hint ``phases-split``.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from ..counts import Cost, total
from ..validate import boolean, choice, mapping, names, real, shorten, text
from .plots import PHASE_COLORS, axes_or_new
from .registry import register, register_hint, smallest

__all__ = ["BYTE_UNITS", "FLOP_UNITS", "intensity_view", "op_intensity", "phase_rows",
           "two_regimes"]

FLOP_UNITS = {"FLOP": 1.0, "kFLOP": 1e3, "MFLOP": 1e6, "GFLOP": 1e9, "TFLOP": 1e12}

BYTE_UNITS = {"B": 1.0, "kB": 1e3, "MB": 1e6, "GB": 1e9}


def _scale(units: Mapping[str, float], unit: str, field: str) -> float:
    return units[choice(field, unit, units)]


def _costs(name: str, costs) -> dict:
    """A dict of operation name -> ``Cost`` (``Tally.costs``, ``formulas.op_costs``)."""
    costs = mapping(name, costs, what="operation name -> formulas.Cost")
    for op, cost in costs.items():
        if not isinstance(cost, Cost):
            raise ValueError(f"{name}[{op!r}] must be a formulas.Cost, got {shorten(cost)}")
    return costs


def phase_rows(prefill: Mapping[str, Cost], decode: Mapping[str, Cost], *,
               flop_unit: str = "MFLOP", byte_unit: str = "MB", totals: bool = True) -> list[dict]:
    """Per operation, prefill and decode side by side: FLOPs, bytes moved, FLOPs per byte.

    ``prefill`` and ``decode`` map operation names to :class:`~llm_roofline.counts.Cost`
    (``Tally.costs`` or ``counts.op_costs``), with the same operations. Operations that do
    nothing in both are left out; an intensity with no bytes is None (a dash in a table). The
    last row is the total of each phase when ``totals``.
    """
    prefill, decode = _costs("prefill", prefill), _costs("decode", decode)
    totals = boolean("totals", totals)
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
    prefill, decode = _costs("prefill", prefill), _costs("decode", decode)
    if ops is not None:
        ops = names("ops", ops)
    ridge_label = text("ridge_label", ridge_label, empty=True)
    unknown = [op for op in ops or () if op not in prefill]
    if unknown:
        raise ValueError(f"ops names operations prefill lacks: {unknown}; known: {', '.join(prefill)}")
    ops = [op for op in (ops or prefill) if prefill[op].flops and prefill[op].bytes]
    missing = [op for op in ops if op not in decode or not decode[op].bytes]
    if missing:
        raise ValueError(f"decode lacks operations that prefill has: {missing}")
    if not ops:
        raise ValueError("prefill has no operation with both FLOPs and bytes")
    ax = axes_or_new(ax, (7, 0.32 * len(ops) + 1.2))
    y = range(len(ops))
    # each phase on its own half of the row (prefill above, decode below) and prefill drawn
    # on top, so that a point of one phase never hides the other's at the same intensity
    for phase, costs, dy, marker, z in (("prefill", prefill, -0.17, "o", 3),
                                        ("decode", decode, 0.17, "s", 2)):
        ax.plot([costs[op].intensity for op in ops], [i + dy for i in y], marker,
                color=PHASE_COLORS[phase], label=phase, markersize=6, zorder=z)
    if ridge is not None:
        ridge = real("ridge", ridge, minimum=0.0)
        ax.axvline(ridge, color="0.3", linestyle="--", linewidth=1, zorder=1)
        # the label in an empty band above the first row, never on the data
        ax.text(ridge / 1.1, -0.95, ridge_label, fontsize=10, color="0.3", ha="right",
                va="center")
    ax.set_yticks(list(y), ops, fontsize=10)
    ax.set_ylim(len(ops) - 0.5, -1.4)
    ax.set_xscale("log")
    ax.set_xlabel("arithmetic intensity (FLOP/byte)")
    ax.grid(axis="x", alpha=0.3)
    ax.legend(fontsize=10, loc="lower right")
    return ax


def intensity_view(prefill: Mapping[str, Cost], decode: Mapping[str, Cost], *, ridge: float,
                   ops: Sequence[str], title: str, ridge_label: str = "H100 ridge"):
    """One :func:`op_intensity` figure, titled and shown: the live widget's view."""
    import matplotlib.pyplot as plt

    title = text("title", title)
    fig, ax = plt.subplots(figsize=(7, 5))
    op_intensity(prefill, decode, ridge=ridge, ridge_label=ridge_label, ops=ops, ax=ax)
    ax.set_title(title, fontsize=10)
    ax.set_xlim(0.05, 1e4)
    plt.show()


def two_regimes(ax=None):
    """The article's flowchart of one request: prefill once (GEMM), then decode in a loop (GEMV)."""
    from matplotlib.patches import FancyArrowPatch, FancyBboxPatch

    ax = axes_or_new(ax, (7, 5.6))
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


# notebooks/02_two_phases: GEMM and GEMV ---------------------------------------------


def _phases_1() -> float:
    from ..counts import op_costs
    from ..models import get_model

    return op_costs(get_model("llama-3-70b"), 16, 1, 2047)["down_proj"].intensity


def _phases_2() -> float:
    from ..counts import op_costs
    from ..hardware import get_accelerator
    from ..models import get_model

    cfg, ridge = get_model("llama-3-8b"), get_accelerator("H100 SXM").ridge("bf16")
    return smallest(lambda n: op_costs(cfg, 1, n)["down_proj"].intensity >= ridge,
                  1, cfg.max_context)


def _phases_3() -> float:
    from .. import formulas as F

    values = {F.n_new: 64, F.n_past: 0}
    causal = F.attention_pairs_expr(causal=True).subs(values)
    full = F.attention_pairs_expr(causal=False).subs(values)
    return float(causal / full)


def _phases_4() -> float:
    from ..counts import op_costs, total
    from ..models import get_model

    costs = op_costs(get_model("llama-3-8b"), 16, 1, 8191)
    return 100 * costs["kv_read"].bytes / total(costs).bytes


register(
    "phases-1", _phases_1, unit="FLOP/byte", rtol=0.01,
    hint="a batch of B decode tokens is a [B x d_ff] activation: 2 B d_ff d FLOPs over the "
    "weight bytes plus the activations'.",
)


register(
    "phases-2", _phases_2, unit="tokens", rtol=0.01,
    hint="intensity 2 L k n / (2 (k n + L k + L n)) at BF16; find the first L at the ridge.",
)


register(
    "phases-3", _phases_3, unit="of the full block", rtol=0.001,
    hint="a causal kernel scores token i against i + 1 keys: sum them, over L x L.",
)


register(
    "phases-4", _phases_4, unit="% of the bytes", rtol=0.01,
    hint="compare kv_read's bytes with the total of every operation of the step.",
)


register_hint(
    "phases-split",
    "per request, prefill costs its TTFT at batch 1 and decode costs answer x TPOT(batch 32) "
    "/ 32 of a GPU; the ratio of the two is the split of GPUs between the phases, and the "
    "larger one is the phase to optimise",
)
