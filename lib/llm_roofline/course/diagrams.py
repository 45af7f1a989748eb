"""Drawn concept diagrams: pictures of the mechanisms the book is about, not data plots.

One function per diagram; each returns its Matplotlib figure, drawn on a canvas whose units
are inches, so a box of width 1 is one inch wide on the page. A diagram that carries numbers
takes them from the library (an accelerator's bandwidth and peak, a model's shapes), never
from literals here.

The shared primitives give every diagram one look:

- :func:`canvas`: a blank figure in inch units, no axes, white;
- :func:`box`: a rounded box with a centred label, coloured by what it is (:data:`KINDS`);
- :func:`arrow`: a straight arrow with an optional label beside its middle;
- :func:`note`: plain text, for a line of arithmetic or a caption inside the picture.

Sizes: a diagram is at most :data:`~llm_roofline.course.plots.WIDTH` (7.2 in) wide and its
smallest text is :data:`SMALL` (10 pt). On a phone the page shrinks a 7.2-in figure to its
368-px column, about half, so 10-pt text shows at about 7 CSS px (``tests/run_notebook.py``
measures it); at 1280 px, in the PDF and on a projector it is larger. Colours follow the
book's phases: memory and its traffic blue (decode's colour), arithmetic orange (prefill's).
"""

from __future__ import annotations

from ..validate import choice, integer, real
from .plots import PHASE_COLORS, WIDTH

__all__ = ["FONT", "INK", "KINDS", "SMALL", "arrow", "box", "canvas", "continuous_batching",
           "gemm_vs_gemv", "kv_cache_growth", "memory_hierarchy", "note", "shared_weight_read",
           "transformer_layer"]

FONT = 11
"""Labels in boxes, points."""

SMALL = 10
"""The smallest text of any diagram, points: about 7 CSS px on a phone at full width."""

INK = "#222222"
"""Text and outlines."""

KINDS = {
    "memory": ("#dbe9f6", PHASE_COLORS["decode"]),   # fill, edge: where bytes live and move
    "compute": ("#fde3cf", PHASE_COLORS["prefill"]),  # where FLOPs are done
    "data": ("#eeeeee", "#7f7f7f"),                   # activations, tokens, vectors
    "plain": ("#ffffff", INK),
}
"""What a box holds -> its (fill, edge) colours."""


def canvas(width: float = WIDTH, height: float = 3.0):
    """A blank figure ``width`` x ``height`` inches whose data units are inches: ``(fig, ax)``."""
    import matplotlib.pyplot as plt

    width = real("width", width, minimum=1.0, maximum=WIDTH)
    height = real("height", height, minimum=0.5, maximum=10.0)
    fig = plt.figure(figsize=(width, height))
    ax = fig.add_axes((0, 0, 1, 1))
    ax.set_xlim(0, width)
    ax.set_ylim(0, height)
    ax.set_aspect("equal")
    ax.axis("off")
    return fig, ax


def box(ax, x: float, y: float, w: float, h: float, label: str = "", *, kind: str = "plain",
        fontsize: float = FONT, weight: str = "normal", linewidth: float = 1.2):
    """A rounded box with its lower-left corner at ``(x, y)``, ``w`` x ``h`` inches, and
    ``label`` centred in it (lines split at ``\\n``). ``kind`` picks its colours
    (:data:`KINDS`). Returns the patch."""
    from matplotlib.patches import FancyBboxPatch

    kind = choice("kind", kind, KINDS)
    fontsize = real("fontsize", fontsize, minimum=SMALL)
    fill, edge = KINDS[kind]
    pad = min(0.06, w / 4, h / 4)
    patch = FancyBboxPatch((x + pad, y + pad), w - 2 * pad, h - 2 * pad,
                           boxstyle=f"round,pad={pad}", facecolor=fill, edgecolor=edge,
                           linewidth=linewidth)
    ax.add_patch(patch)
    if label:
        ax.text(x + w / 2, y + h / 2, label, ha="center", va="center", fontsize=fontsize,
                color=INK, weight=weight, linespacing=1.25)
    return patch


