"""Chapter 7, the calculator (``notebooks/07_calculator``): its figures and its answer checks.

No arithmetic here: every number comes from the library (``calculator``, ``vram``,
``critical``, ``counts``). The notebook calls these functions, so its page shows the idea
(which model, which precision, which range) and not forty lines of plotting.

- :func:`memory_bars`, :func:`latency_curves`, :func:`critical_curves`, :func:`experts_read`,
  :func:`dashboard`: the chapter's figures; :func:`model_table`, :func:`latency_table`,
  :func:`resources_table`, :func:`forecast_table`: its tables;
- the answer checks ``calculator-1`` ... ``calculator-5``, and the design problem's hint
  ``calculator-latency``.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from ..calculator import estimate
from ..counts import op_elements
from ..critical import critical_batch, max_compute_context
from ..hardware import get_accelerator
from ..models import get_model
from ..validate import axes, choice, integer, real, shorten
from ..vram import gpus_needed, max_batch, memory
from .ch05 import PARTS
from .plots import PAGE, WIDTH, GiB
from .registry import register, register_hint

__all__ = [
    "COLOURS", "LAYOUTS", "PRECISIONS", "SCALES", "critical_curves", "dashboard", "experts_read",
    "forecast_table", "latency_curves", "latency_table", "memory_bars", "model_table",
    "resources_table", "show_dashboard",
]


#: the article's three scales
SCALES = {"7B": "llama-2-7b", "70B": "llama-3-70b", "671B": "deepseek-v3"}

#: precision -> (weights, KV cache); INT4 is weight-only (GPTQ/AWQ style): its cache stays 16-bit
PRECISIONS = {"BF16": ("bf16", "bf16"), "FP8": ("fp8", "fp8"), "INT4": ("int4", "bf16")}

COLOURS = {"BF16": "tab:blue", "FP8": "tab:orange", "INT4": "tab:green"}

_MOE_COLOURS = ("tab:purple", "tab:red", "tab:brown", "tab:olive")


def _precision(precision: str) -> tuple[str, str]:
    return PRECISIONS[choice("precision", precision, PRECISIONS)]


def memory_bars(batch: int = 16, prompt: int = 2048, output: int = 1024, gpu="H100 SXM"):
    """Weights, KV cache and activations of the three scales at the three precisions.

    One panel per scale, one stacked bar per precision, all on one memory scale so that the
    panels compare; how many GPUs hold each bar is written under it, with its precision,
    where no bar or line can cover it. The dashed line is one GPU's usable memory, named in
    the legend. Returns the figure.
    """
    import matplotlib.pyplot as plt

    chip = get_accelerator(gpu)
    with plt.rc_context(PAGE):
        # constrained: the key below the axes keeps its room at any text size (a slide's too)
        fig, axes = plt.subplots(1, 3, figsize=(WIDTH, 4.1), sharey=True, layout="constrained")
        top = 0.0
        for ax, (scale, name) in zip(axes, SCALES.items(), strict=True):
            parts = {part: [] for part in list(PARTS)[:3]}
            counts = []
            for weights, kv in PRECISIONS.values():
                options = dict(weight_dtype=weights, kv_dtype=kv)
                m = memory(name, chip, batch, prompt, output, **options)
                parts["weights"].append(m.weights / GiB)
                parts["KV cache"].append(m.kv_cache / GiB)
                parts["activations"].append(m.activations / GiB)
                counts.append(gpus_needed(name, chip, batch, prompt, output, **options))
            bottoms = np.zeros(len(PRECISIONS))
            for part, heights in parts.items():
                ax.bar(list(PRECISIONS), heights, bottom=bottoms, color=PARTS[part], label=part)
                bottoms += heights
            usable = memory(name, chip, 1, 1, 1).usable / GiB
            ax.axhline(usable, color="k", lw=1, ls="--",
                       label=f"usable memory of one {chip.name}")
            ax.set_xticks(range(len(PRECISIONS)),
                          labels=[f"{p}\n{n} GPU{'s' if n > 1 else ''}"
                                  for p, n in zip(PRECISIONS, counts, strict=True)])
            ax.set_title(f"{scale}: {name}")
            ax.set_xlabel("precision, GPUs needed")
            ax.grid(True, axis="y", alpha=0.3)
            top = max(top, bottoms.max(), usable)
        axes[0].set_ylim(0, top * 1.05)
        axes[0].set_ylabel("GiB ($2^{30}$ bytes)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="outside lower center", ncol=4, frameon=False)
        fig.suptitle(f"Memory for {batch} requests of {prompt} + {output} tokens "
                     "(one scale for all three)")
    return fig


def latency_curves(model="llama-3-70b", gpu="H100 SXM", n_gpus: int = 4, prompt: int = 1024,
                   output: int = 256):
    """TPOT per user and TPOT / batch (left) and throughput (right) against the batch.

    One colour per precision, from batch 1 to the largest batch that fits (where a curve
    ends); a dashed vertical marks where decode turns compute-bound. Returns the figure.
    """
    import matplotlib.pyplot as plt

    chip = get_accelerator(gpu)
    name = get_model(model).name
    with plt.rc_context(PAGE):
        # constrained: the panels keep their room at any text size (a slide's too)
        fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 3.9), layout="constrained")
        for precision, (weights, kv) in PRECISIONS.items():
            options = dict(weight_dtype=weights, kv_dtype=kv, n_gpus=n_gpus)
            most = max_batch(model, chip, prompt, output, **options)
            batch = np.unique(np.geomspace(1, most, 60).astype(int))
            e = estimate(model, chip, batch, prompt, output, **options)
            c = COLOURS[precision]
            left.plot(batch, 1e3 * e.tpot_s, color=c)
            left.plot(batch, 1e3 * e.time_per_token_s, color=c, ls=":", lw=1.2)
            right.plot(batch, e.throughput_tok_s, color=c, label=f"{precision} (max {most})")
            compute = batch[e.bound == "compute"]
            if compute.size:
                right.axvline(compute[0], color=c, lw=0.8, ls="--")
        left.set(xscale="log", yscale="log", xlabel="batch (concurrent users)",
                 ylabel="ms per token", title="Time per token")
        right.set(xscale="log", yscale="log", xlabel="batch (concurrent users)",
                  ylabel="tokens/s, all users", title="Throughput (dashed: compute-bound)")
        # the colours are keyed once, on the right; the left key says what its two styles are
        styles = [plt.Line2D([], [], color="0.3", label="TPOT, each user"),
                  plt.Line2D([], [], color="0.3", ls=":", lw=1.2, label="TPOT / batch")]
        for ax, handles in ((left, styles), (right, None)):
            ax.legend(handles=handles, loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2,
                      frameon=False, columnspacing=0.8, handlelength=1.5)
            ax.grid(True, which="major", alpha=0.3)
        fig.suptitle(f"{name} on {n_gpus} x {chip.name}, prompt {prompt}, output {output}")
    return fig


#: each scale on a layout that holds it (FP8 for DeepSeek-V3, its native format): accelerator, GPUs
LAYOUTS = {"7B": ("H100 SXM", 1), "70B": ("H100 SXM", 4), "671B": ("H200", 8)}


def critical_curves(layouts: dict | None = None, max_context: int | None = None):
    """Where a decode step can be mostly compute-bound: batch against context, per scale.

    Each scale runs on its own layout (``layouts``: scale -> (accelerator, GPUs of tensor
    parallelism), :data:`LAYOUTS` by default), one that holds the model. For each precision, a
    horizontal line at the batch where the weight matmuls reach the roof (``critical_batch``,
    the same at every context), ending at the longest context at which a large batch still
    makes the step mostly compute-bound (``max_compute_context``); to the right of the end, the
    memory-bound attention over the cache takes most of every step. Each panel runs to its
    model's longest context, or to ``max_context`` if that is shorter. A line that would
    coincide with an earlier one is drawn 6 % above it, so that both show. Returns the figure.
    """
    import matplotlib.pyplot as plt

    layouts = LAYOUTS if layouts is None else layouts
    if not isinstance(layouts, dict) or set(layouts) != set(SCALES):
        raise ValueError(f"layouts must map each of {sorted(SCALES)} to (accelerator, GPUs), got "
                         f"{shorten(layouts)}")
    if max_context is not None:
        max_context = integer("max_context", max_context, minimum=2)
    with plt.rc_context(PAGE):
        fig, axes = plt.subplots(1, 3, figsize=(WIDTH, 3.6), sharey=True)
        for ax, (scale, name) in zip(axes, SCALES.items(), strict=True):
            gpu, n = layouts[scale]
            chip = get_accelerator(gpu)
            n = integer("GPUs", n, minimum=1)
            cfg = get_model(name)
            top = cfg.max_context if max_context is None else min(cfg.max_context, max_context)
            drawn: list[int] = []
            for precision, (weights, kv) in PRECISIONS.items():
                batch = critical_batch(cfg, chip, weight_dtype=weights, n_gpus=n)
                end = min(max_compute_context(cfg, chip, weight_dtype=weights, kv_dtype=kv,
                                              n_gpus=n), top)
                lift = 1.06 ** drawn.count(batch)  # lines that coincide stay visible
                drawn.append(batch)
                ax.plot([1, end], [batch * lift] * 2, "-", lw=2, color=COLOURS[precision],
                        label=precision)
                ax.plot([end], [batch * lift], "x", ms=8, mew=2, color=COLOURS[precision])
            ax.set(xscale="log", yscale="log", xlim=(1, top), xlabel="context (tokens)",
                   title=f"{name}\n{n} x {chip.name.removeprefix('NVIDIA ')}")
            steps = (1, 100, 10_000, 100_000) if top > 10_000 else (1, 10, 100, 1_000)
            ticks = [t for t in steps if t <= top]
            ax.set_xticks(ticks, labels=[f"{t // 1000}k" if t >= 1000 else str(t) for t in ticks])
            ax.grid(True, which="major", alpha=0.3)
        axes[0].set_ylabel("batch where the weight\nmatmuls reach the roof")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
        fig.suptitle("Decode: mostly compute-bound only left of the x")
        fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def experts_read(models: Sequence[str] = ("deepseek-v3", "mixtral-8x7b"), largest: int = 4096):
    """The fraction of a mixture of experts' weights one decode step reads, against the batch.

    Dotted: the active share of a single token. Returns the figure.
    """
    import matplotlib.pyplot as plt

    top = integer("largest", largest, minimum=2)
    if not isinstance(models, list | tuple) or not 1 <= len(models) <= len(_MOE_COLOURS):
        raise ValueError(f"models must be 1 to {len(_MOE_COLOURS)} model names, got "
                         f"{shorten(models)}")
    models = [get_model(name) for name in models]  # each name checked before any drawing
    batch = np.unique(np.geomspace(1, top, 80).astype(int))
    with plt.rc_context(PAGE):
        fig, ax = plt.subplots(figsize=(WIDTH, 3.8))
        for name, colour in zip(models, _MOE_COLOURS, strict=False):
            cfg, name = name, name.name
            step = op_elements(cfg, batch, 1, 0, absorbed=True)
            weights = sum(w for _, (_, w, _, _) in step.items())
            body = cfg.n_params - cfg.param_counts()["embedding"]
            label = f"{name} ({cfg.n_routed_experts} experts, top {cfg.n_experts_per_token})"
            ax.plot(batch, weights / body, color=colour, label=label)
            ax.axhline(cfg.n_active_params / cfg.n_params, color=colour, ls=":", lw=1.2)
        ax.set(xscale="log", ylim=(0, 1.05), xlabel="batch (tokens per decode step)",
               ylabel="fraction of weights read",
               title="Weights a decode step reads (dotted: one token's active share)")
        ax.grid(True, which="major", alpha=0.3)
        # right of the middle: empty there (the curves have reached 1), and clear of the dotted
        # active shares along the bottom
        ax.legend(loc="center right")
        fig.tight_layout()
    return fig


_COMPACT_WIDTH = 5.5  # inches: a dashboard on a narrower figure is drawn compact


def dashboard(model="llama-3-70b", precision: str = "FP8", batch: int = 32, prompt: int = 2048,
              n_gpus: int = 2, output: int = 256, gpu="H100 SXM", xmax: float | None = None,
              ax=None):
    """The calculator at a glance: memory per GPU as a stacked bar, and the latencies.

    The bar stacks weights, KV cache, activations and reserve against the GPU's capacity
    (the black line). Below it, if the batch fits: TTFT, TPOT, throughput and how busy the
    bandwidth is; if it does not fit, how much memory it would need instead (no latencies:
    a configuration that does not run has none). Draws on ``ax`` (a new figure if None) and
    returns the Axes. On a figure narrower than 5.5 inches (the PDF's frames of
    a scrubber) it is drawn compact: the legend in two rows above the bar, shorter lines.
    """
    import matplotlib.pyplot as plt

    weights, kv = _precision(precision)
    chip = get_accelerator(gpu)
    batch, prompt = integer("batch", batch), integer("prompt", prompt)  # one point, not a sweep
    output, n_gpus = integer("output", output), integer("n_gpus", n_gpus)
    e = estimate(model, chip, batch, prompt, output, weight_dtype=weights, kv_dtype=kv,
                 n_gpus=n_gpus)
    m = e.memory
    if axes("ax", ax) is None:
        with plt.rc_context(PAGE):
            _, ax = plt.subplots(figsize=(WIDTH, 2.9), layout="constrained")
    left = 0.0
    for part, value in (("weights", m.weights), ("KV cache", m.kv_cache),
                        ("activations", m.activations), ("reserve", m.reserve)):
        ax.barh(0, value / GiB, left=left, color=PARTS[part], label=part, height=0.5)
        left += value / GiB
    ax.axvline(m.capacity / GiB, color="k", lw=1.5)
    right = real("xmax", xmax, minimum=0, open_min=True) if xmax is not None else None
    ax.set_xlim(0, right or max(m.capacity, m.used + m.reserve) / GiB * 1.05)
    compact = ax.figure.get_size_inches()[0] < _COMPACT_WIDTH
    ax.set_ylim(-1.9, 1.5 if compact else 0.9)
    ax.set_yticks([])
    capacity = f"{m.capacity / GiB:.0f} GiB"
    ax.set_xlabel(f"GiB per GPU (black line: {capacity})" if compact else
                  f"GiB per GPU (black line: its capacity, {capacity})", fontsize=9)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9, ncol=2 if compact else 4, loc="upper left", frameon=False,
              borderaxespad=0.2, columnspacing=1.0, handlelength=1.5)
    setup = f"{get_model(model).name}, {precision}, {n_gpus} x {chip.name}, batch {batch}"
    if compact and e.fits:
        lines = (f"fits: TTFT {1e3 * e.ttft_s:,.0f} ms, TPOT {1e3 * e.tpot_s:.1f} ms",
                 f"{e.throughput_tok_s:,.0f} tokens/s, bandwidth "
                 f"{e.bandwidth_utilisation:.0%} busy")
        colour = "k"
    elif compact:
        lines = (f"DOES NOT FIT: needs {(m.used + m.reserve) / GiB:,.1f} of {capacity}",
                 "(no latency: it cannot run)")
        colour = "tab:red"
    elif e.fits:
        lines = (
            f"{setup}: fits",
            f"TTFT {1e3 * e.ttft_s:,.0f} ms ({e.prefill_bound}-bound); "
            f"TPOT {1e3 * e.tpot_s:.1f} ms per user ({e.bound}-bound)",
            f"throughput {e.throughput_tok_s:,.0f} tokens/s; "
            f"bandwidth busy {e.bandwidth_utilisation:.0%}",
        )
        colour = "k"
    else:
        lines = (
            f"{setup}: DOES NOT FIT",
            f"needs {(m.used + m.reserve) / GiB:,.1f} GiB per GPU of {m.capacity / GiB:.0f} GiB",
            "(no latency or throughput: it cannot run)",
        )
        colour = "tab:red"
    ax.text(0.01, 0.04, "\n".join(lines), transform=ax.transAxes, fontsize=9, va="bottom",
            color=colour, linespacing=1.3)
    return ax


def show_dashboard(model="llama-3-70b", precision: str = "FP8", n_gpus: int = 2,
                   batch: int = 32, prompt: int = 2048, gpu="H100 SXM"):
    """:func:`dashboard` in a figure of its own, shown; a configuration the calculator refuses
    (a prompt beyond the model's context) shows its reason instead. For ``live`` sliders."""
    import matplotlib.pyplot as plt

    with plt.rc_context(PAGE):
        fig, ax = plt.subplots(figsize=(7.2, 2.9), layout="constrained")
    try:
        dashboard(model, precision, batch, prompt, n_gpus, gpu=gpu, ax=ax)
    except ValueError as err:
        ax.clear()
        ax.set_axis_off()
        ax.text(0.5, 0.5, str(err), ha="center", va="center", wrap=True, transform=ax.transAxes)
    plt.show()


# the chapter's tables: the page shows the call, not the table building -----------------


def model_table():
    """Every built-in model: counted and published parameters, active ones, KV cache per token."""
    from ..models import list_models, model_info
    from .widgets import html_table

    rows = []
    for name in list_models():
        cfg, info = get_model(name), model_info(name)
        rows.append({
            "model": name,
            "counted (B)": cfg.n_params / 1e9,
            "published (B)": info["params"] / 1e9,
            "error": f"{cfg.n_params / info['params'] - 1:+.2%}",
            "active per token (B)": cfg.n_active_params / 1e9,
            "KV cache per token, BF16 (kB)": cfg.kv_cache_bytes_per_token("bf16") / 1e3,
        })
    return html_table(rows, floatfmt="{:,.2f}")


def latency_table(estimates):
    """Per-user TPOT, TPOT / batch, throughput and decode's bound, one row per ``Estimate``."""
    from .widgets import html_table

    rows = [{
        "batch": float(e.batch),
        "TPOT per user (ms)": 1e3 * e.tpot_s,
        "TPOT / batch (ms)": 1e3 * e.time_per_token_s,
        "throughput (tokens/s)": e.throughput_tok_s,
        "decode": e.decode_bound,
    } for e in estimates]
    return html_table(rows, floatfmt={
        "batch": "{:.0f}", "TPOT per user (ms)": "{:.2f}", "TPOT / batch (ms)": "{:.3f}",
        "throughput (tokens/s)": "{:,.0f}"})


def resources_table(step):
    """How long each resource is busy in one decode step, then its floor and kernel-by-kernel time."""
    from .widgets import html_table

    busy = step.resources()
    rows = [{"resource": k, "busy (ms)": 1e3 * busy[k]}
            for k in ("compute", "memory", "interconnect", "latency")]
    rows += [{"resource": "floor", "busy (ms)": 1e3 * step.floor_s},
             {"resource": "kernel by kernel", "busy (ms)": 1e3 * step.time_s}]
    return html_table(rows, floatfmt={"busy (ms)": "{:.2f}"})


def forecast_table(cases):
    """TTFT, TPOT and throughput, one row per ``(label, Estimate)``."""
    from .widgets import html_table

    rows = [{"": label, "TTFT (ms)": 1e3 * e.ttft_s, "TPOT (ms)": 1e3 * e.tpot_s,
             "tokens/s": e.throughput_tok_s} for label, e in cases]
    return html_table(rows, floatfmt="{:,.1f}")


# notebooks/07_calculator: the calculator ------------------------------------------


def _calculator_1() -> float:
    from ..models import get_model

    return 16 * 8192 * get_model("llama-3-70b").kv_cache_bytes_per_token("bf16") / 1e9


def _calculator_2() -> float:
    from ..vram import max_batch

    return max_batch("llama-3-8b", "H100 SXM", 2048, 512)


def _calculator_3() -> float:
    """The smallest batch whose decode step reads, on average, half of DeepSeek-V3's routed
    experts (uniform routing)."""
    from .. import formulas as F

    batch = 1
    while True:
        read = F.expected_experts_expr().subs({F.n_experts: 256, F.top_k: 8, F.B: batch,
                                               F.n_new: 1})
        if float(read) >= 128:
            return float(batch)
        batch += 1


def _calculator_4() -> float:
    from ..calculator import estimate

    e = estimate("llama-3-70b", "H100 SXM", 64, 1024, 256, weight_dtype="fp8", kv_dtype="fp8",
                 n_gpus=2)
    return 1e3 * e.tpot_s


def _calculator_5() -> float:
    from ..models import get_model

    cfg = get_model("deepseek-v3")
    per_head = cfg.n_heads * (cfg.head_dim + cfg.v_head_dim)
    return per_head / (cfg.kv_lora_rank + cfg.qk_rope_head_dim)


register(
    "calculator-1", _calculator_1, unit="GB",
    hint="2 (K and V) x layers x KV heads x head_dim x 2 bytes, per token; GB are 1e9 bytes.",
    mistakes=(
        (lambda: 8 * _calculator_1(), "that counts the 64 query heads: the cache holds the 8 KV heads."),
        (lambda: _calculator_1() / 2, "a token caches a key and a value: count both."),
        (lambda: _calculator_1() * 1e9 / 2**30, "that is in GiB (2**30 bytes): the question asks GB."),
    ),
)


register(
    "calculator-2", _calculator_2, unit="sequences", rtol=0.02,
    hint="usable memory is 90 % of 80 GiB (2**30 bytes each); subtract the weights, divide by one "
    "sequence's cache (prompt plus generated tokens).",
    mistakes=(
        (lambda: _calculator_2() * 2560 / 2048,
         "a sequence caches its generated tokens too, not only the prompt."),
    ),
)


register(
    "calculator-3", _calculator_3, unit="sequences", rtol=0.0,
    hint="an expert is missed by every one of the T tokens with probability (1 - k/E)^T; find "
    "the first whole T at which that falls to one half.",
    mistakes=(
        (lambda: 16.0, "128 / 8 assumes no two tokens pick the same expert: use the "
         "probability that no token picks it."),
        (lambda: _calculator_3() - 1, "at that batch fewer than half are read on average: round "
         "up, to the first whole batch at or past one half."),
    ),
)


register(
    "calculator-4", _calculator_4, unit="ms", rtol=0.08,
    hint="one decode step makes one token for every user, so TPOT is the step time: per GPU, "
    "its share of the weights plus every user's cache (at about the average context), over the "
    "bandwidth. The library also counts the 16-bit embedding and head and the 162 collectives "
    "of each step (about 3 us of latency each); a hand estimate within 8 % is right.",
    mistakes=(
        (lambda: _calculator_4() / 64, "you divided the step time by the batch: that is the "
         "amortised cost of a token, not what a user waits."),
        (lambda: 2 * _calculator_4(), "with tensor parallelism each of the two GPUs reads only its "
         "half of the weights and cache, at the same time."),
    ),
)


register(
    "calculator-5", _calculator_5, unit="times",
    hint="per-head cache: heads x (key dim + value dim); latent: kv_lora_rank + rope dim.",
    mistakes=(
        (lambda: _calculator_5() / 8, "that is the ratio per GPU under 8-way tensor parallelism: "
         "the question asks for the whole cache."),
    ),
)


register_hint(
    "calculator-latency",
    "for each precision and tensor-parallel degree, check that the model and the batch's "
    "cache fit, then compare TPOT and the batch's TTFT with the targets; W4A16 cuts the "
    "weight bytes but keeps the BF16 compute roof that the prefill runs on",
)
