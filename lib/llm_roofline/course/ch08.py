"""Chapter 8, your machine: its answer checks (``notebooks/08_your_machine``): ``check("machine-2", 12.3)``.

One answer depends on nothing but the library (``machine-1``, a count of bytes); the
others depend on the reader's own machine, so they are computed from the measurements the
notebook made: call :func:`use` with the dict ``measure.measure_roofline()`` returned before
checking them. Importing this module registers the exercises with
:func:`llm_roofline.exercises.register`; check them with :func:`llm_roofline.exercises.check`.
"""

from __future__ import annotations

import math

from .registry import register

__all__ = ["use"]

_STATE: dict = {"host": None}


def use(host: dict) -> None:
    """Check the machine-dependent answers against ``host`` (``measure_roofline()``'s dict)."""
    from ..machine import host_accelerator

    host_accelerator(host)  # raises ValueError if host is not such a dict
    _STATE["host"] = host


def _chip():
    from ..machine import host_accelerator

    if _STATE["host"] is None:
        raise ValueError(
            "this answer depends on your machine: measure it first and call "
            "llm_roofline.course.ch08.use(host)"
        )
    return host_accelerator(_STATE["host"])


def _l_decode(batch: int = 1, context: int = 64):
    from ..counts import op_costs
    from ..machine import chapter_models

    costs = op_costs(chapter_models()["L"], batch, 1, context - 1, weight_dtype="fp32")
    return costs


def _machine_1() -> float:
    """Bytes a 1,024-wide float32 query projection moves at batch 4 (a machine-free count)."""
    from ..counts import op_costs
    from ..models import ModelConfig

    width = ModelConfig("gemv-1024", vocab_size=1024, hidden_size=1024, intermediate_size=2816,
                        n_layers=1, n_heads=16, n_kv_heads=16, head_dim=64)
    return op_costs(width, 4, 1, 63, weight_dtype="fp32")["q_proj"].bytes


def _machine_2() -> float:
    chip = _chip()
    return chip.ridge(next(iter(chip.peaks)))


def _machine_3() -> float:
    return float(math.ceil(2 * _machine_2()))


def _machine_4() -> float:
    from ..counts import total

    return 1e3 * total(_l_decode()).bytes / _chip().bandwidth


def _machine_5() -> float:
    from ..calculator import estimate

    e = estimate("llama-3-8b", _chip(), 1, 512, 128, weight_dtype="fp32", kv_dtype="fp32",
                 act_dtype="fp32")
    return 1e3 * e.tpot_s


register(
    "machine-1", _machine_1, unit="bytes", rtol=1e-9,
    hint="4 bytes per float32 number: the weight matrix once, plus the 4 activation rows read "
    "and the 4 result rows written.",
)


register(
    "machine-2", _machine_2, unit="FLOPs/byte",
    hint="the ridge is the measured matmul peak over the measured read bandwidth; mind "
    "GFLOP/s against GB/s.",
)


register(
    "machine-3", _machine_3, unit="sequences", rtol=0.0,
    hint="in float32 a decode step's linear layers do 2 FLOPs per 4-byte weight per sequence: "
    "I = B / 2; find the first whole B at or past your ridge.",
)


register(
    "machine-4", _machine_4, unit="ms", rtol=0.05,
    hint="a memory-bound step takes bytes / bandwidth; sum the bytes of every operation of one "
    "step (counts.op_costs in fp32).",
)


register(
    "machine-5", _machine_5, unit="ms", rtol=0.02,
    hint="estimate(..., weight_dtype='fp32', kv_dtype='fp32', act_dtype='fp32') with your "
    "machine as the accelerator; tpot_s is in seconds.",
)
