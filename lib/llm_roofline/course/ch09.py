"""Chapter 9, serving at scale (``notebooks/09_serving_at_scale``): its figures and its answer checks.

No arithmetic here: every number comes from the library (``calculator``, ``parallel``,
``deployment``, ``dtypes``, ``measured``). The notebook calls these functions, so its page
shows the idea (which model, which layout, which chips) and not the plotting.

- :func:`tp_scaling`, :func:`latent_intensity`, :func:`dp_versus_tp`, :func:`frontier`: the
  chapter's figures; :func:`formats_table`: its table of number formats and peaks;
- the answer checks ``scale-1`` ... ``scale-4``, and the design problem's hint
  ``scale-design``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..calculator import decode_step, estimate
from ..dtypes import bytes_per_element, canonical
from ..hardware import get_accelerator
from ..models import get_model
from ..validate import integer, sequence
from .plots import PAGE, WIDTH
from .registry import register, register_hint

__all__ = ["dp_versus_tp", "formats_table", "frontier", "latent_intensity", "tp_scaling"]

_CHIP_COLOURS = ("tab:blue", "tab:orange", "tab:green", "tab:red")


def _plain_log_y(ax) -> None:
    """Log-axis tick labels as plain numbers (20, not 2 x 10^1); no minor labels."""
    from matplotlib.ticker import FuncFormatter, NullFormatter

    ax.yaxis.set_major_formatter(FuncFormatter(lambda v, _: f"{v:,g}"))
    ax.yaxis.set_minor_formatter(NullFormatter())


def _short(chip) -> str:
    return chip.name.removeprefix("NVIDIA ").removeprefix("AMD Instinct ")


_WORDS = {"llama": "Llama", "deepseek": "DeepSeek", "qwen3": "Qwen3", "mistral": "Mistral",
          "mixtral": "Mixtral", "gpt": "GPT", "oss": "oss", "8x7b": "8x7B", "8x22b": "8x22B"}


def _display(model) -> str:
    """A model as the prose names it: ``'llama-3-70b'`` -> ``'Llama-3-70B'``, ``'deepseek-v3'``
    -> ``'DeepSeek-V3'`` (a ModelConfig by its name)."""
    key = model if isinstance(model, str) else model.name
    return "-".join(_WORDS.get(w, w.upper() if any(ch.isdigit() for ch in w) or len(w) <= 2
                               else w.capitalize()) for w in key.split("-"))


def tp_scaling(model="llama-3-70b", chips: Sequence[str] = ("H100 SXM", "GB200"),
               gpus: Sequence[int] = (2, 4, 8, 16, 32), batch: int = 32, prompt: int = 2048,
               output: int = 256):
    """TPOT (left) and the all-reduces' share of it (right) against the tensor-parallel width.

    One colour per chip; a dotted vertical marks where the first chip's scale-up domain ends
    (its next GPU is in another node). Kernel by kernel, BF16. Returns the figure.
    """
    import matplotlib.pyplot as plt

    widths = [integer("gpus", n, minimum=1) for n in sequence("gpus", gpus)]
    chips = [get_accelerator(c) for c in sequence("chips", chips)]
    if not 1 <= len(chips) <= len(_CHIP_COLOURS):
        raise ValueError(f"chips must be 1 to {len(_CHIP_COLOURS)} accelerators, got {len(chips)}")
    with plt.rc_context(PAGE):
        fig, (left, right) = plt.subplots(1, 2, figsize=(WIDTH, 3.7), layout="constrained")
        for chip, colour in zip(chips, _CHIP_COLOURS, strict=False):
            runs = [estimate(model, chip, batch, prompt, output, n_gpus=n) for n in widths]
            label = f"{_short(chip)} (domain of {chip.domain_size})"
            left.plot(widths, [1e3 * e.tpot_s for e in runs], "o-", color=colour, label=label)
            right.plot(widths, [100 * e.allreduce_s / e.tpot_s for e in runs], "o-",
                       color=colour, label=label)
        edge = chips[0].domain_size
        for ax in (left, right):
            ax.axvline(edge, color="0.4", ls=":", lw=1.2)
            ax.set_xscale("log", base=2)
            ax.set_xticks(widths, labels=[str(n) for n in widths])
            ax.set_xlabel("GPUs of tensor parallelism")
            ax.grid(True, alpha=0.3)
        left.set(yscale="log", ylabel="TPOT (ms)", title=f"{_display(get_model(model))}, {batch} users")
        _plain_log_y(left)
        right.set(ylim=(0, None), ylabel="all-reduces' share of TPOT (%)",
                  title="dotted: end of an 8-GPU node")
        handles, labels = left.get_legend_handles_labels()  # one key for both panels, under them
        fig.legend(handles, labels, loc="outside lower center", ncol=len(labels), fontsize=8.5,
                   frameon=False)
    return fig


def latent_intensity(model="deepseek-v3", gpu="H200", widths: Sequence[int] = (1, 2, 4, 8, 16),
                     batch: int = 64, context: int = 4096):
    """FLOPs per byte of the decode attention on one GPU, against the tensor-parallel width.

    MLA's latent is copied onto every GPU of a tensor-parallel group, while the heads are
    split: the intensity falls as ``1/n``. Dashed: the chip's BF16 ridge (the attention's
    math is BF16); dotted: data-parallel attention, where each GPU runs every head for its
    own sequences. FP8 weights and cache. Returns the figure.
    """
    import matplotlib.pyplot as plt

    chip = get_accelerator(gpu)
    cfg = get_model(model)
    widths = [integer("widths", n, minimum=1) for n in sequence("widths", widths)]

    def intensity(n):
        rows = decode_step(cfg, chip, batch, context, weight_dtype="fp8", kv_dtype="fp8",
                           n_gpus=n).breakdown()
        return next(r for r in rows if r["op"] == "attention")["intensity"]

    values = [intensity(n) for n in widths]
    with plt.rc_context(PAGE):
        fig, ax = plt.subplots(figsize=(WIDTH, 3.3), layout="constrained")
        ax.plot(widths, values, "o-", color="tab:purple", label="tensor parallelism: heads split")
        ax.axhline(values[0], color="tab:green", ls=":", lw=2,
                   label="data-parallel attention: every head, own sequences")
        ax.axhline(chip.ridge("bf16"), color="k", ls="--", lw=1,
                   label=f"{_short(chip)} BF16 ridge")
        ax.set(xscale="log", yscale="log", xlabel="GPUs of tensor parallelism",
               ylabel="attention FLOPs per byte",
               title=f"{cfg.name}: decode attention on one GPU (FP8 latent)")
        ax.set_xticks(widths, labels=[str(n) for n in widths])
        _plain_log_y(ax)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="lower left", fontsize=8.5)
    return fig


def dp_versus_tp(model="deepseek-v3", gpu="H200", n_gpus: int = 8, prompt: int = 2000,
                 output: int = 1000, per_gpu: Sequence[int] = (8, 16, 32, 64, 96, 128, 192, 256)):
    """Decode tokens per second per GPU against the users per GPU: TP8 against DP8 x EP8.

    Solid: kernel by kernel; dashed: the floor of that layout. A curve stops where its memory
    no longer fits. FP8 weights and cache. Returns the figure.
    """
    import matplotlib.pyplot as plt

    from ..parallel import Layout, dp_ep_estimate

    chip = get_accelerator(gpu)
    n = integer("n_gpus", n_gpus, minimum=2)
    per_gpu = [integer("per_gpu", b, minimum=1) for b in sequence("per_gpu", per_gpu)]
    fp8 = dict(weight_dtype="fp8", kv_dtype="fp8")
    layouts = {
        f"TP{n}: latent on every GPU": lambda b: estimate(model, chip, b * n, prompt, output,
                                                          n_gpus=n, **fp8),
        f"DP{n} attention x EP{n}": lambda b: dp_ep_estimate(model, chip, b * n, prompt, output,
                                                            Layout(dp=n, ep=n), **fp8),
    }
    with plt.rc_context(PAGE):
        fig, ax = plt.subplots(figsize=(WIDTH, 3.6), layout="constrained")
        for (label, run), colour in zip(layouts.items(), ("tab:purple", "tab:green"),
                                        strict=True):
            runs = [(b, run(b)) for b in per_gpu]
            runs = [(b, e) for b, e in runs if e.fits]
            xs = [b for b, _ in runs]
            ax.plot(xs, [b * n / e.tpot_s / n for b, e in runs], "o-", color=colour,
                    label=f"{label}, kernel by kernel")
            ax.plot(xs, [b * n / e.tpot_floor_s / n for b, e in runs], "--", color=colour,
                    label=f"{label}, floor")
        ax.set(xscale="log", yscale="log", xlabel="users per GPU",
               ylabel="decode tokens/s per GPU",
               title=f"{get_model(model).name} in FP8 on {n} x {_short(chip)}, "
                     f"{prompt} + {output} tokens")
        ax.set_xticks(per_gpu, labels=[str(b) for b in per_gpu])
        _plain_log_y(ax)
        ax.grid(True, which="major", alpha=0.3)
        ax.legend(loc="upper left", fontsize=8.5)
    return fig


def formats_table(chips: Sequence[str] = ("H100 SXM", "B200", "B300", "MI325X", "MI355X"),
                  formats: Sequence[str] = ("bf16", "fp8", "mxfp8", "mxfp6", "nvfp4", "mxfp4")):
    """Bits per weight of each format, and each chip's dense peak for the math it runs natively.

    A dash: the chip has no tensor-core math for that format, so its weights are multiplied at
    a wider rate (W4A16 on an H100). Returns an HTML table.
    """
    from .widgets import html_table

    chips = [get_accelerator(c) for c in sequence("chips", chips)]
    rows = []
    for f in sequence("formats", formats):
        key = canonical(f)
        row = {"format": f.upper(),
               "bits per weight": float(8 * bytes_per_element(key))}
        math = {"bf16": "bf16", "fp8": "fp8", "mxfp8": "fp8", "mxfp6": "fp6", "nvfp4": "fp4",
                "mxfp4": "fp4"}.get(f.lower())
        for chip in chips:
            peak = chip.peaks.get(math) if math else None
            row[f"{_short(chip)} (TFLOPS)"] = None if peak is None else peak / 1e12
        rows.append(row)
    return html_table(rows, floatfmt={"bits per weight": "{:g}"} | {
        f"{_short(c)} (TFLOPS)": "{:,.0f}" for c in chips})


def frontier(comparisons, data_parallel=(), ceilings=()):
    """Every published row the library can express: measured speed over the floor's speed
    (vertical) against the kernel-by-kernel speed over the floor's (horizontal), log-log.

    For latencies, the floor's time over the measured time. No point may rise above 1 (the
    floor holds); a point above the diagonal beat the kernel-by-kernel time (it overlapped).
    Colour: the GPU; ``data_parallel``: the rows of ``measured.dp_compare`` (data-parallel
    attention with expert parallelism), drawn as triangles; ``ceilings``: the rows of
    ``measured.ceiling_compare`` (max-throughput runs without a batch, against the ceiling at
    an unbounded batch), drawn as diamonds. Returns the figure.
    """
    import matplotlib.pyplot as plt

    from ..measured import TIMES

    if not comparisons:
        raise ValueError("comparisons must hold at least one measured.Comparison, got none")
    data_parallel, ceilings = list(data_parallel), list(ceilings)
    dp_numbers = {c.row.number for c in data_parallel}
    top_numbers = {c.row.number for c in ceilings}
    comparisons = [*comparisons, *data_parallel, *ceilings]
    gpus = sorted({c.row.accelerator for c in comparisons})
    colours = dict(zip(gpus, plt.get_cmap("tab10").colors, strict=False))
    with plt.rc_context(PAGE):
        fig, ax = plt.subplots(figsize=(WIDTH, 5.4), layout="constrained")
        for c in comparisons:
            if c.row.metric in TIMES:
                x, y = c.floor / c.bound, c.floor / c.measured
            else:
                x, y = c.bound / c.floor, c.measured / c.floor
            marker = "s" if c.row.metric in TIMES else "o"
            if c.row.number in dp_numbers:
                marker = "^"
            elif c.row.number in top_numbers:
                marker = "D"
            big = marker in "^D"
            ax.scatter([x], [y], s=44 if big else 30, marker=marker,
                       color=colours[c.row.accelerator], alpha=0.85, zorder=3,
                       edgecolors="k" if big else "none", linewidths=0.6)
        lo = 0.01
        ax.plot([lo, 1], [lo, 1], color="0.3", lw=1, label="measured = kernel by kernel")
        ax.axhline(1, color="k", lw=1.6, label="the floor: no engine above it")
        for g in gpus:
            ax.scatter([], [], color=colours[g], label=g)
        ax.scatter([], [], marker="s", color="0.4", label="a latency (square)")
        if data_parallel:
            ax.scatter([], [], marker="^", s=44, color="0.4", edgecolors="k", linewidths=0.6,
                       label="data-parallel attention")
        if ceilings:
            ax.scatter([], [], marker="D", s=44, color="0.4", edgecolors="k", linewidths=0.6,
                       label="no batch: unbounded-batch floor")
        ax.set(xscale="log", yscale="log", xlim=(0.3, 1.05), ylim=(lo, 1.6),
               xlabel="kernel-by-kernel speed / floor speed",
               ylabel="measured speed / floor speed",
               title=f"{len(comparisons)} published rows against their floor")
        ax.set_xticks([0.3, 0.4, 0.5, 0.6, 0.8, 1.0],
                      labels=["0.3", "0.4", "0.5", "0.6", "0.8", "1"])
        ax.set_yticks([0.01, 0.03, 0.1, 0.3, 1.0], labels=["0.01", "0.03", "0.1", "0.3", "1"])
        ax.minorticks_off()
        ax.grid(True, which="major", alpha=0.25)
        ax.legend(loc="upper center", bbox_to_anchor=(0.5, -0.16), fontsize=8, ncol=3,
                  frameon=False)  # under the axes, where it hides no row
    return fig


# notebooks/09_serving_at_scale: the answer checks ---------------------------------


def _scale_1() -> float:
    """MB each of 8 GPUs sends in one ring all-reduce of 1,024 tokens of Llama-3-70B in BF16."""
    cfg = get_model("llama-3-70b")
    message = 1024 * cfg.hidden_size * 2
    return 2 * 7 / 8 * message / 1e6


def _scale_2() -> float:
    """FLOPs per byte of DeepSeek-V3's decode attention on one of 8 tensor-parallel H200s."""
    rows = decode_step("deepseek-v3", "H200", 64, 4096, weight_dtype="fp8", kv_dtype="fp8",
                       n_gpus=8).breakdown()
    return next(r for r in rows if r["op"] == "attention")["intensity"]


