"""One serving deployment, checked once: model, accelerator, parallelism, precisions, efficiencies.

``setup(model, accelerator, ...)`` returns the ``Setup`` every calculation starts from
(``calculator``, ``vram``, ``critical``, ``serving``, ``parallel``): the share of each operation
one GPU does under tensor parallelism, the bytes per element of weights, cache and activations,
the compute precision, the interconnect, and the one tie rule between memory- and
compute-bound. It also holds the small checks of sizes and contexts those modules share.
"""

from __future__ import annotations

from dataclasses import dataclass, field

import numpy as np

from . import counts, formulas, validate
from .dtypes import (
    GROUPED,
    bytes_per_element,
    canonical,
    math_class,
    nominal_bits,
)
from .hardware import Accelerator, get_accelerator
from .models import ModelConfig, get_model

__all__ = [
    "ATTENTION_KERNEL", "ELEMENTWISE", "Flag", "HEAD_OPS", "Label", "MIN_PREFILL_CHUNK", "Number",
    "ROUTED_KERNELS",
    "Setup", "WEIGHT_MATMULS", "floor_caveats", "floor_scope", "kv_bytes_per_element", "kv_share",
    "prefill_chunk_of", "prefill_pass_tokens", "setup",
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

HEAD_OPS = frozenset({"embed", "lm_head"})
"""The ops whose weights stay 16-bit when the body is quantised (GPTQ, AWQ and FP8 checkpoints)."""

_FLOAT_FORMATS = {"fp32", "bf16", "fp16"}

ATTENTION_KERNEL = ("kv_read", "attn_scores", "attn_values")
"""The operations one fused attention kernel does on the tensor cores and the memory: read the
cache, the scores and the weighted sum of the values (its softmax is element-wise work)."""

ELEMENTWISE = frozenset({
    "attn_norm", "post_attn_norm", "mlp_norm", "post_mlp_norm", "final_norm", "q_norm", "k_norm",
    "q_a_norm", "kv_a_norm", "rope", "residual", "mlp_act", "softmax", "moe_combine", "kv_write",
    "embed", "sampling"})
"""Element-wise work (norms, RoPE, residual adds, the activation, softmax, the experts'
weighted sum, the sampler's softmax and top-p over the vocabulary) and pure data movement (the
cache write, the embedding's gather). Engines fuse it into a neighbouring kernel, where it runs
on the vector units while the activations stay on chip: it is never priced at a tensor-core
peak. Its time is its compulsory bytes over the bandwidth (a norm's weights, the cache it
writes, the embedding rows it reads); its FLOPs are counted but overlap the neighbour's."""

_ROUTED_OPS = ("gate_proj", "up_proj", "down_proj")

ROUTED_KERNELS = frozenset(f"routed_{op}" for op in _ROUTED_OPS)
"""The routed experts' matmuls, priced apart when ``setup(expert_dtype=...)`` gives them their
own format (gpt-oss: MXFP4 experts, BF16 attention; DeepSeek-R1 on Blackwell: NVFP4 experts)."""

WEIGHT_MATMULS = frozenset(formulas.LINEAR_OPS) | ROUTED_KERNELS | {
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
    head_dtype: str
    attention_dtype: str
    mbu: float
    mfu: float
    shares: dict[str, float] = field(repr=False, compare=False)
    sizes: dict[str, float] = field(repr=False, compare=False)
    expert_dtype: str | None = None  # the routed experts' format, where it is not weight_dtype
    expert_compute_dtype: str | None = None  # the routed experts' math (ROUTED_KERNELS)

    @property
    def peak(self) -> float:
        """Attainable FLOP/s of the body's weight matmuls: the dense peak at ``compute_dtype``
        times ``mfu``."""
        return self.accelerator.peak(self.compute_dtype) * self.mfu

    def math_dtype(self, kernel: str) -> str | None:
        """The precision a kernel's math runs at, from its operands; None for element-wise work.

        The body's weight matmuls at ``compute_dtype`` (W8A8 at the fp8 or int8 peak, W4A16
        dequantised to 16 bits); the LM head at ``head_dtype``, the precision of its 16-bit
        weights (a quantised checkpoint keeps its head in 16 bits); the attention at
        ``attention_dtype``, its activations' precision (an fp8 cache is dequantised on chip,
        as FlashInfer's and FlashMLA's kernels do, unless an fp8 attention kernel is chosen);
        ``ELEMENTWISE`` work on the vector units, at no tensor-core peak.
        """
        if kernel in ELEMENTWISE:
            return None
        if kernel in ROUTED_KERNELS:
            return self.expert_compute_dtype or self.compute_dtype
        if kernel in HEAD_OPS:
            return self.head_dtype
        if kernel == "attention" or kernel in ATTENTION_KERNEL:
            return self.attention_dtype
        return self.compute_dtype

    def peak_of(self, kernel: str) -> float:
        """Attainable FLOP/s of a kernel: the dense peak at its ``math_dtype`` times ``mfu``;
        infinite for element-wise work, whose math overlaps its neighbour's (``ELEMENTWISE``)."""
        dtype = self.math_dtype(kernel)
        return np.inf if dtype is None else self.accelerator.peak(dtype) * self.mfu

    def math_s(self, costs: dict) -> Number:
        """The math units' busy time of a pass: the sum over kernels of FLOPs over their peak.

        ``costs``: kernel -> a tuple whose first item is the kernel's FLOPs (``pass_costs``).
        """
        return sum(c[0] / self.peak_of(k) for k, c in costs.items())

    @property
    def bandwidth(self) -> float:
        """Attainable memory bytes/s: the chip's bandwidth times ``mbu``."""
        return self.accelerator.bandwidth * self.mbu

    @property
    def precision(self) -> str:
        """The precisions in words, e.g. ``'weights int4, KV cache bf16, math bf16 (W4A16: ...)'``."""
        return _describe_precision(self.weight_dtype, self.kv_dtype, self.compute_dtype,
                                   self.head_dtype, self.attention_dtype, self.expert_dtype,
                                   self.expert_compute_dtype)

    def pass_costs(self, batch, n_new, n_past, *, absorbed: bool,
                   logits_tokens=None) -> dict[str, tuple[Number, Number, Number]]:
        """Per kernel, ``(FLOPs, weight bytes, KV-cache bytes)`` per GPU of one forward pass.

        ``batch`` sequences of ``n_new`` new tokens each after ``n_past`` cached ones (arrays
        broadcast), counted by ``formulas.op_elements``; ``logits_tokens``: the LM head runs on
        that many positions instead of every new token.
        """
        cfg = self.model
        ops = counts.op_elements(cfg, batch, n_new, n_past, absorbed=absorbed)
        if logits_tokens is not None:
            head = counts.op_elements(cfg, logits_tokens, 1, 0)
            ops["lm_head"], ops["sampling"] = head["lm_head"], head["sampling"]
        routed = self._routed_elements(batch, n_new) if self.expert_dtype else {}
        out: dict[str, list] = {}
        for op, (flops, weights, kv, _act) in ops.items():
            share = self.shares[op]
            pieces = [(_kernel(op), flops, weights, kv, "head" if op in HEAD_OPS else "weight")]
            if op in routed:  # the routed experts apart, in their own format and math
                r_flops, r_weights = routed[op]
                pieces = [(op, flops - r_flops, weights - r_weights, kv, "weight"),
                          (f"routed_{op}", r_flops, r_weights, 0.0, "expert")]
            for k, f, w, c, size in pieces:
                parts = (f * share, w * self.sizes[size] * share, c * self.sizes["kv"] * share)
                out[k] = ([a + b for a, b in zip(out[k], parts, strict=True)] if k in out
                          else list(parts))
        return {k: tuple(v) for k, v in out.items()}

    def _routed_elements(self, batch, n_new) -> dict[str, tuple]:
        """Per expert matmul, the routed experts' ``(FLOPs, weight elements)`` of a pass.

        ``T = batch * n_new`` tokens send ``T k`` (token, expert) pairs, ``2 d d_expert`` FLOPs
        each a matrix, and touch ``E (1 - (1 - k/E)^T)`` experts a layer, each read once (the
        rule of ``formulas.expected_experts_expr``), in each of the MoE layers.
        """
        cfg = self.model
        if not cfg.is_moe:
            return {}
        e, k, layers = cfg.n_routed_experts, cfg.n_experts_per_token, cfg.n_moe_layers
        matrix = cfg.hidden_size * cfg.moe_intermediate_size
        tokens = np.asarray(batch, dtype=float) * np.asarray(n_new, dtype=float)
        touched = e * (1 - (1 - k / e) ** tokens)
        ops = ("gate_proj", "up_proj", "down_proj") if cfg.gated_mlp else ("up_proj", "down_proj")
        return {op: (layers * tokens * k * 2 * matrix, layers * touched * matrix) for op in ops}

    def prefill_passes(self, batch, prompt_len, chunk: int) -> list[tuple]:
        """The passes of a prefill run in chunks of at most ``chunk`` tokens, as groups.

        Each group is ``(count, batch, n_new, n_past, logits)``: ``count`` identical passes of
        ``batch`` sequences, each adding ``n_new`` tokens after ``n_past`` cached ones and
        computing ``logits`` positions of the LM head (arrays broadcast; a group that does not
        apply has count 0). A prompt that fits in a chunk is never split: each pass packs
        ``chunk // prompt_len`` whole prompts (the last pass the rest). A longer prompt runs
        alone in ``ceil(prompt_len / chunk)`` passes, each reading the cache of the pieces
        before it, the last one computing its logits: that group's arrays have one more, last
        axis, one entry per piece, to be summed over. ``vram`` sizes the activations for the
        largest of these passes (``prefill_pass_tokens``), so the TTFT and the memory agree.
        """
        b, p = np.broadcast_arrays(np.asarray(batch, dtype=np.int64),
                                   np.asarray(prompt_len, dtype=np.int64))
        short = p <= chunk
        per_pass = np.where(short, np.maximum(chunk // np.maximum(p, 1), 1), 1)
        full, rest = b // per_pass, b % per_pass
        groups = [(np.where(short, full, 0), per_pass, p, 0, per_pass),
                  (np.where(short & (rest > 0), 1, 0), np.maximum(rest, 1), p, 0,
                   np.maximum(rest, 1))]
        if np.all(short):
            return groups
        pieces = (-(-p // chunk))[..., None]
        j = np.arange(int(np.max(pieces)))
        groups.append((np.where(~short[..., None] & (j < pieces), b[..., None], 0), 1,
                       np.clip(p[..., None] - j * chunk, 1, chunk), j * chunk,
                       np.where(j == pieces - 1, 1, 0)))
        return groups

    def compute_bound(self, kernel: str, flops, moved) -> Flag:
        """The one tie rule: compute-bound when the math takes at least as long as the bytes
        (never for element-wise work, ``ELEMENTWISE``)."""
        if self.math_dtype(kernel) is None:
            return np.zeros(np.broadcast(flops, moved).shape, dtype=bool) if np.ndim(
                flops) or np.ndim(moved) else False
        return flops / self.peak_of(kernel) >= moved / self.bandwidth

    def roofline_s(self, kernel: str, flops, moved) -> Number:
        """One kernel's time on its own roofline: ``max(FLOPs / its peak, bytes / bandwidth)``.

        Attainable figures, the peak at the kernel's ``math_dtype``. Summed over kernels it is
        the kernel-by-kernel time, what an engine pays running them one after another with
        nothing overlapping; not the floor (``calculator``'s module docs).
        """
        return np.maximum(flops / self.peak_of(kernel), moved / self.bandwidth)

    def allreduce_s(self, tokens, logits_tokens=None) -> Number:
        """The collectives of one pass of ``tokens`` tokens under tensor parallelism, seconds.

        ``collectives_per_pass`` of them: two all-reduces of the hidden state per layer (the
        attention's and the MLP's outputs), one more for the vocabulary-parallel embedding (each
        GPU holds ``1/n`` of the table, so the looked-up rows are summed), and the all-gather of
        the logits the LM head computes, each GPU ``1/n`` of the vocabulary, at
        ``logits_tokens`` positions (default ``tokens``: a decode step; a prefill's head runs
        at each sequence's last position only). Ring collectives one after another, each with
        its latency (``Accelerator.allreduce_s``, ``allgather_s``): the collectives' part of
        the kernel-by-kernel time.
        """
        if self.n_gpus == 1:
            return np.zeros(np.shape(tokens)) if np.ndim(tokens) else 0.0
        hidden, logits = self._collective_messages(tokens, logits_tokens)
        chip = self.accelerator
        return ((2 * self.model.n_layers + 1) * chip.allreduce_s(self.n_gpus, hidden)
                + chip.allgather_s(self.n_gpus, logits))

    def _collective_messages(self, tokens, logits_tokens):
        """Bytes of one hidden-state all-reduce message and of the gathered logits."""
        t = np.asarray(tokens, dtype=float)
        lt = t if logits_tokens is None else np.asarray(logits_tokens, dtype=float)
        act = self.sizes["act"]
        return t * self.model.hidden_size * act, lt * self.model.vocab_size * act

    @property
    def collectives_per_pass(self) -> int:
        """Collectives of a forward pass under tensor parallelism (0 on one GPU): ``2L + 2``,
        two all-reduces per layer, the embedding's all-reduce and the logits' all-gather."""
        return 0 if self.n_gpus == 1 else 2 * self.model.n_layers + 2

    def allreduce_floor(self, tokens, logits_tokens=None) -> tuple[Number, Number, float]:
        """The pass's collectives at their least cost: ``(interconnect_s, network_s, latency_s)``.

        The seconds the scale-up link and the network are busy with the bytes each GPU must
        move at the least (``Accelerator.allreduce_floor``: a ring, or half of it less behind a
        switch that reduces in the network; ``allgather_floor`` for the logits), and the fixed
        latencies, summed over the ``collectives_per_pass`` collectives of ``allreduce_s``.
        """
        if self.n_gpus == 1:
            zero = np.zeros(np.shape(tokens)) if np.ndim(tokens) else 0.0
            return zero, zero, 0.0
        hidden, logits = self._collective_messages(tokens, logits_tokens)
        n = 2 * self.model.n_layers + 1
        link, network, latency = self.accelerator.allreduce_floor(self.n_gpus, hidden)
        g_link, g_network, g_latency = self.accelerator.allgather_floor(self.n_gpus, logits)
        return n * link + g_link, n * network + g_network, n * latency + g_latency

    def weight_bytes_by_op(self) -> dict[str, float]:
        """Bytes of weights one GPU holds, per op (``ModelConfig.params_by_op`` times its share);
        with ``expert_dtype`` the routed experts apart, as ``routed_<op>``."""
        out = {op: n * self.shares[op] * self.sizes["head" if op in HEAD_OPS else "weight"]
               for op, n in self.model.params_by_op().items()}
        if self.expert_dtype and self.model.is_moe:
            cfg = self.model
            held = (cfg.n_moe_layers * cfg.n_routed_experts * cfg.hidden_size
                    * cfg.moe_intermediate_size)
            for op in _ROUTED_OPS if cfg.gated_mlp else _ROUTED_OPS[1:]:
                share = self.shares[op]
                out[op] -= held * share * self.sizes["weight"]
                out[f"routed_{op}"] = held * share * self.sizes["expert"]
        return out

    def allreduce_bytes(self, tokens, logits_tokens=None) -> Number:
        """Bytes each GPU sends (and receives) in the collectives of ``allreduce_s`` (rings)."""
        hidden, logits = self._collective_messages(tokens, logits_tokens)
        share = (self.n_gpus - 1) / self.n_gpus
        return (2 * self.model.n_layers + 1) * 2 * share * hidden + share * logits


def setup(model: ModelConfig | str, accelerator: Accelerator | str, *, weight_dtype: str = "bf16",
          kv_dtype: str = "bf16", compute_dtype: str | None = None, act_dtype: str = "bf16",
          weight_group_size: int = 128, n_gpus: int = 1, mbu: float = 1.0,
          mfu: float = 1.0, attention_dtype: str | None = None,
          expert_dtype: str | None = None) -> Setup:
    """Check a serving configuration once and return the ``Setup`` every calculation uses.

    ``compute_dtype`` (the body's weight matmuls) defaults to fp8 for fp8 weights and int8 for
    int8 weights where the chip has that peak, else bf16 (int4 weights are dequantised to bf16).
    The LM head runs at the precision of its weights (16 bits unless the weights are a float
    format); ``attention_dtype`` (the attention's math) defaults to ``act_dtype``'s, whatever
    the cache stores: pass ``"fp8"`` for an fp8 attention kernel (FlashAttention-3's) over an
    fp8 cache. Each falls back to the widest 16-bit or 32-bit peak the chip has
    (``Setup.math_dtype``).
    ``mbu``, ``mfu``: achieved fractions of peak bandwidth and peak FLOP/s, from 0.001 to 1.
    ``expert_dtype``: an MoE model's routed experts in their own format (their kernels
    ``routed_gate_proj``, ...: bytes at that size, math at its peak where the chip has it, as
    ``compute_dtype`` chooses for weights), the rest at ``weight_dtype``: gpt-oss's MXFP4
    experts beside BF16 attention. None: the experts are weights like the others.
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    n_gpus = validate.integer("n_gpus", n_gpus, maximum=2**20, unit="GPUs")
    nodes = chip.nodes(n_gpus)  # raises without an interconnect, or without a network beyond
    weights, kv = canonical(weight_dtype), canonical(kv_dtype)
    act = canonical(act_dtype)
    group = validate.integer("weight_group_size", weight_group_size, maximum=2**20,
                             unit="weights")
    head = weights if weights in _FLOAT_FORMATS else "bf16"
    sizes = _sizes(weights, kv, act, group, cfg)
    expert = expert_compute = None
    if expert_dtype is not None:
        expert = canonical(expert_dtype)
        if not cfg.is_moe:
            raise ValueError(f"expert_dtype applies to a mixture-of-experts model; {cfg.name!r} "
                             f"is dense: use weight_dtype")
        sizes["expert"] = float(bytes_per_element(expert, group if expert in GROUPED else None))
        expert_compute = _compute_dtype(chip, expert, None)
    return Setup(
        model=cfg, accelerator=chip, n_gpus=n_gpus, nodes=nodes, weight_dtype=weights,
        kv_dtype=kv, compute_dtype=_compute_dtype(chip, weights, compute_dtype), act_dtype=act,
        weight_group_size=group, head_dtype=_compute_dtype(chip, head, None),
        attention_dtype=_compute_dtype(chip, act, attention_dtype, "attention_dtype"),
        mbu=validate.fraction("mbu", mbu),
        mfu=validate.fraction("mfu", mfu), shares=_shares(cfg, n_gpus),
        sizes=sizes, expert_dtype=expert, expert_compute_dtype=expert_compute,
    )


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
    b, p, o = (validate.integers(n, v, unit=u) for n, v, u in
               (("batch", batch, "requests"), ("prompt_len", prompt_len, "tokens"),
                ("output_len", output_len, "tokens")))
    if np.any(p + o > cfg.max_context):
        worst = int(np.max(p + o))
        raise ValueError(
            f"prompt_len + output_len = {worst:,} tokens exceeds the context limit of "
            f"{cfg.name!r}: max_context = {cfg.max_context:,} tokens"
        )
    return b, p, o


def _contexts(cfg: ModelConfig, context) -> np.ndarray:
    return validate.integers("context", context, maximum=cfg.max_context, unit="tokens")


MIN_PREFILL_CHUNK = 64
"""The smallest ``prefill_chunk`` (tokens) taken; engines use 512 to 16,384."""


def prefill_chunk_of(chunk) -> int:
    """``prefill_chunk`` checked: an integer of at least ``MIN_PREFILL_CHUNK`` tokens."""
    return validate.integer("prefill_chunk", chunk, minimum=MIN_PREFILL_CHUNK, unit="tokens")


def prefill_pass_tokens(batch, prompt_len, chunk: int):
    """Tokens of the largest pass of a chunked prefill (``Setup.prefill_passes``)."""
    b, p = np.asarray(batch, dtype=float), np.asarray(prompt_len, dtype=float)
    return np.where(p <= chunk, np.minimum(b, np.maximum(chunk // np.maximum(p, 1), 1)) * p,
                    chunk)


def kv_share(cfg: ModelConfig, n_gpus: int) -> float:
    """Fraction of the KV heads (and their cache) each GPU holds."""
    if cfg.is_mla:
        return 1.0  # one latent serves all heads: every GPU keeps all of it
    return max(cfg.n_kv_heads // n_gpus, 1) / cfg.n_kv_heads


def _shares(cfg: ModelConfig, n_gpus: int) -> dict[str, float]:
    """Per op, the fraction of its FLOPs and bytes one GPU does under tensor parallelism."""
    if cfg.n_heads % n_gpus:
        raise ValueError(
            f"n_gpus ({n_gpus} GPUs) must divide n_heads ({cfg.n_heads} attention heads) of "
            f"{cfg.name!r} for tensor parallelism"
        )
    kv = cfg.n_kv_heads
    if not cfg.is_mla and kv % n_gpus and n_gpus % kv:
        raise ValueError(
            f"n_gpus ({n_gpus} GPUs) must divide n_kv_heads ({kv} KV heads) of {cfg.name!r}, or "
            "be a multiple of it (then the KV heads are replicated)"
        )
    share = kv_share(cfg, n_gpus)
    replicated = _REPLICATED | (_KV_OPS if cfg.is_mla else set())
    return {
        op: 1.0 if op in replicated else share if op in _KV_OPS else 1.0 / n_gpus
        for op in formulas.ops_for(cfg)
    }


def _compute_dtype(chip: Accelerator, weights: str, compute_dtype: str | None,
                   name: str = "compute_dtype") -> str:
    if compute_dtype is not None:
        try:
            chip.peak(compute_dtype)  # raises if the chip lacks it
        except ValueError as err:  # the message names the argument the user passed
            raise ValueError(f"{name} {validate.shorten(compute_dtype, 40)}: {err}") from None
        return canonical(compute_dtype)
    # fp8 and int8 weights run fp8/int8 tensor math (W8A8); int4 weights are dequantised (W4A16);
    # NVFP4/MXFP4 weights run FP4 math where the chip has FP4 tensor cores (W4A4), MXFP6 FP6 math,
    # MXFP8 FP8 math; elsewhere they are dequantised to 16 bits (W4A16: an H100 has no FP4 math)
    wanted = {"int4": "bf16", "int4_zp": "bf16"}.get(weights, math_class(weights))
    # else dequantised to 16 bits; a chip with no 16-bit peak in the data (a measured CPU has
    # only the fp32 peak it was measured at) computes in the widest precision it has
    for dtype in (wanted, "bf16", "fp16", "fp32"):
        if dtype in chip.precisions:
            return dtype
    raise ValueError(f"{chip.name} has no peak for {weights} weights in the data; its tensor "
                     f"math: {', '.join(chip.precisions)}: pass compute_dtype")


def _bits(dtype: str) -> int:
    """Nominal bits of one value (scales left out): the 4 of W4A16 for nvfp4 and int4."""
    return nominal_bits(dtype)


def _describe_precision(weights: str, kv: str, compute: str, head: str, attention: str,
                        expert: str | None = None, expert_compute: str | None = None) -> str:
    text = _describe_body(weights, kv, compute, head, attention)
    if expert:
        w, a = _bits(expert), _bits(expert_compute)
        kind = (f"weight-only, W{w}A{a}" if w < a else f"W{w}A{a}")
        text += f"; routed experts {expert}, their math {expert_compute} ({kind})"
    return text


def _describe_body(weights: str, kv: str, compute: str, head: str, attention: str) -> str:
    w, a = _bits(weights), _bits(compute)
    if w < a:
        kind = (f"weight-only, W{w:g}A{a:g}: {weights} weights cut the bytes, the math runs at "
                f"the {compute} peak")
    elif w == a and w < 16:
        kind = (f"weights and activations, W{w:g}A{a:g}: {w:g}-bit weights and the {compute} "
                f"peak")
    else:
        kind = f"W{w:g}A{a:g}"
    return (f"weights {weights}, KV cache {kv}, math {compute} ({kind}); LM head math {head}, "
            f"attention math {attention}")


def floor_scope(where: str, gpus: int, chip: str, weight_dtype: str, compute_dtype: str,
                kv_dtype: str) -> str:
    """What a floor is a floor of, in one line: its layout, chips and formats.

    ``floor (TP8, all-reduces in bf16, on 8 x NVIDIA H100 SXM; bf16 weights, W16A16, KV cache
    bf16)``. The floor holds for that layout and those formats only: an engine in another
    layout (data-parallel attention with expert parallelism) or format can beat it.
    """
    w, a = nominal_bits(weight_dtype), nominal_bits(compute_dtype)
    kind = f"W{w}A{a}" + (" weight-only" if w < a else "")
    chips = f"{gpus} x {chip}" if gpus > 1 else chip
    return f"floor ({where} on {chips}; {weight_dtype} weights, {kind}, KV cache {kv_dtype})"


def floor_caveats(cfg: ModelConfig, n_gpus: int) -> tuple[str, ...]:
    """Where an engine can beat the tensor-parallel floor of ``calculator.estimate``.

    Each is a setup outside what that floor models, named with the function that models it
    where the library has one. Always: one token per user a step (speculative decoding, MTP,
    makes several) and every prompt token prefilled (a prefix cache skips some).
    """
    out = []
    if n_gpus > 1 and cfg.is_mla:
        out.append("the MLA latent cache is replicated on every GPU under tensor parallelism; "
                   "data-parallel attention stores it once (parallel.dp_ep_estimate) and can "
                   "beat this floor")
    elif n_gpus > 1 and cfg.is_moe:
        out.append("tensor parallelism splits every expert; data-parallel attention with expert "
                   "parallelism (parallel.dp_ep_estimate) moves other bytes and can beat this "
                   "floor")
    out.append("one token per user a decode step: speculative decoding (draft models, MTP; "
               "serving.speculative) can beat the TPOT floor; a prefix cache can beat the TTFT "
               "floor")
    return tuple(out)


def kv_bytes_per_element(cfg: ModelConfig, kv_dtype: str) -> float:
    """Bytes per cached number of ``cfg``'s KV cache at ``kv_dtype``.

    ``bytes_per_element(kv_dtype)``, except an MLA latent cache in fp8, stored as FlashMLA
    stores it (``dtypes.mla_cache_bytes_per_element``: 656 bytes a token a layer for
    DeepSeek-V3's 576 numbers, not 576).
    """
    return cfg.kv_bytes_per_element(kv_dtype)


def _sizes(weights: str, kv: str, act: str, group_size: int,
           cfg: ModelConfig | None = None) -> dict[str, float]:
    """Bytes per element: body weights, 16-bit head, KV cache, activations."""
    group = group_size if weights in GROUPED else None
    return {
        "weight": float(bytes_per_element(weights, group)),
        "head": float(bytes_per_element(weights if weights in _FLOAT_FORMATS else "bf16")),
        "kv": kv_bytes_per_element(cfg, kv) if cfg is not None else float(bytes_per_element(kv)),
        "act": float(bytes_per_element(act)),
    }
