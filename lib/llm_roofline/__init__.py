"""llm_roofline: the physics library behind the course book *The physics of LLM inference*.

Every number in the book is computed here once. Modules, from data up:

- ``dtypes``, ``hardware``, ``models``: element sizes, accelerator specs (with sources), model
  configs (Hugging Face ``config.json``); ``validate``: the one check of user input
- ``formulas``: every FLOP, byte and parameter count, written once in SymPy; ``counts``: the
  same expressions valued (exact integers, or NumPy arrays for sweeps)
- ``roofline``: attainable performance, ridge points
- ``deployment``: one serving configuration checked once (``setup``); ``vram``: memory per GPU
  and what fits; ``calculator``: TTFT, TPOT and throughput, kernel by kernel, with the
  per-kernel breakdown; ``critical``: when decode turns compute-bound
- ``serving``, ``parallel``, ``kv``, ``sla``: speculative decoding, chunked prefill and
  disaggregation; tensor x pipeline x expert layouts; the KV cache's share of a step; the best
  batch under a latency target
- ``measured``: published measurements of real engines; ``realistic``: a calibrated prediction
  fitted on them
- ``tiny``: a NumPy Llama that counts its own FLOPs and bytes; ``measure`` and ``machine``:
  the host's own roofline
- ``cli``: the command line, ``llm-roofline`` (or ``python -m llm_roofline``)

The book's own machinery (figures, widgets, answer checks, the student edition) is the
separate package ``llm_roofline.course``, which imports this one; nothing here imports it.
"""

from __future__ import annotations

from typing import TYPE_CHECKING

__version__ = "0.1.0"

from .calculator import Estimate, decode_step
from .calculator import estimate as _kernel_by_kernel
from .critical import critical_batch
from .hardware import get_accelerator
from .models import ModelConfig, get_model, list_models
from .validate import boolean
from .vram import max_batch, memory

if TYPE_CHECKING:  # imported when used (see estimate)
    from .realistic import Realistic

__all__ = [
    "ModelConfig", "critical_batch", "decode_step", "estimate", "get_accelerator", "get_model",
    "list_models", "max_batch", "memory",
]


def estimate(model, accelerator, batch, prompt_len, output_len, *, realistic: bool = False,
             engine: str | None = None, **options) -> Estimate | Realistic:
    """Memory, TTFT, TPOT and throughput of ``batch`` requests served together.

    With ``realistic=False`` (the default) this is ``calculator.estimate``: each kernel on its
    own roofline at the ``mbu`` and ``mfu`` given, an ``Estimate``. With ``realistic=True`` it
    is ``realistic.estimate``: a *calibrated prediction* of what a tuned engine achieves
    (efficiencies and fixed costs fitted on published measurements, optionally for an
    ``engine`` family such as ``"vllm"``), a ``realistic.Realistic``; ``mbu`` and ``mfu`` are
    then the fitted preset's and may not be given. ``options`` are ``calculator.estimate``'s.
    """
    if not boolean("realistic", realistic):
        if engine is not None:
            raise ValueError("engine applies only to a calibrated prediction: pass realistic=True")
        return _kernel_by_kernel(model, accelerator, batch, prompt_len, output_len, **options)
    if "mbu" in options or "mfu" in options:
        raise ValueError("realistic=True sets mbu and mfu from the fitted preset; give either "
                         "realistic=True or your own mbu and mfu, not both")
    from . import realistic as calibrated  # imported when used, so that `python -m
    # llm_roofline.realistic` runs the module once, without runpy's RuntimeWarning

    return calibrated.estimate(model, accelerator, batch, prompt_len, output_len, engine=engine,
                               **options)
