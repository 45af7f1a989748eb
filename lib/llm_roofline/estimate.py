"""The VRAM and throughput calculator: memory, TTFT, TPOT and throughput of a served model.

``estimate(model, accelerator, batch, prompt_len, output_len, ...)`` answers, for ``batch``
requests of ``prompt_len`` prompt tokens and ``output_len`` generated tokens served together
with tensor parallelism over ``n_gpus`` chips:

Memory (bytes per GPU)
    Weights at ``weight_dtype`` (int4 with one fp16 scale per ``weight_group_size`` weights;
    the embedding and LM head stay 16-bit when the body is quantised, as GPTQ, AWQ and FP8
    checkpoints keep them); the KV cache of the whole batch at its final context
    ``prompt_len + output_len``, at ``kv_dtype``; activations, the working set of one layer for
    one prefill chunk of ``min(batch*prompt_len, prefill_chunk)`` tokens plus the batch's last
    fp32 logits; and a runtime reserve, ``reserve_fraction`` of the memory (CUDA context,
    allocator fragmentation, graphs: vLLM's default ``gpu_memory_utilization=0.9`` leaves 10 %).
    It fits when weights + KV + activations <= memory - reserve.
TTFT (s)
    The prefill of the whole batch, one roofline per operation: each op takes
    ``max(FLOPs / (peak * mfu), bytes / (bandwidth * mbu))``, so each is compute- or
    memory-bound on its own; plus the tensor-parallel all-reduces and ``queue_s``. The LM head
    runs on the last position of each sequence only, as engines compute logits only where a
    token is sampled (``formulas.op_costs`` counts it on every new token, its own convention).
TPOT (s)
    The time of one decode step, which is every user's time per output token:
    ``max(bytes / (bandwidth * mbu), FLOPs / (peak * mfu))`` for the whole step (weights, plus
    the whole batch's KV cache), plus the all-reduces; averaged exactly over the
    ``output_len - 1`` steps as the context grows. The aggregate throughput is
    ``batch / TPOT``; ``TPOT / batch`` is the amortised time per token, not anyone's latency.
    With ``output_len = 1`` no decode step happens; the decode fields then describe the step
    that would make a second token (context ``prompt_len + 1``). For one step at a given
    context, call ``decode_step``.

Bytes counted are the compulsory traffic: weights (each distinct expert a step touches, for
MoE) and the KV cache. Activations are left out, as a fused engine keeps most of them on chip;
FLOPs are every op's (``formulas``). With ``mbu = mfu = 1`` the result is therefore a bound
that no engine can beat. Real engines reach a fraction of each peak: model bandwidth
utilisation (MBU, achieved bytes/s over peak in decode) and model FLOPs utilisation (MFU,
achieved FLOP/s over the dense peak in prefill). Pope et al. (2022) report 76 % MFU for
large-batch prefill of PaLM 540B on TPU v4; the Databricks/MosaicML inference study defines MBU
and measures it well below 1 for batch-1 decode on A100/H100, lower still as tensor parallelism
spreads small matrices over more GPUs. As a starting point use ``mfu`` about 0.5-0.7 and
``mbu`` about 0.6-0.8 for a tuned engine, and measure your own machine with
``llm_roofline.measure`` for a forecast.

Tensor parallelism splits attention heads, MLP and experts (each GPU holds ``1/n`` of every
expert), and the vocabulary; the norms, the router and MLA's down-projections are replicated;
with more GPUs than KV heads each GPU keeps one KV head (the cache is replicated), and MLA's
latent cache, shared by all heads, is replicated on every GPU. Each layer all-reduces its
attention and MLP outputs: a ring all-reduce of ``m`` bytes moves ``2*(n-1)/n * m`` bytes each
way per GPU, over half the (bidirectional) interconnect bandwidth a chip can use in a group of
``n`` (``Accelerator.group_bandwidth``: all of it behind a switch such as NVLink; only ``n - 1``
links of a mesh such as MI300X's Infinity Fabric); latency per all-reduce (microseconds) is left
out. More than one GPU needs an interconnect in the data: without one, ``n_gpus > 1`` raises.

Every size may be a NumPy array (they broadcast): a sweep of 100,000 (batch, context) points
is one call (see ``benchmarks/bench_estimate.py``).
"""

