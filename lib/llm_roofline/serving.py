"""Serving techniques on the same rooflines: speculative decoding, mixed steps, disaggregation.

All three change only *which tokens share a forward pass*, and the article's ``I = B x L``
says why each pays: a weight matmul's intensity is the number of tokens that share one read of
the weights.

``speculative(...)``
    Each step verifies ``gamma`` drafted tokens per sequence in one pass of the target model,
    ``n_new = gamma + 1`` tokens per sequence, so the weight matmuls run at ``I = B x (gamma+1)``
    (``L = gamma + 1``) for about the bytes of one decode step. With acceptance rate ``alpha``
    (each drafted token independently accepted), a step yields
    ``(1 - alpha**(gamma + 1)) / (1 - alpha)`` tokens on average (``gamma + 1`` at
    ``alpha = 1``). The draft costs ``gamma`` decode steps of a draft model (``draft``: a
    ``ModelConfig`` or name, run on the same GPUs), of a multi-token-prediction module
    (``draft="mtp"``: one extra layer of the target's kind plus the shared LM head per drafted
    token, as DeepSeek-V3's MTP module), or nothing (``draft=None``: n-gram / prompt lookup).
``mixed_step(...)`` and ``chunked_prefill(...)``
    Chunked prefill puts ``B`` running decode tokens and a chunk of ``c`` prompt tokens of a new
    request into one step: each kernel's FLOPs are those of both, its weights are read once
    (MoE: the experts all ``B + c`` tokens touch), its KV traffic is both. So a chunk rides on
    the weight reads the decode step pays anyway, until the weight matmuls turn compute-bound
    (``B + c`` about the ridge); beyond that every chunk token costs the running users time.
    ``chunked_prefill`` gives the new request's TTFT and the running users' TPOT while it runs.
``disaggregated(...)``
    The same GPUs split into a prefill pool and a decode pool against all of them serving both:
    co-located, a new prompt is prefilled in one mixed step that every running user waits for;
    split, the decode pool never stalls, the prompt runs on fewer GPUs, and its KV cache crosses
    from one pool to the other.

Times are kernel by kernel as in ``calculator``: each kernel on its own roofline, one after
another, at ``mbu`` and ``mfu`` (1 by default). They are not floors: an engine that overlaps
kernels can beat them (``calculator``'s module docs, ``Estimate.tpot_floor_s``). Options are
``deployment.setup``'s.
"""

from __future__ import annotations

import dataclasses
import inspect
import re
from dataclasses import dataclass

from . import validate
from .calculator import decode_step, estimate
from .deployment import Setup, setup
from .models import ModelConfig
from .vram import memory

_SETUP_OPTIONS = tuple(n for n, p in inspect.signature(setup).parameters.items()
                      if p.kind is p.KEYWORD_ONLY)

MAX_CHUNKS = 1024
"""The most chunks ``chunked_prefill`` prices (one mixed step each)."""

__all__ = [
    "ChunkedPrefill", "Disaggregation", "MixedStep", "Speculative", "chunked_prefill",
    "disaggregated", "expected_tokens", "mixed_step", "speculative",
]


def expected_tokens(gamma: int, alpha: float) -> float:
    """Tokens a speculative step yields on average: ``(1 - alpha**(gamma+1)) / (1 - alpha)``.

    The accepted prefix of ``gamma`` drafts, each accepted with probability ``alpha``, plus the
    one token the target model always adds (the correction or the bonus token).
    """
    gamma = validate.integer("gamma", gamma, maximum=1024)
    alpha = validate.real("alpha", alpha, minimum=0, maximum=1)
    if alpha == 1:
        return float(gamma + 1)
    return (1 - alpha ** (gamma + 1)) / (1 - alpha)


@dataclass(frozen=True)
class Speculative:
    """One speculative step for ``batch`` sequences (seconds; tokens per sequence)."""

    step_s: float  # drafting plus verification
    verify_s: float  # the target's pass over gamma + 1 tokens per sequence
    draft_s: float  # gamma draft passes
    tokens_per_step: float  # expected, per sequence
    tpot_s: float  # step_s / tokens_per_step: each user's time per output token
    throughput_tok_s: float  # batch * tokens_per_step / step_s
    plain_tpot_s: float  # a plain decode step at the same context, for comparison

    @property
    def speedup(self) -> float:
        """Plain TPOT over speculative TPOT (above 1: speculation pays)."""
        return self.plain_tpot_s / self.tpot_s