def arrow(ax, start: tuple[float, float], end: tuple[float, float], label: str = "", *,
          kind: str = "plain", width: float = 1.5, fontsize: float = SMALL, offset: float = 0.12,
          ha: str = "center"):
    """An arrow from ``start`` to ``end`` (inches), ``width`` points thick, coloured by
    ``kind`` (its edge colour, :data:`KINDS`), with ``label`` ``offset`` inches above its
    middle (below when ``offset`` is negative)."""
    kind = choice("kind", kind, KINDS)
    fontsize = real("fontsize", fontsize, minimum=SMALL)
    color = KINDS[kind][1] if kind != "plain" else INK
    ax.annotate("", xy=end, xytext=start,
                arrowprops={"arrowstyle": f"-|>,head_width={0.15 + width / 40:.2f},"
                            f"head_length={0.3 + width / 30:.2f}",
                            "color": color, "linewidth": width, "shrinkA": 0, "shrinkB": 0})
    if label:
        mx, my = (start[0] + end[0]) / 2, (start[1] + end[1]) / 2
        ax.text(mx, my + offset, label, ha=ha, va="bottom" if offset >= 0 else "top",
                fontsize=fontsize, color=color if kind != "plain" else INK, linespacing=1.2)


def note(ax, x: float, y: float, words: str, *, fontsize: float = SMALL, ha: str = "left",
         va: str = "center", color: str = INK, style: str = "normal"):
    """Plain text at ``(x, y)`` inches: a line of arithmetic, a label outside any box."""
    fontsize = real("fontsize", fontsize, minimum=SMALL)
    if not isinstance(words, str) or not words.strip():
        raise ValueError(f"words must be a non-empty string, got {words!r}")
    return ax.text(x, y, words, ha=ha, va=va, fontsize=fontsize,
                   color=color, style=style, linespacing=1.25)


def _accelerator(accelerator):
    from ..hardware import Accelerator, get_accelerator

    return accelerator if isinstance(accelerator, Accelerator) else get_accelerator(accelerator)


def memory_hierarchy(accelerator="H100 SXM", dtype: str = "bf16"):
    """Where a weight travels before a tensor core can use it: HBM, then on-chip SRAM, then
    the tensor cores, with the accelerator's capacity, memory bandwidth and dense peak.

    The arrow from HBM is the narrow one: the figure's bottom line divides the peak by the
    bandwidth, the FLOPs the tensor cores can do in the time one byte arrives.
    """
    chip = _accelerator(accelerator)
    peak = chip.peak(dtype)
    fig, ax = canvas(WIDTH, 3.1)
    # three stations, left to right
    box(ax, 0.1, 0.85, 2.0, 1.6, f"HBM\n{chip.memory_type}, "
        f"{chip.memory_bytes / 2**30:,.0f} GiB\nholds every weight\nand the KV cache",
        kind="memory")
    box(ax, 2.75, 0.85, 1.7, 1.6, "SRAM on the chip\nL2, shared memory,\nregisters:\ntens of MB",
        kind="memory", linewidth=0.8)
    box(ax, 5.1, 0.85, 2.0, 1.6, f"tensor cores\n{peak / 1e12:,.0f} TFLOP/s\n"
        f"({dtype.upper()}, dense)", kind="compute", weight="bold")
    arrow(ax, (2.1, 1.65), (2.75, 1.65), f"{chip.bandwidth / 1e9:,.0f}\nGB/s", kind="memory",
          width=1.5, offset=0.12)
    arrow(ax, (4.45, 1.65), (5.1, 1.65), "much\nfaster", kind="memory", width=5.0, offset=0.2)
    note(ax, 3.6, 2.8, chip.name, fontsize=FONT, ha="center")
    note(ax, 3.6, 0.4, f"In the time HBM delivers one byte, the tensor cores can do "
         f"{peak / 1e12:,.0f} T ÷ {chip.bandwidth / 1e12:,.2f} T ≈ "
         f"{peak / chip.bandwidth:,.0f} FLOPs.", ha="center")
    return fig


