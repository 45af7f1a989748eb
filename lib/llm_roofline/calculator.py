"""The VRAM and throughput calculator: memory, TTFT, TPOT and throughput of a served model.

``estimate(model, accelerator, batch, prompt_len, output_len, ...)`` answers, for ``batch``
requests of ``prompt_len`` prompt tokens and ``output_len`` generated tokens served together
with tensor parallelism over ``n_gpus`` chips:

Memory (bytes per GPU)
    Weights, the KV cache of the whole batch at its final context, activations and the
    runtime reserve, computed by :mod:`llm_roofline.vram` (its docstring gives the rules); the
    ``Estimate`` carries them as ``memory`` and says whether they ``fits``.
Two times per phase: kernel by kernel, and the floor
    A pass is a sequence of kernels, each on its own roofline:
    ``max(FLOPs / (peak * mfu), bytes / (bandwidth * mbu))``. Summed, with the all-reduces
    one after another, they give the *kernel-by-kernel time* (``ttft_kernel_s``,
    ``tpot_kernel_s``; older names ``ttft_s``, ``tpot_s``): what an
    engine pays that runs its kernels one at a time with nothing overlapping. It is not a
    bound: an engine that overlaps a compute-bound GEMM with memory-bound attention or with
    communication (NanoFlow's nano-batching, 1.9x over vLLM) can beat it. The *floor*
    (``ttft_floor_s``, ``tpot_floor_s``, ``DecodeStep.floor_s``) is the busiest resource's time:
    the largest of the math units' (the sum over kernels of FLOPs / peak), the memory's (the
    sum of compulsory bytes / bandwidth), the interconnect's and the network's (the
    all-reduces' bytes at their least cost: a ring, or each GPU's message once each way behind
    a switch that reduces in the network, NVLink SHARP; ``Accelerator.allreduce_floor``), plus
    the latency no overlap can hide. The rule for that latency: a pass of one sequence is one
    chain of dependent kernels, each all-reduce waiting for the layer before it and the next
    layer waiting for it, so its collectives' fixed latencies are added to the floor; a pass
    of two or more sequences can split into micro-batches whose collectives overlap the other
    micro-batch's work, so the latencies only join the max (each micro-batch still waits for
    its own collectives one after another). Prefetching a layer's weights during an
    all-reduce could hide part of a single sequence's latency; the floor leaves that out,
    so at a batch of one it is the floor of engines that do not prefetch across collectives.
    The floor is never above the kernel-by-kernel time, and equals it (up to the latency rule)
    when every kernel is limited by the same resource and nothing else runs. Kernels are the
    operations of ``formulas.op_elements``, except that the attention over the KV cache
    (``kv_read``, ``attn_scores``, ``attn_values``) is one kernel, ``attention``, as
    FlashAttention/FlashDecoding read the cache and do the math in one pass. Each kernel's
    math runs at the precision of its operands (``Setup.math_dtype``): the body's weight
    matmuls at ``compute_dtype``, the 16-bit LM head at the 16-bit peak, the attention at its
    activations' precision (``attention_dtype``). Element-wise work (norms, RoPE, residual
    adds, the activation, softmax; ``deployment.ELEMENTWISE``) is fused into a neighbouring
    kernel on the vector units, as engines do: never priced at a tensor-core peak, it costs
    only its compulsory bytes. A weight matmul
    turns compute-bound at a batch of about ``ridge * bytes_per_weight / 2`` (``critical_batch``);
    the attention kernel's intensity is about the query-group size ``n_heads / n_kv_heads``
    (per byte of a 16-bit cache) whatever the batch, so for GQA/MHA it never does.
TTFT (s)
    The prefill of the whole batch in passes of at most ``prefill_chunk`` tokens (whole prompts
    packed into a pass, a longer prompt split into pieces that read the cache of the pieces
    before them; ``Setup.prefill_passes``, the passes whose activations ``vram`` sizes), plus
    each pass's tensor-parallel collectives and ``queue_s`` (kernel by kernel; ``ttft_floor_s``
    is its floor plus the queue). Every pass reads the weights again. The LM head runs on the
    last position of each sequence only, as engines compute logits only where a token is
    sampled.
TPOT (s)
    The time of one decode step, which is every user's time per output token: the sum over
    kernels of their rooflines, plus the all-reduces (kernel by kernel); averaged exactly over the
    ``output_len - 1`` steps as the context grows (each kernel's FLOPs and bytes are affine in
    the context, so each kernel's max has at most one crossing: ``_mean_of_max`` per kernel; a
    kernel that is not affine, such as a sliding window's, is summed step by step).
    ``tpot_floor_s`` is the mean of each step's floor, exact too: a step's compute and memory
    busy times are affine in the context, and the mean of the upper envelope of affine
    functions is summed piece by piece between their crossings (step by step where not
    affine). The
    aggregate throughput is ``batch / TPOT``; ``TPOT / batch`` is the amortised time per token,
    not anyone's latency. With ``output_len = 1`` no decode step happens; the decode fields then
    describe the step that would make a second token (context ``prompt_len + 1``).
Precisions
    ``weight_dtype`` (bytes of the weights), ``kv_dtype`` (bytes of the cache) and
    ``compute_dtype`` (which peak the body's weight matmuls run at) are separate. By default
    fp8/int8 weights run fp8/int8 math where the chip has it (W8A8: half the bytes and twice
    the peak); int4 weights (W4A16) and fp8 weights on a chip without fp8 math are dequantised
    to bf16: they cut bytes only. ``compute_dtype`` chooses the body's math explicitly,
    ``attention_dtype`` the attention's (default: the activations' 16 bits, whatever the cache
    stores); the LM head keeps the precision of its weights.

Bytes counted are the compulsory traffic: weights (each distinct expert a step touches, for
MoE) and the KV cache. Activations are left out, as a fused engine keeps most of them on chip;
FLOPs are every op's (``formulas``). With ``mbu = mfu = 1`` the floor is therefore a bound
that no engine can beat, however it overlaps its kernels; the kernel-by-kernel time is the
plain engine's time, which overlap and fusion can beat. Real engines reach a fraction of each
peak: model bandwidth
utilisation (MBU) and model FLOPs utilisation (MFU). Pope et al. (2022) report 76 % MFU for
large-batch prefill of PaLM 540B on TPU v4; the Databricks/MosaicML inference study measures MBU
well below 1 for batch-1 decode. As a starting point use ``mfu`` about 0.5-0.7 and ``mbu`` about
0.6-0.8 for a tuned engine, and measure your own machine with ``llm_roofline.measure``.

Tensor parallelism splits attention heads, MLP and experts (each GPU holds ``1/n`` of every
expert), and the vocabulary; the norms, the router and MLA's down-projections are replicated;
with more GPUs than KV heads each GPU keeps one KV head (the cache is replicated), and MLA's
latent cache, shared by all heads, is replicated on every GPU. Each layer all-reduces its
attention and MLP outputs, and each pass all-reduces the vocabulary-parallel embedding's rows
and all-gathers the logits: ``2L + 2`` collectives (``Setup.allreduce_s``; the row
``allreduce`` of ``breakdown`` is all of them). Each is a ring inside the scale-up domain
(an HGX node of 8) at the interconnect's bandwidth, a hierarchical all-reduce across nodes at
the network's, each collective with its fixed latency from the data (a lower estimate, so the
floor stays a floor). ``Estimate.nodes`` says how many nodes ``n_gpus`` fill.

Scope: what the floor is a floor of
    ``estimate``'s floor is the floor of *this* layout and *these* formats: tensor parallelism
    over ``n_gpus`` GPUs with 16-bit all-reduces (a ring, or NVLink SHARP where the switch
    reduces), the weight, cache and activation formats given (4-bit NVFP4/MXFP4 and 6-bit
    MXFP6 included, run on FP4/FP6 tensor cores only where the chip has them), one token per
    user a decode step and every prompt token prefilled. ``Estimate.floor_scope`` says it in
    one line, ``Estimate.floor_caveats`` names what lies beyond it: an engine that serves an
    MLA or MoE model with data-parallel attention and expert parallelism (priced by
    ``parallel.dp_ep_estimate``, with its own floor), that decodes speculatively (MTP, draft
    models: ``serving.speculative``) or that reuses a cached prefix can beat this floor, and
    the floor is not a bound for it. Pipeline stages: ``parallel.parallel_estimate``.

Every size may be a NumPy array (they broadcast): a sweep of 100,000 (batch, context) points
is one call (see ``benchmarks/bench_estimate.py``). ``setup`` is the one step every function
here (and ``serving``) starts from.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import validate
from .deployment import (
    Flag,
    Label,
    Number,
    Setup,
    _contexts,
    _describe_precision,
    _out,
    _sizes_of,
    floor_caveats,
    floor_scope,
    prefill_chunk_of,
    setup,
)
from .hardware import Accelerator
from .models import ModelConfig
from .vram import Memory, _memory

__all__ = ["KERNEL_BY_KERNEL", "DecodeStep", "Estimate", "decode_step", "estimate"]

KERNEL_BY_KERNEL = "kernel by kernel"
"""``Estimate.kind`` of ``estimate``'s results: ``ttft_s`` and the rest are kernel-by-kernel."""


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

    Two times per phase (module docs), each named for what it is:

    - the *kernel-by-kernel time*, each kernel on its own roofline and nothing overlapping,
      what a plain engine pays: ``ttft_kernel_s``, ``tpot_kernel_s``,
      ``throughput_kernel_tok_s`` and ``e2e_kernel_s``;
    - the *floor*, the busiest resource's time, which no engine can beat however it overlaps
      its kernels: ``ttft_floor_s``, ``tpot_floor_s``, ``throughput_floor_tok_s`` and
      ``e2e_floor_s``.

    ``ttft_s``, ``tpot_s``, ``throughput_tok_s`` and ``e2e_s`` are the older names of the
    kernel-by-kernel times, kept as aliases (``est.ttft_s == est.ttft_kernel_s``). ``kind``
    says what they hold: ``"kernel by kernel"`` here; in the ``estimate`` of
    ``realistic.estimate`` it is ``"calibrated prediction"``, they hold the prediction, and the
    ``*_kernel_s`` names refuse with a ``ValueError`` rather than mislabel it.
    ``resources(phase)`` gives each resource's busy time.
    ``decode_bound`` and ``prefill_bound`` name the resource that limits the kernel-by-kernel
    time: ``"memory"`` or ``"compute"``.
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
    ttft_floor_s: Number = None  # the prefill's floor (module docs), queue included
    tpot_floor_s: Number = None  # the decode step's floor, mean over the decode steps
    busy: dict = field(default_factory=dict, repr=False, compare=False)  # for resources()
    head_dtype: str = "bf16"  # the LM head's math (Setup.math_dtype)
    attention_dtype: str = "bf16"  # the attention's math
    expert_dtype: str | None = None  # the routed experts' own format (setup's expert_dtype)
    expert_compute_dtype: str | None = None  # and their math
    kind: str = KERNEL_BY_KERNEL  # what ttft_s, tpot_s, throughput_tok_s and e2e_s hold

    def _kernel(self, name: str, kernel_name: str) -> Number:
        if self.kind != KERNEL_BY_KERNEL:
            raise ValueError(
                f"{kernel_name}: this Estimate is a {self.kind}, not a kernel-by-kernel time; "
                f"read {name} for the prediction, or Realistic.bound.{kernel_name} for the "
                "kernel-by-kernel time at the peaks")
        return getattr(self, name)

    @property
    def ttft_kernel_s(self) -> Number:
        """TTFT kernel by kernel, queue included: each kernel of the prefill on its own
        roofline, one after another (``ttft_s`` is its older name)."""
        return self._kernel("ttft_s", "ttft_kernel_s")

    @property
    def tpot_kernel_s(self) -> Number:
        """TPOT kernel by kernel: one decode step's kernels one after another, mean over the
        decode steps (``tpot_s`` is its older name)."""
        return self._kernel("tpot_s", "tpot_kernel_s")

    @property
    def throughput_kernel_tok_s(self) -> Number:
        """``batch / tpot_kernel_s``, decode tokens per second (``throughput_tok_s``)."""
        return self._kernel("throughput_tok_s", "throughput_kernel_tok_s")

    @property
    def e2e_kernel_s(self) -> Number:
        """One request's latency kernel by kernel: ``ttft_kernel_s + (output_len - 1) *
        tpot_kernel_s`` (``e2e_s`` is its older name)."""
        return self._kernel("e2e_s", "e2e_kernel_s")

    @property
    def bound(self) -> Label:
        """Old name of ``decode_bound``, kept until every caller has moved to it."""
        return self.decode_bound

    @property
    def precision(self) -> str:
        """Weight, KV-cache and compute precision in words (weight-only or weight-and-activation)."""
        return _describe_precision(self.weight_dtype, self.kv_dtype, self.compute_dtype,
                                   self.head_dtype, self.attention_dtype, self.expert_dtype,
                                   self.expert_compute_dtype)

    @property
    def floor_scope(self) -> str:
        """The layout and formats the floors are floors of, in one line (``deployment.floor_scope``):
        e.g. ``floor (TP8, all-reduces in bf16, on 8 x NVIDIA H100 SXM; bf16 weights, W16A16,
        KV cache bf16)``. See ``floor_caveats`` for setups outside it."""
        where = f"TP{self.n_gpus}, all-reduces in {self.act_dtype}" if self.n_gpus > 1 else "one GPU"
        scope = floor_scope(where, self.n_gpus, self.accelerator, self.weight_dtype,
                            self.compute_dtype, self.kv_dtype)
        if self.expert_dtype:
            scope = scope[:-1] + f"; routed experts {self.expert_dtype})"
        return scope

    @property
    def floor_caveats(self) -> tuple[str, ...]:
        """The setups an engine may run in which it can beat these floors (``floor_caveats``)."""
        if "decode" not in self.phases:
            return ()
        return floor_caveats(self.phases["decode"][0].model, self.n_gpus)

    @property
    def throughput_floor_tok_s(self) -> Number:
        """``batch / tpot_floor_s``: the most decode tokens per second any engine can make."""
        return self.batch / self.tpot_floor_s

    @property
    def e2e_floor_s(self) -> Number:
        """One request's latency at the floor: ``ttft_floor_s + (output_len - 1) * tpot_floor_s``."""
        return self.ttft_floor_s + (self.output_len - 1) * self.tpot_floor_s

    def resources(self, phase: str = "decode") -> dict:
        """The busy time of each resource in the prefill or a (mean) decode step, seconds.

        Keys: ``compute`` (FLOPs over the peak), ``memory`` (compulsory bytes over the
        bandwidth), ``interconnect`` and ``network`` (the all-reduces' bytes at their least
        cost), ``latency`` (the all-reduces' fixed latencies, on the critical path only for
        one sequence), ``latency_added`` (the latencies the floor adds: all of them for one
        sequence, else 0), ``floor`` (``ttft_floor_s`` less the queue, or ``tpot_floor_s``),
        ``kernel_by_kernel`` (``ttft_kernel_s`` less the queue, or ``tpot_kernel_s``) and
        ``limit``: the
        resource whose busy time is the floor (``"latency"`` where the collectives' latencies
        exceed every busy time).
        """
        phase = validate.choice("phase", phase, ("prefill", "decode"))
        return dict(self.busy[phase])

    @property
    def time_per_token_s(self) -> Number:
        """``tpot_s / batch``: the amortised time per token of the aggregate; no user sees it."""
        return self.tpot_s / self.batch

    @property
    def e2e_s(self) -> Number:
        """One request's latency: TTFT, then ``output_len - 1`` decode steps (of ``kind``; alias
        of ``e2e_kernel_s`` in ``estimate``'s results)."""
        return self.ttft_s + (self.output_len - 1) * self.tpot_s

    @property
    def decode_intensity(self) -> Number:
        """FLOPs per byte of a decode step (per GPU)."""
        return self.decode_flops / self.decode_bytes

    def breakdown(self, phase: str = "decode") -> list[dict]:
        """Per kernel of the prefill or of a (mean) decode step, one dict each.

        Keys: ``op``, ``flops`` and ``bytes`` (per GPU), ``intensity`` (FLOPs per byte; None
        for a kernel that moves no compulsory bytes), ``time_s``, ``math`` (the precision of
        the kernel's tensor math, ``Setup.math_dtype``; None for element-wise work), ``bound``
        (``"compute"``, ``"memory"``, ``"element-wise"`` for work fused into a neighbour and
        priced by its bytes alone, or ``"interconnect"`` for the collectives), ``share`` (of the
        phase's time; the shares sum to 1). Values are arrays when the sizes are.
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
    attention_dtype: str | None = None,
    reserve_fraction: float = 0.1,
    prefill_chunk: int = 8192,
    expert_dtype: str | None = None,
) -> Estimate:
    """Memory, TTFT, TPOT and throughput of ``batch`` requests served together (module docs).

    ``model``: a ``ModelConfig`` or a built-in name; ``accelerator``: an ``Accelerator`` or a
    name. ``batch``, ``prompt_len`` and ``output_len`` are positive integers or arrays of them.
    Other arguments as for ``setup``; ``queue_s`` (seconds) is added to the TTFT. Returns an
    ``Estimate``: kernel-by-kernel times and floors at the ``mbu`` and ``mfu`` given.

    The calibrated prediction of a tuned engine is ``realistic.estimate`` (or
    ``llm_roofline.estimate(..., realistic=True)``).
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, act_dtype=act_dtype,
              weight_group_size=weight_group_size, n_gpus=n_gpus, mbu=mbu, mfu=mfu,
              attention_dtype=attention_dtype, expert_dtype=expert_dtype)
    b, p, o = _sizes_of(s.model, batch, prompt_len, output_len)
    queue = validate.real("queue_s", queue_s, minimum=0, maximum=1e9, unit="seconds")
    chunk = prefill_chunk_of(prefill_chunk)
    mem = _memory(s, b, p, o, reserve_fraction, chunk)

    # prefill: in chunks, logits at each sequence's last position only
    prefill, prefill_times, prefill_ar, collectives, ar_bytes = _prefill(s, b, p, chunk)
    ttft = sum(prefill_times.values()) + prefill_ar + queue
    prefill_busy = _busy(s, s.math_s(prefill), sum(m for _, m in prefill.values()) / s.bandwidth,
                         collectives, ttft - queue)

    # decode: steps see contexts prompt_len+1 ... prompt_len+output_len-1
    steps = np.maximum(o - 1, 1)
    means = _decode_means(s, b, p, steps)
    decode_ar = s.allreduce_s(b)
    tpot = sum(t for _, _, t in means.values()) + decode_ar
    flops = sum(f for f, _, _ in means.values())
    moved = sum(m for _, m, _ in means.values())
    decode = {k: (f, m) for k, (f, m, _) in means.items()}
    decode_times = {k: t for k, (_, _, t) in means.items()}
    decode_busy = _busy(s, s.math_s(decode), moved / s.bandwidth, _collectives(s, b, b), tpot,
                        floor=_decode_floor(s, b, p, steps))

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
        phases={"prefill": (s, prefill, prefill_times, prefill_ar + queue, ar_bytes),
                "decode": (s, decode, decode_times, decode_ar, s.allreduce_bytes(b, b))},
        ttft_floor_s=_out(prefill_busy["floor"] + queue), tpot_floor_s=_out(decode_busy["floor"]),
        busy={"prefill": prefill_busy, "decode": decode_busy}, head_dtype=s.head_dtype,
        attention_dtype=s.attention_dtype, expert_dtype=s.expert_dtype,
        expert_compute_dtype=s.expert_compute_dtype,
    )