from __future__ import annotations

import numbers
from dataclasses import dataclass

import numpy as np

from . import formulas
from .dtypes import bytes_per_element, canonical
from .hardware import Accelerator, get_accelerator
from .models import ModelConfig, get_model

# ops that tensor parallelism replicates on every GPU (norms, residual adds, the router,
# MLA's query and latent down-projections); ops reading or writing the KV cache follow the
# KV heads; every other op is split n ways. The one rule for each op's FLOPs, its bytes and,
# through ModelConfig.params_by_op, the weights each GPU holds.
_REPLICATED = {"attn_norm", "mlp_norm", "residual", "final_norm", "router",
               "q_a_proj", "q_a_norm", "kv_a_proj", "kv_a_norm"}
_KV_OPS = {"k_proj", "v_proj", "kv_write", "kv_read"}
_HEAD_OPS = {"embed", "lm_head"}  # weights kept 16-bit when the body is quantised
_FLOAT_FORMATS = {"fp32", "bf16", "fp16"}


@dataclass(frozen=True)
class Memory:
    """Memory per GPU, bytes (arrays when the inputs are)."""

    weights: float
    kv_cache: float
    activations: float
    reserve: float
    capacity: float

    @property
    def used(self):
        """Weights + KV cache + activations."""
        return self.weights + self.kv_cache + self.activations

    @property
    def usable(self):
        """Capacity less the runtime reserve."""
        return self.capacity - self.reserve

    @property
    def free(self):
        """Usable memory left over (negative: it does not fit)."""
        return self.usable - self.used


@dataclass(frozen=True)
class Estimate:
    """What ``estimate`` computes; times in seconds, memory in bytes per GPU.

    ``tpot_s`` is the duration of one decode step: each of the ``batch`` users waits that long
    for each of their tokens. ``throughput_tok_s = batch / tpot_s`` is the decode tokens per
    second of the whole group of ``n_gpus``. ``bound`` says what limits a decode step
    (``"memory"`` or ``"compute"``), ``prefill_bound`` the same for the whole prefill.
    ``bandwidth_utilisation`` is the fraction of peak bandwidth a decode step keeps busy.
    """

    model: str
    accelerator: str
    batch: object
    prompt_len: object
    output_len: object
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    n_gpus: int
    mbu: float
    mfu: float
    memory: Memory
    fits: object
    ttft_s: object
    prefill_bound: object
    tpot_s: object
    bound: object
    throughput_tok_s: object
    decode_bytes: object  # per GPU, mean over the decode steps
    decode_flops: object  # per GPU, mean over the decode steps
    allreduce_s: object  # per decode step
    bandwidth_utilisation: object

    @property
    def time_per_token_s(self):
        """``tpot_s / batch``: the amortised time per token of the aggregate; no user sees it."""
        return self.tpot_s / self.batch

    @property
    def e2e_s(self):
        """One request's latency: TTFT, then ``output_len - 1`` decode steps."""
        return self.ttft_s + (self.output_len - 1) * self.tpot_s

    @property
    def decode_intensity(self):
        """FLOPs per byte of a decode step (per GPU)."""
        return self.decode_flops / self.decode_bytes