def _scale_3() -> float:
    """TPOT in ms of Llama-3.1-405B in FP8, 32 users, on 16 H100s (two nodes)."""
    e = estimate("llama-3.1-405b", "H100 SXM", 32, 2048, 256, weight_dtype="fp8",
                 kv_dtype="fp8", n_gpus=16)
    return 1e3 * e.tpot_s


def _scale_4() -> float:
    """Decode tokens/s per GPU of DeepSeek-V3 in FP8, DP8 attention x EP8 on 8 H200s, 1,024
    users of 2,000 + 1,000 tokens, kernel by kernel."""
    from ..parallel import Layout, dp_ep_estimate

    e = dp_ep_estimate("deepseek-v3", "H200", 1024, 2000, 1000, Layout(dp=8, ep=8),
                       weight_dtype="fp8", kv_dtype="fp8")
    return e.throughput_tok_s / 8


register(
    "scale-1", _scale_1, unit="MB", rtol=0.02,
    hint="one message is tokens x hidden size x 2 bytes; a ring sends 2 (n - 1) / n of it from "
    "each GPU; MB are 1e6 bytes.",
    mistakes=(
        (lambda: _scale_1() * 8 / 14, "that is what a switch that sums in the network needs "
         "(the message once): the question asks for a ring."),
        (lambda: _scale_1() / 2, "a ring all-reduce is a reduce-scatter then an all-gather: "
         "each moves (n - 1) / n of the message."),
    ),
)

