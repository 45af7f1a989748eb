"""Chapter 8, your machine: its answer checks (``notebooks/08_your_machine``): ``check("machine-2", 12.3)``.

One answer depends on nothing but the library (``machine-1``, a count of bytes); the
others depend on the reader's own machine, so they are computed from the measurements the
notebook made: call :func:`use` with the dict ``measure.measure_roofline()`` returned before
checking them. Importing this module registers the exercises with
:func:`llm_roofline.exercises.register`; check them with :func:`llm_roofline.exercises.check`.
"""

from __future__ import annotations

import math

from .registry import register, register_hint

__all__ = ["WHERE", "measured_here", "roofline_figure", "use"]

#: whose numbers a measured output shows: the website's are the build machine's
WHERE = ("measured on the machine that ran this page (on the website: the machine that built "
         "it; in your own run: yours)")


def measured_here(what: str) -> None:
    """Print the label every machine-dependent output of chapter 8 carries: whose numbers."""
    print(f"{what}, {WHERE}:")

_STATE: dict = {"host": None}


def use(host: dict) -> None:
    """Check the machine-dependent answers against ``host`` (``measure_roofline()``'s dict)."""
    from ..machine import host_accelerator

    host_accelerator(host)  # raises ValueError if host is not such a dict
    _STATE["host"] = host


def roofline_figure(rows, host: dict, chip, configs: dict, prompt: int):
    """Figure 8.1: the tiny ``L`` model measured on this machine (top) and the same model's and
    Llama 3 8B's phases on an H100's datasheet roofline (bottom). Returns the figure.

    ``rows`` are ``machine.profile``'s rows, ``host`` ``measure.measure_roofline()``'s dict,
    ``chip`` its ``machine.host_accelerator``, ``configs`` ``machine.chapter_models()``. Each
    phase's star carries its name in a boxed label set off from the operations' points, with
    a leader line to the star; on the H100 panel the tiny model's circles are drawn over
    Llama 3 8B's hollow squares, so a square at the same intensity cannot hide a circle.
    """
    import matplotlib.pyplot as plt

    from ..counts import op_costs, total
    from ..hardware import get_accelerator
    from ..machine import plot_roofline, totals
    from ..models import get_model

    colour = {"prefill": "C0", "decode": "C3"}
    points, seen = [], set()
    for r in rows:
        if r["flops"]:
            moved = r["bytes_read"] + r["bytes_written"]
            first = r["phase"] not in seen
            seen.add(r["phase"])
            points.append((r["flops"] / moved, r["flops"] / r["seconds"], None, dict(
                color=colour[r["phase"]], s=14, alpha=0.7,
                marker="o" if r["phase"] == "prefill" else "^",
                label=f"{r['phase']} operations" if first else None)))
    stars = []
    for phase, t in totals(rows).items():
        stars.append((phase, t["intensity"], t["flops"] / t["seconds"]))
        points.append((t["intensity"], t["flops"] / t["seconds"], None,
                       dict(color=colour[phase], marker="*", s=170, edgecolor="k")))
    h100 = get_accelerator("H100")
    h100_points = []
    for label, cfg, length, mark, style in [
        ("Llama 3 8B", get_model("llama-3-8b"), 2048, "s", dict(s=80, facecolors="none",
                                                                  linewidths=1.6)),
        ("tiny L", configs["L"], prompt, "o", dict(s=30)),  # drawn last: on top
    ]:
        for phase, costs in [("prefill", op_costs(cfg, 1, length, 0)),
                             ("decode", op_costs(cfg, 1, 1, length))]:
            intensity = total(costs).intensity
            rate = min(h100.peak("bf16"), intensity * h100.bandwidth)
            colours = {"edgecolors": colour[phase]} if mark == "s" else {"color": colour[phase]}
            h100_points.append((intensity, rate, None, dict(
                marker=mark, label=f"{label} {phase}", **colours, **style)))
    fig, (ax1, ax2) = plt.subplots(2, 1, figsize=(7.0, 9.5))
    plot_roofline(ax1, chip.peak("fp32"), chip.bandwidth, points,
                  cache_bandwidth=host["cache_GBps"] * 1e9,
                  title="The machine that ran this page, fp32: tiny L measured (stars: phases)")
    for phase, intensity, rate in stars:  # labels above the stars, clear of the dots
        ax1.annotate(f"{phase} (phase)", (intensity, rate / 1e9), xytext=(0, 26),
                     textcoords="offset points", ha="center", fontsize=9,
                     bbox=dict(boxstyle="round,pad=0.2", fc="white", alpha=0.75, ec=colour[phase],
                               lw=0.8),
                     arrowprops=dict(arrowstyle="-", color=colour[phase], lw=0.8), zorder=7)
    plot_roofline(ax2, h100.peak("bf16"), h100.bandwidth, h100_points, imax=8192,
                  title="H100 SXM, BF16: predicted from the datasheet")
    for ax in (ax1, ax2):
        ax.legend(fontsize=9, loc="lower right")
    fig.tight_layout()
    return fig