def estimate(
    model: ModelConfig | str,
    accelerator: Accelerator | str,
    batch,
    prompt_len,
    output_len,
    *,
    weight_dtype: str = "bf16",
    kv_dtype: str = "bf16",
    n_gpus: int = 1,
    mbu: float = 1.0,
    mfu: float = 1.0,
    compute_dtype: str | None = None,
    act_dtype: str = "bf16",
    weight_group_size: int = 128,
    queue_s: float = 0.0,
    reserve_fraction: float = 0.1,
    prefill_chunk: int = 8192,
) -> Estimate:
    """Memory, TTFT, TPOT and throughput of ``batch`` requests served together (module docs).

    ``model``: a ``ModelConfig`` or a built-in name; ``accelerator``: an ``Accelerator`` or a
    name. ``batch``, ``prompt_len`` and ``output_len`` are positive integers or arrays of them.
    ``compute_dtype`` (the tensor math) defaults to fp8 for fp8 weights and int8 for int8
    weights where the chip has that peak, else bf16 (int4 weights are dequantised to bf16).
    ``mbu``, ``mfu``: achieved fractions of peak bandwidth and peak FLOP/s, in (0, 1].
    """
    cfg, chip, b, p, o = _inputs(model, accelerator, batch, prompt_len, output_len)
    n_gpus = _count("n_gpus", n_gpus)
    mbu, mfu = _fraction("mbu", mbu), _fraction("mfu", mfu)
    if isinstance(queue_s, bool) or not isinstance(queue_s, numbers.Real) or not (
        np.isfinite(queue_s) and queue_s >= 0
    ):
        raise ValueError(f"queue_s must be a non-negative number of seconds, got {queue_s!r}")
    shares = _shares(cfg, n_gpus)
    link = _link_bandwidth(chip, n_gpus)
    compute = _compute_dtype(chip, weight_dtype, compute_dtype)
    peak, bw = chip.peak(compute) * mfu, chip.bandwidth * mbu
    sizes = _sizes(weight_dtype, kv_dtype, act_dtype, weight_group_size)
    memory = _memory(cfg, chip, b, p, o, n_gpus, sizes, reserve_fraction, prefill_chunk)

    # prefill: one roofline per op, the whole batch in one pass; logits at the last position only
    ops = formulas.op_elements(cfg, b, p, 0, absorbed=False)
    ops["lm_head"] = formulas.op_elements(cfg, b, 1, 0)["lm_head"]
    prefill_flops = prefill_bytes = ttft = 0.0
    for op, (flops, weights, kv, _act) in ops.items():
        f, m = flops * shares[op], _traffic(op, weights, kv, sizes) * shares[op]
        ttft = ttft + np.maximum(f / peak, m / bw)
        prefill_flops, prefill_bytes = prefill_flops + f, prefill_bytes + m
    ttft = ttft + _allreduce_s(cfg, b * p, n_gpus, link, sizes["act"]) + float(queue_s)
    prefill_bound = np.where(prefill_flops / peak >= prefill_bytes / bw, "compute", "memory")

    # decode: steps see contexts prompt_len+1 ... prompt_len+output_len-1, affine in between
    steps = np.maximum(o - 1, 1)
    first, last = (_decode_step(cfg, b, p + k, shares, sizes) for k in (0, steps - 1))
    t_mem = [m / bw for _, m in (first, last)]
    t_cmp = [f / peak for f, _ in (first, last)]
    allreduce = _allreduce_s(cfg, b, n_gpus, link, sizes["act"])
    tpot = _mean_of_max(t_mem[0], t_mem[1], t_cmp[0], t_cmp[1], steps) + allreduce
    mean_flops, mean_bytes = (first[0] + last[0]) / 2, (first[1] + last[1]) / 2
    bound = np.where(mean_flops / peak > mean_bytes / bw, "compute", "memory")

    return Estimate(
        model=cfg.name, accelerator=chip.name, batch=_out(b), prompt_len=_out(p),
        output_len=_out(o), weight_dtype=canonical(weight_dtype), kv_dtype=canonical(kv_dtype),
        compute_dtype=compute, n_gpus=n_gpus, mbu=mbu, mfu=mfu, memory=memory,
        fits=_out(memory.free >= 0), ttft_s=_out(ttft), prefill_bound=_out(prefill_bound),
        tpot_s=_out(tpot), bound=_out(bound), throughput_tok_s=_out(b / tpot),
        decode_bytes=_out(mean_bytes), decode_flops=_out(mean_flops), allreduce_s=_out(allreduce),
        bandwidth_utilisation=_out(mean_bytes / tpot / chip.bandwidth),
    )


@dataclass(frozen=True)
class DecodeStep:
    """One decode step, per GPU: its time (s, all-reduces included), what bounds it
    (``"memory"`` or ``"compute"``), its compulsory bytes and its FLOPs (arrays when the
    inputs are)."""

    time_s: object
    bound: object
    bytes: object
    flops: object
    allreduce_s: object


