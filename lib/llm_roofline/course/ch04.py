"""Chapter 4, why decode is memory-bound (``notebooks/04_why_decode_is_bound``): its figures
and its answer checks (``bound-1`` ... ``bound-4``, and the hint of the design problem,
``bound-weight-format``).

No arithmetic of its own beyond grouping what the library counted: FLOPs and bytes come from
:func:`llm_roofline.counts.op_costs` or a tiny transformer's :class:`~llm_roofline.tiny.Tally`
(a dict ``{op: Cost}``), attainable performance from :mod:`llm_roofline.roofline`.

- :func:`op_points`: one ``(kind, intensity)`` per operation that does arithmetic, with the
  two attention products taken together against the KV cache they read;
- :func:`ops_on_roofline`: those points for one or more phases on one chip's roofline;
- :func:`phases_on_roofline`: the pure function behind the chapter's sliders (a model's
  prefill and its next decode step at a batch size and prompt length);
- :func:`intensity_vs_tokens` and :func:`attainable_vs_batch`: the chapter's two line charts.
"""

from __future__ import annotations

import math
from collections.abc import Mapping

import numpy as np

from .. import roofline as rl
from .. import validate
from ..counts import Cost, op_costs, total
from ..formulas import LINEAR_OPS
from ..hardware import get_accelerator
from ..models import ModelConfig
from .registry import register, register_hint

__all__ = [
    "KINDS", "TINY", "attainable_vs_batch", "critical_batch_table", "intensity_rows",
    "intensity_vs_tokens", "op_points", "ops_on_roofline", "phases_on_roofline",
]

KINDS = {"linear": "o", "attention": "^", "elementwise": "s"}
"""The kinds of operation :func:`op_points` returns, with the marker each is drawn with."""

_ATTENTION = ("attn_scores", "attn_values")

_PHASE_COLORS = ("C1", "C2", "C3", "C4", "C5")

TINY = ModelConfig("tiny-256", vocab_size=512, hidden_size=256, intermediate_size=688,
                   n_layers=2, n_heads=8, n_kv_heads=2, head_dim=32, max_context=512)
"""The chapter's tiny transformer: a Llama-style decoder 256 wide, 2 layers, 8 query heads
sharing 2 KV heads."""

SCHEMES = {
    "BF16": ("bf16", None, "bf16"),
    "W8A8 (FP8 math)": ("fp8", None, "fp8"),
    "W8A16 (FP8 weights)": ("fp8", None, "bf16"),
    "W4A16 (INT4, g128)": ("int4", 128, "bf16"),
}
"""The weight formats of the critical-batch table: name -> (weight dtype, group, math dtype)."""


def intensity_rows(counted: Mapping[str, Mapping[str, Cost]]) -> list[dict]:
    """One row per operation that does arithmetic: its intensity in the prefill and in decode,
    from a ``{"prefill": costs, "decode": costs}`` tally (:func:`op_points`)."""
    points = {phase: op_points(costs) for phase, costs in counted.items()}
    return [{"operation": op, "prefill": i, "decode": points["decode"][op][1]}
            for op, (_, i) in points["prefill"].items()]


def critical_batch_table(accelerator="H100 SXM") -> list[dict]:
    """For each weight format of :data:`SCHEMES`: its bytes per weight, the ridge of its math,
    the critical batch ``B* = b_w I_ridge / 2`` (a real number) and the whole batch above it."""
    from ..dtypes import bytes_per_element

    chip = get_accelerator(accelerator) if isinstance(accelerator, str) else accelerator
    rows = []
    for name, (weights, group, math_dtype) in SCHEMES.items():
        b_w = float(bytes_per_element(weights, group, "fp16") if group else
                    bytes_per_element(weights))
        ridge = chip.ridge(math_dtype)
        rows.append({"scheme": name, "bytes/weight": b_w, "ridge": ridge,
                     "B_*": b_w * ridge / 2, "whole batch": math.ceil(b_w * ridge / 2)})
    return rows


