"""Element sizes of the number formats an LLM is stored and computed in.

Sizes are exact (``fractions.Fraction``): an int4 weight is 1/2 byte, and a quantised
tensor also stores one scale per group of ``group_size`` elements, so int4 with fp16
scales per 128 weights costs 1/2 + 2/128 = 0.5156 bytes per weight: the symmetric format of
GPTQ checkpoints with ``sym=True`` and of llama.cpp's Q4_0. ``int4_zp`` is the asymmetric
format of AWQ (and of GPTQ with ``sym=False``): each group also stores a 4-bit zero point, so
1/2 + (2 + 1/2)/128 = 0.5195 bytes per weight at group 128.

Names forgive case, ``-``, spaces and the PyTorch spellings: ``"BF16"``, ``"bfloat16"``,
``"fp8-e4m3"`` and ``"float8_e4m3fn"`` all work; ``"fp8"`` means ``"fp8_e4m3"``.

Block-scaled floating point (:data:`BLOCK_SCALED`) carries its scales inside the format, so
its size counts them: each block of ``block`` values shares one scale.

========  ==============  =====================  ==================  =====================
format    values          block scale            tensor scale        bits per value
========  ==============  =====================  ==================  =====================
nvfp4     FP4 E2M1 (4 b)  FP8 E4M3 per 16        one FP32 a tensor   4 + 8/16 = 4.5
mxfp4     FP4 E2M1 (4 b)  E8M0 (8 b) per 32      none                4 + 8/32 = 4.25
mxfp6     FP6 E2M3 (6 b)  E8M0 per 32            none                6 + 8/32 = 6.25
mxfp8     FP8 E4M3 (8 b)  E8M0 per 32            none                8 + 8/32 = 8.25
========  ==============  =====================  ==================  =====================

(NVIDIA, "Introducing NVFP4 for efficient and accurate low-precision inference", 2025; the
OCP Microscaling Formats (MX) v1.0 specification, 2023.) ``bytes_per_element`` leaves out
NVFP4's one tensor scale (4 bytes for millions of values); ``nbytes`` counts it. The bare
``"fp4_e2m1"`` and ``"fp6_e2m3"`` are the unscaled elements (``"fp4"``, ``"fp6"``): they name
the tensor-core math a chip runs (:func:`math_class`), not a storage format.
"""

from __future__ import annotations

from fractions import Fraction

from .validate import shorten

__all__ = [
    "BLOCK_SCALED", "GROUPED", "aliases", "bytes_per_element", "canonical", "list_dtypes",
    "math_class", "mla_cache_bytes_per_element", "nbytes", "nominal_bits",
]

# Bytes per element of each canonical format.
_BYTES: dict[str, Fraction] = {
    "fp32": Fraction(4),
    "bf16": Fraction(2),
    "fp16": Fraction(2),
    "fp8_e4m3": Fraction(1),
    "fp8_e5m2": Fraction(1),
    "int8": Fraction(1),
    "int4": Fraction(1, 2),
    "int4_zp": Fraction(1, 2),
    "mxfp8": Fraction(1) + Fraction(1, 32),
    "mxfp6": Fraction(3, 4) + Fraction(1, 32),
    "fp6_e2m3": Fraction(3, 4),
    "nvfp4": Fraction(1, 2) + Fraction(1, 16),
    "mxfp4": Fraction(1, 2) + Fraction(1, 32),
    "fp4_e2m1": Fraction(1, 2),
}

BLOCK_SCALED: dict[str, tuple[Fraction, int, Fraction, Fraction]] = {
    # name: (bytes of one value, values per block, bytes of a block's scale, bytes a tensor)
    "nvfp4": (Fraction(1, 2), 16, Fraction(1), Fraction(4)),
    "mxfp4": (Fraction(1, 2), 32, Fraction(1), Fraction(0)),
    "mxfp6": (Fraction(3, 4), 32, Fraction(1), Fraction(0)),
    "mxfp8": (Fraction(1), 32, Fraction(1), Fraction(0)),
}
"""The block-scaled formats: each value's bytes, the block that shares one scale, the scale's
bytes, and the bytes of the one scale per tensor (NVFP4's FP32)."""

_MATH = {"fp8_e4m3": "fp8", "fp8_e5m2": "fp8", "mxfp8": "fp8", "mxfp6": "fp6", "fp6_e2m3": "fp6",
         "nvfp4": "fp4", "mxfp4": "fp4", "fp4_e2m1": "fp4"}

_NOMINAL_BITS = {"mxfp8": 8, "mxfp6": 6, "fp6_e2m3": 6, "nvfp4": 4, "mxfp4": 4, "fp4_e2m1": 4}

GROUPED = frozenset({"int4", "int4_zp"})
"""The formats stored in groups, each group with its own scale (``int4_zp``: and zero point)."""

_ZERO_POINT = {"int4_zp": Fraction(1, 2)}  # bytes of one group's zero point

_ALIASES: dict[str, str] = {
    "fp8": "fp8_e4m3",
    "float32": "fp32",
    "float": "fp32",
    "bfloat16": "bf16",
    "float16": "fp16",
    "half": "fp16",
    "float8_e4m3fn": "fp8_e4m3",
    "float8_e4m3": "fp8_e4m3",
    "float8_e5m2": "fp8_e5m2",
    "awq": "int4_zp",
    "gptq": "int4",
    "fp4": "fp4_e2m1",
    "float4_e2m1fn_x2": "fp4_e2m1",
    "e2m1": "fp4_e2m1",
    "fp6": "fp6_e2m3",
    "float6_e2m3fn": "fp6_e2m3",
    "nv_fp4": "nvfp4",
    "mx_fp4": "mxfp4",
    "mx_fp6": "mxfp6",
    "mx_fp8": "mxfp8",
}


