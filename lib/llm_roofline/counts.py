"""The counts of :mod:`llm_roofline.formulas`, valued: exact integers per operation and vectorised
arrays for the calculator.

:func:`op_costs` substitutes a :class:`~llm_roofline.models.ModelConfig` and a workload into the
SymPy expressions of :func:`~llm_roofline.formulas.expressions_for` and returns exact integers
(:class:`Cost` per operation); :func:`op_elements` lambdifies the same expressions for NumPy
arrays of batches and contexts; :func:`params_by_op` and :func:`param_counts` value
:func:`~llm_roofline.formulas.param_expressions`. Nothing here writes a count of its own: the
expressions are the one source, and this module only evaluates them.
"""

from __future__ import annotations

from dataclasses import dataclass
from functools import cache, lru_cache

import sympy as sp

from . import validate
from .dtypes import bytes_per_element
from .formulas import (
    _N_NEW,
    _N_PAST,
    B,
    _flags,
    _logits_at,
    _model_expressions,
    _param_table,
    b_act,
    b_kv,
    b_w,
    d_expert,
    d_ff,
    d_model,
    d_nope,
    d_rope,
    d_v,
    expressions_for,
    head_dim,
    kv_rank,
    n_dense,
    n_experts,
    n_heads,
    n_kv_heads,
    n_layers,
    n_local,
    n_shared,
    q_rank,
    top_k,
    vocab,
    window,
)

__all__ = [
    "Cost", "PARAM_COMPONENTS", "ZERO", "model_values", "op_costs", "op_elements",
    "param_counts", "params_by_op", "total",
]


@dataclass(frozen=True)
class Cost:
    """FLOPs and bytes of some work: ``flops`` (FLOP), ``bytes_read``, ``bytes_written`` (byte)."""

    flops: int
    bytes_read: int
    bytes_written: int

    def __post_init__(self) -> None:
        for field in ("flops", "bytes_read", "bytes_written"):
            value = getattr(self, field)
            if isinstance(value, bool) or not isinstance(value, int) or value < 0:
                raise ValueError(f"Cost.{field} must be a non-negative int, got {value!r}")

    @property
    def bytes(self) -> int:
        """Bytes moved: read plus written."""
        return self.bytes_read + self.bytes_written

    @property
    def intensity(self) -> float:
        """Arithmetic intensity, FLOP per byte moved."""
        if self.bytes == 0:
            raise ValueError("Cost.intensity is undefined: no bytes are moved")
        return self.flops / self.bytes

    def __add__(self, other: Cost) -> Cost:
        if not isinstance(other, Cost):
            return NotImplemented
        return Cost(
            self.flops + other.flops,
            self.bytes_read + other.bytes_read,
            self.bytes_written + other.bytes_written,
        )


ZERO = Cost(0, 0, 0)


def total(costs) -> Cost:
    """Sum of the costs in a dict (its values) or an iterable of :class:`Cost`."""
    values = costs.values() if isinstance(costs, dict) else costs
    out = ZERO
    for c in values:
        out = out + c
    return out


# --- numbers -----------------------------------------------------------------------------
def _bytes_per_element(name: str, field: str) -> sp.Rational:
    try:
        return sp.Rational(bytes_per_element(name))
    except ValueError as err:
        raise ValueError(f"{field}: {err}") from None


def _positive_int(value, field: str, minimum: int = 1) -> int:
    """A Python or NumPy integer ``>= minimum``, as an ``int`` (``validate.integer``)."""
    return validate.integer(field, value, minimum=minimum)


