"""Thin front ends for the notebooks: a kernel-free scrubber and a live ipywidgets binding.

No arithmetic here. A figure is drawn by a pure function from the library (for example
``roofline.explore``); this module only binds it to controls:

- ``scrubber`` precomputes frames and returns plain HTML with a range slider, which works
  on the static website with no kernel (matplotlib's ``FuncAnimation.to_jshtml``);
- ``live`` binds ipywidgets controls to the function for a running kernel;
- ``html_table`` shows a library table (a list of dicts) on the page.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence

# to_jshtml links Font Awesome from a CDN for its button icons; the book reads offline,
# so the link is dropped (the slider and the buttons still work, the theme styles icons).
_CDN_LINK = re.compile(r"<link[^>]*font-awesome[^>]*>\s*")


def scrubber(
    draw: Callable,
    values: Sequence,
    *,
    label: str = "",
    fmt: str = "{}",
    figsize: tuple[float, float] = (6.0, 4.0),
    dpi: int = 72,
    interval: int = 500,
):
    """A slider over precomputed frames, as an ``IPython.display.HTML`` object.

    ``draw(ax, value)`` draws one frame on a cleared Axes; the frame's title is
    ``label + fmt.format(value)``. The animation does not play by itself (the reader drags
    the slider or presses play), stops at the last frame, and the figure is closed so no
    stray static image follows it. Keep ``len(values)`` small (<= 25) and ``dpi`` low:
    every frame is embedded as a PNG.
    """
    import matplotlib.pyplot as plt
    from IPython.display import HTML
    from matplotlib.animation import FuncAnimation

    values = list(values)
    if not values:
        raise ValueError("values must hold at least one frame value, got none")
    fig, ax = plt.subplots(figsize=figsize, dpi=dpi)

    def frame(i: int) -> None:
        ax.clear()
        draw(ax, values[i])
        ax.set_title(label + fmt.format(values[i]), fontsize=10)

    animation = FuncAnimation(fig, frame, frames=len(values), interval=interval, repeat=False)
    html = animation.to_jshtml(default_mode="once")
    plt.close(fig)
    return HTML(_CDN_LINK.sub("", html))


def live(fn: Callable, **controls):
    """``ipywidgets.interactive(fn, **controls)``: one widget per keyword, redrawn live.

    Controls are ipywidgets (``Dropdown``, ``FloatLogSlider``...) or anything
    ``interactive`` accepts (a list gives a dropdown, a tuple a slider).
    """
    import ipywidgets

    return ipywidgets.interactive(fn, **controls)


def html_table(rows: Sequence[dict], floatfmt: str | dict[str, str] = "{:,.1f}"):
    """Rows of dicts with the same keys as an ``IPython.display.HTML`` table.

    Floats are written with ``floatfmt``, one format for all columns or a dict from column
    name to format (other columns get ``"{:,.1f}"``); ``None`` (for example a precision a
    chip lacks) shows as a dash.
    """
    from html import escape

    from IPython.display import HTML

    if not rows:
        raise ValueError("rows must hold at least one row, got none")
    header = list(rows[0])
    formats = floatfmt if isinstance(floatfmt, dict) else dict.fromkeys(header, floatfmt)

    pad = "padding: 0.15em 0.6em"

    def cell(value, column: str) -> str:
        if value is None:
            return f'<td style="{pad}; text-align: right">&ndash;</td>'
        if isinstance(value, float):
            text = escape(formats.get(column, "{:,.1f}").format(value))
            return f'<td style="{pad}; text-align: right">{text}</td>'
        return f'<td style="{pad}">{escape(str(value))}</td>'

    head = "".join(f'<th style="{pad}">{escape(str(k))}</th>' for k in header)
    body = "".join(
        "<tr>" + "".join(cell(row[k], k) for k in header) + "</tr>" for row in rows
    )
    return HTML(f"<table><thead><tr>{head}</tr></thead><tbody>{body}</tbody></table>")
