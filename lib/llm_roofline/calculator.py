"""The VRAM and throughput calculator: memory, TTFT, TPOT and throughput of a served model.

``estimate(model, accelerator, batch, prompt_len, output_len, ...)`` answers, for ``batch``
requests of ``prompt_len`` prompt tokens and ``output_len`` generated tokens served together
with tensor parallelism over ``n_gpus`` chips:

Memory (bytes per GPU)
    Weights at ``weight_dtype`` (int4 with one fp16 scale per ``weight_group_size`` weights;
    the embedding and LM head stay 16-bit when the body is quantised, as GPTQ, AWQ and FP8
    checkpoints keep them); the KV cache of the whole batch at its final context
    ``prompt_len + output_len`` (``ModelConfig.kv_cache_elements``), at ``kv_dtype``;
    activations, the working set of one layer for one prefill chunk of
    ``min(batch*prompt_len, prefill_chunk)`` tokens plus the batch's last fp32 logits; and a
    runtime reserve, ``reserve_fraction`` of the memory (CUDA context, allocator fragmentation,
    graphs: vLLM's default ``gpu_memory_utilization=0.9`` leaves 10 %). It fits when
    weights + KV + activations <= memory - reserve. Sizes are float64 products, so a batch of
    2**36 gives a correct (huge) number, never an int64 overflow.
One roofline per operation (prefill and decode alike)
    A pass is a sequence of kernels, each on its own roofline:
    ``max(FLOPs / (peak * mfu), bytes / (bandwidth * mbu))``, summed. Kernels are the
    operations of ``formulas.op_elements``, except that the attention over the KV cache
    (``kv_read``, ``attn_scores``, ``softmax``, ``attn_values``) is one kernel, ``attention``,
    as FlashAttention/FlashDecoding read the cache and do the math in one pass. A weight matmul
    turns compute-bound at a batch of about ``ridge * bytes_per_weight / 2`` (``critical_batch``);
    the attention kernel's intensity is about the query-group size ``n_heads / n_kv_heads``
    (per byte of a 16-bit cache) whatever the batch, so for GQA/MHA it never does.
TTFT (s)
    The prefill of the whole batch in one pass, plus the tensor-parallel all-reduces and
    ``queue_s``. The LM head runs on the last position of each sequence only, as engines compute
    logits only where a token is sampled.
TPOT (s)
    The time of one decode step, which is every user's time per output token: the sum over
    kernels of their rooflines, plus the all-reduces; averaged exactly over the
    ``output_len - 1`` steps as the context grows (each kernel's FLOPs and bytes are affine in
    the context, so each kernel's max has at most one crossing: ``_mean_of_max`` per kernel; a
    kernel that is not affine, such as a sliding window's, is summed step by step). The
    aggregate throughput is ``batch / TPOT``; ``TPOT / batch`` is the amortised time per token,
    not anyone's latency. With ``output_len = 1`` no decode step happens; the decode fields then
    describe the step that would make a second token (context ``prompt_len + 1``).
Precisions
    ``weight_dtype`` (bytes of the weights), ``kv_dtype`` (bytes of the cache) and
    ``compute_dtype`` (which peak the math runs at) are separate. By default fp8/int8 weights run
    fp8/int8 math where the chip has it (W8A8: half the bytes and twice the peak); int4 weights
    (W4A16) and fp8 weights on a chip without fp8 math are dequantised to bf16: they cut bytes
    only. ``compute_dtype`` chooses the math explicitly.

Bytes counted are the compulsory traffic: weights (each distinct expert a step touches, for
MoE) and the KV cache. Activations are left out, as a fused engine keeps most of them on chip;
FLOPs are every op's (``formulas``). With ``mbu = mfu = 1`` the result is therefore a bound
that no engine can beat. Real engines reach a fraction of each peak: model bandwidth
utilisation (MBU) and model FLOPs utilisation (MFU). Pope et al. (2022) report 76 % MFU for
large-batch prefill of PaLM 540B on TPU v4; the Databricks/MosaicML inference study measures MBU
well below 1 for batch-1 decode. As a starting point use ``mfu`` about 0.5-0.7 and ``mbu`` about
0.6-0.8 for a tuned engine, and measure your own machine with ``llm_roofline.measure``.

Tensor parallelism splits attention heads, MLP and experts (each GPU holds ``1/n`` of every
expert), and the vocabulary; the norms, the router and MLA's down-projections are replicated;
with more GPUs than KV heads each GPU keeps one KV head (the cache is replicated), and MLA's
latent cache, shared by all heads, is replicated on every GPU. Each layer all-reduces its
attention and MLP outputs (``Accelerator.allreduce_s``): a ring inside the scale-up domain
(an HGX node of 8) at the interconnect's bandwidth, a hierarchical all-reduce across nodes at
the network's, each collective with its fixed latency from the data (a lower estimate, so the
result stays a bound). ``Estimate.nodes`` says how many nodes ``n_gpus`` fill.

Every size may be a NumPy array (they broadcast): a sweep of 100,000 (batch, context) points
is one call (see ``benchmarks/bench_estimate.py``). ``setup`` is the one step every function
here (and ``serving``) starts from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import formulas, validate
from .dtypes import bytes_per_element, canonical
from .hardware import Accelerator, get_accelerator
from .models import ModelConfig, get_model

__all__ = [
    "ATTENTION_KERNEL", "WEIGHT_MATMULS", "DecodeStep", "Estimate", "Memory", "Setup",
    "critical_batch", "critical_batches", "decode_step", "estimate", "gpus_needed", "max_batch",
    "max_compute_context", "max_prompt_len", "memory", "setup",
    "step_critical_batch",
]

Number = float | np.ndarray  # a float, or an array of them when the sizes are arrays
Label = str | np.ndarray  # "memory" or "compute" (or an array of them)
Flag = bool | np.ndarray

# ops that tensor parallelism replicates on every GPU (norms, residual adds, the router,
# MLA's query and latent down-projections); ops reading or writing the KV cache follow the
# KV heads; every other op is split n ways. The one rule for each op's FLOPs, its bytes and,
# through ModelConfig.params_by_op, the weights each GPU holds.
_REPLICATED = {"attn_norm", "post_attn_norm", "mlp_norm", "post_mlp_norm", "residual",
               "final_norm", "router", "q_a_proj", "q_a_norm", "kv_a_proj", "kv_a_norm"}
_KV_OPS = {"k_proj", "k_norm", "v_proj", "kv_write", "kv_read"}
_HEAD_OPS = {"embed", "lm_head"}  # weights kept 16-bit when the body is quantised
_FLOAT_FORMATS = {"fp32", "bf16", "fp16"}

ATTENTION_KERNEL = ("kv_read", "attn_scores", "softmax", "attn_values")
"""The operations one fused attention kernel does: read the cache, scores, softmax, values."""

WEIGHT_MATMULS = frozenset(formulas.LINEAR_OPS) | {
    "router", "q_a_proj", "q_b_proj", "kv_a_proj", "kv_b_proj"}
"""The kernels that multiply activations by a weight matrix (the ones ``critical_batch`` is about)."""


def _kernel(op: str) -> str:
    return "attention" if op in ATTENTION_KERNEL else op


# --- the shared setup ----------------------------------------------------------------------
@dataclass(frozen=True)
class Setup:
    """One serving configuration, checked once: model, chip, parallelism, precisions, efficiencies.

    Every function of the calculator (and of ``serving``) starts from ``setup(...)``, so that
    shares, link, compute precision, element sizes and the tie rule are written once.
    """

    model: ModelConfig
    accelerator: Accelerator
    n_gpus: int
    nodes: int
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    act_dtype: str
    weight_group_size: int
    mbu: float
    mfu: float
    shares: dict[str, float] = field(repr=False, compare=False)
    sizes: dict[str, float] = field(repr=False, compare=False)

    @property
    def peak(self) -> float:
        """Attainable FLOP/s: the chip's dense peak at ``compute_dtype`` times ``mfu``."""
        return self.accelerator.peak(self.compute_dtype) * self.mfu

    @property
    def bandwidth(self) -> float:
        """Attainable memory bytes/s: the chip's bandwidth times ``mbu``."""
        return self.accelerator.bandwidth * self.mbu

    @property
    def precision(self) -> str:
        """The precisions in words, e.g. ``'weights int4, KV cache bf16, math bf16 (W4A16: ...)'``."""
        return _describe_precision(self.weight_dtype, self.kv_dtype, self.compute_dtype)

    def pass_costs(self, batch, n_new, n_past, *, absorbed: bool,
                   logits_tokens=None) -> dict[str, tuple[Number, Number, Number]]:
        """Per kernel, ``(FLOPs, weight bytes, KV-cache bytes)`` per GPU of one forward pass.

        ``batch`` sequences of ``n_new`` new tokens each after ``n_past`` cached ones (arrays
        broadcast), counted by ``formulas.op_elements``; ``logits_tokens``: the LM head runs on
        that many positions instead of every new token.
        """
        cfg = self.model
        ops = formulas.op_elements(cfg, batch, n_new, n_past, absorbed=absorbed)
        if logits_tokens is not None:
            ops["lm_head"] = formulas.op_elements(cfg, logits_tokens, 1, 0)["lm_head"]
        out: dict[str, list] = {}
        for op, (flops, weights, kv, _act) in ops.items():
            share = self.shares[op]
            w = weights * self.sizes["head" if op in _HEAD_OPS else "weight"] * share
            parts = (flops * share, w, kv * self.sizes["kv"] * share)
            k = _kernel(op)
            out[k] = [a + b for a, b in zip(out[k], parts, strict=True)] if k in out else list(parts)
        return {k: tuple(v) for k, v in out.items()}

    def compute_bound(self, flops, moved) -> Flag:
        """The one tie rule: compute-bound when the math takes at least as long as the bytes."""
        return flops / self.peak >= moved / self.bandwidth

    def roofline_s(self, flops, moved) -> Number:
        """One kernel's time: ``max(FLOPs / peak, bytes / bandwidth)``, attainable figures."""
        return np.maximum(flops / self.peak, moved / self.bandwidth)

    def allreduce_s(self, tokens) -> Number:
        """Two all-reduces of the hidden state per layer for ``tokens`` tokens, seconds."""
        if self.n_gpus == 1:
            return np.zeros(np.shape(tokens)) if np.ndim(tokens) else 0.0
        message = np.asarray(tokens, dtype=float) * self.model.hidden_size * self.sizes["act"]
        return 2 * self.model.n_layers * self.accelerator.allreduce_s(self.n_gpus, message)

    def weight_bytes_by_op(self) -> dict[str, float]:
        """Bytes of weights one GPU holds, per op (``ModelConfig.params_by_op`` times its share)."""
        return {op: n * self.shares[op] * self.sizes["head" if op in _HEAD_OPS else "weight"]
                for op, n in self.model.params_by_op().items()}

    def allreduce_bytes(self, tokens) -> Number:
        """Bytes each GPU sends (and receives) in those all-reduces."""
        message = np.asarray(tokens, dtype=float) * self.model.hidden_size * self.sizes["act"]
        return 2 * self.model.n_layers * 2 * (self.n_gpus - 1) / self.n_gpus * message