def decode_step(model, accelerator, batch, context, *, weight_dtype="bf16", kv_dtype="bf16",
                compute_dtype=None, n_gpus=1, mbu=1.0, mfu=1.0, act_dtype="bf16",
                weight_group_size=128) -> DecodeStep:
    """One decode step of ``batch`` sequences whose attention spans ``context`` tokens each.

    The step reads ``context - 1`` cached tokens per sequence and adds one: it makes token
    ``context + 1 - prompt_len`` of a request with ``prompt_len`` prompt tokens. Its time is
    ``max(bytes / (bandwidth * mbu), FLOPs / (peak * mfu))`` plus the all-reduces: every
    user's TPOT at that context. Arguments as for ``estimate``.
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    b, ctx = _positive_ints("batch", batch), _contexts(cfg, context)
    n_gpus = _count("n_gpus", n_gpus)
    mbu, mfu = _fraction("mbu", mbu), _fraction("mfu", mfu)
    shares = _shares(cfg, n_gpus)
    link = _link_bandwidth(chip, n_gpus)
    peak = chip.peak(_compute_dtype(chip, weight_dtype, compute_dtype)) * mfu
    sizes = _sizes(weight_dtype, kv_dtype, act_dtype, weight_group_size)
    flops, moved = _decode_step(cfg, b, ctx - 1, shares, sizes)
    t_mem, t_cmp = moved / (chip.bandwidth * mbu), flops / peak
    allreduce = _allreduce_s(cfg, b, n_gpus, link, sizes["act"])
    return DecodeStep(
        time_s=_out(np.maximum(t_mem, t_cmp) + allreduce),
        bound=_out(np.where(t_cmp > t_mem, "compute", "memory")),
        bytes=_out(moved), flops=_out(flops), allreduce_s=_out(allreduce),
    )


def memory(model, accelerator, batch, prompt_len, output_len, *, weight_dtype="bf16",
           kv_dtype="bf16", n_gpus=1, act_dtype="bf16", weight_group_size=128,
           reserve_fraction=0.1, prefill_chunk=8192) -> Memory:
    """Only the memory part of ``estimate`` (bytes per GPU), with the same arguments."""
    cfg, chip, b, p, o = _inputs(model, accelerator, batch, prompt_len, output_len)
    n_gpus = _count("n_gpus", n_gpus)
    _shares(cfg, n_gpus)
    _link_bandwidth(chip, n_gpus)  # more than one GPU needs an interconnect
    sizes = _sizes(weight_dtype, kv_dtype, act_dtype, weight_group_size)
    return _memory(cfg, chip, b, p, o, n_gpus, sizes, reserve_fraction, prefill_chunk)


def max_batch(model, accelerator, prompt_len, output_len, **kwargs):
    """The largest batch whose memory fits (0 if not even one request fits).

    ``kwargs`` are ``memory``'s. Context arrays broadcast; the answer is found by bisection on
    the same memory function ``estimate`` uses (memory grows with the batch).
    """
    probe = memory(model, accelerator, 1, prompt_len, output_len, **kwargs)
    lo = np.zeros(np.shape(probe.used), dtype=np.int64)  # fits (0 trivially)
    hi = np.full_like(lo, 2**24)  # does not fit, or the search limit
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        fits = memory(model, accelerator, mid, prompt_len, output_len, **kwargs).free >= 0
        lo, hi = np.where(fits, mid, lo), np.where(fits, hi, mid)
    return _out(lo)


def gpus_needed(model, accelerator, batch, prompt_len, output_len, *, max_gpus=128, **kwargs):
    """The fewest GPUs (a tensor-parallel degree the heads allow) whose memory fits.

    ``None`` when no degree up to ``max_gpus`` fits, or when one GPU does not fit and the
    accelerator has no interconnect in the data (so tensor parallelism is impossible).
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    for n in range(1, _count("max_gpus", max_gpus) + 1):
        if n > 1 and chip.group_bandwidth(n) is None:
            return None
        try:
            _shares(cfg, n)
        except ValueError:
            continue
        mem = memory(cfg, chip, batch, prompt_len, output_len, n_gpus=n, **kwargs)
        if np.all(mem.free >= 0):
            return n
    return None