def _chip():
    from ..machine import host_accelerator

    if _STATE["host"] is None:
        raise ValueError(
            "this answer depends on your machine: measure it first and call "
            "llm_roofline.course.ch08.use(host)"
        )
    return host_accelerator(_STATE["host"])


def _l_decode(batch: int = 1, cached: int = 64):
    """One decode step of tiny ``L`` with ``cached`` tokens in the cache (64: the first step
    after the chapter's 64-token prompt)."""
    from ..counts import op_costs
    from ..machine import chapter_models

    costs = op_costs(chapter_models()["L"], batch, 1, cached, weight_dtype="fp32")
    return costs


def _machine_1() -> float:
    """Bytes a 1,024-wide float32 query projection moves at batch 4 (a machine-free count)."""
    from ..counts import op_costs
    from ..models import ModelConfig

    width = ModelConfig("gemv-1024", vocab_size=1024, hidden_size=1024, intermediate_size=2816,
                        n_layers=1, n_heads=16, n_kv_heads=16, head_dim=64)
    return op_costs(width, 4, 1, 63, weight_dtype="fp32")["q_proj"].bytes


def _machine_2() -> float:
    chip = _chip()
    return chip.ridge(next(iter(chip.peaks)))


def _machine_3() -> float:
    return float(math.ceil(2 * _machine_2()))


def _machine_4() -> float:
    from ..counts import total

    return 1e3 * total(_l_decode()).bytes / _chip().bandwidth


def _machine_5() -> float:
    from ..calculator import estimate

    e = estimate("llama-3-8b", _chip(), 1, 512, 128, weight_dtype="fp32", kv_dtype="fp32",
                 act_dtype="fp32")
    return 1e3 * e.tpot_s


register(
    "machine-1", _machine_1, unit="bytes", rtol=1e-9,
    hint="4 bytes per float32 number: the weight matrix once, plus the 4 activation rows read "
    "and the 4 result rows written.",
)


register(
    "machine-2", _machine_2, unit="FLOPs/byte",
    hint="the ridge is the measured matmul peak over the measured read bandwidth; mind "
    "GFLOP/s against GB/s.",
)


register(
    "machine-3", _machine_3, unit="sequences", rtol=0.0,
    hint="in float32 a decode step's linear layers do 2 FLOPs per 4-byte weight per sequence: "
    "I = B / 2; find the first whole B at or past your ridge.",
)


register(
    "machine-4", _machine_4, unit="ms", rtol=0.05,
    hint="a memory-bound step takes bytes / bandwidth; sum the bytes of every operation of one "
    "step (counts.op_costs in fp32).",
)


register(
    "machine-5", _machine_5, unit="ms", rtol=0.02,
    hint="estimate(..., weight_dtype='fp32', kv_dtype='fp32', act_dtype='fp32') with your "
    "machine as the accelerator; tpot_s is in seconds.",
)


register_hint(
    "machine-server",
    "start from the TPOT limit: a memory-bound decode step reads every weight once, so the "
    "bandwidth this page measured times 100 ms is the most bytes a step may read; list which "
    "models' weights at fp32 fit under that, before you look at memory or the prompt.",
)
