"""Parallel layouts: tensor x pipeline x expert parallelism (TP x PP x EP) on the same rooflines.

A ``Layout(tp, pp, ep)`` serves the model on ``tp * pp`` GPUs: ``pp`` pipeline stages of
``ceil(n_layers / pp)`` consecutive layers each (the embedding on the first stage, the final
norm and LM head on the last), each stage tensor-parallel over ``tp`` GPUs (``calculator``'s
rules). With ``ep = tp`` an MoE model's routed experts are spread whole over a stage's GPUs
(``E / ep`` experts each) instead of each expert being split ``tp`` ways: attention stays
tensor-parallel, so after its all-reduce every GPU has every token, dispatch is local and the
combine is the all-reduce the layer has anyway; what expert parallelism changes on the roofline
is the busiest GPU's share of the (token, expert) pairs.

Decode, pipelined
    The batch runs as ``microbatches`` (default ``pp``) micro-batches in flight, one per stage.
    A micro-batch passes all stages in turn, with one point-to-point transfer of its hidden
    states between stages (``Accelerator.send_s``; over the network where stages sit in
    different nodes), so each user's TPOT is
    ``max(m * t_busiest_stage, t_all_stages + t_transfers)`` for micro-batches of
    ``ceil(batch / m)``. Pipelining adds capacity (memory per GPU falls as ``1/pp``), not speed:
    a token still crosses every layer.
Prefill, pipelined
    GPipe-style: ``m`` micro-batches fill and drain ``pp`` stages in ``m + pp - 1`` stage
    times; the bubble is ``(pp - 1) / (m + pp - 1)`` of it.
Expert load
    Under uniform routing of ``T`` tokens to ``k`` of ``E`` experts, a GPU holding ``E / ep``
    experts gets ``T*k/ep`` pairs on average, with variance
    ``T*k*(1/ep)*(1 - 1/ep)*(E - k)/(E - 1)``; the busiest of ``ep`` GPUs is estimated as the
    mean plus ``sqrt(2 ln ep)`` standard deviations (the Gaussian extreme; an approximation).
    ``expert_load`` reports it over the mean. By default the step is priced balanced (engines
    rebalance hot experts, e.g. DeepSeek's EPLB, so the time stays the least for that plan);
    ``balanced=False`` scales the MoE MLP kernels' time by ``expert_load`` (an upper
    estimate: shared experts and the dense first layers are scaled too).

Data-parallel attention with expert parallelism (``Layout(dp=8, ep=8)``, ``dp_ep_estimate``)
    DeepSeek-V3's own deployment, and SGLang's and vLLM's for large MoE models: each of ``dp``
    GPUs runs the attention of its own sequences (the attention weights on every GPU, each
    sequence's cache, an MLA latent too, on one GPU only), the dense layers, shared experts,
    router, embedding and LM head replicated, the routed experts spread ``E / ep`` to a GPU.
    Per MoE layer an all-to-all dispatches each token to the GPUs of its experts (FP8 with an
    FP32 scale per 128 channels, as DeepEP sends it) and a second combines their outputs
    (BF16): over the scale-up link inside a node, the network across. The floor has each token
    sent once to each distinct remote GPU among its experts' (``(ep - 1)(1 - C(E - E/ep, k) /
    C(E, k))`` of them on average); the kernel-by-kernel time sends one copy per (token,
    expert) pair, ``k (ep - 1) / ep``, as DeepEP's low-latency kernels do, the all-to-alls after
    the kernels. Each GPU reads the routed experts its share of all ``dp`` GPUs' tokens touch.
    Across nodes the least sends a token once to each other node holding one of its experts
    (the node forwards it over its own links, as DeepEP's normal kernels do), at most
    ``node_limit`` nodes where routing is node-limited (DeepSeek-V3's: 4).

Not modelled: expert parallelism across pipeline stages; data-parallel attention combined with
tensor parallelism inside each attention group (``tp`` must be 1 with ``dp``).
"""

from __future__ import annotations

import dataclasses
import inspect
import math
from dataclasses import dataclass, field

import numpy as np

from . import validate
from .calculator import estimate
from .deployment import _contexts, _out, _sizes_of, setup
from .deployment import floor_scope as deployment_floor_scope
from .dtypes import bytes_per_element, canonical
from .hardware import get_accelerator
from .models import ModelConfig, get_model
from .serving import expected_tokens
from .vram import Memory, memory

__all__ = [
    "DataParallelEstimate", "DataParallelStep", "Layout", "ParallelEstimate", "dp_ep_decode_step",
    "dp_ep_estimate", "expert_load", "layout_needed", "layout_scope", "parallel_estimate",
]

_NON_LAYER = ("embed", "final_norm", "lm_head")
_MOE_KERNELS = ("gate_proj", "up_proj", "mlp_act", "down_proj", "moe_combine",
                "routed_gate_proj", "routed_up_proj", "routed_down_proj")