def speculative(model: ModelConfig | str, accelerator, batch: int, context: int, gamma: int,
                alpha: float, *, draft: ModelConfig | str | None = "mtp",
                **options) -> Speculative:
    """A speculative (or MTP) decoding step of ``batch`` sequences at ``context`` tokens (module docs).

    ``context`` as for ``decode_step``: the first verified token attends to ``context`` tokens.
    ``options``: ``setup``'s (``weight_dtype``, ``kv_dtype``, ``n_gpus``, ``mbu``, ...).
    """
    validate.options("speculative", options, _SETUP_OPTIONS)
    s = setup(model, accelerator, **options)
    b = validate.integer("batch", batch)
    top = s.model.max_context - 1  # the verified tokens and one context token must fit
    if top < 1:
        raise ValueError(f"speculative decoding needs a context of at least 2 tokens; "
                         f"{s.model.name!r} has max_context {s.model.max_context}")
    gamma = validate.integer("gamma", gamma, maximum=min(1024, top))
    tokens = expected_tokens(gamma, alpha)
    ctx = validate.integer("context (with gamma drafted tokens)", context,
                           maximum=s.model.max_context - gamma)
    # the verify pass needs the logits of all gamma + 1 positions, to check every draft
    verify = _step_s(s, b, gamma + 1, ctx - 1, logits_tokens=b * (gamma + 1))
    if draft is None:
        draft_s = 0.0
    else:
        d = _draft_setup(s, draft, options)
        draft_s = sum(_step_s(d, b, 1, ctx - 1 + i) for i in range(gamma))
    step = verify + draft_s
    plain = decode_step(s.model, s.accelerator, b, ctx, **_step_options(s)).time_s
    return Speculative(step_s=step, verify_s=verify, draft_s=draft_s, tokens_per_step=tokens,
                       tpot_s=step / tokens, throughput_tok_s=b * tokens / step,
                       plain_tpot_s=plain)


@dataclass(frozen=True)
class MixedStep:
    """One step carrying ``batch`` decode tokens and a prompt chunk (seconds)."""

    time_s: float  # the mixed step: every running user's token waits this long
    decode_only_s: float  # the same decode step without the chunk
    chunk_only_s: float  # the chunk alone, as its own prefill pass
    ops: tuple[dict, ...] = dataclasses.field(default=(), repr=False, compare=False)
    floor_s: float = 0.0  # the step's floor: its busiest resource's time (math, memory, links)

    def breakdown(self) -> list[dict]:
        """Per kernel of the mixed step: ``op``, ``flops``, ``bytes``, ``time_s``, ``bound``."""
        return [dict(row) for row in self.ops]


def mixed_step(model: ModelConfig | str, accelerator, batch: int, context: int, chunk: int, *,
               chunk_past: int = 0, **options) -> MixedStep:
    """One step of ``batch`` decode tokens at ``context`` plus ``chunk`` prompt tokens of a new
    request that has ``chunk_past`` prompt tokens cached already (module docs).

    Per kernel: FLOPs of both parts, weights read once for all ``batch + chunk`` tokens, the
    KV traffic of both. ``batch`` may be 0 (the chunk alone).
    """
    validate.options("mixed_step", options, _SETUP_OPTIONS)
    s = setup(model, accelerator, **options)
    b = validate.integer("batch", batch, minimum=0)
    ctx = validate.integer("context", context, maximum=s.model.max_context)
    c = validate.integer("chunk", chunk, maximum=s.model.max_context)
    past = validate.integer("chunk_past", chunk_past, minimum=0,
                            maximum=s.model.max_context - c)
    both = _mixed_costs(s, b, ctx - 1, c, past)
    rows = tuple({"op": k, "flops": float(f), "bytes": float(m),
                  "time_s": float(s.roofline_s(k, f, m)),
                  "bound": ("element-wise" if s.math_dtype(k) is None else
                            "compute" if s.compute_bound(k, f, m) else "memory")}
                 for k, (f, m) in both.items() if f > 0 or m > 0)
    collectives = float(s.allreduce_s(b + c, b + 1))
    time = sum(r["time_s"] for r in rows) + collectives
    # the floor: the busiest resource, math and memory overlapped (calculator's module docs)
    floor = max(float(s.math_s(both)), sum(m for _, m in both.values()) / s.bandwidth,
                collectives)
    decode_only = _step_s(s, b, 1, ctx - 1) if b else 0.0
    chunk_only = _step_s(s, 1, c, past, absorbed=False, logits_tokens=1)
    return MixedStep(time_s=time, decode_only_s=decode_only, chunk_only_s=chunk_only, ops=rows,
                     floor_s=floor)


