"""Chapter 1, the paradox (``notebooks/01_dormant_tensor_cores``): its figures and its answer checks.

- :func:`decode_share`: the share of a call's time spent in decode against output length;
- :func:`share_view`: that curve for one prompt length and batch, the live widget's view;
- :func:`snapshot`: a tally's two phases as a profiler's summary (time, share, FLOP/s, GB/s);
- :func:`step_split`: a decode step's time split into what its bytes need and the rest;
- the answer checks ``paradox-1`` ... ``paradox-4``, and the design problem's hint ``paradox-200-tokens``.
"""

from __future__ import annotations

from collections.abc import Sequence

from ..validate import real, sequence, shorten, text
from .plots import PHASE_COLORS, axes_or_new
from .registry import register, register_hint, smallest

__all__ = ["decode_share", "share_view", "snapshot", "step_split"]


def decode_share(output_lens: Sequence[float], shares: Sequence[float], *, ax=None,
                 threshold: float | None = 0.95, label: str | None = None, color=None):
    """The share of one call's time spent in decode (``shares``, fractions) against output length.

    A log x-axis of output tokens; ``threshold`` draws a dashed horizontal line (None: none).
    """
    output_lens = sequence("output_lens", output_lens, what="token counts", empty=True)
    shares = sequence("shares", shares, what="fractions", empty=True)
    if len(output_lens) != len(shares) or not shares:
        raise ValueError(
            f"output_lens and shares must be non-empty and of one length, "
            f"got {len(output_lens)} and {len(shares)}"
        )
    for i, s in enumerate(shares):
        real(f"shares[{i}]", s, minimum=0.0, maximum=1.0)
    for i, n in enumerate(output_lens):
        real(f"output_lens[{i}]", n, minimum=0.0, open_min=True, maximum=1e15)
    if label is not None:
        text("label", label)
    ax = axes_or_new(ax, (7, 4))
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


def share_view(prompt_len: int, batch: int, outputs: Sequence[float], *,
               model: str = "llama-3-70b", chip: str = "H100 SXM"):
    """:func:`decode_share` of ``model`` on ``chip`` for one prompt length and batch, shown."""
    import matplotlib.pyplot as plt

    from ..calculator import estimate

    fig, ax = plt.subplots(figsize=(7, 4))
    m = estimate(model, chip, batch, prompt_len, outputs)
    decode_share(outputs, 1 - m.ttft_s / m.e2e_s, ax=ax,
                 label=f"prompt {prompt_len:,} tokens, batch {batch}")
    ax.set_title(f"{model}, BF16, {chip} (roofline bound)")
    plt.show()


def snapshot(tally) -> list[dict]:
    """A ``Tally`` of one ``generate`` call as a profiler's summary, one row per quantity.

    Columns ``prefill`` and ``decode`` hold text: the passes, the tokens each pass fed, the
    measured time and its share of the call, the FLOPs and bytes counted, and the FLOP/s and
    bytes/s achieved (counted over measured). Rows, not columns, so it fits a phone.
    """
    if not all(callable(getattr(tally, a, None)) for a in ("seconds", "total")) or not (
            isinstance(getattr(tally, "passes", None), list)):
        raise ValueError(f"tally must be a Tally (of one generate call), got {shorten(tally)}")
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


def step_split(tally, bandwidth_gb_s: float) -> dict[str, float]:
    """A tally's mean decode step split in two: the time its bytes need at ``bandwidth_gb_s``
    (GB/s, the host's measured streaming speed) and the rest, which is overhead.

    Returns ``step_ms`` (measured), ``achieved_gb_s`` (its bytes over its time),
    ``memory_ms`` (its bytes over the bandwidth), ``rest_ms`` (the difference, at least 0),
    ``calls`` (operations per step) and ``us_per_call`` (the rest over the calls).
    """
    if not callable(getattr(tally, "total", None)) or not isinstance(getattr(tally, "passes", None), list):
        raise ValueError(f"tally must be a Tally (of one generate call), got {shorten(tally)}")
    bandwidth_gb_s = real("bandwidth_gb_s", bandwidth_gb_s, minimum=0.0, open_min=True, maximum=1e6)
    steps = [p for p in tally.passes if p["phase"] == "decode"]
    if not steps:
        raise ValueError("tally must hold decode steps; it has none")
    seconds = sum(p["seconds"] for p in steps) / len(steps)
    nbytes = tally.total("decode").bytes / len(steps)
    calls = sum(r["calls"] for r in tally.rows() if r["phase"] == "decode") / len(steps)
    memory = nbytes / (bandwidth_gb_s * 1e9)
    rest = max(0.0, seconds - memory)
    return {"step_ms": 1e3 * seconds, "achieved_gb_s": nbytes / seconds / 1e9,
            "memory_ms": 1e3 * memory, "rest_ms": 1e3 * rest, "calls": calls,
            "us_per_call": 1e6 * rest / calls}


# notebooks/01_dormant_tensor_cores: the paradox -------------------------------------


def _paradox_1() -> float:
    from ..calculator import estimate

    e = estimate("llama-3-8b", "H100 SXM", 1, 2048, 256)
    return 1 + 0.95 / 0.05 * e.ttft_s / e.tpot_s  # the output length where decode is 95 %


def _paradox_2() -> float:
    from ..calculator import estimate

    e = estimate("llama-3-70b", "H100 SXM", 1, 2048, 256, weight_dtype="fp8", kv_dtype="fp8")
    return 1 / e.tpot_s


def _paradox_3() -> float:
    from ..calculator import estimate
    from ..hardware import get_accelerator

    e = estimate("llama-3-8b", "H100 SXM", 32, 2048, 256)
    return 100 * e.decode_flops / e.tpot_s / get_accelerator("H100 SXM").peak("bf16")


def _paradox_4() -> float:
    from ..counts import op_costs, total
    from ..hardware import get_accelerator
    from ..models import get_model

    work = 12.4e-3 * 0.824 * get_accelerator("H100 SXM").peak("bf16")
    cfg = get_model("llama-3-8b")
    return smallest(lambda n: total(op_costs(cfg, 1, n)).flops >= work,
                  1, cfg.max_context)


register(
    # 5 %: the hand estimate TTFT / TPOT = L x bandwidth / peak (N cancels) gives 133
    "paradox-1", _paradox_1, unit="output tokens", rtol=0.05,
    hint="decode's share is (n-1) TPOT / (TTFT + (n-1) TPOT); solve it for n at 0.95.",
)


register(
    "paradox-2", _paradox_2, unit="tokens/s", rtol=0.02,
    hint="one stream gets one token per decode step: 1 / TPOT, with fp8 weights and KV cache.",
)


register(
    "paradox-3", _paradox_3, unit="% of the peak", rtol=0.02,
    hint="a decode step's FLOPs divided by its time, over the dense BF16 peak, times 100.",
)


register(
    "paradox-4", _paradox_4, unit="tokens", rtol=0.07,
    hint="the work done is time x 0.824 x peak; a prompt token costs about 2 FLOPs per "
         "parameter of the layers (the LM head runs once, at the last position).",
)


register_hint(
    "paradox-200-tokens",
    "a decode step at batch 1 reads every weight once: its time is about the weight bytes "
    "over the bandwidth of the GPUs that share them. Find the bytes per token at each "
    "precision, the aggregate bandwidth that 200 tokens/s needs, then the fewest GPUs per "
    "chip that reach it; compare the step's FLOPs with the peak",
)
