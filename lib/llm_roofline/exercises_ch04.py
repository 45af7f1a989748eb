"""Answer checks of notebooks/04_why_decode_is_bound (ids ``bound-1`` ... ``bound-4``).

Importing this module registers them with :func:`llm_roofline.exercises.register`; the
notebook then calls ``check("bound-1", answer)``. Each expected value is computed from the
library when checked.
"""

from __future__ import annotations

from .exercises import register


def _bound_1() -> float:
    from .formulas import op_costs
    from .models import get_model

    return op_costs(get_model("llama-3-8b"), 1, 512, 0, weight_dtype="bf16")["down_proj"].intensity


def _bound_2() -> float:
    from .hardware import get_accelerator

    # square d x d projections, all 2-byte: I -> 2 k n / (2 (k + n)) = d / 2 as tokens grow
    return 2 * get_accelerator("B200").ridge("bf16")


def _bound_3() -> float:
    from .dtypes import bytes_per_element
    from .hardware import get_accelerator

    # weight-only int4: BF16 math; I = 2 B / (bytes per weight); B* where I meets the ridge
    per_weight = float(bytes_per_element("int4", 32, "fp16"))
    return get_accelerator("H200 SXM").ridge("bf16") * per_weight / 2


def _bound_4() -> float:
    from .formulas import op_costs, total
    from .models import get_model

    return total(op_costs(get_model("llama-3-70b"), 64, 1, 4095, weight_dtype="bf16")).intensity


register(
    "bound-1", _bound_1, unit="FLOPs/byte",
    hint="2mkn FLOPs over the bytes of the weight matrix, the input and the output, with m the "
    "tokens of the pass; k and n are the matrix's two sizes.",
)
register(
    "bound-2", _bound_2, unit="(hidden size)",
    hint="let m grow without bound in 2mkn / (2(mk + kn + mn)) with k = n = d, and set the "
    "limit equal to the ridge.",
)
register(
    "bound-3", _bound_3, unit="sequences",
    hint="weight-only int4 keeps BF16 math (the H200's BF16 ridge); count half a byte per weight "
    "plus one 2-byte scale per group of 32.",
)
register(
    "bound-4", _bound_4, unit="FLOPs/byte",
    hint="add up the FLOPs and the bytes of every operation of the step: the 64 sequences' KV "
    "caches are read as well as the weights.",
)
