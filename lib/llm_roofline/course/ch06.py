"""Chapter 6, TTFT against TPOT (``notebooks/06_ttft_vs_tpot``): its figures (drawing only)
and its answer checks (``ttft-1`` ... ``ttft-5``).

- ``latency_throughput``: per-user TPOT against aggregate tokens/s as the batch grows, with
  the batches that no longer fit in memory drawn hollow;
- ``memory_keys``: legend entries for the cross and the hollow points that
  ``latency_throughput`` draws;
- ``client_timeline``: one request's queue, prefill and streamed tokens under the server's
  steps;
- ``chunk_tradeoff``: chunked prefill's newcomer TTFT against the running users' TPOT.

The numbers come from ``calculator``, ``serving`` and ``sla``; each function returns what it
drew, so tests can compare it with the library.
"""

from __future__ import annotations

import inspect
from collections.abc import Sequence

import numpy as np

from .. import validate
from ..calculator import estimate
from ..hardware import get_accelerator
from ..serving import ChunkedPrefill
from ..vram import max_batch
from .registry import register, register_hint

__all__ = ["SFU_EXP_PER_S", "chunk_tradeoff", "client_timeline", "latency_throughput",
           "memory_keys", "request_timeline", "sla_rows", "ttft_rows"]

_MEMORY_OPTIONS = ("weight_dtype", "kv_dtype", "n_gpus", "act_dtype", "weight_group_size",
                   "reserve_fraction", "prefill_chunk")


def latency_throughput(ax, model, accelerator, prompt_len: int, output_len: int,
                       batches: Sequence[int], *, label: str | None = None,
                       annotate: Sequence[int] = (), text_offset: tuple[float, float] = (6, -12),
                       color=None, **options) -> dict:
    """Per-user TPOT (ms, x) against aggregate decode tokens/s (y), one point per batch.

    Batches beyond ``max_batch`` are drawn hollow and a cross marks the last that fits.
    ``annotate``: batches to label ``B = n``, ``text_offset`` points from each. Returns
    ``batch``, ``tpot_ms``, ``tok_s``, ``fits`` (arrays) and ``max_batch``.
    """
    validate.axes("ax", ax, optional=False)
    validate.options("latency_throughput", options,
                     [n for n, p in inspect.signature(estimate).parameters.items()
                      if p.kind is p.KEYWORD_ONLY])
    b = np.atleast_1d(validate.integers("batches", batches))
    if b.ndim != 1 or b.size > 4096:
        raise ValueError(f"batches must be a list of at most 4,096 batch sizes, got "
                         f"{validate.shorten(batches)}")
    annotate = validate.sequence("annotate", annotate, what="batch sizes", empty=True)
    for n in annotate:
        if not np.any(b == n) or isinstance(n, bool):
            raise ValueError(f"annotate must list batch sizes of batches, got {validate.shorten(n)}")
    if label is not None:
        validate.text("label", label)
    if (not isinstance(text_offset, tuple | list) or len(text_offset) != 2):
        raise ValueError(f"text_offset must be (dx, dy) in points, got {validate.shorten(text_offset)}")
    for v in text_offset:
        validate.real("text_offset", v, minimum=-1e4, maximum=1e4)
    e = estimate(model, accelerator, b, prompt_len, output_len, **options)
    tpot_ms, tok_s = np.atleast_1d(e.tpot_s) * 1e3, np.atleast_1d(e.throughput_tok_s)
    fit = int(max_batch(model, accelerator, prompt_len, output_len,
                        **{k: v for k, v in options.items() if k in _MEMORY_OPTIONS}))
    fits = b <= fit
    (line,) = ax.plot(tpot_ms[fits], tok_s[fits], marker="o", ms=4, color=color, label=label)
    ax.plot(tpot_ms[~fits], tok_s[~fits], ls=":", marker="o", ms=4, mfc="white",
            color=line.get_color())
    if 1 <= fit and fit < b.max():
        last = estimate(model, accelerator, fit, prompt_len, output_len, **options)
        ax.plot(last.tpot_s * 1e3, last.throughput_tok_s, marker="X", ms=11, ls="none",
                color=line.get_color(), mec="black")
    for n in annotate:
        i = int(np.flatnonzero(b == n)[0])
        ax.annotate(f"B = {n}", (tpot_ms[i], tok_s[i]), textcoords="offset points",
                    xytext=text_offset, fontsize=9, color=line.get_color())
    ax.set(xlabel="TPOT each user sees (ms per token)",
           ylabel="aggregate decode throughput (tokens/s)")
    return {"batch": b, "tpot_ms": tpot_ms, "tok_s": tok_s, "fits": fits, "max_batch": fit}