def op_costs(
    cfg,
    batch: int,
    n_new: int,
    n_past: int = 0,
    *,
    weight_dtype: str = "bf16",
    kv_dtype: str | None = None,
    act_dtype: str | None = None,
    causal: bool = True,
    logits: str = "last",
) -> dict[str, Cost]:
    """Cost of each operation for one forward pass, summed over all layers, exact integers.

    ``batch`` sequences each process ``n_new`` new tokens attending to ``n_past`` cached tokens
    plus themselves (prefill: ``n_past=0, n_new=L``; decode step: ``n_new=1, n_past=L_ctx-1``).
    ``kv_dtype`` and ``act_dtype`` default to ``weight_dtype``. Counting conventions: see the
    module docstring. Bytes of packed sub-byte types are rounded up to whole bytes per operation.
    ``logits="last"`` (the default) counts the LM head at each sequence's last new position,
    where a token is sampled (Hugging Face ``generate``, serving engines); ``"all"`` at every
    new token, as a forward pass that returns every position's logits. A decode step is the
    same under both.

    ``batch``, ``n_new`` and ``n_past`` are Python or NumPy integers. The operations are
    :data:`~llm_roofline.formulas.OPS` for a Llama-style model,
    :func:`~llm_roofline.formulas.ops_for` in general: the
    :func:`~llm_roofline.formulas.expressions_for` ``cfg`` (latent attention in its absorbed
    form for a decode step, ``n_new == 1``, naive otherwise) valued with :func:`model_values`
    and the workload.
    """
    batch, n_new = _positive_int(batch, "batch"), _positive_int(n_new, "n_new")
    n_past = _positive_int(n_past, "n_past", minimum=0)
    if n_past + n_new > cfg.max_context:
        raise ValueError(
            f"n_past + n_new = {n_past + n_new} exceeds max_context = {cfg.max_context} "
            f"of {cfg.name!r}"
        )
    values = model_values(cfg) | {
        B: sp.Integer(batch), _N_NEW: sp.Integer(n_new), _N_PAST: sp.Integer(n_past),
        b_w: _bytes_per_element(weight_dtype, "weight_dtype"),
        b_kv: _bytes_per_element(kv_dtype or weight_dtype, "kv_dtype"),
        b_act: _bytes_per_element(act_dtype or weight_dtype, "act_dtype"),
    }
    exprs = expressions_for(cfg, causal=causal, absorbed=n_new == 1, logits=logits)
    return {
        op: Cost(*(int(sp.ceiling(x.xreplace(values))) for x in e)) for op, e in exprs.items()
    }


def model_values(cfg) -> dict:
    """The model symbols of :func:`~llm_roofline.formulas.model_expressions`, valued from a
    ``ModelConfig``."""
    values = {
        n_layers: cfg.n_layers, d_model: cfg.hidden_size, d_ff: cfg.intermediate_size,
        n_heads: cfg.n_heads, n_kv_heads: cfg.n_kv_heads, head_dim: cfg.head_dim,
        vocab: cfg.vocab_size,
    }
    if getattr(cfg, "n_windowed_layers", 0):
        values |= {n_local: cfg.n_windowed_layers, window: cfg.sliding_window}
    if getattr(cfg, "is_moe", False):
        values |= {
            n_experts: cfg.n_routed_experts, top_k: cfg.n_experts_per_token,
            n_shared: cfg.n_shared_experts, d_expert: cfg.moe_intermediate_size,
            n_dense: cfg.first_dense_layers,
        }
    if getattr(cfg, "is_mla", False):
        values |= {
            q_rank: cfg.q_lora_rank, kv_rank: cfg.kv_lora_rank, d_rope: cfg.qk_rope_head_dim,
            d_nope: cfg.qk_nope_head_dim, d_v: cfg.v_head_dim,
        }
    return {k: sp.Integer(v) for k, v in values.items()}


# --- parameters, valued --------------------------------------------------------------------
def _param_flags(cfg) -> tuple:
    f = _flags(cfg)
    return tuple(f[k] for k in ("gated_mlp", "qkv_bias", "moe", "mla", "q_lora", "post_norms",
                                "qk_norm"))


