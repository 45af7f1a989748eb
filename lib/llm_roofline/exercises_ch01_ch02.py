"""Answer checks of chapters 1 and 2 (``paradox-*``, ``phases-*``).

Importing this module registers them with :func:`llm_roofline.exercises.register`; each
expected value is computed from the library when first checked.
"""

from __future__ import annotations

from .exercises import register

__all__: list[str] = []


def _first(predicate, low: int, high: int) -> int:
    """The smallest integer in ``[low, high]`` where a monotone ``predicate`` holds."""
    if not predicate(high):
        raise ValueError(f"no value up to {high} satisfies the condition")
    while low < high:
        mid = (low + high) // 2
        if predicate(mid):
            high = mid
        else:
            low = mid + 1
    return low


# notebooks/01_dormant_tensor_cores: the paradox -------------------------------------


def _paradox_1() -> float:
    from .calculator import estimate

    e = estimate("llama-3-8b", "H100 SXM", 1, 2048, 256)
    return 1 + 0.95 / 0.05 * e.ttft_s / e.tpot_s  # the output length where decode is 95 %


def _paradox_2() -> float:
    from .calculator import estimate

    e = estimate("llama-3-70b", "H100 SXM", 1, 2048, 256, weight_dtype="fp8", kv_dtype="fp8")
    return 1 / e.tpot_s


def _paradox_3() -> float:
    from .calculator import estimate
    from .hardware import get_accelerator

    e = estimate("llama-3-8b", "H100 SXM", 32, 2048, 256)
    return 100 * e.decode_flops / e.tpot_s / get_accelerator("H100 SXM").peak("bf16")


def _paradox_4() -> float:
    from . import formulas
    from .hardware import get_accelerator
    from .models import get_model

    work = 12.4e-3 * 0.824 * get_accelerator("H100 SXM").peak("bf16")
    cfg = get_model("llama-3-8b")
    return _first(lambda n: formulas.total(formulas.op_costs(cfg, 1, n)).flops >= work,
                  1, cfg.max_context)


register(
    "paradox-1", _paradox_1, unit="output tokens", rtol=0.02,
    hint="decode's share is (N-1) TPOT / (TTFT + (N-1) TPOT); solve it for N at 0.95.",
)
register(
    "paradox-2", _paradox_2, unit="tokens/s", rtol=0.02,
    hint="one stream gets one token per decode step: 1 / TPOT, with fp8 weights and KV cache.",
)
register(
    "paradox-3", _paradox_3, unit="% of the peak", rtol=0.02,
    hint="a decode step's FLOPs divided by its time, over the dense BF16 peak, times 100.",
)
register(
    "paradox-4", _paradox_4, unit="tokens", rtol=0.07,
    hint="the work done is time x 0.824 x peak; a prompt token costs about 2 FLOPs per parameter.",
)


# notebooks/02_two_phases: GEMM and GEMV ---------------------------------------------


def _phases_1() -> float:
    from .formulas import op_costs
    from .models import get_model

    return op_costs(get_model("llama-3-70b"), 16, 1, 2047)["down_proj"].intensity


def _phases_2() -> float:
    from .formulas import op_costs
    from .hardware import get_accelerator
    from .models import get_model

    cfg, ridge = get_model("llama-3-8b"), get_accelerator("H100 SXM").ridge("bf16")
    return _first(lambda n: op_costs(cfg, 1, n)["down_proj"].intensity >= ridge,
                  1, cfg.max_context)


def _phases_3() -> float:
    from . import formulas as F

    values = {F.n_new: 64, F.n_past: 0}
    causal = F.attention_pairs_expr(causal=True).subs(values)
    full = F.attention_pairs_expr(causal=False).subs(values)
    return float(causal / full)


def _phases_4() -> float:
    from .formulas import op_costs, total
    from .models import get_model

    costs = op_costs(get_model("llama-3-8b"), 16, 1, 8191)
    return 100 * costs["kv_read"].bytes / total(costs).bytes


register(
    "phases-1", _phases_1, unit="FLOP/byte", rtol=0.01,
    hint="a batch of B decode tokens is a [B x d_ff] activation: 2 B d_ff d FLOPs over the "
    "weight bytes plus the activations'.",
)
register(
    "phases-2", _phases_2, unit="tokens", rtol=0.01,
    hint="intensity 2 L k n / (2 (k n + L k + L n)) at BF16; find the first L at the ridge.",
)
register(
    "phases-3", _phases_3, unit="of the full block", rtol=0.001,
    hint="a causal kernel scores token i against i + 1 keys: sum them, over L x L.",
)
register(
    "phases-4", _phases_4, unit="% of the bytes", rtol=0.01,
    hint="compare kv_read's bytes with the total of every operation of the step.",
)
