"""Checks of user input, shared by every entry point of the library and the command line.

Each function takes the name of the field (as the caller knows it: ``"batch"``,
``"config.json hidden_size"``), the value, and what is allowed; it returns the value in the
form the caller computes with, or raises ``ValueError`` with one line that names the field,
the value (shortened) and what is allowed. Nothing here guesses: a string ``"false"`` is not
a boolean, ``4+3j`` is not a batch size, ``5e-324`` is not a usable fraction of a peak.

Integers are Python or NumPy integers (``bool`` is refused). Arrays of integers (the
calculator's sweeps) may also hold whole floats such as ``32.0``, as NumPy makes them. Sizes
are bounded by :data:`MAX_COUNT` so that products of them stay exact in float64 and never
overflow int64.
"""

from __future__ import annotations

import difflib
import math
import numbers
from collections.abc import Iterable

import numpy as np

__all__ = [
    "MAX_COUNT", "shorten", "integer", "integers", "real", "fraction", "boolean", "choice",
]

MAX_COUNT = 2**40
"""The largest count (batch, tokens, GPUs) accepted: about 1.1e12. Products of three such
counts and a model dimension stay far below float64's 2**1023 and are exact up to 2**53
for every realistic input."""


def shorten(value, limit: int = 60) -> str:
    """``repr(value)``, cut to ``limit`` characters with an ellipsis and the full length."""
    try:
        text = repr(value)
    except Exception:  # a repr that raises is still named by its type
        text = f"<{type(value).__name__}>"
    if len(text) <= limit:
        return text
    return f"{text[: limit - 1]}… ({len(text)} characters)"


def _is_integer(value) -> bool:
    return isinstance(value, numbers.Integral) and not isinstance(value, bool | np.bool_)


def integer(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT) -> int:
    """A Python or NumPy integer in ``[minimum, maximum]``, as an ``int``."""
    if not _is_integer(value) or not minimum <= value <= maximum:
        raise ValueError(
            f"{name} must be an integer from {minimum:,} to {maximum:,}, got {shorten(value)}"
        )
    return int(value)


def integers(name: str, value, *, minimum: int = 1, maximum: int = MAX_COUNT) -> np.ndarray:
    """An integer or a non-empty array of whole numbers in ``[minimum, maximum]``, as int64."""
    what = f"{name} must be an integer from {minimum:,} to {maximum:,} (or an array of them)"
    if isinstance(value, str | bytes | bool | np.bool_) or value is None:
        raise ValueError(f"{what}, got {shorten(value)}")
    try:
        array = np.asarray(value)
    except Exception:
        raise ValueError(f"{what}, got {shorten(value)}") from None
    if array.size == 0:
        raise ValueError(f"{what}, got an empty array")
    kind = array.dtype.kind
    if kind not in "iuf":  # refuses bool, complex, strings, objects
        raise ValueError(f"{what}, got {shorten(value)}")
    if kind == "f":
        with np.errstate(invalid="ignore"):
            bad = ~(np.isfinite(array) & (array == np.floor(array)))
    else:
        bad = np.zeros(array.shape, dtype=bool)
    with np.errstate(invalid="ignore"):
        bad |= ~((array >= minimum) & (array <= maximum))
    if np.any(bad):
        raise ValueError(f"{what}, got {shorten(array[bad].flat[0].item())}")
    return array.astype(np.int64)


def real(name: str, value, *, minimum: float | None = None, maximum: float | None = None,
         open_min: bool = False, open_max: bool = False, unit: str = "") -> float:
    """A finite Python or NumPy real number within the bounds given, as a ``float``.

    ``open_min``/``open_max`` exclude the bound itself. ``unit`` is named in the message.
    """
    bounds = []
    if minimum is not None:
        bounds.append(f"{'>' if open_min else '>='} {minimum:g}")
    if maximum is not None:
        bounds.append(f"{'<' if open_max else '<='} {maximum:g}")
    what = f"{name} must be a finite number{' of ' + unit if unit else ''}"
    if bounds:
        what += f" {' and '.join(bounds)}"
    x = math.nan
    if isinstance(value, numbers.Real) and not isinstance(value, bool | np.bool_):
        try:
            x = float(value)
        except (OverflowError, ValueError):
            pass
    ok = math.isfinite(x)
    if ok and minimum is not None:
        ok = x > minimum if open_min else x >= minimum
    if ok and maximum is not None:
        ok = x < maximum if open_max else x <= maximum
    if not ok:
        raise ValueError(f"{what}, got {shorten(value)}")
    return x


def fraction(name: str, value, *, minimum: float = 1e-3) -> float:
    """A fraction of a peak (MBU, MFU) in ``[minimum, 1]``: 0.1 % to 100 % by default.

    Smaller fractions are refused rather than turned into infinite times.
    """
    try:
        return real(name, value, minimum=minimum, maximum=1.0)
    except ValueError:
        raise ValueError(
            f"{name} must be a fraction of the peak from {minimum:g} to 1, got {shorten(value)}"
        ) from None


def boolean(name: str, value) -> bool:
    """``True`` or ``False`` (also NumPy's): a string such as ``"false"`` is refused, not truthy."""
    if isinstance(value, bool | np.bool_):
        return bool(value)
    raise ValueError(f"{name} must be true or false, got {shorten(value)}")


def _key(name: str) -> str:
    return "".join(ch for ch in name.lower() if ch.isalnum())


def choice(name: str, value, allowed: Iterable[str], *, aliases: dict[str, str] | None = None) -> str:
    """One of ``allowed`` (or a key of ``aliases``, mapped to its value), with suggestions.

    Matching ignores case, spaces, dashes, dots and underscores (``' Llama_3-70B'`` is
    ``llama-3-70b``); a near miss is answered with the closest names.
    """
    allowed = list(allowed)
    if not isinstance(value, str):
        raise ValueError(f"{name} must be a name, one of {', '.join(allowed)}; got {shorten(value)}")
    table = {_key(a): a for a in allowed}
    for alias, target in (aliases or {}).items():
        table.setdefault(_key(alias), target)
    found = table.get(_key(value))
    if found is not None:
        return found
    close = difflib.get_close_matches(_key(value), list(table), n=3, cutoff=0.6)
    hint = f"; did you mean {' or '.join(repr(table[c]) for c in dict.fromkeys(close))}?" if close else ""
    raise ValueError(
        f"unknown {name} {shorten(value, 40)}{hint} Known: {', '.join(allowed)}"
    )
