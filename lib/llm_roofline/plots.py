"""The chapters' figures, as pure functions: parameters in, a Matplotlib figure (or Axes) out.

No arithmetic here: every number comes from ``calculator``, ``formulas`` and ``roofline``. The
notebooks call these functions, so a page shows the idea (which model, which precision,
which range) and not forty lines of plotting.

Every figure is sized for the book's content column (about 700 px wide): at most 7.2 inches
wide, with no text under 9 pt, so labels read at the page's width without zooming.
"""

from __future__ import annotations

from collections.abc import Sequence

import numpy as np

from . import formulas as F
from .calculator import critical_batch, estimate, gpus_needed, max_batch, max_compute_context, memory
from .dtypes import bytes_per_element
from .hardware import get_accelerator
from .models import get_model
from .roofline import explore
from .validate import choice, integer, real

__all__ = [
    "COLOURS", "PAGE", "PARTS", "PRECISIONS", "SCALES", "critical_curves", "dashboard",
    "experts_read", "kv_step_bars", "latency_curves", "memory_bars", "roofline_grid",
]

GiB = 2**30
#: the article's three scales
SCALES = {"7B": "llama-2-7b", "70B": "llama-3-70b", "671B": "deepseek-v3"}
#: precision -> (weights, KV cache); INT4 is weight-only (GPTQ/AWQ style): its cache stays 16-bit
PRECISIONS = {"BF16": ("bf16", "bf16"), "FP8": ("fp8", "fp8"), "INT4": ("int4", "bf16")}
COLOURS = {"BF16": "tab:blue", "FP8": "tab:orange", "INT4": "tab:green"}
PARTS = {"weights": "tab:blue", "KV cache": "tab:orange", "activations": "tab:green",
         "reserve": "0.75"}
#: Matplotlib settings for a figure read at the page's width: no text under 9 pt
PAGE = {"font.size": 10, "axes.titlesize": 10, "axes.labelsize": 10, "xtick.labelsize": 9,
        "ytick.labelsize": 9, "legend.fontsize": 9, "figure.titlesize": 10}
_MOE_COLOURS = ("tab:purple", "tab:red", "tab:brown", "tab:olive")
_WIDTH = 7.2  # inches: about 700 px at the inline backend's 100 dpi


def _precision(precision: str) -> tuple[str, str]:
    return PRECISIONS[choice("precision", precision, PRECISIONS)]


def memory_bars(batch: int = 16, prompt: int = 2048, output: int = 1024, gpu="H100 SXM"):
    """Weights, KV cache and activations of the three scales at the three precisions.

    One panel per scale, one stacked bar per precision, labelled with how many GPUs hold it;
    the dashed line is one GPU's usable memory. Returns the figure.
    """
    import matplotlib.pyplot as plt

    chip = get_accelerator(gpu)
    with plt.rc_context(PAGE):
        fig, axes = plt.subplots(1, 3, figsize=(_WIDTH, 3.9))
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
            for i, n in enumerate(counts):
                ax.annotate(f"{n} GPU{'s' if n > 1 else ''}", (i, bottoms[i]), ha="center",
                            va="bottom", fontsize=9)
            usable = memory(name, chip, 1, 1, 1).usable / GiB
            ax.axhline(usable, color="k", lw=1, ls="--")
            ax.set_title(f"{scale}: {name}")
            ax.set_ylim(0, max(bottoms.max(), usable) * 1.18)
            ax.set_xlabel("precision")
        axes[0].set_ylabel("GiB ($2^{30}$ bytes)")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
        fig.suptitle(f"Memory for {batch} requests of {prompt} + {output} tokens\n"
                     f"(dashed: the usable memory of one {chip.name})")
        fig.tight_layout(rect=(0, 0.08, 1, 1))
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
        fig, (left, right) = plt.subplots(1, 2, figsize=(_WIDTH, 3.9))
        for precision, (weights, kv) in PRECISIONS.items():
            options = dict(weight_dtype=weights, kv_dtype=kv, n_gpus=n_gpus)
            most = max_batch(model, chip, prompt, output, **options)
            batch = np.unique(np.geomspace(1, most, 60).astype(int))
            e = estimate(model, chip, batch, prompt, output, **options)
            c = COLOURS[precision]
            left.plot(batch, 1e3 * e.tpot_s, color=c, label=f"{precision}, per user")
            left.plot(batch, 1e3 * e.time_per_token_s, color=c, ls=":", lw=1.2)
            right.plot(batch, e.throughput_tok_s, color=c, label=f"{precision} (max {most})")
            compute = batch[e.bound == "compute"]
            if compute.size:
                right.axvline(compute[0], color=c, lw=0.8, ls="--")
        left.set(xscale="log", yscale="log", xlabel="batch (concurrent users)",
                 ylabel="ms per token", title="TPOT (solid), TPOT / batch (dotted)")
        right.set(xscale="log", yscale="log", xlabel="batch (concurrent users)",
                  ylabel="tokens/s, all users", title="Throughput (dashed: compute-bound)")
        for ax in (left, right):
            ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.22), ncol=2, frameon=False,
                      columnspacing=0.8, handlelength=1.5)
            ax.grid(True, which="major", alpha=0.3)
        fig.suptitle(f"{name} on {n_gpus} x {chip.name}, prompt {prompt}, output {output}")
        fig.tight_layout()
    return fig