def op_points(costs: Mapping[str, Cost]) -> dict[str, tuple[str, float]]:
    """``{name: (kind, intensity)}`` for the operations of ``costs`` that do arithmetic.

    Linear layers (:data:`formulas.LINEAR_OPS`, and any other ``*_proj``) are ``"linear"``,
    each with its own FLOPs over its own bytes. The two attention products are one point,
    ``"attention"``: their FLOPs over the bytes of the KV cache they read (``kv_read``), the
    article's ``I_KV``. The rest (norms, RoPE, softmax, residual, activation) are
    ``"elementwise"``. Operations without FLOPs (embedding lookup, KV-cache reads and writes)
    have no intensity and are left out.
    """
    if not isinstance(costs, Mapping) or not all(isinstance(c, Cost) for c in costs.values()) or (
            not all(isinstance(op, str) for op in costs)):
        raise ValueError(
            f"costs must be a dict of operation name -> counts.Cost, got {validate.shorten(costs)}"
        )
    points: dict[str, tuple[str, float]] = {}
    for op, cost in costs.items():
        if cost.flops == 0 or op in _ATTENTION:
            continue
        kind = "linear" if op in LINEAR_OPS or op.endswith("_proj") else "elementwise"
        points[op] = (kind, cost.intensity)
    attention = total(costs[op] for op in _ATTENTION if op in costs)
    kv = costs.get("kv_read")
    if attention.flops and kv is not None and kv.bytes:
        points["attention"] = ("attention", attention.flops / kv.bytes)
    return points


def ops_on_roofline(
    phases: Mapping[str, Mapping[str, Cost]],
    accelerator,
    dtype: str = "bf16",
    *,
    ax=None,
    imin: float = 1 / 8,
    imax: float = 2.0**15,
    legend: bool = True,
):
    """Each phase's :func:`op_points` at their attainable TFLOPS on one chip; return the Axes.

    ``phases`` maps a label (``"prefill"``, ``"decode"``) to a dict ``{op: Cost}``. Colour
    tells the phase, the marker the kind of operation (:data:`KINDS`). Points outside
    ``[imin, imax]`` are not drawn. The legend sits in the lower right, under the roof and
    right of the slope, where no point can fall.
    """
    import matplotlib.pyplot as plt

    if not isinstance(phases, Mapping) or not phases:
        raise ValueError(
            f"phases must be a non-empty dict of label -> costs, got {validate.shorten(phases)}"
        )
    if len(phases) > len(_PHASE_COLORS):
        raise ValueError(f"phases: at most {len(_PHASE_COLORS)} phases, got {len(phases)}")
    chip = get_accelerator(accelerator)
    if validate.axes("ax", ax) is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    rl.plot([chip], (dtype,), ax=ax, imin=imin, imax=imax)
    handles = []
    for color, (label, costs) in zip(_PHASE_COLORS, phases.items(), strict=False):
        points = op_points(costs)
        for kind, marker in KINDS.items():
            x = np.array([i for k, i in points.values() if k == kind and imin <= i <= imax])
            if x.size == 0:
                continue
            y = rl.attainable(x, chip, dtype=dtype) / 1e12
            size = 28 if kind == "elementwise" else 46
            handles.append(ax.scatter(x, np.atleast_1d(y), marker=marker, s=size, color=color,
                                      edgecolor="k", linewidth=0.5, zorder=4,
                                      label=f"{label}: {kind}"))
    ax.set_ylim(chip.peak(dtype) / 1e12 / 2e4, chip.peak(dtype) / 1e12 * 4)
    ticks = [2.0**e for e in range(-30, 31, 3) if imin <= 2.0**e <= imax]
    ax.set_xticks(ticks, labels=[_compact(t) for t in ticks])
    if legend:
        roof = ax.get_legend()
        if roof is not None:
            roof.remove()
        ax.legend(handles=handles, fontsize=9, loc="lower right",  # below the roof: empty
                  ncols=2 if len(handles) > 3 else 1,
                  title=f"{chip.name}, {dtype.upper()} (ridge {chip.ridge(dtype):.0f})",
                  title_fontsize=9)
    elif ax.get_legend() is not None:
        ax.get_legend().remove()
    return ax