register(
    "scale-2", _scale_2, unit="FLOPs/byte", rtol=0.03,
    hint="per cached token and layer, a head does 2 x 576 FLOPs for its score and 2 x 512 for "
    "its value; a GPU runs 128 / 8 heads but reads the whole 656-byte latent.",
    mistakes=(
        (lambda: 8 * _scale_2(), "that is one GPU running all 128 heads: under tensor "
         "parallelism each runs 16."),
        (lambda: _scale_2() * 656 / 576, "the FP8 latent is 656 bytes a token a layer as "
         "FlashMLA stores it (scales and a BF16 rotary key), not 576."),
    ),
)

register(
    "scale-3", _scale_3, unit="ms", rtol=0.03,
    hint="lr.estimate with n_gpus=16: the sixteenth GPU is in a second node, so the all-reduces "
    "cross the network.",
    mistakes=(
        (lambda: 1e3 * estimate("llama-3.1-405b", "H100 SXM", 32, 2048, 256, weight_dtype="fp8",
                                kv_dtype="fp8", n_gpus=16).tpot_s / 32,
         "you divided by the batch: TPOT is the whole step."),
    ),
)

register(
    "scale-4", _scale_4, unit="tokens/s per GPU", rtol=0.03,
    hint="parallel.dp_ep_estimate(..., Layout(dp=8, ep=8), weight_dtype='fp8', kv_dtype='fp8'); "
    "its throughput_tok_s is for all eight GPUs.",
    mistakes=(
        (lambda: 8 * _scale_4(), "that is the throughput of all eight GPUs: divide by 8."),
    ),
)

register_hint(
    "scale-design",
    "for each candidate, check that it fits, then compare its TPOT with the target and its "
    "tokens/s per GPU; the layout that stores each latent once fits the largest batch",
)

