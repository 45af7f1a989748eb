"""The best batch under a latency target (SLA): the most tokens per second that still keep
every user's TPOT and TTFT within their limits, and the memory within the GPUs.

``best_batch(model, accelerator, prompt_len, output_len, tpot_max_s=..., ttft_max_s=...)``
sweeps the batch from 1 to the largest that fits in memory (``vram.max_batch``) and
keeps the batch of highest aggregate throughput among those that meet both limits. The TPOT
is ``estimate``'s (the mean decode step of the batch; every user's time per output token).
The TTFT depends on how requests arrive (``arrival``):

``"burst"``
    The whole batch arrives at once and is prefilled in one pass: ``estimate``'s TTFT, the
    worst case for the last request of a burst. It grows with the batch.
``"joining"``
    One request joins ``batch - 1`` users already decoding (continuous batching): its whole
    prompt rides one mixed step with their decode tokens (``serving.mixed_step``, the running
    users at the mean context ``prompt_len + output_len // 2``), as the command line's
    "TTFT, joining a server".

Both TPOT and TTFT grow with the batch, so the batches meeting both limits run from 1 up to
some largest one. ``limited_by`` names what stops the batch from growing: ``"tpot"``,
``"ttft"``, ``"memory"`` (the next batch would not fit, or not even one request does: then
``batch`` is 0), ``"roof"`` (throughput has stopped growing: every kernel that grows with the
batch is on its roof, so a larger batch that still meets both limits adds latency and, beyond
``ROOF_TOLERANCE``, no tokens per second; the smallest batch within it of the highest
throughput is kept), or ``"none"`` when
even batch 1 misses a limit (then ``batch`` is 0 and the times are batch 1's). Options are
``estimate``'s.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from . import validate
from .calculator import estimate
from .models import ModelConfig
from .serving import mixed_step
from .vram import max_batch

__all__ = ["ROOF_TOLERANCE", "SLAChoice", "best_batch", "ttft_joining"]

_OPTIONS = tuple(n for n, p in inspect.signature(estimate).parameters.items()
                 if p.kind is p.KEYWORD_ONLY)
"""The options ``best_batch`` and ``ttft_joining`` take: ``calculator.estimate``'s."""

ROOF_TOLERANCE = 1e-4
"""Throughput within this fraction of the best counts as the roof: past the critical batch only
the norms' weights (a few hundred kB a step) do not grow with the batch, so throughput still
creeps up by parts in a hundred thousand, which no one would trade latency for."""

MAX_SWEEP = 65_536
"""Batches up to this many are swept one by one; beyond, the limits are found by bisection."""

_MEMORY_OPTIONS = ("weight_dtype", "kv_dtype", "n_gpus", "act_dtype", "weight_group_size",
                   "reserve_fraction", "prefill_chunk")
_STEP_OPTIONS = ("weight_dtype", "kv_dtype", "compute_dtype", "act_dtype", "weight_group_size",
                 "n_gpus", "mbu", "mfu")


@dataclass(frozen=True)
class SLAChoice:
    """The best batch under a TPOT and a TTFT limit (seconds; tokens per second)."""

    batch: int  # 0 when no batch meets the limits
    tpot_s: float
    ttft_s: float
    throughput_tok_s: float  # batch / tpot_s (0 when batch is 0)
    limited_by: str  # "tpot", "ttft", "memory", "roof" or "none"
    memory_batch: int  # the largest batch that fits
    tpot_batch: int  # the largest batch (up to memory_batch) meeting the TPOT limit alone
    ttft_batch: int  # the largest batch (up to memory_batch) meeting the TTFT limit alone