@lru_cache(maxsize=512)
def _valued_params(cfg) -> dict[str, dict[str, int]]:
    values = model_values(cfg)
    table = _param_table(*_param_flags(cfg))
    out = {op: {k: int(v.xreplace(values)) for k, v in parts.items()} for op, parts in table.items()}
    if cfg.tie_embeddings:  # the head multiplies by the embedding's own matrix
        out["lm_head"] = {"lm_head": 0}
    return out


def params_by_op(cfg) -> dict[str, int]:
    """Parameters of ``cfg`` by the operation that uses them.

    :func:`~llm_roofline.formulas.param_expressions`, valued. Keys are the ops of
    :func:`~llm_roofline.formulas.ops_for` that have weights, in pass order; a tied LM head
    counts 0 (its matrix is ``embed``'s). They sum to ``ModelConfig.n_params``.
    """
    return {op: sum(parts.values()) for op, parts in _valued_params(cfg).items()}


PARAM_COMPONENTS = ("embedding", "attention", "mlp", "router", "shared_experts",
                    "routed_experts", "norms", "lm_head")
"""The components :func:`param_counts` sums parameters into."""


def param_counts(cfg) -> dict[str, int]:
    """Parameters of ``cfg`` by component (:data:`PARAM_COMPONENTS`): the same table by column."""
    counts = dict.fromkeys(PARAM_COMPONENTS, 0)
    for parts in _valued_params(cfg).values():
        for k, v in parts.items():
            counts[k] += v
    return counts


# --- vectorised numbers for the calculator ---------------------------------------------------
@cache
def _traffic_functions(causal, gated_mlp, qkv_bias, moe, mla, q_lora, absorbed,
                       windowed, post_norms, qk_norm, act, logits="last"):
    """Per op, a NumPy function of (model values..., B, n_new, n_past) -> four arrays."""
    exprs = _logits_at(dict(_model_expressions(causal, gated_mlp, qkv_bias, moe, mla, q_lora,
                                               absorbed, windowed, post_norms, qk_norm, act)),
                       logits)
    model = [n_layers, d_model, d_ff, n_heads, n_kv_heads, head_dim, vocab, n_local, window]
    model += [n_experts, top_k, n_shared, d_expert, n_dense, q_rank, kv_rank, d_rope, d_nope, d_v]
    args = [*model, B, _N_NEW, _N_PAST]
    funcs = {}
    for op, (flops, read, written) in exprs.items():
        moved = sp.expand(read + written)  # linear in b_w, b_kv, b_act: split by coefficient
        parts = [flops] + [moved.coeff(b) for b in (b_w, b_kv, b_act)]
        funcs[op] = sp.lambdify(args, parts, modules="numpy")
    return model, funcs


def op_elements(cfg, batch, n_new_, n_past_=0, *, causal: bool = True, absorbed: bool = False,
                logits: str = "last"):
    """Vectorised op counts for the calculator: per op ``(flops, weight, kv, act)`` as arrays.

    ``batch``, ``n_new_`` and ``n_past_`` may be NumPy arrays (they broadcast). ``weight``,
    ``kv`` and ``act`` are the *elements* moved (read plus written) of each kind, so that bytes
    are ``elements * bytes_per_element`` of the caller's precisions. The same expressions as
    :func:`op_costs`, lambdified instead of substituted: floats, not exact integers; the LM
    head where ``logits`` says (``"last"``: each sequence's last new position).
    """
    import numpy as np

    f = _flags(cfg)
    model, funcs = _traffic_functions(
        causal, f["gated_mlp"], f["qkv_bias"], f["moe"], f["mla"], f["q_lora"], absorbed,
        f["windowed"], f["post_norms"], f["qk_norm"], f["act"], logits,
    )
    known = model_values(cfg)
    values = [float(known.get(s, 0)) for s in model]
    b, n, p = (np.asarray(x, dtype=float) for x in (batch, n_new_, n_past_))
    shape = np.broadcast_shapes(b.shape, n.shape, p.shape)
    return {
        op: tuple(np.broadcast_to(np.asarray(x, dtype=float), shape) for x in f(*values, b, n, p))
        for op, f in funcs.items()
    }