def memory_keys(ax, color="0.35") -> list:
    """Two legend entries, in grey, for what ``latency_throughput`` draws on every curve: the
    cross at the last batch that fits in memory, and the hollow points beyond it. Call it
    before ``ax.legend()``; returns the two proxy artists."""
    validate.axes("ax", ax, optional=False)
    (cross,) = ax.plot([], [], marker="X", ms=9, ls="none", color=color, mec="black",
                       label="last batch that fits in memory")
    (hollow,) = ax.plot([], [], ls=":", marker="o", ms=4, mfc="white", color=color,
                        label="batches that do not fit")
    return [cross, hollow]


def client_timeline(ax, *, arrive_s: float, step_s: float, prefill_s: float, tpot_s: float,
                    n_tokens: int = 6, steps_before: int = 3) -> dict:
    """Two rows in milliseconds: the server's steps (decode steps of the running users, the
    mixed step that carries the new prompt, then decode steps with the new user), and the new
    request (its wait for the step in flight, its prefill, its streamed tokens).

    The request arrives at ``arrive_s`` during one of ``steps_before`` decode steps of
    ``step_s``; it waits for that step to end, is prefilled in one step of ``prefill_s``,
    whose end gives its first token, and then receives a token every ``tpot_s``.
    Returns ``queue_s``, ``ttft_s`` and ``token_s`` (the arrival times of its tokens).
    """
    validate.axes("ax", ax, optional=False)
    step_s = validate.real("step_s", step_s, minimum=1e-9, maximum=1e6, unit="seconds")
    prefill_s = validate.real("prefill_s", prefill_s, minimum=0, maximum=1e6, unit="seconds")
    tpot_s = validate.real("tpot_s", tpot_s, minimum=1e-9, maximum=1e6, unit="seconds")
    n_tokens = validate.integer("n_tokens", n_tokens, maximum=1000)
    steps_before = validate.integer("steps_before", steps_before, maximum=1000)
    arrive_s = validate.real("arrive_s", arrive_s, minimum=0, maximum=1e9, unit="seconds")
    ms = 1e3
    if not 0 <= arrive_s < steps_before * step_s:
        raise ValueError(f"arrive_s must fall within the first {steps_before} steps "
                         f"(0 to {steps_before * step_s:g} s), got {arrive_s!r}")
    start = (np.floor(arrive_s / step_s) + 1) * step_s  # the next step boundary
    first = start + prefill_s
    tokens = first + tpot_s * np.arange(n_tokens)
    server = [(i * step_s, step_s, "tab:blue") for i in range(int(start / step_s + 0.5))]
    server.append((start, prefill_s, "tab:orange"))
    server += [(first + i * tpot_s, tpot_s, "tab:blue") for i in range(n_tokens - 1)]
    ax.broken_barh([(s * ms, w * ms) for s, w, _ in server], (1.6, 0.8),
                   facecolors=[c for *_, c in server], edgecolor="white")
    ax.broken_barh([(arrive_s * ms, (start - arrive_s) * ms), (start * ms, prefill_s * ms)],
                   (0.2, 0.8), facecolors=["lightgrey", "tab:orange"], edgecolor="white")
    ax.plot(tokens * ms, np.full(n_tokens, 0.6), "v", color="black", ms=8, ls="none")
    ax.annotate("", xy=(first * ms, 0.05), xytext=(arrive_s * ms, 0.05),
                arrowprops=dict(arrowstyle="<->", color="black"))
    ax.text((arrive_s + first) / 2 * ms, -0.3, "TTFT", ha="center", fontsize=10)
    ax.set(yticks=[0.6, 2.0], yticklabels=["new request", "server steps"],
           xlabel="time (ms)", ylim=(-0.6, 2.7))
    return {"queue_s": start - arrive_s, "ttft_s": first - arrive_s, "token_s": tokens}