def ttft_joining(model: ModelConfig | str, accelerator, batch: int, prompt_len: int,
                 output_len: int, **options) -> float:
    """TTFT (s) of one request whose prompt joins ``batch - 1`` users decoding at the mean
    context ``prompt_len + output_len // 2``: one mixed step (``serving.mixed_step``), plus
    ``queue_s`` if given."""
    validate.options("ttft_joining", options, _OPTIONS)
    b = validate.integer("batch", batch)
    p = validate.integer("prompt_len", prompt_len)
    o = validate.integer("output_len", output_len)
    queue = validate.real("queue_s", options.get("queue_s", 0.0), minimum=0, maximum=1e9,
                          unit="seconds")
    step = {k: v for k, v in options.items() if k in _STEP_OPTIONS}
    return mixed_step(model, accelerator, b - 1, p + o // 2, p, **step).time_s + queue


def best_batch(model: ModelConfig | str, accelerator, prompt_len: int, output_len: int, *,
               tpot_max_s: float, ttft_max_s: float, arrival: str = "burst",
               **options) -> SLAChoice:
    """The batch of highest throughput whose TPOT and TTFT meet the limits (module docs)."""
    validate.options("best_batch", options, _OPTIONS)
    tpot_max = validate.real("tpot_max_s", tpot_max_s, minimum=0, open_min=True, unit="seconds")
    ttft_max = validate.real("ttft_max_s", ttft_max_s, minimum=0, open_min=True, unit="seconds")
    arrival = validate.choice("arrival", arrival, ("burst", "joining"))
    p = validate.integer("prompt_len", prompt_len)
    o = validate.integer("output_len", output_len)
    fit = int(max_batch(model, accelerator, p, o,
                        **{k: v for k, v in options.items() if k in _MEMORY_OPTIONS}))
    top = max(fit, 1)
    if top > MAX_SWEEP:  # too many batches to sweep one by one: bisect (module docs)
        return _bisected(model, accelerator, p, o, tpot_max, ttft_max, arrival, fit, options)
    batches = np.arange(1, top + 1)
    e = estimate(model, accelerator, batches, p, o, **options)
    tpot = np.atleast_1d(e.tpot_s)
    if arrival == "burst":
        ttft = np.atleast_1d(e.ttft_s)
        ttft_batch = int(np.sum(ttft <= ttft_max))  # ttft grows with the batch
    else:  # one mixed step per batch is slow: bisect (the step grows with the batch)
        ttft = None
        ttft_batch = _largest(lambda b: ttft_joining(model, accelerator, b, p, o, **options)
                              <= ttft_max, top)
    tpot_batch = int(np.sum(tpot <= tpot_max))  # tpot grows with the batch
    last = min(fit, tpot_batch, ttft_batch)  # batches 1..last meet everything

    def ttft_at(b: int) -> float:
        if ttft is not None:
            return float(ttft[b - 1])
        return ttft_joining(model, accelerator, b, p, o, **options)

    if last == 0:
        return SLAChoice(0, float(tpot[0]), ttft_at(1), 0.0, "none" if fit else "memory",
                         fit, min(tpot_batch, fit), min(ttft_batch, fit))
    throughput = batches[:last] / tpot[:last]
    b = int(np.flatnonzero(throughput >= throughput.max() * (1 - ROOF_TOLERANCE))[0]) + 1
    limited = _limit(b, last, fit, tpot_batch)
    return SLAChoice(b, float(tpot[b - 1]), ttft_at(b), float(throughput[b - 1]), limited, fit,
                     min(tpot_batch, fit), min(ttft_batch, fit))


def _limit(b: int, last: int, fit: int, tpot_batch: int) -> str:
    """What stops the batch at ``b``: the roof (throughput peaked below ``last``, the largest
    allowed batch), memory, the TPOT target, or else the TTFT target."""
    if b < last:
        return "roof"
    if b == fit:
        return "memory"
    return "tpot" if b == tpot_batch else "ttft"


def _bisected(model, accelerator, p, o, tpot_max, ttft_max, arrival, fit, options) -> SLAChoice:
    """``best_batch`` when more than ``MAX_SWEEP`` batches fit: TPOT, TTFT and throughput
    all grow with the batch (each kernel's time per token falls or stays), so the largest batch
    meeting each limit, and the smallest batch of the highest throughput, are bisected."""
    def one(b):
        return estimate(model, accelerator, b, p, o, **options)

    def ttft(b):
        if arrival == "burst":
            return one(b).ttft_s
        return ttft_joining(model, accelerator, b, p, o, **options)

    tpot_batch = _largest(lambda b: one(b).tpot_s <= tpot_max, fit)
    ttft_batch = _largest(lambda b: ttft(b) <= ttft_max, fit)
    last = min(fit, tpot_batch, ttft_batch)
    if last == 0:
        first = one(1)
        return SLAChoice(0, float(first.tpot_s), float(ttft(1)), 0.0, "none", fit,
                         tpot_batch, ttft_batch)
    best = last / one(last).tpot_s
    b = last - _largest(lambda k: (last - k + 1) / one(last - k + 1).tpot_s
                        >= best * (1 - ROOF_TOLERANCE), last) + 1
    limited = _limit(b, last, fit, tpot_batch)
    e = one(b)
    return SLAChoice(b, float(e.tpot_s), float(ttft(b)), float(b / e.tpot_s), limited, fit,
                     tpot_batch, ttft_batch)


def _largest(meets, top: int) -> int:
    """The largest ``b`` in ``[1, top]`` with ``meets(b)`` (true up to some b, then false), else 0."""
    if not meets(1):
        return 0
    if meets(top):
        return top
    lo, hi = 1, top  # meets(lo), not meets(hi)
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (mid, hi) if meets(mid) else (lo, mid)
    return lo