def critical_batch(model, accelerator, context, *, weight_dtype="bf16", kv_dtype="bf16",
                   compute_dtype=None, n_gpus=1, limit=2**20):
    """The smallest batch at which a decode step at ``context`` tokens is compute-bound.

    ``None`` (or -1 in an array) when even ``limit`` is memory-bound: the KV cache's own
    intensity (``2 * n_heads / n_kv_heads`` FLOPs per cached element, ``n_heads / n_kv_heads``
    per byte at 16 bits) stays below the ridge, so at long contexts more batch never reaches
    the roof. Memory capacity is ignored here.
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    ctx = _contexts(cfg, context)
    shares = _shares(cfg, _count("n_gpus", n_gpus))
    ratio = chip.peak(_compute_dtype(chip, weight_dtype, compute_dtype)) / chip.bandwidth
    sizes = _sizes(weight_dtype, kv_dtype, "bf16", 128)

    def compute_bound(b):
        flops, moved = _decode_step(cfg, b, ctx - 1, shares, sizes)
        return flops >= ratio * moved

    lo = np.zeros(ctx.shape, dtype=np.int64)  # memory-bound (batch 0: by convention)
    hi = np.full_like(lo, limit)
    never = ~compute_bound(hi)
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        ok = compute_bound(mid)
        lo, hi = np.where(ok, lo, mid), np.where(ok, mid, hi)
    answer = np.where(never, -1, hi)
    if np.ndim(answer) == 0:
        return None if never else int(answer)
    return answer


# --- internals -------------------------------------------------------------------------------
def _out(x):
    """0-d arrays as Python scalars, anything else unchanged."""
    return np.asarray(x).item() if np.ndim(x) == 0 else x


def _model(model) -> ModelConfig:
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        return get_model(model)
    raise ValueError(f"model must be a ModelConfig or a built-in model name, got {model!r}")


def _positive_ints(name: str, value) -> np.ndarray:
    array = np.asarray(value)
    if array.dtype == bool or not np.issubdtype(array.dtype, np.number):
        raise ValueError(f"{name} must be a positive integer (or an array of them), got {value!r}")
    if array.size == 0:
        raise ValueError(
            f"{name} must be a positive integer or a non-empty array of them, got {value!r}"
        )
    bad = ~(np.isfinite(array) & (array >= 1) & (array == np.round(array)))
    if np.any(bad):
        raise ValueError(
            f"{name} must be a positive integer (or an array of them), "
            f"got {array[bad].flat[0].item()!r}"
        )
    return array.astype(np.int64)


def _inputs(model, accelerator, batch, prompt_len, output_len):
    cfg, chip = _model(model), get_accelerator(accelerator)
    b, p, o = (_positive_ints(n, v) for n, v in
               (("batch", batch), ("prompt_len", prompt_len), ("output_len", output_len)))
    if np.any(p + o > cfg.max_context):
        worst = int(np.max(p + o))
        raise ValueError(
            f"prompt_len + output_len = {worst} exceeds the context limit of {cfg.name!r}: "
            f"max_context = {cfg.max_context}"
        )
    return cfg, chip, b, p, o


def _contexts(cfg: ModelConfig, context) -> np.ndarray:
    ctx = _positive_ints("context", context)
    if np.any(ctx > cfg.max_context):
        raise ValueError(f"context must be at most max_context = {cfg.max_context} of {cfg.name!r}")
    return ctx


def _count(name: str, value) -> int:
    """A positive integer (Python or NumPy) as an ``int``; anything else raises."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral) or value < 1:
        raise ValueError(f"{name} must be a positive integer, got {value!r}")
    return int(value)


def _fraction(name: str, value) -> float:
    """A fraction of a peak in (0, 1] (Python or NumPy number) as a ``float``."""
    if isinstance(value, bool) or not isinstance(value, numbers.Real) or not 0 < value <= 1:
        raise ValueError(f"{name} must be a fraction of the peak in (0, 1], got {value!r}")
    return float(value)


