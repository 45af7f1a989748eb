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

Not modelled: data-parallel attention with an all-to-all dispatch and combine (DeepSeek-V3's
own deployment), and expert parallelism across pipeline stages.
"""

from __future__ import annotations

import inspect
import math
from dataclasses import dataclass

from . import validate
from .calculator import estimate
from .deployment import setup
from .hardware import get_accelerator
from .models import ModelConfig, get_model
from .vram import Memory, memory

__all__ = ["Layout", "ParallelEstimate", "expert_load", "layout_needed", "parallel_estimate"]

_NON_LAYER = ("embed", "final_norm", "lm_head")
_MOE_KERNELS = ("gate_proj", "up_proj", "mlp_act", "down_proj", "moe_combine")
_MEMORY_OPTIONS = ("weight_dtype", "kv_dtype", "act_dtype", "weight_group_size")
_SETUP_OPTIONS = tuple(n for n, p in inspect.signature(setup).parameters.items()
                       if p.kind is p.KEYWORD_ONLY and n != "n_gpus")


@dataclass(frozen=True)
class Layout:
    """``tp`` GPUs per pipeline stage, ``pp`` stages, experts spread over ``ep`` (1 or ``tp``)."""

    tp: int = 1
    pp: int = 1
    ep: int = 1

    def __post_init__(self) -> None:
        for name in ("tp", "pp", "ep"):
            validate.integer(f"Layout.{name}", getattr(self, name), maximum=2**20)
        if self.ep not in (1, self.tp):
            raise ValueError(
                f"Layout.ep must be 1 or tp ({self.tp}): experts are spread over the GPUs of a "
                f"stage, got {self.ep}"
            )

    @property
    def gpus(self) -> int:
        """GPUs in the layout: ``tp * pp``."""
        return self.tp * self.pp

    def __str__(self) -> str:
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