def critical_curves(gpu="H100 SXM", max_context: int = 65536):
    """Where a decode step can be mostly compute-bound: batch against context, per scale.

    For each precision, a horizontal line at the batch where the weight matmuls reach the roof
    (``critical_batch``, the same at every context), ending at the longest context at which a
    large batch still makes the step mostly compute-bound (``max_compute_context``); to the
    right of the end, the memory-bound attention over the cache takes most of every step.
    Returns the figure.
    """
    import matplotlib.pyplot as plt

    chip = get_accelerator(gpu)
    max_context = integer("max_context", max_context, minimum=2)
    with plt.rc_context(PAGE):
        fig, axes = plt.subplots(1, 3, figsize=(_WIDTH, 3.5), sharey=True)
        for ax, (scale, name) in zip(axes, SCALES.items(), strict=True):
            cfg = get_model(name)
            top = min(cfg.max_context, max_context)
            for offset, (precision, (weights, kv)) in enumerate(PRECISIONS.items()):
                batch = critical_batch(cfg, chip, weight_dtype=weights)
                end = min(max_compute_context(cfg, chip, weight_dtype=weights, kv_dtype=kv), top)
                lift = 1.06 ** offset  # lines that coincide stay visible side by side
                ax.plot([1, end], [batch * lift] * 2, "-", lw=2, color=COLOURS[precision],
                        label=precision)
                ax.plot([end], [batch * lift], "x", ms=8, mew=2, color=COLOURS[precision])
            ax.set(xscale="log", yscale="log", xlim=(1, top), xlabel="context (tokens)",
                   title=f"{scale}: {name}")
            ax.set_xticks([1, 100, 10_000], labels=["1", "100", "10k"])
            ax.grid(True, which="major", alpha=0.3)
        axes[0].set_ylabel("batch where the weight\nmatmuls reach the roof")
        handles, labels = axes[0].get_legend_handles_labels()
        fig.legend(handles, labels, loc="lower center", ncol=3, frameon=False)
        fig.suptitle(f"Decode on the {chip.name}: mostly compute-bound only left of the x")
        fig.tight_layout(rect=(0, 0.08, 1, 1))
    return fig


def experts_read(models: Sequence[str] = ("deepseek-v3", "mixtral-8x7b"), largest: int = 4096):
    """The fraction of a mixture of experts' weights one decode step reads, against the batch.

    Dotted: the active share of a single token. Returns the figure.
    """
    import matplotlib.pyplot as plt

    top = integer("largest", largest, minimum=2)
    if isinstance(models, str) or not 1 <= len(models) <= len(_MOE_COLOURS):
        raise ValueError(f"models must be 1 to {len(_MOE_COLOURS)} model names, got {models!r}")
    batch = np.unique(np.geomspace(1, top, 80).astype(int))
    with plt.rc_context(PAGE):
        fig, ax = plt.subplots(figsize=(_WIDTH, 3.8))
        for name, colour in zip(models, _MOE_COLOURS, strict=False):
            cfg = get_model(name)
            step = F.op_elements(cfg, batch, 1, 0, absorbed=True)
            weights = sum(w for _, (_, w, _, _) in step.items())
            body = cfg.n_params - cfg.param_counts()["embedding"]
            label = f"{name} ({cfg.n_routed_experts} experts, top {cfg.n_experts_per_token})"
            ax.plot(batch, weights / body, color=colour, label=label)
            ax.axhline(cfg.n_active_params / cfg.n_params, color=colour, ls=":", lw=1.2)
        ax.set(xscale="log", ylim=(0, 1.05), xlabel="batch (tokens per decode step)",
               ylabel="fraction of weights read",
               title="Weights a decode step reads (dotted: one token's active share)")
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower right")
        fig.tight_layout()
    return fig