def _kv_share(cfg: ModelConfig, n_gpus: int) -> float:
    """Fraction of the KV heads (and their cache) each GPU holds."""
    if cfg.is_mla:
        return 1.0  # one latent serves all heads: every GPU keeps all of it
    return max(cfg.n_kv_heads // n_gpus, 1) / cfg.n_kv_heads


def _shares(cfg: ModelConfig, n_gpus: int) -> dict[str, float]:
    """Per op, the fraction of its FLOPs and bytes one GPU does under tensor parallelism."""
    if cfg.n_heads % n_gpus:
        raise ValueError(
            f"n_gpus ({n_gpus}) must divide n_heads ({cfg.n_heads}) of {cfg.name!r} "
            "for tensor parallelism"
        )
    kv = cfg.n_kv_heads
    if not cfg.is_mla and kv % n_gpus and n_gpus % kv:
        raise ValueError(
            f"n_gpus ({n_gpus}) must divide n_kv_heads ({kv}) of {cfg.name!r}, or be a multiple "
            "of it (then the KV heads are replicated)"
        )
    kv_share = _kv_share(cfg, n_gpus)
    replicated = _REPLICATED | (_KV_OPS if cfg.is_mla else set())
    return {
        op: 1.0 if op in replicated else kv_share if op in _KV_OPS else 1.0 / n_gpus
        for op in formulas.ops_for(cfg)
    }


def _link_bandwidth(chip: Accelerator, n_gpus: int) -> float:
    """Interconnect bytes/s (both directions) one chip uses in a group of ``n_gpus``."""
    if n_gpus == 1:
        return 0.0
    bandwidth = chip.group_bandwidth(n_gpus)
    if bandwidth is None:
        raise ValueError(
            f"{chip.name} has no interconnect in the data for tensor parallelism; "
            f"n_gpus must be 1, got {n_gpus}"
        )
    return bandwidth


def _compute_dtype(chip: Accelerator, weight_dtype: str, compute_dtype: str | None) -> str:
    if compute_dtype is not None:
        chip.peak(compute_dtype)  # raises if the chip lacks it
        return canonical(compute_dtype)
    weights = canonical(weight_dtype)
    # fp8 and int8 weights run fp8/int8 tensor math (W8A8); int4 weights are dequantised (W4A16)
    wanted = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "int4": "bf16"}.get(weights, weights)
    if wanted in chip.precisions:
        return wanted
    return "bf16"


def _sizes(weight_dtype, kv_dtype, act_dtype, group_size) -> dict[str, float]:
    """Bytes per element: body weights, 16-bit head, KV cache, activations."""
    weights = canonical(weight_dtype)
    group = group_size if weights == "int4" else None
    return {
        "weight": float(bytes_per_element(weights, group)),
        "head": float(bytes_per_element(weights if weights in _FLOAT_FORMATS else "bf16")),
        "kv": float(bytes_per_element(kv_dtype)),
        "act": float(bytes_per_element(act_dtype)),
    }


def _traffic(op: str, weights, kv, sizes):
    """Compulsory bytes of an op: its weights and its KV-cache traffic."""
    return weights * sizes["head" if op in _HEAD_OPS else "weight"] + kv * sizes["kv"]


def _decode_step(cfg, b, n_past, shares, sizes):
    """Per-GPU (FLOPs, compulsory bytes) of one decode step with ``n_past`` cached tokens."""
    flops = moved = 0.0
    ops = formulas.op_elements(cfg, b, 1, n_past, absorbed=True)
    for op, (f, weights, kv, _act) in ops.items():
        flops = flops + f * shares[op]
        moved = moved + _traffic(op, weights, kv, sizes) * shares[op]
    return flops, moved


def _allreduce_s(cfg, tokens, n_gpus, link, act_bytes):
    """Two ring all-reduces of the hidden state per layer (after attention and after the MLP)."""
    if n_gpus == 1:
        return np.zeros(np.shape(tokens))
    message = tokens * cfg.hidden_size * act_bytes
    per_gpu = 2 * (n_gpus - 1) / n_gpus * message  # bytes each GPU sends (and receives)
    return 2 * cfg.n_layers * per_gpu / (link / 2)