def chunk_tradeoff(ax, chunks: Sequence[int], results: Sequence, *, color=None) -> dict:
    """Chunked prefill: the newcomer's TTFT (ms, x) against the running users' TPOT while the
    chunks run (ms, y), one point per chunk size, labelled; a dashed line at their TPOT with
    no prefill. ``results``: ``serving.chunked_prefill`` results, one per chunk size."""
    validate.axes("ax", ax, optional=False)
    chunks = validate.sequence("chunks", chunks, what="chunk sizes")
    for c in chunks:
        validate.integer("chunks", c)
    results = validate.sequence("results", results, what="serving.chunked_prefill results")
    if len(results) != len(chunks) or not all(isinstance(r, ChunkedPrefill) for r in results):
        raise ValueError(f"results must be one serving.chunked_prefill result per chunk size "
                         f"({len(chunks)}), got {validate.shorten(results)}")
    ttft = np.array([r.ttft_s for r in results]) * 1e3
    tpot = np.array([r.tpot_during_s for r in results]) * 1e3
    ax.plot(ttft, tpot, marker="o", color=color, label="kernel by kernel")
    floor_ttft = np.array([r.ttft_floor_s for r in results]) * 1e3
    floor_tpot = np.array([r.tpot_during_floor_s for r in results]) * 1e3
    ax.plot(floor_ttft, floor_tpot, marker="o", mfc="white", ls=":", color=color or "C0",
            label="floor")
    for c, x, y in zip(chunks, ttft, tpot, strict=True):
        ax.annotate(f"{c:,}", (x, y), textcoords="offset points", xytext=(5, 5), fontsize=9)
    ax.legend(fontsize=9, loc="upper right")
    without = results[0].tpot_without_s * 1e3
    ax.axhline(without, color="grey", ls="--")
    # a few points below the line, whatever the text size, so that the line does not strike it
    ax.annotate("no prefill running", (ttft.min(), without), xytext=(0, -6),
                textcoords="offset points", color="grey", fontsize=9, ha="left", va="top")
    # head room: the top point's label stays clear of the frame
    ax.set_ylim(0, 1.15 * max(tpot.max(), floor_tpot.max()))
    ax.set(xlabel="new request's TTFT (ms)", ylabel="running users' TPOT meanwhile (ms)")
    return {"ttft_ms": ttft, "tpot_ms": tpot, "tpot_without_ms": without,
            "floor_ttft_ms": floor_ttft, "floor_tpot_ms": floor_tpot}


def ttft_rows(model, accelerator, prompts, n_gpus: int = 8) -> list[dict]:
    """Per prompt length: the article's ``2NL`` over the GPUs' peaks (ms), the kernel-by-kernel
    TTFT (ms), the all-reduces' share of that time, attention's share of the FLOPs, and ``2NL``
    over the counted FLOPs. From :func:`llm_roofline.estimate`'s prefill breakdown."""
    from ..models import resolve

    cfg = resolve(model, "model")
    chip = get_accelerator(accelerator) if isinstance(accelerator, str) else accelerator
    rows = []
    for p in prompts:
        e = estimate(cfg, chip, 1, p, 1, n_gpus=n_gpus)
        ops = {r["op"]: r for r in e.breakdown("prefill")}
        counted = n_gpus * sum(r["flops"] for r in ops.values())  # all the GPUs
        article = 2 * cfg.n_params * p
        rows.append({"prompt": f"{p:,}",
                     "2NL / peaks (ms)": 1e3 * article / (n_gpus * chip.peak("bf16")),
                     "TTFT (ms)": 1e3 * e.ttft_s,
                     "all-reduce (time)": ops["allreduce"]["share"],
                     "attention (FLOPs)": n_gpus * ops["attention"]["flops"] / counted,
                     "2NL / counted": article / counted})
    return rows


