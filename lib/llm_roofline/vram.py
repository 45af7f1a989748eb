"""Memory per GPU of a served model, and what fits: ``memory``, ``max_batch``, ``max_prompt_len``,
``gpus_needed``.

Weights at ``weight_dtype`` (int4 with one fp16 scale per ``weight_group_size`` weights; the
embedding and LM head stay 16-bit when the body is quantised, as GPTQ, AWQ and FP8 checkpoints
keep them); the KV cache of the whole batch at its final context ``prompt_len + output_len``
(``ModelConfig.kv_cache_elements``), at ``kv_dtype``; activations, the working set of one layer
for the largest pass of a prefill run in chunks of at most ``prefill_chunk`` tokens (whole
prompts packed into a chunk, a longer prompt split; ``Setup.prefill_passes``, which the TTFT
prices too) plus the batch's last fp32 logits; and a runtime reserve, ``reserve_fraction`` of
the memory (CUDA context, allocator fragmentation, graphs: vLLM's default
``gpu_memory_utilization=0.9`` leaves 10 %). It fits when weights + KV + activations <= memory -
reserve. Sizes are float64 products, so a batch of
2**36 gives a correct (huge) number, never an int64 overflow.
"""

from __future__ import annotations

import inspect
from dataclasses import dataclass

import numpy as np

from . import validate
from .deployment import (
    Number,
    Setup,
    _first,
    _first_true,
    _model,
    _out,
    _shares,
    _sizes_of,
    kv_share,
    prefill_chunk_of,
    prefill_pass_tokens,
    setup,
)
from .hardware import Accelerator, get_accelerator
from .models import ModelConfig

__all__ = [
    "Memory", "activation_elements_per_token", "gpus_needed", "max_batch", "max_prompt_len", "memory",
]


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


def memory(model: ModelConfig | str, accelerator: Accelerator | str, batch, prompt_len, output_len,
           *, weight_dtype: str = "bf16", kv_dtype: str = "bf16", n_gpus: int = 1,
           act_dtype: str = "bf16", weight_group_size: int = 128, reserve_fraction: float = 0.1,
           prefill_chunk: int = 8192, expert_dtype: str | None = None) -> Memory:
    """Only the memory part of ``estimate`` (bytes per GPU), with the same arguments."""
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              act_dtype=act_dtype, weight_group_size=weight_group_size, n_gpus=n_gpus,
              expert_dtype=expert_dtype)
    b, p, o = _sizes_of(s.model, batch, prompt_len, output_len)
    return _memory(s, b, p, o, reserve_fraction, prefill_chunk)