def list_dtypes() -> tuple[str, ...]:
    """The canonical names, smallest precision last."""
    return tuple(_BYTES)


def aliases() -> dict[str, tuple[str, ...]]:
    """The other spellings ``canonical`` accepts, by canonical name (every canonical name is a
    key): ``aliases()["fp8_e4m3"] == ("fp8", "float8_e4m3fn", "float8_e4m3")``. Case, ``-``
    and spaces are forgiven on top of these."""
    return {name: tuple(a for a, c in _ALIASES.items() if c == name) for name in _BYTES}


def canonical(name: str) -> str:
    """The canonical name of a format: ``canonical("FP8-E4M3") == "fp8_e4m3"``.

    Raises ``ValueError`` naming the known formats when ``name`` is not one of them.
    """
    if not isinstance(name, str):
        raise ValueError(f"dtype must be a string such as 'bf16', got {shorten(name)}")
    key = name.strip().lower().replace("-", "_").replace(" ", "_")
    key = _ALIASES.get(key, key)
    if key not in _BYTES:
        known = ", ".join(list_dtypes())
        raise ValueError(f"unknown dtype {shorten(name, 40)}; known: {known} (and 'fp8' = 'fp8_e4m3')")
    return key


def math_class(dtype: str) -> str:
    """The tensor-core math a format's values run on: ``"fp4"``, ``"fp6"``, ``"fp8"``, else its
    canonical name. ``math_class("nvfp4") == math_class("mxfp4") == "fp4"``: a chip's FP4 peak
    serves both (``hardware.Accelerator.peak``)."""
    key = canonical(dtype)
    return _MATH.get(key, key)


def nominal_bits(dtype: str) -> int:
    """Bits of one value, scales left out: 4 for nvfp4, mxfp4 and int4, 16 for bf16.

    The number in the names W4A16 (4-bit weights, 16-bit math) and W4A4."""
    key = canonical(dtype)
    return _NOMINAL_BITS.get(key) or int(8 * _BYTES[key])


def mla_cache_bytes_per_element(kv_dtype: str, latent: int, rope: int) -> Fraction:
    """Bytes per cached number of an MLA latent cache of ``latent + rope`` numbers a token.

    In 16 or 32 bits every number costs the same. In fp8 (``fp8_e4m3``/``e5m2``) the cache is
    stored as FlashMLA stores it: the ``latent`` numbers in FP8 with one FP32 scale per 128 of
    them, the ``rope`` numbers (the decoupled RoPE key) kept in BF16. For DeepSeek-V3's 512 +
    64: ``512 + 4 * 4 + 64 * 2 = 656`` bytes a token a layer, 656/576 a number (not 576/576).
    Other formats: their own size (``bytes_per_element``).
    """
    key = canonical(kv_dtype)
    if not key.startswith("fp8_") or latent <= 0:
        return _BYTES[key]
    scales = -(-latent // 128) * 4
    return Fraction(latent + scales + 2 * rope, latent + rope)


def _check_group(group_size: int | None) -> None:
    if group_size is None:
        return
    if isinstance(group_size, bool) or not isinstance(group_size, int) or group_size <= 0:
        raise ValueError(f"group_size must be a positive integer or None, got {shorten(group_size)}")


def bytes_per_element(
    dtype: str, group_size: int | None = None, scale_dtype: str = "fp16"
) -> Fraction:
    """Bytes one element costs in memory, exactly.

    With ``group_size`` the cost of one ``scale_dtype`` scale per group (and, for ``int4_zp``,
    one 4-bit zero point) is spread over the group:
    ``bytes_per_element("int4", 128) == Fraction(1, 2) + Fraction(2, 128)``.
    """
    key = canonical(dtype)
    _check_group(group_size)
    _no_group_for_blocks(key, group_size)
    if group_size is None:
        return _BYTES[key]
    return _BYTES[key] + (_BYTES[canonical(scale_dtype)] + _ZERO_POINT.get(key, 0)) / group_size


def _no_group_for_blocks(key: str, group_size) -> None:
    if key in BLOCK_SCALED and group_size is not None:
        raise ValueError(f"group_size must be None for {key}: its block of "
                         f"{BLOCK_SCALED[key][1]} values and their scale are part of the format, "
                         f"got {shorten(group_size)}")


def nbytes(
    n: int, dtype: str, group_size: int | None = None, scale_dtype: str = "fp16"
) -> Fraction:
    """Bytes of ``n`` elements, exactly; with groups, one scale per started group.

    ``nbytes(4096 * 4096, "bf16") == 33_554_432``; ``nbytes(3, "int4") == Fraction(3, 2)``.
    A block-scaled format (:data:`BLOCK_SCALED`) stores one scale per started block, and
    NVFP4 one FP32 scale for the tensor: ``nbytes(32, "nvfp4") == 16 + 2 + 4``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n (number of elements) must be a non-negative integer, got {shorten(n)}")
    key = canonical(dtype)
    _check_group(group_size)
    _no_group_for_blocks(key, group_size)
    if key in BLOCK_SCALED:
        value, block, scale, tensor = BLOCK_SCALED[key]
        return n * value + -(-n // block) * scale + (tensor if n else 0)
    size = n * _BYTES[key]
    if group_size is None:
        return size
    return size + -(-n // group_size) * (_BYTES[canonical(scale_dtype)] + _ZERO_POINT.get(key, 0))