def sla_rows(servers, prompt_len: int, output_len: int, **targets) -> list[dict]:
    """The best batch of each ``(model, chip, options)`` server for each arrival pattern, from
    :func:`llm_roofline.sla.best_batch`: four narrow columns (server, arrival, batch,
    tokens/s) and the bound, ``limited_by``, kept out of the table for the prose."""
    from ..sla import best_batch

    rows = []
    for name, chip, opts in servers:
        for arrival in ("burst", "joining"):
            c = best_batch(name, chip, prompt_len, output_len, arrival=arrival, **targets,
                           **opts)
            rows.append({"server": f"{name}, {opts.get('n_gpus', 1)}×{chip}",
                         "arrival": arrival, "batch": c.batch,
                         "tokens/s": c.throughput_tok_s, "limited_by": c.limited_by,
                         "model": name})
    return rows


def request_timeline(ax, model="llama-3-8b", accelerator="H100", batch: int = 32,
                     context: int = 2048, prompt: int = 2048, arrive_ms: float = 10.0) -> dict:
    """One request joining ``batch`` decoding users: the library's step times drawn by
    :func:`client_timeline` (the step in flight, the mixed step with its prompt, then the
    steps of ``batch + 1`` users)."""
    from .. import serving
    from ..calculator import decode_step

    step = decode_step(model, accelerator, batch, context).time_s
    first = serving.mixed_step(model, accelerator, batch, context, prompt).time_s
    tpot = decode_step(model, accelerator, batch + 1, context).time_s
    arrive = min(arrive_ms / 1e3, 2.99 * step)
    return client_timeline(ax, arrive_s=arrive, step_s=step, prefill_s=first, tpot_s=tpot,
                           n_tokens=6, steps_before=3)


SFU_EXP_PER_S = 3.9e12
"""An H100 SXM's special-function throughput (exponentials per second) that exercise ttft-5
uses: 3.9 T/s, as the FlashAttention-3 paper (Shah et al., 2024) gives it."""


def _ttft_1() -> float:
    from ..hardware import get_accelerator
    from ..models import get_model

    return 2 * get_model("llama-3-8b").n_params * 4096 / get_accelerator("H100").peak("bf16") * 1e3


def _ttft_2() -> float:
    from ..calculator import decode_step

    return decode_step("llama-3-8b", "H100", 48, 6144).time_s * 1e3


def _ttft_3() -> float:
    from ..sla import best_batch

    return best_batch("llama-3-70b", "H100", 1024, 256, tpot_max_s=0.015, ttft_max_s=1.0,
                      arrival="joining", n_gpus=4).batch


def _ttft_4() -> float:
    from ..serving import expected_tokens

    return expected_tokens(4, 0.6)


def _ttft_5() -> float:
    from ..models import get_model

    cfg, prompt = get_model("llama-3-70b"), 32768  # Llama-3.1-70B: the same layers and heads
    exps = cfg.n_layers * cfg.n_heads * prompt * (prompt + 1) / 2  # causal: one per score kept
    return exps / SFU_EXP_PER_S * 1e3


register("ttft-1", _ttft_1, unit="ms",
         hint="2 FLOPs per parameter per prompt token, over the dense BF16 peak.")


register("ttft-2", _ttft_2, unit="ms",
         hint="each user waits a whole decode step per token; do not divide by the batch.")


register("ttft-3", _ttft_3, unit="sequences", rtol=0.0,
         hint="sla.best_batch with arrival='joining' and n_gpus=4; its limited_by names the limit.")


register("ttft-4", _ttft_4, unit="tokens per step",
         hint="sum the geometric series 1 + alpha + ... + alpha**gamma.")


register("ttft-5", _ttft_5, unit="ms",
         hint="one exponential per causal score: layers x heads x L (L + 1) / 2, over 3.9e12/s.")


register_hint("ttft-cluster",
              "start with one replica: for each chip, precision and tensor-parallel degree, ask "
              "best_batch for the largest batch within both targets, divide 500 users by it to "
              "get the replicas, and multiply the GPUs by the price; only then compare")