def setup(model: ModelConfig | str, accelerator: Accelerator | str, *, weight_dtype: str = "bf16",
          kv_dtype: str = "bf16", compute_dtype: str | None = None, act_dtype: str = "bf16",
          weight_group_size: int = 128, n_gpus: int = 1, mbu: float = 1.0,
          mfu: float = 1.0) -> Setup:
    """Check a serving configuration once and return the ``Setup`` every calculation uses.

    ``compute_dtype`` (the tensor math) defaults to fp8 for fp8 weights and int8 for int8
    weights where the chip has that peak, else bf16 (int4 weights are dequantised to bf16).
    ``mbu``, ``mfu``: achieved fractions of peak bandwidth and peak FLOP/s, from 0.001 to 1.
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    n_gpus = validate.integer("n_gpus", n_gpus, maximum=2**20)
    nodes = chip.nodes(n_gpus)  # raises without an interconnect, or without a network beyond
    weights, kv = canonical(weight_dtype), canonical(kv_dtype)
    act = canonical(act_dtype)
    group = validate.integer("weight_group_size", weight_group_size, maximum=2**20)
    return Setup(
        model=cfg, accelerator=chip, n_gpus=n_gpus, nodes=nodes, weight_dtype=weights,
        kv_dtype=kv, compute_dtype=_compute_dtype(chip, weights, compute_dtype), act_dtype=act,
        weight_group_size=group, mbu=validate.fraction("mbu", mbu),
        mfu=validate.fraction("mfu", mfu), shares=_shares(cfg, n_gpus),
        sizes=_sizes(weights, kv, act, group),
    )


# --- results ---------------------------------------------------------------------------------
@dataclass(frozen=True)
class Memory:
    """Memory per GPU, bytes (arrays when the inputs are)."""

    weights: Number
    kv_cache: Number
    activations: Number
    reserve: float
    capacity: float

    @property
    def used(self) -> Number:
        """Weights + KV cache + activations."""
        return self.weights + self.kv_cache + self.activations

    @property
    def usable(self) -> float:
        """Capacity less the runtime reserve."""
        return self.capacity - self.reserve

    @property
    def free(self) -> Number:
        """Usable memory left over (negative: it does not fit)."""
        return self.usable - self.used


@dataclass(frozen=True)
class Estimate:
    """What ``estimate`` computes; times in seconds, memory in bytes per GPU.

    ``tpot_s`` is the duration of one decode step: each of the ``batch`` users waits that long
    for each of their tokens. ``throughput_tok_s = batch / tpot_s`` is the decode tokens per
    second of the whole group of ``n_gpus`` (``nodes`` scale-up domains). ``decode_bound`` says
    what limits a decode step, ``prefill_bound`` the prefill: ``"compute"`` when the kernels
    that are compute-bound take at least as long as the memory-bound ones, else ``"memory"``.
    ``bandwidth_utilisation`` is the fraction of peak bandwidth a decode step keeps busy.
    ``breakdown("prefill")`` and ``breakdown("decode")`` give the per-kernel table.
    """

    model: str
    accelerator: str
    batch: int | np.ndarray
    prompt_len: int | np.ndarray
    output_len: int | np.ndarray
    weight_dtype: str
    kv_dtype: str
    compute_dtype: str
    act_dtype: str
    n_gpus: int
    nodes: int
    mbu: float
    mfu: float
    memory: Memory
    fits: Flag
    ttft_s: Number
    prefill_bound: Label
    tpot_s: Number
    decode_bound: Label
    throughput_tok_s: Number
    decode_bytes: Number  # per GPU, mean over the decode steps
    decode_flops: Number  # per GPU, mean over the decode steps
    allreduce_s: Number  # per decode step
    bandwidth_utilisation: Number
    phases: dict = field(default_factory=dict, repr=False, compare=False)  # for breakdown()

    @property
    def bound(self) -> Label:
        """Old name of ``decode_bound``, kept until every caller has moved to it."""
        return self.decode_bound

    @property
    def precision(self) -> str:
        """Weight, KV-cache and compute precision in words (weight-only or weight-and-activation)."""
        return _describe_precision(self.weight_dtype, self.kv_dtype, self.compute_dtype)

    @property
    def time_per_token_s(self) -> Number:
        """``tpot_s / batch``: the amortised time per token of the aggregate; no user sees it."""
        return self.tpot_s / self.batch

    @property
    def e2e_s(self) -> Number:
        """One request's latency: TTFT, then ``output_len - 1`` decode steps."""
        return self.ttft_s + (self.output_len - 1) * self.tpot_s

    @property
    def decode_intensity(self) -> Number:
        """FLOPs per byte of a decode step (per GPU)."""
        return self.decode_flops / self.decode_bytes

    def breakdown(self, phase: str = "decode") -> list[dict]:
        """Per kernel of the prefill or of a (mean) decode step, one dict each.

        Keys: ``op``, ``flops`` and ``bytes`` (per GPU), ``intensity`` (FLOPs per byte; None
        for a kernel that moves no compulsory bytes), ``time_s``, ``bound`` (``"compute"``,
        ``"memory"``, or ``"interconnect"`` for the all-reduces), ``share`` (of the phase's
        time; the shares sum to 1). Values are arrays when the sizes are.
        """
        phase = validate.choice("phase", phase, ("prefill", "decode"))
        return list(_rows(*self.phases[phase]))


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
    realistic: bool = False,
    engine: str | None = None,
):
    """Memory, TTFT, TPOT and throughput of ``batch`` requests served together (module docs).

    ``model``: a ``ModelConfig`` or a built-in name; ``accelerator``: an ``Accelerator`` or a
    name. ``batch``, ``prompt_len`` and ``output_len`` are positive integers or arrays of them.
    Other arguments as for ``setup``; ``queue_s`` (seconds) is added to the TTFT. Returns an
    ``Estimate``: bounds at the ``mbu`` and ``mfu`` given.

    ``realistic=True`` returns instead a ``realistic.Realistic``: a *calibrated prediction* of
    what a tuned engine achieves (efficiencies and fixed per-step costs fitted on published
    measurements, optionally for an ``engine`` family such as ``"vllm"``), with the bound beside
    it; ``mbu`` and ``mfu`` are then the preset's and may not be given. See ``realistic``.
    """
    if realistic is not False or engine is not None:
        if not validate.boolean("realistic", realistic):
            raise ValueError("engine applies only to a calibrated prediction: pass realistic=True")
        if (mbu, mfu) != (1.0, 1.0):
            raise ValueError("realistic=True sets mbu and mfu from the fitted preset; give either "
                             "realistic=True or your own mbu and mfu, not both")
        from . import realistic as calibrated  # realistic builds on this module

        return calibrated.estimate(
            model, accelerator, batch, prompt_len, output_len, engine=engine,
            weight_dtype=weight_dtype, kv_dtype=kv_dtype, n_gpus=n_gpus,
            compute_dtype=compute_dtype, act_dtype=act_dtype, weight_group_size=weight_group_size,
            queue_s=queue_s, reserve_fraction=reserve_fraction, prefill_chunk=prefill_chunk)
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, act_dtype=act_dtype,
              weight_group_size=weight_group_size, n_gpus=n_gpus, mbu=mbu, mfu=mfu)
    b, p, o = _sizes_of(s.model, batch, prompt_len, output_len)
    queue = validate.real("queue_s", queue_s, minimum=0, maximum=1e9, unit="seconds")
    mem = _memory(s, b, p, o, reserve_fraction, prefill_chunk)

    # prefill: one pass of the whole batch, logits at each sequence's last position only
    prefill = {k: (f, w + kv) for k, (f, w, kv) in
               s.pass_costs(b, p, 0, absorbed=False, logits_tokens=b).items()}
    prefill_times = {k: s.roofline_s(f, m) for k, (f, m) in prefill.items()}
    prefill_ar = s.allreduce_s(b * p.astype(float))
    ttft = sum(prefill_times.values()) + prefill_ar + queue

    # decode: steps see contexts prompt_len+1 ... prompt_len+output_len-1
    steps = np.maximum(o - 1, 1)
    means = _decode_means(s, b, p, steps)
    decode_ar = s.allreduce_s(b)
    tpot = sum(t for _, _, t in means.values()) + decode_ar
    flops = sum(f for f, _, _ in means.values())
    moved = sum(m for _, m, _ in means.values())
    decode = {k: (f, m) for k, (f, m, _) in means.items()}
    decode_times = {k: t for k, (_, _, t) in means.items()}

    return Estimate(
        model=s.model.name, accelerator=s.accelerator.name, batch=_out(b), prompt_len=_out(p),
        output_len=_out(o), weight_dtype=s.weight_dtype, kv_dtype=s.kv_dtype,
        compute_dtype=s.compute_dtype, act_dtype=s.act_dtype, n_gpus=s.n_gpus, nodes=s.nodes,
        mbu=s.mbu, mfu=s.mfu, memory=mem, fits=_out(mem.free >= 0), ttft_s=_out(ttft),
        prefill_bound=_out(_step_bound(s, prefill, prefill_times)), tpot_s=_out(tpot),
        decode_bound=_out(_step_bound(s, decode, decode_times)),
        throughput_tok_s=_out(b / tpot), decode_bytes=_out(moved), decode_flops=_out(flops),
        allreduce_s=_out(decode_ar),
        bandwidth_utilisation=_out(moved / tpot / s.accelerator.bandwidth),
        phases={"prefill": (s, prefill, prefill_times, prefill_ar + queue, b * p.astype(float)),
                "decode": (s, decode, decode_times, decode_ar, b)},
    )