@dataclass(frozen=True)
class ChunkedPrefill:
    """A new request's prompt prefilled in chunks while ``batch`` users decode (seconds)."""

    chunks: int
    ttft_s: float  # the new request's: the sum of its mixed steps
    tpot_during_s: float  # the running users' mean TPOT while the chunks run
    tpot_without_s: float  # their TPOT with no prefill going on
    tpot_during_floor_s: float = 0.0  # the floor of those steps, mean over the chunks
    ttft_floor_s: float = 0.0  # the newcomer's TTFT at the floor: the sum of the steps' floors


def chunked_prefill(model: ModelConfig | str, accelerator, batch: int, context: int,
                    prompt_len: int, chunk: int, **options) -> ChunkedPrefill:
    """TTFT of one ``prompt_len`` prompt prefilled in chunks of ``chunk`` tokens, each riding a
    decode step of ``batch`` users at ``context``; and what those users' TPOT becomes.

    A smaller chunk lowers the running users' TPOT during the prefill (down to the decode step
    itself while the weight matmuls stay memory-bound) and raises the newcomer's TTFT (more
    steps, each reading all the weights). ``context`` stays fixed over the chunks.
    """
    validate.options("chunked_prefill", options, _SETUP_OPTIONS)
    s = setup(model, accelerator, **options)
    b = validate.integer("batch", batch)
    ctx = validate.integer("context", context, maximum=s.model.max_context)
    p = validate.integer("prompt_len", prompt_len, maximum=s.model.max_context)
    c = validate.integer("chunk", chunk, minimum=-(-p // MAX_CHUNKS), maximum=p)
    starts = range(0, p, c)
    mixed = [mixed_step(s.model, s.accelerator, b, ctx, min(c, p - i), chunk_past=i, **options)
             for i in starts]
    steps = [m.time_s for m in mixed]
    floors = [m.floor_s for m in mixed]
    without = _step_s(s, b, 1, ctx - 1)
    return ChunkedPrefill(chunks=len(steps), ttft_s=sum(steps),
                          tpot_during_s=sum(steps) / len(steps), tpot_without_s=without,
                          tpot_during_floor_s=sum(floors) / len(floors), ttft_floor_s=sum(floors))


@dataclass(frozen=True)
class Disaggregation:
    """Co-located against split prefill/decode pools, as each user sees it (seconds)."""

    colocated_ttft_s: float  # a new prompt prefilled in one mixed step on all GPUs
    colocated_tpot_s: float  # running users' TPOT with no prompt arriving
    colocated_stall_s: float  # their token that waits for the new prompt's mixed step
    split_ttft_s: float  # the prompt on the prefill pool, plus its KV cache's transfer
    split_tpot_s: float  # the decode pool's TPOT, never stalled by a prefill
    kv_transfer_s: float  # the prompt's KV cache from the prefill pool to the decode pool
    colocated_fits: bool
    split_fits: bool  # the batch in the decode pool and one prompt in the prefill pool


def disaggregated(model: ModelConfig | str, accelerator, batch: int, prompt_len: int,
                  output_len: int, *, prefill_gpus: int, decode_gpus: int,
                  **options) -> Disaggregation:
    """``batch`` users decoding, one new prompt arriving: co-located on ``prefill_gpus +
    decode_gpus`` GPUs, or split into the two pools (module docs).

    Each pool and the whole use tensor parallelism over their GPUs. The running users sit at the
    mean context ``prompt_len + output_len // 2``; the KV cache handoff goes over the
    interconnect inside a node and over the network when the pools span nodes.
    """
    if "n_gpus" in options:
        raise ValueError("disaggregated takes no n_gpus: the GPUs are prefill_gpus + decode_gpus")
    validate.options("disaggregated", options, _SETUP_OPTIONS)
    n_pre = validate.integer("prefill_gpus", prefill_gpus, maximum=2**20)
    n_dec = validate.integer("decode_gpus", decode_gpus, maximum=2**20)
    b = validate.integer("batch", batch)
    p = validate.integer("prompt_len", prompt_len)
    o = validate.integer("output_len", output_len)
    ctx = p + o // 2
    together = n_pre + n_dec
    for label, n in (("prefill_gpus + decode_gpus", together), ("prefill_gpus", n_pre),
                     ("decode_gpus", n_dec)):
        try:  # each pool and the whole: the message names the argument the user passed
            setup(model, accelerator, n_gpus=n, **options)
        except ValueError as err:
            raise ValueError(re.sub(rf"^n_gpus \({n}( GPUs)?\)", f"{label} ({n}\\1)", str(err))) from None
    whole = setup(model, accelerator, n_gpus=together, **options)
    both = mixed_step(model, accelerator, b, ctx, p, n_gpus=together, **options)
    colocated_tpot = estimate(model, accelerator, b, p, o, n_gpus=together, **options).tpot_s
    pre = setup(model, accelerator, n_gpus=n_pre, **options)
    prefill = _step_s(pre, 1, p, 0, absorbed=False, logits_tokens=1)
    split_tpot = estimate(model, accelerator, b, p, o, n_gpus=n_dec, **options).tpot_s
    cfg = whole.model
    kv_bytes = float(cfg.kv_cache_elements(p)) * whole.sizes["kv"]
    across = whole.nodes > 1
    # each prefill GPU sends its share of the cache in parallel over its own link
    transfer = float(whole.accelerator.send_s(kv_bytes / n_pre, across_nodes=across))
    mem_options = {k: v for k, v in options.items() if k in
                   ("weight_dtype", "kv_dtype", "act_dtype", "weight_group_size")}
    co_fits = bool(memory(model, accelerator, b + 1, p, o, n_gpus=together,
                          **mem_options).free >= 0)
    split_fits = bool(memory(model, accelerator, b, p, o, n_gpus=n_dec, **mem_options).free >= 0
                      and memory(model, accelerator, 1, p, 1, n_gpus=n_pre,
                                 **mem_options).free >= 0)
    return Disaggregation(
        colocated_ttft_s=both.time_s, colocated_tpot_s=colocated_tpot,
        colocated_stall_s=both.time_s, split_ttft_s=prefill + transfer, split_tpot_s=split_tpot,
        kv_transfer_s=transfer, colocated_fits=co_fits, split_fits=split_fits,
    )


# --- internals -------------------------------------------------------------------------------
def _step_options(s: Setup) -> dict:
    return dict(weight_dtype=s.weight_dtype, kv_dtype=s.kv_dtype, compute_dtype=s.compute_dtype,
                act_dtype=s.act_dtype, weight_group_size=s.weight_group_size, n_gpus=s.n_gpus,
                mbu=s.mbu, mfu=s.mfu, attention_dtype=s.attention_dtype)


def _step_s(s: Setup, batch, n_new, n_past, *, absorbed: bool = True, logits_tokens=None) -> float:
    """Time of one pass: the per-kernel rooflines plus the all-reduces."""
    costs = s.pass_costs(batch, n_new, n_past, absorbed=absorbed, logits_tokens=logits_tokens)
    kernels = sum(s.roofline_s(k, f, w + kv) for k, (f, w, kv) in costs.items())
    logits = batch if logits_tokens is None else logits_tokens  # op_elements: the last positions
    return float(kernels + s.allreduce_s(batch * n_new, logits))


def _draft_setup(s: Setup, draft, options: dict) -> Setup:
    if isinstance(draft, str) and draft.lower() == "mtp":
        cfg = s.model
        module = dataclasses.replace(cfg, name=f"{cfg.name} MTP module", n_layers=1,
                                     first_dense_layers=0)
        return setup(module, s.accelerator, **options)
    if not isinstance(draft, ModelConfig | str):
        raise ValueError(f"draft must be a model (a name or a ModelConfig), 'mtp' or None, got "
                         f"{validate.shorten(draft)}")
    try:
        return setup(draft, s.accelerator, **options)
    except ValueError as err:  # the message names the argument the user passed
        raise ValueError(f"draft: {err} (or draft='mtp' for the model's own MTP module, "
                         "None for no draft)") from None


def _mixed_costs(s: Setup, batch: int, n_past: int, chunk: int, chunk_past: int) -> dict:
    """Per kernel (FLOPs, bytes) of ``batch`` decode tokens plus one chunk: weights read once."""
    parts = []
    if batch:
        parts.append(s.pass_costs(batch, 1, n_past, absorbed=True))
    parts.append(s.pass_costs(1, chunk, chunk_past, absorbed=False, logits_tokens=1))
    # weight traffic of all batch + chunk tokens together (MoE: the experts they all touch)
    weights = s.pass_costs(1, batch + chunk, 0, absorbed=False)
    out = {}
    for k in weights:
        flops = sum(float(p[k][0]) for p in parts if k in p)
        kv = sum(float(p[k][2]) for p in parts if k in p)
        out[k] = (flops, float(weights[k][1]) + kv)
    return out