def dashboard(model="llama-3-70b", precision: str = "FP8", batch: int = 32, prompt: int = 2048,
              n_gpus: int = 2, output: int = 256, gpu="H100 SXM", xmax: float | None = None,
              ax=None):
    """The calculator at a glance: memory per GPU as a stacked bar, and the latencies.

    The bar stacks weights, KV cache, activations and reserve against the GPU's capacity
    (the black line). Below it, if the batch fits: TTFT, TPOT, throughput and how busy the
    bandwidth is; if it does not fit, how much memory it would need instead (no latencies:
    a configuration that does not run has none). Draws on ``ax`` (a new figure if None) and
    returns the Axes.
    """
    import matplotlib.pyplot as plt

    weights, kv = _precision(precision)
    chip = get_accelerator(gpu)
    e = estimate(model, chip, batch, prompt, output, weight_dtype=weights, kv_dtype=kv,
                 n_gpus=n_gpus)
    m = e.memory
    if ax is None:
        with plt.rc_context(PAGE):
            _, ax = plt.subplots(figsize=(_WIDTH, 2.9), layout="constrained")
    left = 0.0
    for part, value in (("weights", m.weights), ("KV cache", m.kv_cache),
                        ("activations", m.activations), ("reserve", m.reserve)):
        ax.barh(0, value / GiB, left=left, color=PARTS[part], label=part, height=0.5)
        left += value / GiB
    ax.axvline(m.capacity / GiB, color="k", lw=1.5)
    right = real("xmax", xmax, minimum=0, open_min=True) if xmax is not None else None
    ax.set_xlim(0, right or max(m.capacity, m.used + m.reserve) / GiB * 1.05)
    ax.set_ylim(-1.9, 0.9)
    ax.set_yticks([])
    ax.set_xlabel(f"GiB per GPU (black line: its capacity, {m.capacity / GiB:.0f} GiB)",
                  fontsize=9)
    ax.tick_params(labelsize=9)
    ax.legend(fontsize=9, ncol=4, loc="upper left", frameon=False, borderaxespad=0.2)
    setup = f"{get_model(model).name}, {precision}, {n_gpus} x {chip.name}, batch {batch}"
    if e.fits:
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


def roofline_grid(chips: Sequence[str] = ("A100", "H100", "B200", "MI300X"),
                  dtypes: Sequence[str] = ("bf16", "fp8"), batch: int = 32):
    """Small multiples: a batch-``batch`` decode's linear layers on each chip and precision.

    Rows are chips, columns precisions; the kernel's intensity is ``2 * batch`` FLOPs per
    ``bytes_per_element(dtype)`` bytes (2 FLOPs per weight per token). A chip without tensor
    math at a precision gets a panel that says so. Returns the figure.
    """
    import matplotlib.pyplot as plt

    batch = integer("batch", batch)
    with plt.rc_context(PAGE):
        fig, axes = plt.subplots(len(chips), len(dtypes), figsize=(_WIDTH, 2.6 * len(chips)),
                                 squeeze=False)
        for row, chip in zip(axes, chips, strict=True):
            accelerator = get_accelerator(chip)
            for ax, dtype in zip(row, dtypes, strict=True):
                if accelerator.has(dtype):
                    intensity = 2 * batch / float(bytes_per_element(dtype))
                    explore(accelerator, dtype, intensity, ax=ax)
                    ax.legend().remove()
                    for text in ax.texts:
                        text.set_fontsize(9)
                else:
                    ax.text(0.5, 0.5, f"{accelerator.name}\nhas no {dtype.upper()} tensor math",
                            ha="center", va="center", transform=ax.transAxes, fontsize=10)
                    ax.set_axis_off()
                ax.set_title(f"{accelerator.name}, {dtype.upper()}")
                ax.set_xlabel("I (FLOPs/byte)")
                ax.set_ylabel("TFLOPS")
        fig.tight_layout()
    return fig


def kv_step_bars(ax, batch: int, context: int, model: str = "llama-3-8b",
                 accelerator: str = "H100", ylim: float = 80.0):
    """One decode step's weight and KV-cache bytes as two bars, titled with its memory time.

    The KV-cache chapter's slider and its twins draw this. Returns the Axes.
    """
    from .kv import step_traffic

    traffic = step_traffic(model, batch, context)
    chip = get_accelerator(accelerator)
    gb = [traffic["weights"] / 1e9, traffic["kv"] / 1e9]
    ms = 1e3 * sum(traffic.values()) / chip.bandwidth
    ax.bar(["weights", "KV cache"], gb, color=[PARTS["weights"], PARTS["KV cache"]])
    ax.set(ylabel="bytes read per step (GB)", ylim=(0, real("ylim", ylim, minimum=0, open_min=True)),
           title=f"B = {batch}, context {context:,}: {ms:.1f} ms on an {accelerator}")
    return ax
