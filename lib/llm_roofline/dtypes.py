"""Element sizes of the number formats an LLM is stored and computed in.

Sizes are exact (``fractions.Fraction``): an int4 weight is 1/2 byte, and a quantised
tensor also stores one scale per group of ``group_size`` elements, so int4 with fp16
scales per 128 weights costs 1/2 + 2/128 = 0.5156 bytes per weight: the symmetric format of
GPTQ checkpoints with ``sym=True`` and of llama.cpp's Q4_0. ``int4_zp`` is the asymmetric
format of AWQ (and of GPTQ with ``sym=False``): each group also stores a 4-bit zero point, so
1/2 + (2 + 1/2)/128 = 0.5195 bytes per weight at group 128.

Names forgive case, ``-``, spaces and the PyTorch spellings: ``"BF16"``, ``"bfloat16"``,
``"fp8-e4m3"`` and ``"float8_e4m3fn"`` all work; ``"fp8"`` means ``"fp8_e4m3"``.
"""

from __future__ import annotations

from fractions import Fraction

from .validate import shorten

__all__ = ["GROUPED", "aliases", "bytes_per_element", "canonical", "list_dtypes", "nbytes"]

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
}

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
    if group_size is None:
        return _BYTES[key]
    return _BYTES[key] + (_BYTES[canonical(scale_dtype)] + _ZERO_POINT.get(key, 0)) / group_size


def nbytes(
    n: int, dtype: str, group_size: int | None = None, scale_dtype: str = "fp16"
) -> Fraction:
    """Bytes of ``n`` elements, exactly; with groups, one scale per started group.

    ``nbytes(4096 * 4096, "bf16") == 33_554_432``; ``nbytes(3, "int4") == Fraction(3, 2)``.
    """
    if isinstance(n, bool) or not isinstance(n, int) or n < 0:
        raise ValueError(f"n (number of elements) must be a non-negative integer, got {shorten(n)}")
    key = canonical(dtype)
    size = n * _BYTES[key]
    _check_group(group_size)
    if group_size is None:
        return size
    return size + -(-n // group_size) * (_BYTES[canonical(scale_dtype)] + _ZERO_POINT.get(key, 0))
