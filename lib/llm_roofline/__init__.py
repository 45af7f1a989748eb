"""llm_roofline: the single source of numbers for the course book *The physics of LLM inference*.

Every notebook imports this package; every figure and every number in the book's prose is
computed here once. Modules, from data up:

- ``dtypes``, ``hardware``, ``models``: element sizes, accelerator specs, model configs
- ``roofline``, ``formulas``: attainable performance; FLOPs and bytes, derived with SymPy
- ``calculator``: the VRAM and throughput calculator (``estimate``, ``decode_step``, ...)
- ``serving``: speculative decoding, chunked prefill (mixed steps), prefill/decode disaggregation
- ``parallel``: tensor x pipeline x expert parallel layouts (``Layout``, ``layout_needed``)
- ``tiny``: a NumPy Llama that counts its own FLOPs and bytes
- ``measure``: micro-benchmarks of the host
"""

__version__ = "0.1.0"

from .calculator import critical_batch, decode_step, estimate, max_batch, memory  # noqa: E402
from .hardware import get_accelerator  # noqa: E402
from .models import ModelConfig, get_model, list_models  # noqa: E402

__all__ = [
    "ModelConfig", "critical_batch", "decode_step", "estimate", "get_accelerator", "get_model",
    "list_models", "max_batch", "memory",
]