def phases_on_roofline(
    model, accelerator, batch: int, prompt: int, *, dtype: str = "bf16", ax=None,
    legend: bool = True,
):
    """A model's prefill of ``prompt`` tokens and its next decode step, ``batch`` sequences.

    ``model`` is a ``ModelConfig`` or a built-in name; ``dtype`` is the precision of the
    weights, the activations, the KV cache and the chip's math. The box gives the intensity
    of the linear layers taken together in each phase: in the upper left, above the slope,
    or with ``legend=False`` (small multiples, sharing one figure legend) in the lower
    right, where the legend would be. The intensity axis runs to ``2**15`` FLOPs/byte, or
    further where a point of the model's longest prompt would sit near its edge. Returns the Axes.
    """
    from ..models import resolve

    cfg = resolve(model)
    batch = validate.integer("batch", batch)
    prompt = validate.integer("prompt", prompt, maximum=cfg.max_context - 1)
    phases = {
        "prefill": op_costs(cfg, batch, prompt, 0, weight_dtype=dtype),
        "decode": op_costs(cfg, batch, 1, prompt, weight_dtype=dtype),
    }
    legend = validate.boolean("legend", legend)
    # the x axis ends at least a factor of 1.5 past the highest point the model can have (the
    # prefill attention of its longest prompt, which grows with the prompt), so that no
    # marker is cut by the plot's edge and the axis stays put as the prompt changes
    longest = op_costs(cfg, batch, cfg.max_context - 1, 0, weight_dtype=dtype)
    highest = max(i for costs in (*phases.values(), longest) for _, i in op_points(costs).values())
    imax = 2.0 ** max(15, math.ceil(math.log2(1.5 * highest)))
    ax = ops_on_roofline(phases, accelerator, dtype, ax=ax, legend=legend, imax=imax)
    linear = {p: total(c[op] for op in LINEAR_OPS if op in c).intensity for p, c in phases.items()}
    readout = (
        f"B = {batch}, L = {prompt:,}\n"
        f"linear layers, prefill: I = {linear['prefill']:,.0f}\n"
        f"linear layers, decode: I = {linear['decode']:,.1f}"
    )
    where = {"x": 0.02, "y": 0.97, "ha": "left", "va": "top"} if legend else {
        "x": 0.98, "y": 0.04, "ha": "right", "va": "bottom"}
    ax.text(s=readout, transform=ax.transAxes, fontsize=9, **where,
            bbox={"boxstyle": "round", "facecolor": "white", "alpha": 0.9})
    return ax


def _axis(name: str, values, what: str) -> np.ndarray:
    """The x values of a line chart: a 1-D array of at least two positive numbers."""
    try:
        x = np.atleast_1d(validate.reals(name, values, maximum=1e15))
    except ValueError:
        x = np.zeros(0)
    if x.ndim != 1 or x.size < 2 or not np.all(x > 0):
        raise ValueError(f"{name} must be a 1-D array of positive {what}, got {validate.shorten(values)}")
    return x