def max_batch(model: ModelConfig | str, accelerator: Accelerator | str, prompt_len, output_len,
              *, weight_dtype: str = "bf16", kv_dtype: str = "bf16", n_gpus: int = 1,
              act_dtype: str = "bf16", weight_group_size: int = 128,
              reserve_fraction: float = 0.1, prefill_chunk: int = 8192,
              expert_dtype: str | None = None) -> int | np.ndarray:
    """The largest batch whose memory fits (0 if not even one request fits).

    Arguments as for ``memory``. Context arrays broadcast; the answer is found by bisection on
    the same memory function ``estimate`` uses (memory grows with the batch), up to
    ``validate.MAX_COUNT``; if even that many fit, it raises rather than report its search cap.
    """
    s = setup(model, accelerator, weight_dtype=weight_dtype, kv_dtype=kv_dtype,
              act_dtype=act_dtype, weight_group_size=weight_group_size, n_gpus=n_gpus,
              expert_dtype=expert_dtype)
    _, p, o = _sizes_of(s.model, 1, prompt_len, output_len)

    def fits(b):
        return _memory(s, b, p, o, reserve_fraction, prefill_chunk).free >= 0

    shape = np.broadcast_shapes(np.shape(p), np.shape(o))
    lo = np.zeros(shape, dtype=np.int64)  # fits (0 trivially)
    hi = np.full(shape, validate.MAX_COUNT, dtype=np.int64)
    if np.any(fits(hi)):
        raise ValueError(
            f"more than {validate.MAX_COUNT:,} requests fit (prompt_len {_first(p):,} tokens, "
            f"output_len {_first(o):,} tokens): max_batch only searches up to "
            "validate.MAX_COUNT"
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
    validate.options("max_prompt_len", options,
                     [n for n, p in inspect.signature(memory).parameters.items()
                      if p.kind is p.KEYWORD_ONLY])
    cfg = _model(model)
    batch = validate.integer("batch", batch, unit="requests")
    if cfg.max_context < 2:
        raise ValueError(f"max_prompt_len needs a context of at least 2 tokens; {cfg.name!r} has "
                         f"max_context {cfg.max_context} {'token' if cfg.max_context == 1 else 'tokens'}")
    output_len = validate.integer("output_len", output_len, maximum=cfg.max_context - 1,
                                  unit="tokens")

    def fits(p):
        return bool(memory(cfg, accelerator, batch, int(p), output_len, **options).free >= 0)

    too_long = _first_true(lambda p: not fits(p), cfg.max_context - output_len)
    return cfg.max_context - output_len if too_long is None else too_long - 1


def gpus_needed(model: ModelConfig | str, accelerator: Accelerator | str, batch, prompt_len,
                output_len, *, max_gpus: int = 128, weight_dtype: str = "bf16",
                kv_dtype: str = "bf16", act_dtype: str = "bf16", weight_group_size: int = 128,
                reserve_fraction: float = 0.1, prefill_chunk: int = 8192,
                expert_dtype: str | None = None) -> int | None:
    """The fewest GPUs (a tensor-parallel degree the heads allow) whose memory fits.

    ``None`` when no degree up to ``max_gpus`` fits, or when one GPU does not fit and the
    accelerator cannot link more (no interconnect, or no network beyond its domain). The nodes
    that many GPUs fill: ``get_accelerator(accelerator).nodes(n)``, as ``Estimate.nodes``.
    """
    cfg, chip = _model(model), get_accelerator(accelerator)
    for n in range(1, validate.integer("max_gpus", max_gpus, maximum=2**20, unit="GPUs") + 1):
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
                     prefill_chunk=prefill_chunk, expert_dtype=expert_dtype)
        if np.all(mem.free >= 0):
            return n
    return None


def _memory(s: Setup, b, p, o, reserve_fraction, prefill_chunk) -> Memory:
    reserve_fraction = validate.real("reserve_fraction", reserve_fraction, minimum=0, maximum=1,
                                     open_max=True)
    prefill_chunk = prefill_chunk_of(prefill_chunk)
    cfg, n_gpus = s.model, s.n_gpus
    weights = sum(s.weight_bytes_by_op().values())
    bf, context = np.asarray(b, dtype=float), np.asarray(p + o, dtype=float)  # float64: no overflow
    kv_cache = bf * cfg.kv_cache_elements(context) * kv_share(cfg, n_gpus) * s.sizes["kv"]
    tokens = prefill_pass_tokens(bf, p, prefill_chunk)
    activations = (tokens * activation_elements_per_token(cfg, n_gpus) * s.sizes["act"]
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


def activation_elements_per_token(cfg: ModelConfig, n_gpus: int) -> float:
    """Elements per token of one layer's working set: the residual and its normed copy, plus
    the wider of the attention projections and the MLP intermediate (gate and up)."""
    if cfg.is_mla:  # queries, and keys and values up-projected from the latent
        qk = cfg.qk_nope_head_dim + cfg.qk_rope_head_dim
        attention = (cfg.n_heads * (qk + cfg.qk_nope_head_dim + cfg.v_head_dim) / n_gpus
                     + cfg.kv_lora_rank + cfg.qk_rope_head_dim)
    else:
        kv_heads = cfg.n_kv_heads * kv_share(cfg, n_gpus)
        attention = (cfg.n_heads / n_gpus + 2 * kv_heads) * cfg.head_dim
    mlp = 2 * cfg.intermediate_size if cfg.n_layers > cfg.n_moe_layers else 0
    if cfg.is_moe:
        experts = cfg.n_experts_per_token + cfg.n_shared_experts
        mlp = max(mlp, 2 * experts * cfg.moe_intermediate_size)
    return 2 * cfg.hidden_size + max(attention, mlp / n_gpus)