_MEMORY_OPTIONS = ("weight_dtype", "kv_dtype", "act_dtype", "weight_group_size", "expert_dtype")
_SETUP_OPTIONS = tuple(n for n, p in inspect.signature(setup).parameters.items()
                       if p.kind is p.KEYWORD_ONLY and n != "n_gpus")


@dataclass(frozen=True)
class Layout:
    """``tp`` GPUs per pipeline stage, ``pp`` stages, experts spread over ``ep`` (1 or ``tp``).

    ``dp > 1``: data-parallel attention instead (``dp_ep_estimate``): ``dp`` GPUs, each with the
    whole attention and the cache of its own sequences, the routed experts spread over
    ``ep`` (1 or ``dp``) of them; then ``tp`` and ``pp`` must be 1.
    """

    tp: int = 1
    pp: int = 1
    ep: int = 1
    dp: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep", "dp"):
            validate.integer(f"Layout.{name}", getattr(self, name), maximum=2**20)
        if self.dp > 1:
            if self.tp != 1 or self.pp != 1:
                raise ValueError(
                    f"Layout.dp ({self.dp}) runs attention data-parallel on every GPU: tp and pp "
                    f"must be 1, got tp={self.tp}, pp={self.pp}")
            if self.ep not in (1, self.dp):
                raise ValueError(
                    f"Layout.ep must be 1 or dp ({self.dp}) with data-parallel attention: the "
                    f"experts are spread over the same GPUs, got {self.ep}")
        elif self.ep not in (1, self.tp):
            raise ValueError(
                f"Layout.ep must be 1 or tp ({self.tp}): experts are spread over the GPUs of a "
                f"stage, got {self.ep}"
            )

    @property
    def gpus(self) -> int:
        """GPUs in the layout: ``tp * pp`` (``dp`` with data-parallel attention)."""
        return self.tp * self.pp * self.dp

    def __str__(self) -> str:
        if self.dp > 1:
            return f"DP{self.dp} attention x EP{self.ep} ({self.gpus} GPUs)"
        return f"TP{self.tp} x PP{self.pp} x EP{self.ep} ({self.gpus} GPUs)"


@dataclass(frozen=True)
class ParallelEstimate:
    """What ``parallel_estimate`` computes (seconds; memory per GPU of the busiest stage)."""

    layout: Layout
    nodes: int
    microbatches: int
    memory: Memory
    fits: bool
    ttft_s: float  # the whole batch's prefill, pipelined, with its bubble
    tpot_s: float  # each user's time per output token
    throughput_tok_s: float  # batch / tpot_s
    bubble_fraction: float  # of the prefill: (pp - 1) / (m + pp - 1)
    transfer_s: float  # one micro-batch's stage-to-stage transfers in a decode step
    expert_load: float  # busiest GPU's (token, expert) pairs over the mean; 1 without EP


def expert_load(model: ModelConfig | str, tokens: int, ep: int) -> float:
    """Busiest over mean (token, expert) pairs of ``ep`` GPUs under uniform routing (module docs)."""
    cfg = model if isinstance(model, ModelConfig) else get_model(model)
    tokens = validate.integer("tokens", tokens)
    ep = validate.integer("ep", ep, maximum=2**20)
    if ep == 1 or not cfg.is_moe:
        return 1.0
    e, k = cfg.n_routed_experts, cfg.n_experts_per_token
    if e % ep:
        raise ValueError(f"ep ({ep}) must divide the {e} routed experts of {cfg.name!r}")
    mean = tokens * k / ep
    var = tokens * k * (1 / ep) * (1 - 1 / ep) * ((e - k) / (e - 1) if e > 1 else 0.0)
    busiest = min(mean + math.sqrt(var) * math.sqrt(2 * math.log(ep)), tokens * min(k, e / ep))
    return busiest / mean