def intensity_vs_tokens(
    tokens, curves: Mapping[str, np.ndarray], *, ridge: float | None = None,
    ridge_label: str = "ridge", ax=None,
):
    """Intensity (FLOPs/byte) against the tokens of a pass, one line per entry of ``curves``.

    The first curve is drawn dashed and black (the simple model, ``I = B x L``); ``ridge``
    adds a horizontal line. Returns the Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter, LogLocator

    x = _axis("tokens", tokens, "counts")
    if not isinstance(curves, Mapping) or not curves:
        raise ValueError("curves must be a non-empty dict of label -> intensities")
    if validate.axes("ax", ax) is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    for i, (label, y) in enumerate(curves.items()):
        label = validate.text("curves label", label)
        y = np.atleast_1d(validate.reals(f"curve {label!r}", y, minimum=1e-300, maximum=1e300))
        if y.shape != x.shape:
            raise ValueError(f"curve {label!r} has shape {y.shape}, tokens have {x.shape}")
        style = {"color": "k", "linestyle": "--"} if i == 0 else {"color": f"C{i - 1}"}
        ax.plot(x, y, label=label, linewidth=1.6, **style)
    if ridge is not None:
        ridge = validate.real("ridge", ridge, minimum=0, open_min=True, maximum=1e300)
        ax.axhline(ridge, color="C3", linestyle=":", linewidth=1.2,
                   label=validate.text("ridge_label", ridge_label, empty=True))
    ax.set_xscale("log", base=2)
    ax.set_yscale("log", base=2)
    # a tick every 16x: every 8x, six ran together ("4,09632,768") at a slide's text size
    ax.xaxis.set_major_locator(LogLocator(base=16))
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    ax.set_xlabel("tokens in the pass, B x L")
    ax.set_ylabel("arithmetic intensity (FLOPs/byte)")
    ax.grid(True, which="major", alpha=0.3)
    # under the axes (a phone's width; a slide moves it beside them): inside, the key would
    # cover the curves where they cross the ridge
    ax.legend(fontsize=9, loc="upper center", bbox_to_anchor=(0.5, -0.14), ncol=2,
              frameon=False)
    return ax


def attainable_vs_batch(
    batches, schemes: Mapping[str, tuple[np.ndarray, float]], *, ax=None,
):
    """Attainable TFLOPS of decode's linear layers against batch size, one line per scheme.

    ``schemes`` maps a label to ``(tflops, critical_batch)``: the attainable TFLOPS at each
    of ``batches`` and the batch where the line meets its roof, marked with a dot and its
    value (a real number, to one decimal where it has one). A line that runs on top of a later one for part
    of its length (two schemes with the same bytes per weight share the slope) is drawn
    wide and pale under it, so that both show. Returns the Axes.
    """
    import matplotlib.pyplot as plt
    from matplotlib.ticker import FuncFormatter

    x = _axis("batches", batches, "sizes")
    if not isinstance(schemes, Mapping) or not schemes:
        raise ValueError("schemes must be a non-empty dict of label -> (tflops, critical batch)")
    if validate.axes("ax", ax) is None:
        _, ax = plt.subplots(figsize=(7, 4.5))
    lines = []
    for label, scheme in schemes.items():
        label = validate.text("schemes label", label)
        if not isinstance(scheme, tuple | list) or len(scheme) != 2:
            raise ValueError(f"scheme {label!r} must be (tflops, critical batch), got "
                             f"{validate.shorten(scheme)}")
        tflops, knee = scheme
        y = np.atleast_1d(validate.reals(f"scheme {label!r} tflops", tflops, minimum=1e-300,
                                         maximum=1e300))
        if y.shape != x.shape:
            raise ValueError(f"scheme {label!r} has shape {y.shape}, batches have {x.shape}")
        knee = validate.real(f"critical batch of {label!r}", knee, minimum=0.0, open_min=True)
        lines.append((label, y, knee))
    for i, (label, y, knee) in enumerate(lines):
        color, style = f"C{i}", ("-", "--", "-.", ":")[i % 4]
        under = any(np.sum(np.isclose(y, later, rtol=1e-9)) >= 2 for _, later, _ in lines[i + 1:])
        width = {"linewidth": 5, "alpha": 0.45, "zorder": 2} if under else {"linewidth": 2,
                                                                          "zorder": 3}
        ax.plot(x, y, style, color=color, label=f"{label}: B* = {round(knee, 1):g}", **width)
        roof = float(np.max(y))
        ax.scatter([knee], [roof], color=color, edgecolor="k", zorder=4, s=36)
    ax.set_xscale("log", base=2)
    ax.set_yscale("log")
    for axis in (ax.xaxis, ax.yaxis):
        axis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    ax.set_xlabel("batch size B (sequences decoded together)")
    ax.set_ylabel("attainable, linear layers (TFLOPS)")
    ax.grid(True, which="major", alpha=0.3)
    ax.legend(fontsize=9, loc="lower right")
    return ax


def _compact(value: float) -> str:
    """A tick label: 0.125 -> '1/8', 8 -> '8', 4096 -> '4K', 2**20 -> '1M'."""
    if value < 1:
        return f"1/{round(1 / value)}"
    for size, suffix in ((2**20, "M"), (2**10, "K")):
        if value >= size:
            return f"{value / size:g}{suffix}"
    return f"{value:g}"


def _bound_1() -> float:
    from ..counts import op_costs
    from ..models import get_model

    return op_costs(get_model("llama-3-8b"), 1, 512, 0, weight_dtype="bf16")["down_proj"].intensity


def _bound_2() -> float:
    from ..hardware import get_accelerator

    # square d x d projections, 2-byte activations and outputs, weights of any size b_w:
    # I -> 2 k n / (2 (k + n)) = d / 2 as tokens grow (the weights, read once, drop out);
    # a width is whole: the smallest d with d / 2 >= ridge
    return math.ceil(2 * get_accelerator("B200").ridge("bf16"))


def _bound_3() -> float:
    from ..dtypes import bytes_per_element
    from ..hardware import get_accelerator

    # weight-only int4: BF16 math; I = 2 B / (bytes per weight); B* where I meets the ridge
    per_weight = float(bytes_per_element("int4", 32, "fp16"))
    return get_accelerator("H200 SXM").ridge("bf16") * per_weight / 2


def _bound_4() -> float:
    from ..counts import op_costs, total
    from ..models import get_model

    return total(op_costs(get_model("llama-3-70b"), 64, 1, 4095, weight_dtype="bf16")).intensity


register(
    "bound-1", _bound_1, unit="FLOPs/byte",
    hint="2mkn FLOPs over the bytes of the weight matrix, the input and the output, with m the "
    "tokens of the pass; k and n are the matrix's two sizes.",
)


def _b200_ridge() -> float:
    from ..hardware import get_accelerator

    return get_accelerator("B200").ridge("bf16")


register(
    "bound-2", _bound_2, unit="(hidden size)",
    hint="let m grow without bound in 2mkn / (2mk + b_w kn + 2mn) with k = n = d, set the "
    "limit equal to the ridge, and round up to a whole width.",
    mistakes=(
        (lambda: math.ceil(_b200_ridge()), "the ceiling of a square d x d projection is d / 2, "
                                           "not d."),
    ),
)


register(
    "bound-3", _bound_3, unit="sequences",
    hint="weight-only int4 keeps BF16 math (the H200's BF16 ridge); count half a byte per weight "
    "plus one 2-byte scale per group of 32.",
)


register_hint(
    "bound-weight-format",
    "start with one table: for each format write its bytes per weight (the INT4 group scales "
    "included) and the precision its math runs in. Those two give its critical batch; the "
    "bytes of the weights plus the KV cache of a batch at 4,096 tokens give the fewest GPUs; "
    "and each operation's FLOPs over its math's peak or its bytes over the bandwidth, "
    "whichever is longer, summed over one decode step, give its TPOT.",
)


register(
    "bound-4", _bound_4, unit="FLOPs/byte",
    hint="add up the FLOPs and the bytes of every operation of the step: the 64 sequences' KV "
    "caches are read as well as the weights.",
)