@dataclass(frozen=True)
class DecodeStep:
    """One decode step, per GPU: its time (s, all-reduces included), what bounds it
    (``"memory"`` or ``"compute"``, the rule of ``Estimate.decode_bound``), its compulsory bytes
    and its FLOPs (arrays when the inputs are); ``breakdown()``: the per-kernel table."""

    time_s: Number
    bound: Label
    bytes: Number
    flops: Number
    allreduce_s: Number
    phase: tuple = field(default=(), repr=False, compare=False)  # for breakdown()

    def breakdown(self) -> list[dict]:
        """Per kernel rows, as ``Estimate.breakdown``."""
        return list(_rows(*self.phase))


def decode_step(model: ModelConfig | str, accelerator: Accelerator | str, batch, context, *,
                weight_dtype: str = "bf16", kv_dtype: str = "bf16", compute_dtype: str | None = None,
                n_gpus: int = 1, mbu: float = 1.0, mfu: float = 1.0, act_dtype: str = "bf16",
                weight_group_size: int = 128) -> DecodeStep:
    """One decode step of ``batch`` sequences whose attention spans ``context`` tokens each.

    The step reads ``context - 1`` cached tokens per sequence and adds one: it makes token
    ``context + 1 - prompt_len`` of a request with ``prompt_len`` prompt tokens. Its time is
    the sum over kernels of ``max(bytes / (bandwidth * mbu), FLOPs / (peak * mfu))`` plus the
    all-reduces: every user's TPOT at that context. Arguments as for ``estimate``.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, act_dtype=act_dtype,
              weight_group_size=weight_group_size, n_gpus=n_gpus, mbu=mbu, mfu=mfu)
    b = validate.integers("batch", batch)
    ctx = _contexts(s.model, context)
    costs = {k: (f, w + kv) for k, (f, w, kv) in
             s.pass_costs(b, 1, ctx - 1, absorbed=True).items()}
    times = {k: s.roofline_s(f, m) for k, (f, m) in costs.items()}
    allreduce = s.allreduce_s(b * np.ones(np.shape(ctx)))
    return DecodeStep(
        time_s=_out(sum(times.values()) + allreduce),
        bound=_out(_step_bound(s, costs, times)),
        bytes=_out(sum(m for _, m in costs.values())),
        flops=_out(sum(f for f, _ in costs.values())),
        allreduce_s=_out(allreduce),
        phase=(s, costs, times, allreduce, b),
    )


def memory(model: ModelConfig | str, accelerator: Accelerator | str, batch, prompt_len, output_len,
           *, weight_dtype: str = "bf16", kv_dtype: str = "bf16", n_gpus: int = 1,
           act_dtype: str = "bf16", weight_group_size: int = 128, reserve_fraction: float = 0.1,
           prefill_chunk: int = 8192) -> Memory:
    """Only the memory part of ``estimate`` (bytes per GPU), with the same arguments."""
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              act_dtype=act_dtype, weight_group_size=weight_group_size, n_gpus=n_gpus)
    b, p, o = _sizes_of(s.model, batch, prompt_len, output_len)
    return _memory(s, b, p, o, reserve_fraction, prefill_chunk)


def max_batch(model: ModelConfig | str, accelerator: Accelerator | str, prompt_len, output_len,
              *, weight_dtype: str = "bf16", kv_dtype: str = "bf16", n_gpus: int = 1,
              act_dtype: str = "bf16", weight_group_size: int = 128,
              reserve_fraction: float = 0.1, prefill_chunk: int = 8192) -> int | np.ndarray:
    """The largest batch whose memory fits (0 if not even one request fits).

    Arguments as for ``memory``. Context arrays broadcast; the answer is found by bisection on
    the same memory function ``estimate`` uses (memory grows with the batch), up to
    ``validate.MAX_COUNT``; if even that many fit, it raises rather than report its search cap.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              act_dtype=act_dtype, weight_group_size=weight_group_size, n_gpus=n_gpus)
    _, p, o = _sizes_of(s.model, 1, prompt_len, output_len)

    def fits(b):
        return _memory(s, b, p, o, reserve_fraction, prefill_chunk).free >= 0

    shape = np.broadcast_shapes(np.shape(p), np.shape(o))
    lo = np.zeros(shape, dtype=np.int64)  # fits (0 trivially)
    hi = np.full(shape, validate.MAX_COUNT, dtype=np.int64)
    if np.any(fits(hi)):
        raise ValueError(
            f"more than {validate.MAX_COUNT:,} requests fit (prompt_len {_first(p)}, "
            f"output_len {_first(o)}): max_batch only searches up to validate.MAX_COUNT"
        )
    while np.any(hi - lo > 1):
        mid = (lo + hi) // 2
        ok = fits(mid)
        lo, hi = np.where(ok, mid, lo), np.where(ok, hi, mid)
    return _out(lo)