def transformer_layer(model="llama-3-8b", dtype: str = "bf16", batch: int = 1):
    """One decoder layer, top to bottom: the activations that come in, attention's three
    projections beside the KV cache they feed, attention itself and its output projection,
    then the MLP's three matrices. Each weight matrix shows its shape and its bytes, and its
    box grows with its bytes, so the MLP looks as large beside attention as it is.
    """
    from ..dtypes import bytes_per_element
    from ..models import resolve

    cfg = resolve(model, "model")
    batch = integer("batch", batch, minimum=1)
    b = float(bytes_per_element(dtype))
    d, f = cfg.hidden_size, cfg.intermediate_size
    kv = cfg.n_kv_heads * cfg.head_dim
    q = cfg.n_heads * cfg.head_dim
    mats = [("W_Q", d, q), ("W_K", d, kv), ("W_V", d, kv), ("W_O", q, d),
            ("W_gate", d, f), ("W_up", d, f), ("W_down", f, d)]
    largest = max(r * c for _, r, c in mats)
    fig, ax = canvas(WIDTH, 5.0)

    def size(n):
        return f"{n * b / 1e6:,.0f} MB" if n * b >= 1e6 else f"{n * b / 1e3:,.0f} kB"

    def matrix(x, y, name, rows, cols):
        w = 1.1 + 1.1 * rows * cols / largest
        box(ax, x, y, w, 0.75, f"{name}\n{rows:,}×{cols:,}\n{size(rows * cols)}",
            kind="memory", fontsize=FONT)
        return x + w + 0.1

    h = 0.75
    rows = {"in": 4.15, "qkv": 3.1, "attn": 2.05, "mlp": 1.0}
    box(ax, 0.05, rows["in"], 2.4, h, f"x: {batch:,} × {d:,}\n{size(batch * d)}", kind="data",
        fontsize=FONT)
    note(ax, 2.6, rows["in"] + h / 2, fontsize=FONT, words="activations in: one row per token of the pass",
         style="italic")
    x = 0.05
    for name, r, c in mats[:3]:
        x = matrix(x, rows["qkv"], name, r, c)
    box(ax, x, rows["qkv"], WIDTH - 0.05 - x, h, f"KV cache: grows by\n{size(2 * kv)} a token",
        kind="memory", fontsize=FONT)
    box(ax, 0.05, rows["attn"], 3.6, h, f"attention over the cached tokens\n"
        f"{cfg.n_heads} query heads, {cfg.n_kv_heads} KV heads", kind="compute", fontsize=FONT)
    matrix(3.75, rows["attn"], *mats[3])
    x = 0.05
    for name, r, c in mats[4:]:
        x = matrix(x, rows["mlp"], name, r, c)
    for top, bottom in (("in", "qkv"), ("qkv", "attn"), ("attn", "mlp")):
        arrow(ax, (0.3, rows[top]), (0.3, rows[bottom] + h), width=1.2)
    total = sum(r * c for _, r, c in mats)
    every = cfg.n_layers * total * b
    everything = f"{every / 1e9:,.1f} GB" if every >= 1e9 else size(cfg.n_layers * total)
    note(ax, 0.05, 0.55, fontsize=FONT, words=f"Weights of one layer: {size(total)} in {dtype.upper()}. "
         f"All {cfg.n_layers} layers: {everything}.")
    note(ax, 0.05, 0.2, fontsize=FONT, words=f"Between them flow {size(batch * d)} to {size(batch * f)} of "
         f"activations for {batch:,} token{'s' if batch > 1 else ''}.")
    return fig


def gemm_vs_gemv(rows: int = 4096, cols: int = 4096, batch: int = 8, dtype: str = "bf16"):
    """A weight matrix times a batch of vectors (GEMM) beside the same matrix times one vector
    (GEMV): the same weight bytes read, ``batch`` times the FLOPs."""
    from ..dtypes import bytes_per_element

    rows = integer("rows", rows, minimum=1)
    cols = integer("cols", cols, minimum=1)
    batch = integer("batch", batch, minimum=2, maximum=16)
    b = float(bytes_per_element(dtype))
    fig, ax = canvas(WIDTH, 3.3)
    weight_mb = rows * cols * b / 1e6

    def product(x0, n, title):
        box(ax, x0, 1.0, 1.35, 1.5, f"W\n{rows:,}×{cols:,}\n{weight_mb:,.3g} MB",
            kind="memory")
        note(ax, x0 + 1.47, 1.75, "×", fontsize=14, ha="center")
        wx = 0.09 * n + 0.12
        box(ax, x0 + 1.6, 1.0, wx, 1.5, "", kind="data")
        note(ax, x0 + 1.6 + wx / 2, 0.8, f"{n} token{'s' if n > 1 else ''}", ha="center",
             fontsize=FONT)
        note(ax, x0 + 1.75 + wx, 1.75, "=", fontsize=14, ha="center")
        box(ax, x0 + 1.9 + wx, 1.0, wx, 1.5, "", kind="data")
        mid = x0 + (1.9 + 2 * wx) / 2
        note(ax, mid, 2.85, title, fontsize=FONT, ha="center")
        flops = 2 * rows * cols * n
        note(ax, mid, 0.35, f"{flops / 1e6:,.3g} MFLOP from {weight_mb:,.3g} MB:\n"
             f"{flops / (rows * cols * b):g} FLOP per byte of weights", ha="center",
             fontsize=FONT)

    product(0.05, batch, f"GEMM: a batch of {batch} tokens")
    product(4.2, 1, "GEMV: one token")
    return fig


