"""The KV cache's share of a decode step: its bytes against the weights', and its intensity.

Every number comes from :mod:`llm_roofline.formulas` (the per-operation counts) and
:mod:`llm_roofline.dtypes` (element sizes); this module only groups them the way the KV-cache
chapter asks its questions:

- :func:`step_traffic`: the weight bytes and the KV-cache bytes one decode step reads;
- :func:`crossover_context`: the context at which the two are equal, for a batch;
- :func:`attention_intensity`: FLOPs per KV-cache byte of decode attention, for a grouped
  kernel (each KV head read once for its query group) or a naive one, and per GPU under
  tensor parallelism.
"""

from __future__ import annotations

import numpy as np

from . import counts, formulas, validate
from .dtypes import bytes_per_element
from .models import ModelConfig, resolve

__all__ = ["step_traffic", "crossover_context", "attention_intensity"]


def _model(model) -> ModelConfig:
    return resolve(model)


def _kv_bytes(cfg: ModelConfig, kv_dtype: str) -> float:
    """Bytes per cached number; an fp8 MLA latent as FlashMLA stores it (656 B a token a layer)."""
    return cfg.kv_bytes_per_element(kv_dtype)


def step_traffic(model, batch, context, *, weight_dtype: str = "bf16",
                 kv_dtype: str = "bf16") -> dict:
    """Bytes one decode step reads: ``{"weights": ..., "kv": ...}`` (arrays broadcast).

    The step makes one token for each of ``batch`` sequences whose attention spans
    ``context`` tokens (``context - 1`` cached plus the new one). Weights are every weight
    the step touches (all of a dense model's, the experts the batch routes to for MoE), at
    ``weight_dtype``; the KV bytes are the cache reads of attention, at ``kv_dtype``.
    """
    cfg = _model(model)
    b = validate.integers("batch", batch)
    ctx = validate.integers("context", context, maximum=cfg.max_context)
    ops = counts.op_elements(cfg, b, 1, ctx - 1, absorbed=True)
    weights = sum(ops[op][1] for op in ops)
    return {
        "weights": weights * float(bytes_per_element(weight_dtype)),
        "kv": ops["kv_read"][2] * _kv_bytes(cfg, kv_dtype),
    }


def crossover_context(model, batch, *, weight_dtype: str = "bf16", kv_dtype: str = "bf16"):
    """The context (tokens) at which a decode step's KV-cache reads equal its weight reads.

    ``weights(batch) / (batch * kv_bytes_per_token)``; may exceed the model's context
    limit, which says that at this batch the weights always dominate. Arrays broadcast.
    """
    cfg = _model(model)
    b = validate.integers("batch", batch)
    one = step_traffic(cfg, b, 1, weight_dtype=weight_dtype, kv_dtype=kv_dtype)
    per_token = cfg.kv_elements_per_token * _kv_bytes(cfg, kv_dtype)
    out = one["weights"] / (b * per_token)
    return float(out) if np.ndim(out) == 0 else out


def attention_intensity(model, *, kv_dtype: str = "bf16", grouped: bool = True,
                        tp: int = 1) -> float:
    """FLOPs of decode attention (scores and values) per KV-cache byte it reads.

    Independent of batch and context. ``grouped``: the kernel reads each KV head once for
    all the query heads that share it (FlashAttention-style GQA kernels); ``False``: it
    reads the cache once per query head, so grouped-query attention gains nothing. ``tp``:
    tensor-parallel degree; heads are split over the GPUs while latent attention's cache
    (MLA), shared by all heads, is replicated on each, so its intensity per GPU falls by ``tp``.
    """
    cfg = _model(model)
    grouped = validate.boolean("grouped", grouped)
    tp = validate.integer("tp", tp, maximum=2**20)
    if cfg.n_heads % tp:
        raise ValueError(f"tp ({tp}) must divide n_heads ({cfg.n_heads}) of {cfg.name!r}")
    ops = counts.op_elements(cfg, 1, 1, 1023, absorbed=True)
    flops = float(sum(ops[op][0] for op in formulas.ATTENTION_OPS))
    kv = float(ops["kv_read"][2]) * _kv_bytes(cfg, kv_dtype)
    if not grouped and not cfg.is_mla:
        kv *= cfg.n_heads / cfg.n_kv_heads
    if cfg.is_mla:
        return flops / tp / kv
    kv_per_gpu = kv * max(cfg.n_kv_heads // tp, 1) / cfg.n_kv_heads
    return flops / tp / kv_per_gpu