def _mean_of_max(m0, m1, c0, c1, n):
    """Mean over ``n`` evenly spaced steps of ``max(m, c)``, both affine from (m0, c0) to (m1, c1).

    Exact: the steps where ``c > m`` form a prefix or a suffix, and there the excess
    ``g = c - m`` is an arithmetic series.
    """
    g0 = c0 - m0
    slope = ((c1 - m1) - g0) / np.maximum(n - 1, 1)
    with np.errstate(divide="ignore", invalid="ignore"):
        crossing = np.where(slope != 0, -g0 / np.where(slope != 0, slope, 1), 0.0)
    # prefix 0 .. k-1 where g > 0 (falling excess); suffix start .. n-1 (rising excess)
    prefix = np.clip(np.ceil(crossing), 0, n)
    start = np.clip(np.floor(crossing) + 1, 0, n)
    count = np.where(slope < 0, np.where(g0 > 0, prefix, 0),
                     np.where(slope > 0, n - start, np.where(g0 > 0, n, 0)))
    first = np.where(slope > 0, g0 + slope * start, g0)
    excess = count * first + slope * count * (count - 1) / 2
    return np.where(n > 1, (m0 + m1) / 2, m0) + excess / n


def _weight_elements_per_gpu(cfg: ModelConfig, n_gpus: int) -> tuple[float, float]:
    """(body, embedding + head) parameters one GPU holds: each op's share of its weights."""
    shares = _shares(cfg, n_gpus)
    params = cfg.params_by_op()
    body = sum(n * shares[op] for op, n in params.items() if op not in _HEAD_OPS)
    return body, sum(params[op] * shares[op] for op in _HEAD_OPS)


def _memory(cfg, chip, b, p, o, n_gpus, sizes, reserve_fraction, prefill_chunk) -> Memory:
    if (isinstance(reserve_fraction, bool) or not isinstance(reserve_fraction, numbers.Real)
            or not 0 <= reserve_fraction < 1):
        raise ValueError(f"reserve_fraction must be in [0, 1), got {reserve_fraction!r}")
    prefill_chunk = _count("prefill_chunk (tokens)", prefill_chunk)
    body, head = _weight_elements_per_gpu(cfg, n_gpus)
    weights = body * sizes["weight"] + head * sizes["head"]
    kv_cache = b * (p + o) * cfg.kv_elements_per_token * _kv_share(cfg, n_gpus) * sizes["kv"]
    tokens = np.minimum(b * p, prefill_chunk)
    activations = (tokens * _activation_elements_per_token(cfg, n_gpus) * sizes["act"]
                   + b * cfg.vocab_size / n_gpus * 4)  # the last position's fp32 logits
    capacity = chip.memory_bytes
    shape = np.broadcast_shapes(np.shape(kv_cache), np.shape(activations))
    return Memory(
        weights=_out(np.broadcast_to(float(weights), shape)),
        kv_cache=_out(kv_cache * 1.0),
        activations=_out(activations * 1.0),
        reserve=float(reserve_fraction) * capacity,
        capacity=float(capacity),
    )


def _activation_elements_per_token(cfg: ModelConfig, n_gpus: int) -> float:
    """Elements per token of one layer's working set: the residual and its normed copy, plus
    the wider of the attention projections and the MLP intermediate (gate and up)."""
    if cfg.is_mla:  # queries, and keys and values up-projected from the latent
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        attention = (cfg.n_heads * (qk + cfg.qk_nope_head_dim + cfg.v_head_dim) / n_gpus
                     + cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    else:
        kv_heads = cfg.n_kv_heads * _kv_share(cfg, n_gpus)
        attention = (cfg.n_heads / n_gpus + 2 * kv_heads) * cfg.head_dim
    mlp = 2 * cfg.intermediate_size if cfg.n_layers > cfg.n_moe_layers else 0
    if cfg.is_moe:
        experts = cfg.n_experts_per_token + cfg.n_shared_experts
        mlp = max(mlp, 2 * experts * cfg.moe_intermediate_size)
    return 2 * cfg.hidden_size + max(attention, mlp / n_gpus)