def parallel_estimate(model: ModelConfig | str, accelerator, batch: int, prompt_len: int,
                      output_len: int, layout: Layout, *, microbatches: int | None = None,
                      balanced: bool = True, reserve_fraction: float = 0.1,
                      prefill_chunk: int = 8192, **options) -> ParallelEstimate:
    """Memory, TTFT, TPOT and throughput of ``batch`` requests on a TP x PP x EP layout.

    ``options``: ``deployment.setup``'s (``weight_dtype``, ``kv_dtype``, ``mbu``, ...), not
    ``n_gpus`` (the layout says it). Scalars only.
    """
    if not isinstance(layout, Layout):
        raise ValueError(f"layout must be a Layout(tp, pp, ep), got {validate.shorten(layout)}")
    if layout.dp > 1:
        raise ValueError(f"layout {layout} has data-parallel attention: use dp_ep_estimate")
    if "n_gpus" in options:
        raise ValueError("n_gpus is given by the layout (tp * pp); do not pass it")
    validate.options("parallel_estimate", options, _SETUP_OPTIONS)
    balanced = validate.boolean("balanced", balanced)
    chip = get_accelerator(accelerator)
    tp, pp = layout.tp, layout.pp
    s = setup(model, chip, n_gpus=tp, **options)
    cfg = s.model
    nodes = chip.nodes(layout.gpus)
    if pp > cfg.n_layers:
        raise ValueError(f"Layout.pp ({pp}) must be at most n_layers ({cfg.n_layers}) of {cfg.name!r}")
    load = expert_load(cfg, validate.integer("batch", batch), layout.ep) if layout.ep > 1 else 1.0
    b = validate.integer("batch", batch)
    m = validate.integer("microbatches", microbatches if microbatches is not None else min(pp, b),
                         maximum=b) if pp > 1 else 1
    micro = -(-b // m)
    frac = _stage_share(cfg, pp)

    mem = _stage_memory(s, b, prompt_len, output_len, pp, reserve_fraction, prefill_chunk,
                        options)

    # one micro-batch through the whole model at TP tp, split into its stages
    est = estimate(cfg, chip, micro, prompt_len, output_len, n_gpus=tp,
                   prefill_chunk=prefill_chunk, **options)
    message = micro * cfg.hidden_size * s.sizes["act"] / tp  # each TP rank sends its slice
    crossing = min(pp - 1, nodes - 1)  # stage boundaries that cross nodes
    inside = pp - 1 - crossing

    def transfers(msg) -> float:
        if pp == 1:
            return 0.0
        t = inside * float(chip.send_s(msg, across_nodes=False)) if inside else 0.0
        return t + (crossing * float(chip.send_s(msg, across_nodes=True)) if crossing else 0.0)

    def stages(rows: list[dict]) -> tuple[float, float]:
        """(all stages in turn, the busiest stage) for one micro-batch."""
        time = {r["op"]: r["time_s"] for r in rows}
        if not balanced and load > 1:
            for op in _MOE_KERNELS:
                if op in time:
                    time[op] *= load
        total = sum(time.values())
        ends_s = [time.get(op, 0.0) for op in _NON_LAYER]
        body = total - sum(ends_s)
        busiest = body * frac + (sum(ends_s) if pp == 1 else max(ends_s[0], sum(ends_s[1:])))
        return total, busiest

    all_stages, busiest = stages(est.breakdown("decode"))
    transfer = transfers(message)
    tpot = max(m * busiest, all_stages + transfer)
    pre_all, pre_busiest = stages(est.breakdown("prefill"))
    prompt = validate.integer("prompt_len", prompt_len)
    if pp == 1:
        ttft = pre_all
    else:
        ttft = (m + pp - 1) * pre_busiest + transfers(message * prompt)
    return ParallelEstimate(
        layout=layout, nodes=nodes, microbatches=m, memory=mem, fits=bool(mem.free >= 0),
        ttft_s=ttft, tpot_s=tpot, throughput_tok_s=b / tpot,
        bubble_fraction=(pp - 1) / (m + pp - 1), transfer_s=transfer, expert_load=load,
    )


def layout_needed(model: ModelConfig | str, accelerator, batch: int, prompt_len: int,
                  output_len: int, *, max_gpus: int = 256, **options) -> Layout | None:
    """The smallest TP x PP x EP layout whose memory fits, or None up to ``max_gpus``.

    Tensor parallelism stays inside one scale-up domain (a node: its all-reduces are on the
    critical path of every layer); pipeline stages go across nodes. Among layouts of the fewest
    GPUs the widest TP wins (the lowest latency); MoE models spread their experts (``ep = tp``).
    """
    if "n_gpus" in options:
        raise ValueError("layout_needed takes no n_gpus: it finds the layout, up to max_gpus")
    validate.options("layout_needed", options, _SETUP_OPTIONS)
    chip = get_accelerator(accelerator)
    cfg = setup(model, chip, **options).model
    max_gpus = validate.integer("max_gpus", max_gpus, maximum=2**20)
    # a TP degree divides the attention heads: no more candidates than heads (a file's chip
    # may join a million in one domain)
    top = min(chip.domain_size, cfg.n_heads, max_gpus)
    degrees = [n for n in range(1, top + 1) if _tp_allowed(cfg, chip, n)]
    candidates = sorted(
        ((tp * pp, -tp, tp, pp) for tp in degrees for pp in range(1, cfg.n_layers + 1)
         if tp * pp <= max_gpus),
    )
    mem_options = {k: v for k, v in options.items() if k in _MEMORY_OPTIONS}
    for _, _, tp, pp in candidates:
        if tp * pp > chip.domain_size and chip.network_bandwidth is None:
            continue
        s = setup(cfg, chip, n_gpus=tp, **mem_options)
        mem = _stage_memory(s, batch, prompt_len, output_len, pp, 0.1, 8192, options)
        if mem.free >= 0:
            return Layout(tp, pp, tp if cfg.is_moe and cfg.n_routed_experts % tp == 0 else 1)
    return None


def _stage_share(cfg: ModelConfig, pp: int) -> float:
    """The busiest stage's share of the layers: ``ceil(n_layers / pp) / n_layers``."""
    return -(-cfg.n_layers // pp) / cfg.n_layers


def _stage_memory(s, batch, prompt_len, output_len, pp, reserve_fraction, prefill_chunk,
                  options) -> Memory:
    """Memory per GPU of the busiest stage: its layers, its end of the model, its cache."""
    mem_options = {k: v for k, v in options.items() if k in _MEMORY_OPTIONS}
    full = memory(s.model, s.accelerator, batch, prompt_len, output_len, n_gpus=s.n_gpus,
                  reserve_fraction=reserve_fraction, prefill_chunk=prefill_chunk, **mem_options)
    by_op = s.weight_bytes_by_op()
    layer = sum(v for op, v in by_op.items() if op not in _NON_LAYER)
    ends = (sum(by_op[op] for op in _NON_LAYER) if pp == 1
            else max(by_op["embed"], by_op["final_norm"] + by_op["lm_head"]))
    frac = _stage_share(s.model, pp)
    return Memory(weights=layer * frac + ends, kv_cache=full.kv_cache * frac,
                  activations=full.activations, reserve=full.reserve, capacity=full.capacity)


def _tp_allowed(cfg: ModelConfig, chip, n: int) -> bool:
    try:
        setup(cfg, chip, n_gpus=n)
    except ValueError:
        return False
    return True


# --- data-parallel attention with expert parallelism ------------------------------------------
_ROUTED_KERNELS = ("gate_proj", "up_proj", "down_proj")
_SCALE_BLOCK = 128  # DeepEP's FP8 dispatch: one FP32 scale per 128 hidden channels


def _check_dp_layout(layout) -> None:
    if not isinstance(layout, Layout) or layout.dp == 1:
        raise ValueError(f"layout must be a data-parallel Layout(dp=..., ep=...) with dp > 1, "
                         f"got {validate.shorten(layout)}")


def _miss(e: int, k: int, held: float) -> float:
    """The chance that none of a token's ``k`` experts (uniform, without replacement among
    ``e``) is one of ``held`` given experts: ``C(e - held, k) / C(e, k)``."""
    out = 1.0
    for i in range(k):
        out *= max(e - held - i, 0) / (e - i)
    return out


def _remote_copies(e: int, k: int, ep: int, domain: int, node_limit: int | None):
    """Copies of a token's hidden state one MoE layer sends, ``((link, network) least,
    (link, network) per pair)``.

    ``ep`` GPUs of ``e / ep`` experts each, ``d = min(ep, domain)`` to a node. The least: one
    copy to each distinct other GPU of its own node that holds one of its experts,
    ``(d - 1)(1 - C(e - e/ep, k) / C(e, k))``, over the scale-up link, and one copy to each
    distinct other node, ``(nodes - 1)(1 - C(e - e d/ep, k) / C(e, k))``, over the network
    (a node forwards it to its GPUs over its own links, as DeepEP's normal kernels do; that
    forwarding is left out of the least), at most ``node_limit`` nodes where routing is
    node-limited (DeepSeek-V3: 4). Per pair (DeepEP's low-latency kernels): ``k`` copies,
    ``(d - 1)/ep`` of them inside the node and ``(ep - d)/ep`` across.
    """
    if ep == 1:
        return (0.0, 0.0), (0.0, 0.0)
    d = min(ep, domain)
    nodes = -(-ep // d)
    per = e / ep
    inside = (d - 1) * (1 - _miss(e, k, per))
    across = (nodes - 1) * (1 - _miss(e, k, per * d))
    if node_limit is not None:
        across = min(across, float(node_limit))
    return (inside, across), (k * (d - 1) / ep, k * (ep - d) / ep)


@dataclass(frozen=True)
class DataParallelStep:
    """One pass (a decode step, or a prefill) on the busiest GPU of a DP-attention x EP layout.

    Seconds; bytes and FLOPs per GPU. ``floor_s`` is the busiest resource's time (module docs
    of ``calculator``: compute, memory, the scale-up link, the network, the all-to-alls'
    latencies); ``time_s`` the kernel-by-kernel time (each kernel's roofline, then the
    all-to-alls one after another, a copy per (token, expert) pair). ``resources``: each busy
    time. ``all_to_all_bytes``: what the floor has each GPU send (and receive) per pass,
    dispatch and combine of every MoE layer, one copy per distinct remote GPU.
    """

    layout: Layout
    batch_per_gpu: int
    time_s: float
    floor_s: float
    flops: float
    weight_bytes: float
    kv_bytes: float
    all_to_all_bytes: float
    all_to_all_s: float  # kernel by kernel
    resources: dict = field(compare=False)
    rows: tuple = field(default=(), repr=False, compare=False)

    @property
    def bound(self) -> str:
        """The resource whose busy time is the floor."""
        return max(("compute", "memory", "interconnect", "network", "latency"),
                   key=lambda r: self.resources[r])

    def breakdown(self) -> list[dict]:
        """Per kernel: op, FLOPs, bytes and its roofline time; then the all-to-alls."""
        return [dict(r) for r in self.rows]


def _dp_pass(s, layout: Layout, b: int, n_new, n_past, *, absorbed: bool, logits,
             balanced: bool, dispatch_bytes: float, combine_bytes: float,
             node_limit: int | None = None):
    """Per kernel (FLOPs, weight bytes, cache bytes) of one GPU, its all-to-all bytes each way
    (least, per pair: each a pair (scale-up link, network)), and the busiest GPU's expert load,
    for ``b`` sequences of ``n_new`` tokens."""
    cfg, ep, dp = s.model, layout.ep, layout.dp
    costs = {k: list(v) for k, v in
             s.pass_costs(b, n_new, n_past, absorbed=absorbed, logits_tokens=logits).items()}
    tokens = b * np.asarray(n_new, dtype=float)
    load = 1.0
    least = pairs = 0.0
    if cfg.is_moe:
        e, k, layers = cfg.n_routed_experts, cfg.n_experts_per_token, cfg.n_moe_layers
        matrix = cfg.hidden_size * cfg.moe_intermediate_size  # one expert's one matrix
        # routed experts: the pass counted E(1 - (1 - k/E)^t) experts for its own t tokens; a GPU
        # of an EP group holds E/ep of them and serves the pairs of all dp GPUs' tokens
        local = e * (1 - (1 - k / e) ** tokens)
        held = (e / ep) * (1 - (1 - k / e) ** (tokens * dp)) if ep > 1 else local
        if not balanced and ep > 1:
            load = expert_load(cfg, int(np.max(tokens)) * dp, ep)
        for op in _ROUTED_KERNELS:
            key, size = ((f"routed_{op}", s.sizes["expert"]) if f"routed_{op}" in costs
                         else (op, s.sizes["weight"]))
            if key in costs:
                costs[key][1] = costs[key][1] + layers * (held - local) * matrix * size
                costs[key][0] = costs[key][0] + (load - 1) * layers * tokens * k * 2 * matrix
        if ep > 1:
            r_least, r_pairs = _remote_copies(e, k, ep, s.accelerator.domain_size, node_limit)
            per_copy = layers * tokens * (dispatch_bytes + combine_bytes)
            least = tuple(per_copy * r for r in r_least)
            pairs = tuple(per_copy * r for r in r_pairs)
    if not isinstance(least, tuple):
        least, pairs = (least, least), (pairs, pairs)
    return {k: tuple(v) for k, v in costs.items()}, least, pairs, load


def _dp_times(s, layout, costs, least, pairs, sequences) -> tuple[dict, float, dict]:
    """Kernel-by-kernel time, floor and each resource's busy time of one GPU's pass."""
    chip, ep = s.accelerator, layout.ep
    cfg = s.model
    times = {k: s.roofline_s(k, f, w + kv) for k, (f, w, kv) in costs.items()}
    math = s.math_s(costs)
    memory = sum(w + kv for _, w, kv in costs.values()) / s.bandwidth
    link = network = link_kbk = network_kbk = 0.0
    latency = 0.0
    if ep > 1 and cfg.is_moe:
        inside = min(ep, chip.domain_size)
        across = ep > inside
        one_way = chip.group_bandwidth(inside) / 2
        link, link_kbk = least[0] / one_way, pairs[0] / one_way
        if across:
            net = chip.network_bandwidth / 2
            network, network_kbk = least[1] / net, pairs[1] / net
        each = chip.collective_latency_s + (chip.network_latency_s if across else 0.0)
        latency = 2 * cfg.n_moe_layers * each  # a dispatch and a combine per MoE layer
    single = np.asarray(sequences) == 1
    terms = np.stack(np.broadcast_arrays(math, memory, link, network,
                                         np.where(single, 0.0, latency)))
    floor = np.max(terms, axis=0) + np.where(single, latency, 0.0)
    a2a = link_kbk + network_kbk + latency
    kbk = sum(times.values()) + a2a
    busy = {"compute": math, "memory": memory, "interconnect": link, "network": network,
            "latency": latency * np.ones(np.shape(floor))}
    return {"time": kbk, "floor": floor, "a2a": a2a}, times, busy


def _dp_setup(model, accelerator, layout, options):
    _check_dp_layout(layout)
    validate.options("dp_ep_estimate", options, _SETUP_OPTIONS)
    if "n_gpus" in options:
        raise ValueError("n_gpus is given by the layout (dp); do not pass it")
    chip = get_accelerator(accelerator)
    s = setup(model, chip, n_gpus=1, **options)
    cfg = s.model
    if layout.ep > 1:
        if not cfg.is_moe:
            raise ValueError(f"Layout.ep ({layout.ep}) needs a mixture-of-experts model; "
                             f"{cfg.name!r} is dense: use ep=1 (plain data parallelism)")
        if cfg.n_routed_experts % layout.ep:
            raise ValueError(f"Layout.ep ({layout.ep}) must divide the {cfg.n_routed_experts} "
                             f"routed experts of {cfg.name!r}")
        chip.nodes(layout.ep)  # raises without an interconnect or a network that joins them
        if chip.interconnect_bandwidth is None:
            raise ValueError(f"{chip.name} has no interconnect in the data for an all-to-all")
    return s, chip


def _node_limit(value) -> int | None:
    if value is None:
        return None
    return validate.integer("node_limit (most nodes a token's experts span)", value,
                            maximum=2**20)


def _a2a_sizes(cfg, dispatch_dtype, combine_dtype) -> tuple[float, float]:
    d = canonical(dispatch_dtype)
    scales = -(-cfg.hidden_size // _SCALE_BLOCK) * 4 if d.startswith("fp8") else 0
    return (cfg.hidden_size * float(bytes_per_element(d)) + scales,
            cfg.hidden_size * float(bytes_per_element(combine_dtype)))


def dp_ep_decode_step(model: ModelConfig | str, accelerator, batch_per_gpu: int, context,
                      layout: Layout, *, balanced: bool = True, dispatch_dtype: str = "fp8",
                      combine_dtype: str = "bf16", node_limit: int | None = None,
                      **options) -> DataParallelStep:
    """One decode step on the busiest GPU of a data-parallel attention x expert-parallel layout.

    Each of the ``layout.dp`` GPUs holds ``batch_per_gpu`` sequences whose attention spans
    ``context`` tokens, the whole attention (weights and the cache of its own sequences: an MLA
    latent is stored once, on its GPU), the dense layers, shared experts, router, embedding and
    LM head (replicated), and ``E / ep`` routed experts. Per MoE layer each GPU dispatches its
    tokens' hidden states to the GPUs of their experts (``dispatch_dtype``: FP8 with one FP32
    scale per 128 channels, as DeepEP sends them) and gets the experts' outputs back
    (``combine_dtype``: BF16), over the scale-up link inside a node and the network across.
    ``node_limit``: the most nodes one token's experts may span (DeepSeek-V3's node-limited
    routing sends each token to at most 4); None: uniform routing, which may span them all.
    ``options``: ``deployment.setup``'s (``weight_dtype``, ``kv_dtype``, ``mbu``, ...).
    """
    s, _ = _dp_setup(model, accelerator, layout, options)
    node_limit = _node_limit(node_limit)
    b = validate.integer("batch_per_gpu", batch_per_gpu)
    ctx = _contexts(s.model, context)
    sizes = _a2a_sizes(s.model, dispatch_dtype, combine_dtype)
    costs, least, pairs, _load = _dp_pass(
        s, layout, b, 1, ctx - 1, absorbed=True, logits=None,
        balanced=validate.boolean("balanced", balanced),
        dispatch_bytes=sizes[0], combine_bytes=sizes[1], node_limit=node_limit)
    out, times, busy = _dp_times(s, layout, costs, least, pairs, b)
    rows = tuple({"op": k, "flops": _out(f), "bytes": _out(w + kv), "time_s": _out(times[k])}
                 for k, (f, w, kv) in costs.items())
    rows += ({"op": "all_to_all", "flops": 0.0, "bytes": _out(pairs[0] + pairs[1]),
              "time_s": _out(out["a2a"])},)
    return DataParallelStep(
        layout=layout, batch_per_gpu=b, time_s=_out(out["time"]), floor_s=_out(out["floor"]),
        flops=_out(sum(f for f, _, _ in costs.values())),
        weight_bytes=_out(sum(w for _, w, _ in costs.values())),
        kv_bytes=_out(sum(kv for _, _, kv in costs.values())),
        all_to_all_bytes=_out(least[0] + least[1]), all_to_all_s=_out(out["a2a"]),
        resources={k: _out(v) for k, v in busy.items()}, rows=rows,
    )


@dataclass(frozen=True)
class DataParallelEstimate:
    """What ``dp_ep_estimate`` computes: seconds; memory per GPU; ``batch`` over all GPUs.

    ``tpot_floor_s`` is the floor of this layout and these formats (``scope`` says which),
    the mean over the decode steps; ``tpot_s`` the kernel-by-kernel time. ``ttft_*``: the
    prefill of each GPU's own ``batch_per_gpu`` prompts in one pass.
    """

    model: str
    accelerator: str
    layout: Layout
    batch: int
    batch_per_gpu: int
    nodes: int
    precision: str
    memory: Memory
    fits: bool
    ttft_s: float
    ttft_floor_s: float
    tpot_s: float
    tpot_floor_s: float
    expert_load: float
    all_to_all_bytes: float  # per GPU per decode step, each way, at the floor
    decode_resources: dict = field(compare=False)
    scope: str = ""
    tokens_per_step: float = 1.0  # decode tokens a sequence gains a step (MTP: more than 1)

    @property
    def throughput_tok_s(self) -> float:
        """Decode tokens per second of all ``layout.gpus`` GPUs, kernel by kernel."""
        return self.batch / self.tpot_s

    @property
    def throughput_floor_tok_s(self) -> float:
        """The most decode tokens per second any engine makes in this layout and formats."""
        return self.batch / self.tpot_floor_s


def dp_ep_estimate(model: ModelConfig | str, accelerator, batch: int, prompt_len: int,
                   output_len: int, layout: Layout, *, balanced: bool = True,
                   dispatch_dtype: str = "fp8", combine_dtype: str = "bf16",
                   reserve_fraction: float = 0.1, prefill_chunk: int = 8192, mtp: int = 0,
                   acceptance: float | None = None, node_limit: int | None = None,
                   **options) -> DataParallelEstimate:
    """Memory, TTFT, TPOT and throughput of ``batch`` requests on ``Layout(dp=..., ep=...)``.

    ``batch`` is spread over the ``dp`` GPUs; the busiest holds ``ceil(batch / dp)`` and sets
    every GPU's pace. The decode fields are the exact mean over the ``output_len - 1`` steps of
    ``dp_ep_decode_step`` (floor and kernel-by-kernel time). By default the routed experts are
    priced balanced (each GPU gets ``1/ep`` of the (token, expert) pairs, as an engine that
    rebalances hot experts does: the least for this plan); ``balanced=False`` scales the busiest
    GPU's routed-expert math by ``expert_load``. Scalars only.

    ``mtp`` > 0: multi-token prediction as speculative decoding (DeepSeek's MTP). Each step
    drafts ``mtp`` tokens a sequence with the MTP module (one layer of the model's kind and
    the shared LM head, one pass per drafted token) and verifies them in one pass of
    ``mtp + 1`` tokens; each drafted token is accepted with probability ``acceptance``, so a
    step makes ``serving.expected_tokens(mtp, acceptance)`` tokens on average and the TPOT
    fields are a step's time over them. The floor of a step is its busiest resource over the
    draft and verify passes together: a floor *given* that acceptance rate.

    ``node_limit`` as for ``dp_ep_decode_step``: with uniform routing (None) a token's experts
    may span every node, with node-limited routing (DeepSeek-V3: 4) fewer, so fewer bytes
    cross the network; pass the model's limit, else the floor is that of uniform routing.
    """
    s, chip = _dp_setup(model, accelerator, layout, options)
    cfg = s.model
    balanced = validate.boolean("balanced", balanced)
    b_all = validate.integer("batch", batch)
    b = -(-b_all // layout.dp)
    _, p, o = (int(x) for x in _sizes_of(cfg, b, prompt_len, output_len))
    nodes = -(-layout.gpus // chip.domain_size)
    sizes = _a2a_sizes(cfg, dispatch_dtype, combine_dtype)
    kw = dict(balanced=balanced, dispatch_bytes=sizes[0], combine_bytes=sizes[1],
              node_limit=_node_limit(node_limit))
    mtp = validate.integer("mtp (drafted tokens a step)", mtp, minimum=0, maximum=16)
    if mtp:
        if acceptance is None:
            raise ValueError("mtp needs acceptance, the chance each drafted token is accepted "
                             "(DeepSeek-V3 reports 0.85 to 0.9 for its one MTP token)")
        tokens = expected_tokens(mtp, acceptance)
    elif acceptance is not None:
        raise ValueError("acceptance applies only with mtp > 0 drafted tokens")
    else:
        tokens = 1.0
    # speculative steps that make the output_len - 1 decode tokens; contexts advance by the
    # expected tokens a step
    steps = max(math.ceil((o - 1) / tokens), 1)
    past = p + np.floor(np.arange(steps) * tokens)
    costs, least, pairs, load = _dp_pass(s, layout, b, mtp + 1, past, absorbed=True,
                                         logits=b * (mtp + 1) if mtp else None, **kw)
    out, _, busy = _dp_times(s, layout, costs, least, pairs, b)
    if mtp:  # the MTP module drafts: one layer of the model's kind and the shared LM head
        module = dataclasses.replace(cfg, name=f"{cfg.name} MTP module", n_layers=1,
                                     first_dense_layers=0)
        d = setup(module, chip, n_gpus=1, **options)
        for i in range(mtp):
            dc, dl, dp_, _ = _dp_pass(d, layout, b, 1, past + i, absorbed=True, logits=None, **kw)
            d_out, _, d_busy = _dp_times(d, layout, dc, dl, dp_, b)
            out["time"] = out["time"] + d_out["time"]
            busy = {k: busy[k] + d_busy[k] for k in busy}
            least = (least[0] + dl[0], least[1] + dl[1])
        single = b == 1
        terms = [busy[k] for k in ("compute", "memory", "interconnect", "network")]
        terms = np.stack(np.broadcast_arrays(
            *terms, busy["latency"] * (0.0 if single else 1.0)))
        out["floor"] = np.max(terms, axis=0) + (busy["latency"] if single else 0.0)
    tpot = float(np.mean(out["time"] * np.ones(steps))) / tokens
    tpot_floor = float(np.mean(out["floor"] * np.ones(steps))) / tokens
    pre, p_least, p_pairs, _ = _dp_pass(s, layout, b, p, 0, absorbed=False, logits=b, **kw)
    p_out, _, _ = _dp_times(s, layout, pre, p_least, p_pairs, b)
    mem_options = {k: v for k, v in options.items() if k in _MEMORY_OPTIONS}
    full = memory(cfg, chip, b, p, o, n_gpus=1, reserve_fraction=reserve_fraction,
                  prefill_chunk=prefill_chunk, **mem_options)
    expert_size = s.sizes.get("expert", s.sizes["weight"])
    routed = cfg.param_counts()["routed_experts"] * (1 - 1 / layout.ep) * expert_size
    if mtp:  # the MTP module's own layer (its embedding and LM head are the model's)
        module = dataclasses.replace(cfg, name=f"{cfg.name} MTP module", n_layers=1,
                                     first_dense_layers=0)
        d = setup(module, chip, n_gpus=1, **options)
        by_op = d.weight_bytes_by_op()
        own = sum(v for op, v in by_op.items() if op not in _NON_LAYER)
        routed += module.param_counts()["routed_experts"] * (1 - 1 / layout.ep) * expert_size
        routed -= own
    mem = Memory(weights=full.weights - routed, kv_cache=full.kv_cache,
                 activations=full.activations, reserve=full.reserve, capacity=full.capacity)
    scope = layout_scope(layout, s, dispatch_dtype=dispatch_dtype, combine_dtype=combine_dtype)
    return DataParallelEstimate(
        model=cfg.name, accelerator=chip.name, layout=layout, batch=b_all, batch_per_gpu=b,
        nodes=nodes, precision=s.precision, memory=mem, fits=bool(mem.free >= 0),
        ttft_s=float(p_out["time"]), ttft_floor_s=float(p_out["floor"]), tpot_s=tpot,
        tpot_floor_s=tpot_floor, expert_load=load if not balanced else
        (expert_load(cfg, b * layout.dp, layout.ep) if layout.ep > 1 else 1.0),
        all_to_all_bytes=float(np.mean((least[0] + least[1]) * np.ones(steps))),
        decode_resources={k: float(np.mean(v * np.ones(steps))) for k, v in busy.items()},
        scope=scope + (f" with MTP: {mtp} drafted a step, acceptance {acceptance:g}"
                       if mtp else ""),
        tokens_per_step=tokens,
    )


def layout_scope(layout: Layout | None, s, *, dispatch_dtype: str = "fp8",
                 combine_dtype: str = "bf16") -> str:
    """What a floor of ``layout`` covers, in one line (``deployment.floor_scope``)."""
    if layout is None or layout.gpus == 1 or (layout.dp == 1 and layout.pp == 1
                                              and layout.ep == 1):
        where = f"TP{s.n_gpus}, all-reduces in {s.act_dtype}" if s.n_gpus > 1 else "one GPU"
        gpus = s.n_gpus
    elif layout.dp > 1:
        where = (f"DP{layout.dp} attention x EP{layout.ep}, all-to-all dispatch "
                 f"{canonical(dispatch_dtype)} / combine {canonical(combine_dtype)}"
                 if layout.ep > 1 else f"DP{layout.dp}, no collectives")
        gpus = layout.gpus
    else:
        where, gpus = f"TP{layout.tp} x PP{layout.pp} x EP{layout.ep}", layout.gpus
    return deployment_floor_scope(where, gpus, s.accelerator.name, s.weight_dtype,
                                  s.compute_dtype, s.kv_dtype)