def max_prompt_len(model: ModelConfig | str, accelerator: Accelerator | str, batch: int,
                   output_len: int, **options) -> int:
    """The longest prompt whose memory fits ``batch`` requests of ``output_len`` new tokens.

    0 if not even a one-token prompt fits. ``options`` are ``memory``'s. Found by bisection on
    the same memory function (memory grows with the prompt), up to the model's context limit.
    """
    cfg = _model(model)
    batch = validate.integer("batch", batch)
    output_len = validate.integer("output_len", output_len, maximum=cfg.max_context - 1)

    def fits(p):
        return bool(memory(cfg, accelerator, batch, int(p), output_len, **options).free >= 0)

    too_long = _first_true(lambda p: not fits(p), cfg.max_context - output_len)
    return cfg.max_context - output_len if too_long is None else too_long - 1


def gpus_needed(model: ModelConfig | str, accelerator: Accelerator | str, batch, prompt_len,
                output_len, *, max_gpus: int = 128, weight_dtype: str = "bf16",
                kv_dtype: str = "bf16", act_dtype: str = "bf16", weight_group_size: int = 128,
                reserve_fraction: float = 0.1, prefill_chunk: int = 8192) -> int | None:
    """The fewest GPUs (a tensor-parallel degree the heads allow) whose memory fits.

    ``None`` when no degree up to ``max_gpus`` fits, or when one GPU does not fit and the
    accelerator cannot link more (no interconnect, or no network beyond its domain). The nodes
    that many GPUs fill: ``get_accelerator(accelerator).nodes(n)``, as ``Estimate.nodes``.
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    for n in range(1, validate.integer("max_gpus", max_gpus, maximum=2**20) + 1):
        if n > 1 and chip.interconnect_bandwidth is None:
            return None
        if n > chip.domain_size and chip.network_bandwidth is None:
            return None
        try:
            _shares(cfg, n)
        except ValueError:
            continue  # a degree the heads do not allow
        mem = memory(cfg, chip, batch, prompt_len, output_len, weight_dtype=weight_dtype,
                     kv_dtype=kv_dtype, n_gpus=n, act_dtype=act_dtype,
                     weight_group_size=weight_group_size, reserve_fraction=reserve_fraction,
                     prefill_chunk=prefill_chunk)
        if np.all(mem.free >= 0):
            return n
    return None


def critical_batch(model: ModelConfig | str, accelerator: Accelerator | str, *,
                   weight_dtype: str = "bf16", compute_dtype: str | None = None, n_gpus: int = 1,
                   weight_group_size: int = 128, limit: int = 2**20) -> int | None:
    """The smallest batch at which a decode step's weight matmuls turn compute-bound.

    Taken together (their FLOP time at least their weight-byte time): about
    ``ridge * bytes_per_weight / 2``, whatever the context, since a weight matmul does 2 FLOPs
    per weight per token and reads each weight once per step (MoE: once per expert the batch
    touches, which takes more users). The attention over the KV cache never turns compute-bound
    this way for GQA/MHA: its intensity, about the query-group size ``n_heads / n_kv_heads``
    per byte of a 16-bit cache, does not grow with the batch (see ``critical_batches`` for each
    kernel's own answer). ``None`` when none up to ``limit`` (at least 1) is.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, compute_dtype=compute_dtype,
              n_gpus=n_gpus, weight_group_size=weight_group_size)
    limit = validate.integer("limit", limit, maximum=validate.MAX_COUNT)

    def compute_bound(b):
        costs = s.pass_costs(b, 1, 0, absorbed=True)
        flops = sum(f for k, (f, _, _) in costs.items() if k in WEIGHT_MATMULS)
        moved = sum(w + kv for k, (_, w, kv) in costs.items() if k in WEIGHT_MATMULS)
        return s.compute_bound(flops, moved)

    return _first_true(compute_bound, limit)