@dataclass(frozen=True)
class DecodeStep:
    """One decode step, per GPU: its kernel-by-kernel time (s, all-reduces included), what
    limits that time (``"memory"`` or ``"compute"``, the rule of ``Estimate.decode_bound``), its
    compulsory bytes and its FLOPs (arrays when the inputs are), and its floor ``floor_s`` (the
    busiest resource, module docs); ``breakdown()``: the per-kernel table; ``resources()``: the
    busy time of each resource."""

    time_s: Number
    bound: Label
    bytes: Number
    flops: Number
    allreduce_s: Number
    phase: tuple = field(default=(), repr=False, compare=False)  # for breakdown()
    floor_s: Number = None  # the step's floor: its busiest resource (module docs)
    busy: dict = field(default_factory=dict, repr=False, compare=False)  # for resources()

    def breakdown(self) -> list[dict]:
        """Per kernel rows, as ``Estimate.breakdown``."""
        return list(_rows(*self.phase))

    def resources(self) -> dict:
        """Each resource's busy time in the step, as ``Estimate.resources``."""
        return dict(self.busy)


def decode_step(model: ModelConfig | str, accelerator: Accelerator | str, batch, context, *,
                weight_dtype: str = "bf16", kv_dtype: str = "bf16", compute_dtype: str | None = None,
                n_gpus: int = 1, mbu: float = 1.0, mfu: float = 1.0, act_dtype: str = "bf16",
                weight_group_size: int = 128, attention_dtype: str | None = None,
                expert_dtype: str | None = None) -> DecodeStep:
    """One decode step of ``batch`` sequences whose attention spans ``context`` tokens each.

    The step reads ``context - 1`` cached tokens per sequence and adds one: it makes token
    ``context + 1 - prompt_len`` of a request with ``prompt_len`` prompt tokens. Its time is
    the sum over kernels of ``max(bytes / (bandwidth * mbu), FLOPs / (peak * mfu))`` plus the
    all-reduces: every user's TPOT at that context, kernel by kernel; ``floor_s`` is the least
    any engine can take for it. Arguments as for ``estimate``.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              compute_dtype=compute_dtype, act_dtype=act_dtype,
              weight_group_size=weight_group_size, n_gpus=n_gpus, mbu=mbu, mfu=mfu,
              attention_dtype=attention_dtype, expert_dtype=expert_dtype)
    b = validate.integers("batch", batch)
    ctx = _contexts(s.model, context)
    costs = {k: (f, w + kv) for k, (f, w, kv) in
             s.pass_costs(b, 1, ctx - 1, absorbed=True).items()}
    times = {k: s.roofline_s(k, f, m) for k, (f, m) in costs.items()}
    allreduce = s.allreduce_s(b * np.ones(np.shape(ctx)))
    flops = sum(f for f, _ in costs.values())
    moved = sum(m for _, m in costs.values())
    busy = _busy(s, s.math_s(costs), moved / s.bandwidth,
                 _collectives(s, b * np.ones(np.shape(ctx)), b), sum(times.values()) + allreduce)
    return DecodeStep(
        time_s=_out(sum(times.values()) + allreduce),
        bound=_out(_step_bound(s, costs, times)),
        bytes=_out(moved), flops=_out(flops),
        allreduce_s=_out(allreduce),
        phase=(s, costs, times, allreduce, s.allreduce_bytes(b, b)),
        floor_s=_out(busy["floor"]), busy=busy,
    )


def _collectives(s: Setup, tokens, sequences) -> tuple:
    """A pass's collectives at their least cost: ``(interconnect_s, network_s, latency_s,
    single)``, ``single`` where the pass holds one sequence (the latency rule, module docs)."""
    link, network, latency = s.allreduce_floor(tokens, sequences)  # logits: one per sequence
    return link, network, latency, np.asarray(sequences) == 1


def _prefill(s: Setup, b, p, chunk: int):
    """The prefill in chunks (``Setup.prefill_passes``), summed over its passes.

    Returns per kernel ``(FLOPs, bytes)``, per kernel its time (each pass's kernels on their
    rooflines), the collectives' time, their ``_collectives`` terms and the bytes they send.
    A pass that computes no logits skips the LM head and the sampling.
    """
    costs: dict = {}
    times: dict = {}
    ar = link = network = latency = ar_bytes = 0.0
    single = True
    for count, batch, n_new, n_past, logits in s.prefill_passes(b, p, chunk):
        def total(x, count=count):
            x = count * np.asarray(x, dtype=float)
            return x.sum(-1) if np.ndim(count) > np.ndim(b) else x

        pc = s.pass_costs(batch, n_new, n_past, absorbed=False, logits_tokens=logits)
        for k in ("lm_head", "sampling"):
            pc[k] = tuple(np.where(np.asarray(logits) > 0, x, 0.0) for x in pc[k])
        for k, (f, w, kv) in pc.items():
            parts = (total(f), total(w + kv), total(s.roofline_s(k, f, w + kv)))
            costs[k] = tuple(a + c for a, c in zip(costs[k], parts[:2], strict=True)) \
                if k in costs else parts[:2]
            times[k] = times[k] + parts[2] if k in times else parts[2]
        tokens = np.asarray(batch * n_new, dtype=float)
        g_link, g_network, g_latency, g_single = _collectives(s, tokens, logits)
        ar, link, network, latency = (ar + total(s.allreduce_s(tokens, logits)),
                                      link + total(g_link), network + total(g_network),
                                      latency + total(g_latency))
        ar_bytes = ar_bytes + total(s.allreduce_bytes(tokens, logits))
        one = (np.asarray(count) == 0) | (np.asarray(batch) == 1)
        single = single & (one.all(-1) if np.ndim(count) > np.ndim(b) else one)
    return costs, times, ar, (link, network, latency, single), ar_bytes


def _busy(s: Setup, compute, memory, collectives, kernel_by_kernel, floor=None) -> dict:
    """Each resource's busy time in a pass, its floor and the resource that sets it.

    ``collectives``: ``_collectives``' terms; their latencies are added to the floor where the
    pass holds one sequence, else join the max as a chain (module docs).
    """
    link, network, latency, single = collectives
    added = np.where(single, latency, 0.0)
    chain = np.where(single, 0.0, latency)
    names = ("compute", "memory", "interconnect", "network", "latency")
    terms = np.broadcast_arrays(*(np.asarray(x, dtype=float) for x in
                                  (compute, memory, link, network, chain)))
    if floor is None:
        floor = np.max(np.stack(terms), axis=0) + added
    limit = np.asarray(names)[np.argmax(np.stack(terms), axis=0)]
    return {"compute": _out(terms[0]), "memory": _out(terms[1]), "interconnect": _out(terms[2]),
            "network": _out(terms[3]), "latency": _out(latency * np.ones(np.shape(terms[0]))),
            "latency_added": _out(added * np.ones(np.shape(terms[0]))),
            "floor": _out(floor), "kernel_by_kernel": _out(kernel_by_kernel),
            "limit": _out(limit)}


def _decode_floor(s: Setup, b, p, steps) -> Number:
    """The mean over the decode steps of each step's floor, exactly.

    A step's floor is ``max(C, M, K) + A``: C and M, the compute and memory busy times, are
    affine in the context for full attention, and K (the collectives' busy times and latency
    chain) and A (the latencies added for one sequence) do not depend on it; the mean of the
    upper envelope of three affine functions is summed piece by piece (``_mean_of_envelope``).
    Where C or M is not affine (a sliding window), every step is summed instead.
    """
    b, p, steps = np.broadcast_arrays(b, p, steps)
    link, network, latency, single = _collectives(s, b, b)
    added = np.where(single, latency, 0.0)
    flat = np.maximum(np.maximum(link, network), np.where(single, 0.0, latency))

    def totals(n):
        costs = s.pass_costs(b, 1, n, absorbed=True)
        return s.math_s(costs), sum(w + kv for _, w, kv in costs.values()) / s.bandwidth

    first, last = totals(p), totals(p + steps - 1)
    span = np.maximum(steps - 1, 1).astype(float)
    affine = True
    for where in ((steps - 1) // 3, 2 * (steps - 1) // 3):
        inner = totals(p + where)
        for i in range(2):
            chord = first[i] + (last[i] - first[i]) * where / span
            affine &= bool(np.allclose(inner[i], chord, rtol=1e-9, atol=0))
    if affine:
        lines = [(first[0], last[0]), (first[1], last[1]), (flat, flat)]
        return _mean_of_envelope(lines, steps) + added
    total = 0.0
    for start in range(0, int(np.max(steps)), 256):
        j = np.arange(start, min(start + 256, int(np.max(steps))))
        mask = j < steps[..., None]
        costs = s.pass_costs(b[..., None], 1, p[..., None] + j, absorbed=True)
        c = s.math_s(costs)
        m = sum(w + kv for _, w, kv in costs.values()) / s.bandwidth
        step = np.maximum(np.maximum(c, m), np.asarray(flat)[..., None])
        total = total + np.where(mask, step, 0.0).sum(-1)
    return total / steps + added


def _mean_of_envelope(lines, n):
    """Mean over steps ``j = 0 .. n-1`` of ``max_i line_i(j)``, each line affine from its
    ``(start, end)`` values at ``j = 0`` and ``j = n - 1``; exact.

    The envelope changes line only where two lines cross: between consecutive crossings one
    line is the max, and its sum over the integer steps there is an arithmetic series.
    """
    n = np.asarray(n, dtype=float)
    span = np.maximum(n - 1, 1)
    a = np.stack(np.broadcast_arrays(*(np.asarray(v0, dtype=float) for v0, _ in lines)))
    end = np.stack(np.broadcast_arrays(*(np.asarray(v1, dtype=float) for _, v1 in lines)))
    a, end, n, span = np.broadcast_arrays(a, end, n, span)
    slope = (end - a) / span
    k = len(lines)
    cuts = [np.zeros(n.shape[1:]), n[0]]
    for i in range(k):
        for j in range(i + 1, k):
            ds = slope[i] - slope[j]
            with np.errstate(divide="ignore", invalid="ignore"):
                x = np.where(ds != 0, (a[j] - a[i]) / np.where(ds != 0, ds, 1), 0.0)
            cuts.append(np.clip(x, 0, n[0]))
    cuts = np.sort(np.stack(cuts), axis=0)
    total = np.zeros(n.shape[1:])
    for lo, hi in zip(cuts[:-1], cuts[1:], strict=True):
        j0, j1 = np.ceil(lo), np.ceil(hi)  # integer steps j0 .. j1 - 1
        count = np.maximum(j1 - j0, 0)
        mid = (lo + hi) / 2
        best = np.argmax(a + slope * mid, axis=0)
        a_b = np.take_along_axis(a, best[None], 0)[0]
        s_b = np.take_along_axis(slope, best[None], 0)[0]
        total = total + count * a_b + s_b * (count * j0 + count * (count - 1) / 2)
    return total / n[0]


def _step_bound(s: Setup, costs: dict, times: dict) -> Label:
    """``"compute"`` when the compute-bound kernels take at least as long as the memory-bound."""
    compute = memory_time = 0.0
    for k, (f, m) in costs.items():
        is_compute = s.compute_bound(k, f, m)
        compute = compute + np.where(is_compute, times[k], 0.0)
        memory_time = memory_time + np.where(is_compute, 0.0, times[k])
    return np.where(compute >= memory_time, "compute", "memory")


def _rows(s: Setup, costs: dict, times: dict, extra_s, ar_bytes) -> tuple[dict, ...]:
    """The per-kernel table of a phase (kernels with no FLOPs and no bytes left out);
    ``ar_bytes``: the bytes each GPU sends in the phase's collectives."""
    total = sum(times.values()) + extra_s
    rows = []
    for k, (f, m) in costs.items():
        if not (np.any(f > 0) or np.any(m > 0)):
            continue
        intensity = None if not np.any(m > 0) else _out(f / np.where(m > 0, m, 1.0))
        rows.append({
            "op": k, "flops": _out(f * 1.0), "bytes": _out(m * 1.0), "intensity": intensity,
            "time_s": _out(times[k] * 1.0), "math": s.math_dtype(k),
            "bound": "element-wise" if s.math_dtype(k) is None else
                     _out(np.where(s.compute_bound(k, f, m), "compute", "memory")),
            "share": _out(times[k] / total),
        })
    if s.n_gpus > 1:
        rows.append({"op": "allreduce", "flops": 0.0, "bytes": _out(ar_bytes * 1.0),
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
        peak = s.peak_of(k)
        t = _mean_of_max(m0 / s.bandwidth, m1 / s.bandwidth, f0 / peak, f1 / peak, steps)
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
                     (f, w + kv, s.roofline_s(k, f, w + kv))]
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
