"""Numbers in prose that cannot drift from the code that computes them.

A page states its numbers as plain text, so that they read the same in the website, in
JupyterLab, in Colab and in the student edition. The cell that computes a number asserts
the text the prose uses, with :func:`states`::

    ridge = get_accelerator("h100").ridge("bf16")
    states(ridge, "295.3")          # the prose says "295.3 FLOP/byte"

If the library changes and the number moves, the cell fails and names the prose's text and
the new value, so the prose is rewritten instead of silently going stale. A test checks that
every number in a page's prose appears in one of its code cells (as such a text, or as the
literal input it is).
"""

from __future__ import annotations

import re

from ..validate import real, shorten

__all__ = ["fmt_like", "states"]

_NUMBER = re.compile(r"^[-−]?(\d{1,3}(,\d{3})+|\d+)(\.\d+)?$", re.ASCII)


def fmt_like(value, text: str) -> str:
    """``value`` printed the way ``text`` is: its decimals, with thousands separators if it has them."""
    if not isinstance(text, str) or len(text) > 100 or not _NUMBER.match(text.strip()):
        raise ValueError(
            f"text must be a number as the prose writes it, such as '1,476' or '0.34', got "
            f"{shorten(text)}"
        )
    value = real("value", value)  # finite, not a bool, not an int beyond float's range
    text = text.strip().replace("−", "-")
    decimals = len(text.split(".")[1]) if "." in text else 0
    comma = "," if "," in text else ""
    return format(float(value), f"{comma}.{decimals}f")


def states(value, text: str) -> None:
    """Assert that ``value``, rounded as ``text`` is written, reads ``text``.

    Returns nothing, so a cell that ends with it displays nothing extra.

    ``states(295.35, "295.3")`` passes (printed to one decimal, 295.35 reads 295.3 or 295.4
    depending on its binary value: pass the value the page computes, not a retyped one);
    ``states(1476.2, "1,476")`` passes; ``states(0.0034, "0.34")`` fails: scale percentages
    yourself (``states(100 * share, "0.34")``).
    """
    printed = fmt_like(value, text)
    if printed != text.strip().replace("−", "-"):
        raise AssertionError(
            f"the prose says {text!r} but the cell computes {printed} ({shorten(value)}): "
            "rewrite the prose to what the library now says"
        )