# Chapters 4-6


def _model(model):
    from ..models import resolve

    return resolve(model, "model")


def shared_weight_read(model="llama-3-70b", batch: int = 4, dtype: str = "bf16"):
    """One decode step of ``batch`` sequences: the weights come out of HBM once and serve every
    sequence's token, while each sequence reads its own KV cache.

    The bottom line is the linear layers' intensity by hand: ``2 N B`` FLOPs over ``b_w N``
    bytes, with the model's parameter count ``N`` and the weights' bytes from the library.
    """
    from ..dtypes import bytes_per_element

    cfg = _model(model)
    batch = integer("batch", batch, minimum=2, maximum=6)
    b = float(bytes_per_element(dtype))
    weights_gb = cfg.n_params * b / 1e9
    fig, ax = canvas(WIDTH, 3.9)
    # "billion" in words: B is the batch on this figure
    box(ax, 0.05, 1.55, 1.9, 1.3, f"HBM: weights\nN = {cfg.n_params / 1e9:,.2f} billion\n"
        f"{weights_gb:,.0f} GB in {dtype.upper()}", kind="memory")
    arrow(ax, (1.95, 2.2), (2.85, 2.2), "read once\nper step", kind="memory", width=4.0,
          offset=0.1)
    box(ax, 2.85, 1.55, 1.55, 1.3, "tensor cores\nW × every\ntoken", kind="compute",
        weight="bold")
    note(ax, 3.62, 3.15, f"{cfg.name}, one decode step", fontsize=FONT, ha="center")
    # one row per sequence: its token, its own KV cache
    top, gap = 3.2, 2.6 / batch
    h = min(0.5, gap - 0.08)
    for i in range(batch):
        y = top - (i + 1) * gap
        arrow(ax, (4.4, 2.2), (4.95, y + h / 2), width=1.0)
        box(ax, 4.95, y, 1.0, h, f"token {i + 1}", kind="data", fontsize=SMALL)
        box(ax, 6.0, y, 1.15, h, "own KV", kind="memory", fontsize=SMALL, linewidth=0.8)
    note(ax, 5.45, top + 0.05, "B sequences", ha="center", style="italic")
    note(ax, 6.57, top + 0.05, "not shared", ha="center", style="italic")
    # N to two decimals, so that the product checks by hand: 2 x 70.55 x 4 = 564.4
    note(ax, 0.05, 0.85, f"Linear FLOPs: 2 × N × B = 2 × {cfg.n_params / 1e9:,.2f} "
         f"billion × {batch} = {2 * cfg.n_params * batch / 1e9:,.0f} GFLOP")
    note(ax, 0.05, 0.5, f"Bytes of weights: {b:g} × N = {weights_gb:,.0f} GB, whatever B is")
    note(ax, 0.05, 0.15, f"Intensity: 2NB / ({b:g}N) = {2 * batch / b:g} FLOP per byte"
         + (" = B" if b == 2 else ""))
    return fig