def critical_batches(model: ModelConfig | str, accelerator: Accelerator | str, context, *,
                     weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                     compute_dtype: str | None = None, n_gpus: int = 1,
                     weight_group_size: int = 128, limit: int = 2**20) -> dict[str, int | None]:
    """Per kernel of a decode step at ``context``, the smallest compute-bound batch (or None).

    Enough to plot each kernel's regime against the batch: below its critical batch a kernel is
    memory-bound, from it on compute-bound (every kernel's intensity grows with the batch or
    stays put). Weight matmuls turn near ``ridge * bytes_per_weight / 2``; ``attention``
    (intensity about ``n_heads / n_kv_heads`` per 16-bit byte) never does for GQA/MHA, while
    MLA's absorbed attention (all heads against one latent) can; kernels without compulsory
    bytes (RoPE, softmax-free elementwise math) are compute-bound from batch 1, and kernels
    without FLOPs (``embed``, ``kv_write``) never. Kernels with neither are left out.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, n_gpus=n_gpus, weight_group_size=weight_group_size)
    ctx = validate.integer("context", context, maximum=s.model.max_context)
    limit = validate.integer("limit", limit, maximum=validate.MAX_COUNT)
    kernels = [k for k, (f, w, kv) in s.pass_costs(1, 1, ctx - 1, absorbed=True).items()
               if f > 0 or w + kv > 0]

    def bound_of(kernel):
        def compute_bound(b):
            f, w, kv = s.pass_costs(b, 1, ctx - 1, absorbed=True)[kernel]
            return s.compute_bound(f, w + kv)
        return compute_bound

    return {k: _first_true(bound_of(k), limit) for k in kernels}


def step_critical_batch(model: ModelConfig | str, accelerator: Accelerator | str, context, *,
                        weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                        compute_dtype: str | None = None, n_gpus: int = 1,
                        weight_group_size: int = 128, limit: int = 2**16):
    """The smallest batch at which a decode step at ``context`` is mostly compute-bound.

    "Mostly": its compute-bound kernels take at least as long as its memory-bound ones (the
    rule of ``Estimate.decode_bound``). Past ``critical_batch`` the weight matmuls' FLOP time
    and the attention's cache time both grow in proportion to the batch, so whether the step
    is mostly compute-bound then depends on the context alone: about while
    ``2 * N_active / q_kv(context) >= I_ridge`` (FLOPs per token against the cache bytes per
    sequence). ``None`` (or -1 in an array) when no batch up to ``limit`` makes it so.
    ``context`` may be an array; each entry is searched over every batch from 1 to ``limit``.
    """
    options = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                   n_gpus=n_gpus, weight_group_size=weight_group_size)
    limit = validate.integer("limit", limit, maximum=2**20)
    cfg = _model(model)
    ctx = _contexts(cfg, context)
    batch = np.arange(1, limit + 1)
    answer = np.full(ctx.shape, -1, dtype=np.int64)
    for index, c in np.ndenumerate(ctx):
        compute = decode_step(cfg, accelerator, batch, int(c), **options).bound == "compute"
        if np.any(compute):
            answer[index] = int(np.argmax(compute)) + 1
    if np.ndim(answer) == 0:
        return None if answer < 0 else int(answer)
    return answer


def max_compute_context(model: ModelConfig | str, accelerator: Accelerator | str, *,
                        weight_dtype: str = "bf16", kv_dtype: str = "bf16",
                        compute_dtype: str | None = None, n_gpus: int = 1,
                        weight_group_size: int = 128, limit: int = 2**16) -> int:
    """The longest context at which some batch (up to ``limit``) makes decode mostly compute-bound.

    0 if none does. A larger batch only raises the compute-bound share of a step (the weight
    matmuls' FLOP time grows with it, the fixed costs do not), so the test is at ``limit``;
    the share falls as the context grows, so the answer is found by bisection. Beyond it the
    memory-bound attention over the cache takes most of every step, whatever the batch.
    """
    options = dict(weight_dtype=weight_dtype, kv_dtype=kv_dtype, compute_dtype=compute_dtype,
                   n_gpus=n_gpus, weight_group_size=weight_group_size)
    limit = validate.integer("limit", limit, maximum=2**20)
    cfg = _model(model)

    def memory_bound(c):
        return decode_step(cfg, accelerator, limit, int(c), **options).bound == "memory"

    first = _first_true(memory_bound, cfg.max_context)
    return cfg.max_context if first is None else first - 1


# --- internals -------------------------------------------------------------------------------
def _out(x):
    """0-d arrays as Python scalars, anything else unchanged."""
    return np.asarray(x).item() if np.ndim(x) == 0 else x


def _first(x):
    return np.asarray(x).flat[0].item()


def _first_true(predicate, limit: int) -> int | None:
    """The smallest ``b`` in ``[1, limit]`` with ``predicate(b)`` (monotone), else None."""
    if not bool(predicate(np.int64(limit))):
        return None
    lo, hi = 0, limit  # predicate(lo) false (batch 0 by convention), predicate(hi) true
    while hi - lo > 1:
        mid = (lo + hi) // 2
        lo, hi = (lo, mid) if bool(predicate(np.int64(mid))) else (mid, hi)
    return hi


def _model(model) -> ModelConfig:
    if isinstance(model, ModelConfig):
        return model
    if isinstance(model, str):
        return get_model(model)
    raise ValueError(
        f"model must be a ModelConfig or a built-in model name, got {validate.shorten(model)}")


def _sizes_of(cfg: ModelConfig, batch, prompt_len, output_len):
    b, p, o = (validate.integers(n, v) for n, v in
               (("batch", batch), ("prompt_len", prompt_len), ("output_len", output_len)))
    if np.any(p + o > cfg.max_context):
        worst = int(np.max(p + o))
        raise ValueError(
            f"prompt_len + output_len = {worst:,} exceeds the context limit of {cfg.name!r}: "
            f"max_context = {cfg.max_context}"
        )
    return b, p, o


def _contexts(cfg: ModelConfig, context) -> np.ndarray:
    return validate.integers("context", context, maximum=cfg.max_context)


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


def _compute_dtype(chip: Accelerator, weights: str, compute_dtype: str | None) -> str:
    if compute_dtype is not None:
        chip.peak(compute_dtype)  # raises if the chip lacks it
        return canonical(compute_dtype)
    # fp8 and int8 weights run fp8/int8 tensor math (W8A8); int4 weights are dequantised (W4A16)
    wanted = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "int4": "bf16"}.get(weights, weights)
    # else dequantised to 16 bits; a chip with no 16-bit peak in the data (a measured CPU has
    # only the fp32 peak it was measured at) computes in the widest precision it has
    for dtype in (wanted, "bf16", "fp16", "fp32"):
        if dtype in chip.precisions:
            return dtype
    raise ValueError(f"{chip.name} has no peak for {weights} weights in the data; its tensor "
                     f"math: {', '.join(chip.precisions)}: pass compute_dtype")


def _bits(dtype: str) -> float:
    return 8 * float(bytes_per_element("fp8" if dtype == "fp8" else dtype))


def _describe_precision(weights: str, kv: str, compute: str) -> str:
    w, a = _bits(weights), _bits(compute)
    if w < a:
        kind = (f"weight-only, W{w:g}A{a:g}: {weights} weights cut the bytes, the math runs at "
                f"the {compute} peak")
    elif w == a and w < 16:
        kind = (f"weights and activations, W{w:g}A{a:g}: {w:g}-bit weights and the {compute} "
                f"peak")
    else:
        kind = f"W{w:g}A{a:g}"
    return f"weights {weights}, KV cache {kv}, math {compute} ({kind})"


def _sizes(weights: str, kv: str, act: str, group_size: int) -> dict[str, float]:
    """Bytes per element: body weights, 16-bit head, KV cache, activations."""
    group = group_size if weights == "int4" else None
    return {
        "weight": float(bytes_per_element(weights, group)),
        "head": float(bytes_per_element(weights if weights in _FLOAT_FORMATS else "bf16")),
        "kv": float(bytes_per_element(kv)),
        "act": float(bytes_per_element(act)),
    }


def _step_bound(s: Setup, costs: dict, times: dict) -> Label:
    """``"compute"`` when the compute-bound kernels take at least as long as the memory-bound."""
    compute = memory_time = 0.0
    for k, (f, m) in costs.items():
        is_compute = s.compute_bound(f, m)
        compute = compute + np.where(is_compute, times[k], 0.0)
        memory_time = memory_time + np.where(is_compute, 0.0, times[k])
    return np.where(compute >= memory_time, "compute", "memory")


def _rows(s: Setup, costs: dict, times: dict, extra_s, tokens) -> tuple[dict, ...]:
    """The per-kernel table of a phase (kernels with no FLOPs and no bytes left out)."""
    total = sum(times.values()) + extra_s
    rows = []
    for k, (f, m) in costs.items():
        if not (np.any(f > 0) or np.any(m > 0)):
            continue
        intensity = None if not np.any(m > 0) else _out(f / np.where(m > 0, m, 1.0))
        rows.append({
            "op": k, "flops": _out(f * 1.0), "bytes": _out(m * 1.0), "intensity": intensity,
            "time_s": _out(times[k] * 1.0), "bound": _out(np.where(s.compute_bound(f, m),
                                                                   "compute", "memory")),
            "share": _out(times[k] / total),
        })
    if s.n_gpus > 1:
        rows.append({"op": "allreduce", "flops": 0.0, "bytes": _out(s.allreduce_bytes(tokens)),
                     "intensity": None, "time_s": _out(extra_s * 1.0), "bound": "interconnect",
                     "share": _out(extra_s / total)})
    elif np.any(extra_s > 0):  # the queue of a prefill on one GPU
        rows.append({"op": "queue", "flops": 0.0, "bytes": 0.0, "intensity": None,
                     "time_s": _out(extra_s * 1.0), "bound": "queue",
                     "share": _out(extra_s / total)})
    return tuple(rows)


def _decode_means(s: Setup, b, p, steps) -> dict[str, tuple[Number, Number, Number]]:
    """Per kernel, mean (FLOPs, bytes, time) over decode steps with ``p .. p + steps - 1`` cached.

    Each kernel's FLOPs and bytes are affine in the context for full attention, so its time,
    a max of two affine functions, is averaged in closed form (``_mean_of_max``). Affinity is
    checked at two interior steps; a kernel that is not affine (a sliding window saturates) is
    averaged step by step instead, exactly.
    """
    b, p, steps = np.broadcast_arrays(b, p, steps)
    ends = [p, p + steps - 1, p + (steps - 1) // 3, p + 2 * (steps - 1) // 3]
    first, last, *inner = (s.pass_costs(b, 1, n, absorbed=True) for n in ends)
    span = np.maximum(steps - 1, 1).astype(float)
    affine = True
    for where, costs in zip(((steps - 1) // 3, 2 * (steps - 1) // 3), inner, strict=True):
        for k in costs:
            for i in range(3):
                chord = first[k][i] + (last[k][i] - first[k][i]) * where / span
                affine &= bool(np.allclose(costs[k][i], chord, rtol=1e-9, atol=0))
    if not affine:
        return _decode_means_by_step(s, b, p, steps)
    out = {}
    for k in first:
        (f0, w0, kv0), (f1, w1, kv1) = first[k], last[k]
        m0, m1 = w0 + kv0, w1 + kv1
        t = _mean_of_max(m0 / s.bandwidth, m1 / s.bandwidth, f0 / s.peak, f1 / s.peak, steps)
        out[k] = ((f0 + f1) / 2, (m0 + m1) / 2, t)
    return out


def _decode_means_by_step(s: Setup, b, p, steps, block: int = 256):
    """``_decode_means`` by summing every step (for kernels not affine in the context)."""
    total: dict[str, list] = {}
    for start in range(0, int(np.max(steps)), block):
        j = np.arange(start, min(start + block, int(np.max(steps))))
        mask = j < steps[..., None]
        costs = s.pass_costs(b[..., None], 1, p[..., None] + j, absorbed=True)
        for k, (f, w, kv) in costs.items():
            parts = [np.where(mask, x, 0.0).sum(-1) for x in
                     (f, w + kv, s.roofline_s(f, w + kv))]
            total[k] = [a + c for a, c in zip(total[k], parts, strict=True)] if k in total else parts
    return {k: tuple(x / steps for x in v) for k, v in total.items()}


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


def _memory(s: Setup, b, p, o, reserve_fraction, prefill_chunk) -> Memory:
    reserve_fraction = validate.real("reserve_fraction", reserve_fraction, minimum=0, maximum=1,
                                     open_max=True)
    prefill_chunk = validate.integer("prefill_chunk (tokens)", prefill_chunk)
    cfg, n_gpus = s.model, s.n_gpus
    weights = sum(s.weight_bytes_by_op().values())
    bf, context = np.asarray(b, dtype=float), np.asarray(p + o, dtype=float)  # float64: no overflow
    kv_cache = bf * cfg.kv_cache_elements(context) * _kv_share(cfg, n_gpus) * s.sizes["kv"]
    tokens = np.minimum(bf * np.asarray(p, dtype=float), prefill_chunk)
    activations = (tokens * _activation_elements_per_token(cfg, n_gpus) * s.sizes["act"]
                   + bf * cfg.vocab_size / n_gpus * 4)  # the last position's fp32 logits
    capacity = s.accelerator.memory_bytes
    shape = np.broadcast_shapes(np.shape(kv_cache), np.shape(activations))
    return Memory(
        weights=_out(np.broadcast_to(float(weights), shape)),
        kv_cache=_out(kv_cache * 1.0),
        activations=_out(activations * 1.0),
        reserve=reserve_fraction * capacity,
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