def kv_cache_growth(model="llama-3-8b", prompt: int = 3, steps: int = 4,
                    kv_dtype: str = "bf16"):
    """The KV cache of one sequence, a row per step: the prefill writes the prompt's keys and
    values, then each decode step reads every cached token and writes one more.

    Each row ends with that step's cache read in bytes, from the model's bytes per token.
    """
    cfg = _model(model)
    prompt = integer("prompt", prompt, minimum=1, maximum=4)
    steps = integer("steps", steps, minimum=2, maximum=5)
    per_token = cfg.kv_cache_bytes_per_token(kv_dtype)
    fig, ax = canvas(WIDTH, 0.95 + 0.55 * (steps + 1))
    cell, h = 0.42, 0.4
    x0 = 1.35
    y = 0.55 * steps + 0.45
    note(ax, 0.05, y + 0.5, f"{cfg.name}: {per_token / 1e3:,.0f} kB of keys and values per "
         f"token ({kv_dtype.upper()}, all {cfg.n_layers} layers)", fontsize=FONT)
    for row in range(steps + 1):
        cached = 0 if row == 0 else prompt + row - 1
        new = prompt if row == 0 else 1
        note(ax, 0.05, y + h / 2, "prefill" if row == 0 else f"step {row}")
        for j in range(cached):
            box(ax, x0 + j * cell, y, cell, h, kind="memory", linewidth=0.8)
        for j in range(cached, cached + new):
            box(ax, x0 + j * cell, y, cell, h, kind="compute", linewidth=0.8)
        end = x0 + (prompt + steps) * cell + 0.15
        read = f"reads {cached} × {per_token / 1e3:,.0f} kB = {cached * per_token / 1e6:,.2f} MB" \
            if cached else "reads nothing from the cache"
        note(ax, end, y + h / 2, read + f", writes {new}")
        y -= 0.55
    box(ax, 0.05, 0.05, 0.3, 0.3, kind="memory", linewidth=0.8)
    note(ax, 0.42, 0.2, "cached: read by the step")
    box(ax, 2.75, 0.05, 0.3, 0.3, kind="compute", linewidth=0.8)
    note(ax, 3.12, 0.2, "new: computed and written")
    return fig


def continuous_batching(model="llama-3-8b", accelerator="H100 SXM", batch: int = 32,
                        context: int = 2048, prompt: int = 2048):
    """A continuous-batching timeline: four of a server's sequences, a row each, through its
    steps. One finishes and leaves; a newcomer joins at the next step boundary and its whole
    prompt rides one longer step, which every running sequence waits for too.

    The steps' widths are the library's times for ``batch`` sequences at ``context`` and for
    the step that also carries the ``prompt``.
    """
    from .. import serving
    from ..calculator import decode_step

    cfg = _model(model)
    chip = _accelerator(accelerator)
    batch = integer("batch", batch, minimum=2)
    step_s = decode_step(cfg, chip, batch, context).time_s
    mixed_s = serving.mixed_step(cfg, chip, batch, context, prompt).time_s
    fig, ax = canvas(WIDTH, 3.2)
    x0, unit = 1.35, 0.5  # a decode step is half an inch wide
    wide = min(unit * mixed_s / step_s, 2.4)
    widths = [unit, unit, wide, unit, unit, unit]
    edges = [x0]
    for w in widths:
        edges.append(edges[-1] + w)
    rows = {"seq A": (0, 2), "seq B": (0, 6), "seq C": (0, 6), "newcomer": (2, 6)}
    y = 2.35
    for name, (first, last) in rows.items():
        note(ax, 0.05, y + 0.2, name)
        for k in range(first, last):
            kind = "compute" if (k == 2 and name == "newcomer") else "memory"
            label = "prefill: first token" if kind == "compute" else (
                "late token" if k == 2 else "")
            box(ax, edges[k], y, widths[k], 0.4, label, kind=kind, fontsize=SMALL, linewidth=0.8)
        y -= 0.5
    note(ax, edges[2] + 0.05, 2.95, "A leaves; the newcomer joins", fontsize=SMALL)
    arrow(ax, (edges[-1] + 0.1, 2.55), (WIDTH - 0.1, 2.55), "time", width=1.0)
    arrow(ax, (edges[2], 2.85), (edges[2], 0.85), width=0.8)
    note(ax, 0.05, 0.5, f"{cfg.name} on one {chip.name}, {batch} sequences at {context:,} tokens: "
         f"a decode step takes {step_s * 1e3:,.1f} ms;")
    note(ax, 0.05, 0.17, f"the step that carries a {prompt:,}-token prompt takes "
         f"{mixed_s * 1e3:,.1f} ms, and every sequence waits for it.")
    return fig
