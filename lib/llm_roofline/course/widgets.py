"""Thin front ends for the notebooks: a kernel-free scrubber and a live ipywidgets binding.

No arithmetic here. A figure is drawn by a pure function from the library (for example
``roofline.explore``); this module only binds it to controls:

- ``scrubber`` precomputes frames and returns plain HTML with a range slider, which works
  on the static website with no kernel (matplotlib's ``FuncAnimation.to_jshtml``);
- ``small_multiples`` draws one small figure per panel, side by side on a laptop and
  stacked on a phone;
- ``live`` binds ipywidgets controls to the function for a running kernel;
- ``html_table`` shows a library table (a list of dicts) on the page.

Each also has a print form, for the PDF built from the same pages: a scrubber prints as small
multiples of its frames and small multiples as a grid (``image/png``), a table as a LaTeX
table (``text/latex``). MyST-NB picks each builder's form from the output's MIME bundle, so no
cell is written twice.
"""

from __future__ import annotations

import re
import string
from collections.abc import Callable, Sequence

from ..validate import integer, real, sequence, shorten, text

__all__ = ["PRINT_MARK", "PRINT_MIN_WIDTH", "PRINT_SCALE", "Scrubber", "SmallMultiples", "Table",
           "html_table", "latex_text", "live", "print_size", "scrubber", "small_multiples"]


def _html_class():
    from IPython.display import HTML

    return HTML


PRINT_MARK = "%print\n"
"""The first line of a print form that is text, not math: MyST-NB typesets ``text/latex`` as
display math, and the book's ``_ext/printform.py`` passes a block starting so to LaTeX as is."""

_LATEX_SPECIAL = {c: "\\" + c for c in "&%$#_{}"} | {
    "~": r"\textasciitilde{}", "^": r"\textasciicircum{}", "\\": r"\textbackslash{}"}


def latex_text(text: str) -> str:
    """``text`` with LaTeX's special characters escaped, to be typeset as it reads."""
    return "".join(_LATEX_SPECIAL.get(c, c) for c in text)


def _inches(name: str, size, maximum: float) -> tuple[float, float]:
    """A figure size, ``(width, height)`` in inches, each from 0.5 to ``maximum``."""
    if not isinstance(size, Sequence) or isinstance(size, str) or len(size) != 2:
        raise ValueError(f"{name} must be (width, height) in inches, got {shorten(size)}")
    width, height = (real(f"{name} {side}", v, minimum=0.5, maximum=maximum, unit="inches")
                     for side, v in zip(("width", "height"), size, strict=True))
    return width, height


def _panel_png(draw: Callable, value, size: tuple[float, float], dpi: int, title: str = "") -> bytes:
    """``draw(ax, value)`` on a fresh figure of ``size`` inches, as PNG bytes at ``dpi``."""
    import io

    import matplotlib.pyplot as plt

    fig, ax = plt.subplots(figsize=size, dpi=dpi, layout="constrained")
    try:
        draw(ax, value)
        if title:
            ax.set_title(title, fontsize=10)
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=dpi)
    finally:
        plt.close(fig)
    return out.getvalue()


def _grid_png(pngs: Sequence[bytes], columns: int, key: bytes | None = None) -> bytes:
    """PNG images of one size as one PNG, ``columns`` to a row, at their own pixels; ``key``, a
    PNG of a legend, as one more row under them all, centred."""
    import io

    import matplotlib.pyplot as plt

    rows = -(-len(pngs) // columns)
    images = [plt.imread(io.BytesIO(png), format="png") for png in pngs]
    height, width = images[0].shape[:2]
    legend = plt.imread(io.BytesIO(key), format="png") if key else None
    below = legend.shape[0] if legend is not None else 0
    fig, axes = plt.subplots(rows, columns, squeeze=False, dpi=100,
                             figsize=(columns * width / 100, (rows * height + below) / 100))
    for ax in axes.flat:
        ax.set_axis_off()
    for ax, image in zip(axes.flat, images, strict=False):
        ax.imshow(image)
    fig.subplots_adjust(0, below / (rows * height + below), 1, 1, 0.02, 0.02)
    if legend is not None:
        strip = fig.add_axes((0, 0, 1, below / (rows * height + below)))
        strip.set_axis_off()
        strip.imshow(legend)
    out = io.BytesIO()
    fig.savefig(out, format="png", dpi=100)
    plt.close(fig)
    return out.getvalue()


# to_jshtml wraps each frame's base64 over lines ending in a backslash; the decoder drops them
_FRAME = re.compile(r"data:image/png;base64,([^\"']+)")


class Scrubber(_html_class()):
    """A scrubber's HTML; printed (``_repr_png_``) as small multiples of up to six of its
    frames, evenly spaced from the first to the last: the print frames ``scrubber`` drew for
    the page, or else the frames of the HTML."""

    _PRINTED = 6
    print_frames: Sequence[bytes] = ()  # PNGs drawn for print by ``scrubber``
    print_key: bytes | None = None  # the frames' shared legend, a PNG under them in print

    @classmethod
    def picked(cls, count: int) -> list[int]:
        """The indices of the frames printed out of ``count``: up to six, evenly spaced."""
        shown = min(count, cls._PRINTED)
        return [round(i * (count - 1) / max(shown - 1, 1)) for i in range(shown)]

    def _repr_png_(self) -> bytes:
        import base64

        if self.print_frames:
            pngs = self.print_frames
        else:
            frames = _FRAME.findall(self.data)
            if not frames:
                return None
            pngs = [base64.b64decode(frames[i]) for i in self.picked(len(frames))]
        return _grid_png(pngs, 1 if len(pngs) == 1 else 2, self.print_key if self.print_frames else None)


class SmallMultiples(_html_class()):
    """Panels side by side that wrap into one column in a narrow window (a phone), each an
    image at its own size, so its text is never scaled down; printed (``_repr_png_``) as a
    grid of two columns, drawn again with its title."""

    panels: tuple = ()  # (draw, panel values, title, panel size), set by ``small_multiples``

    def _repr_png_(self) -> bytes:
        import base64
        import io

        import matplotlib.pyplot as plt

        if not self.panels:  # built from HTML alone: its panels side by side
            pngs = [base64.b64decode(f) for f in _FRAME.findall(self.data)]
            return _grid_png(pngs, 1 if len(pngs) == 1 else 2) if pngs else None
        fig = self.grid_figure()  # drawn again, with its title, at print resolution
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=150)
        plt.close(fig)
        return out.getvalue()

    def grid_figure(self):
        """The panels drawn again as one matplotlib figure, two to a row (for a slide, where
        the figure is refitted to the projector as a whole)."""
        import matplotlib.pyplot as plt

        draw, values, title, (width, height) = self.panels
        columns = 1 if len(values) == 1 else 2
        rows = -(-len(values) // columns)
        fig, axes = plt.subplots(rows, columns, squeeze=False, layout="constrained",
                                 figsize=(columns * width, rows * height))
        for ax in axes.flat[len(values):]:
            ax.set_axis_off()
        for ax, value in zip(axes.flat, values, strict=False):
            draw(ax, value)
        if title:
            fig.suptitle(title, fontsize=11)
        return fig


class Table(_html_class()):
    """An ``html_table``'s HTML; printed (``_repr_latex_``) as a LaTeX table (``tabulary``)."""

    def __init__(self, html: str, header: list[str], cells: list[list[str]], numeric: list[bool]):
        super().__init__(html)
        self._latex = (header, cells, numeric)

    def _repr_latex_(self) -> str:
        header, cells, numeric = self._latex

        def tex(value: str) -> str:
            return latex_text(value.replace("\u2013", "--"))

        # tabulary (loaded by Sphinx): at its natural width when that fits the text block, else
        # its columns wrap to the text block's width, so that no table runs off the page
        spec = "".join("R" if n else "L" for n in numeric)
        lines = [PRINT_MARK + r"\begin{center}\small\begin{tabulary}{\linewidth}{" + spec + "}", r"\hline",
                 " & ".join(r"\textbf{" + tex(h) + "}" for h in header) + r" \\", r"\hline"]
        lines += [" & ".join(tex(c) for c in row) + r" \\" for row in cells]
        lines += [r"\hline", r"\end{tabulary}\end{center}"]
        return "\n".join(lines)


# to_jshtml links Font Awesome from a CDN for its button icons; the book reads offline,
# so the link is dropped (the slider and the buttons still work, the theme styles icons).
_CDN_LINK = re.compile(r"<link[^>]*font-awesome[^>]*>\s*")


def scrubber(
    draw: Callable,
    values: Sequence,
    *,
    label: str = "",
    fmt: str = "{}",
    figsize: tuple[float, float] = (7.0, 4.4),
    dpi: int = 96,
    interval: int = 500,
    legend: dict | None = None,
):
    """A slider over precomputed frames, as an ``IPython.display.HTML`` object.

    ``draw(ax, value)`` draws one frame on a cleared Axes; the frame's title is
    ``label + fmt.format(value)``, where ``fmt`` has one positional field (``"{}"``,
    ``"I = {:g}"``). The animation does not play by itself (the reader drags the slider or
    presses play), stops at the last frame, and the figure is closed so no stray static
    image follows it. Every frame is embedded as a PNG at its own pixel size, so keep
    ``len(values)`` small (<= 25); the defaults (7.0 x 4.4 inches at 96 dpi, 672 px)
    fit the book's column without scaling, so 9-pt text reads as 9 pt. Up to six frames are
    drawn a second time at :func:`print_size`, for the PDF's small multiples
    (``Scrubber._repr_png_``).

    ``legend``, a dict of keyword arguments of matplotlib's ``Figure.legend`` (``ncols``,
    ``title``...), gives every frame one shared legend outside its Axes, so that no key covers
    a point: under the frame on the page, and once under all the printed frames. Its entries
    are the labelled artists of the first frame; ``draw`` then draws no legend of its own.
    """
    import matplotlib.pyplot as plt
    from matplotlib.animation import FuncAnimation

    values = sequence("values", values, what="frame values", empty=True)
    if not values:
        raise ValueError("values must hold at least one frame value, got none")
    if len(values) > 200:
        raise ValueError(f"values must hold at most 200 frames (each is an image on the page), "
                         f"got {len(values):,}")
    if not callable(draw):
        raise ValueError(f"draw must be a function draw(ax, value), got {shorten(draw)}")
    label = text("label", label, empty=True)
    interval = integer("interval", interval, minimum=10, maximum=60_000)
    _check_fmt(fmt, values[0])
    dpi = integer("dpi", dpi, minimum=20, maximum=600)
    width, height = _inches("figsize", figsize, maximum=50)
    if legend is not None and not isinstance(legend, dict):
        raise ValueError(f"legend must be a dict of Figure.legend's keyword arguments or None, "
                         f"got {shorten(legend)}")
    fig, ax = plt.subplots(figsize=(width, height), dpi=dpi, layout="constrained")
    key = _shared_legend(fig, ax, draw, values[0], legend) if legend is not None else None

    def frame(i: int) -> None:
        ax.clear()
        draw(ax, values[i])
        ax.set_title(label + fmt.format(values[i]), fontsize=10)

    animation = FuncAnimation(fig, frame, frames=len(values), interval=interval, repeat=False)
    html = animation.to_jshtml(default_mode="once")
    plt.close(fig)
    shown = Scrubber(_CDN_LINK.sub("", html))
    shown.print_frames = _print_frames(draw, values, label, fmt, width, height)
    if key is not None:
        shown.print_key = _key_png(*key, legend, 2 * print_size(width, height)[0])
    return shown


def _shared_legend(fig, ax, draw, value, legend: dict):
    """The legend of ``draw``'s first frame, once, under the Axes of ``fig``; its entries."""
    draw(ax, value)
    handles, labels = ax.get_legend_handles_labels()
    if not handles:
        raise ValueError("legend: the first frame has no labelled artist to put in a legend")
    fig.legend(handles, labels, loc="outside lower center", **legend)
    ax.clear()
    return handles, labels


def _key_png(handles, labels, legend: dict, width: float) -> bytes:
    """A legend alone, as a PNG at 150 dpi no wider than ``width`` inches (the printed grid's)."""
    import io

    import matplotlib.pyplot as plt

    fig = plt.figure(figsize=(width, 1.0), dpi=150)
    try:
        fig.legend(handles, labels, loc="center", **legend)
        out = io.BytesIO()
        fig.savefig(out, format="png", dpi=150, bbox_inches="tight", pad_inches=0.04)
    finally:
        plt.close(fig)
    return out.getvalue()


PRINT_SCALE = 0.6
"""A print frame's size, as a share of the page's: two frames to a row across the printed column
shrink each to about 0.45 of its size, so frames drawn at 0.6 of it keep the text at about
three quarters of its size on the website, instead of under half. A frame is never drawn
narrower than ``PRINT_MIN_WIDTH`` inches (nor wider than on the page): a smaller one has no room
for its axes' labels."""

PRINT_MIN_WIDTH = 4.0


def print_size(width: float, height: float) -> tuple[float, float]:
    """The size in inches of a print frame of a scrubber whose frames are ``width`` x ``height``."""
    scale = min(1.0, max(PRINT_SCALE, PRINT_MIN_WIDTH / width))
    return width * scale, height * scale


def _print_frames(draw, values, label, fmt, width, height) -> list[bytes]:
    """The frames the PDF prints (``Scrubber.picked``), drawn anew at their :func:`print_size`."""
    return [_panel_png(draw, values[i], print_size(width, height), 150,
                       label + fmt.format(values[i]))
            for i in Scrubber.picked(len(values))]


def small_multiples(
    draw: Callable,
    panels: Sequence,
    *,
    alt: str,
    title: str = "",
    panel_size: tuple[float, float] = (3.35, 3.0),
    dpi: int = 100,
):
    """One small figure per panel, ``draw(ax, panel)`` on a fresh Axes each, as HTML.

    The panels sit side by side, two to a row in the book's column, and wrap into one column
    in a phone's, where each stays at its own size (3.35 inches at 100 dpi, 335 px, within a
    400 px window's 368 px column), so 9-pt text still reads as 9 pt. ``title`` goes above
    the panels; ``alt`` describes the whole figure for a reader who cannot see it. Printed,
    the panels form a grid of two columns.
    """
    import base64
    import html

    panels = sequence("panels", panels, what="panel values", empty=True)
    if not 1 <= len(panels) <= 12:
        raise ValueError(f"panels must hold 1 to 12 panel values, got {len(panels)}")
    if not callable(draw):
        raise ValueError(f"draw must be a function draw(ax, panel), got {shorten(draw)}")
    alt = text("alt", alt, limit=1000)
    title = text("title", title, empty=True)
    dpi = integer("dpi", dpi, minimum=20, maximum=600)
    width, height = _inches("panel_size", panel_size, maximum=20)
    images = [base64.b64encode(_panel_png(draw, panel, (width, height), dpi)).decode("ascii")
              for panel in panels]
    pixels = round(width * dpi)
    tags = "".join(
        f'<img src="data:image/png;base64,{image}" width="{pixels}" '
        f'alt="panel {i} of {len(images)}" style="max-width: 100%; height: auto">'
        for i, image in enumerate(images, start=1))
    heading = (f'<p style="text-align: center; font-weight: 600; margin: 0 0 0.4em">'
               f"{html.escape(title)}</p>") if title else ""
    shown = SmallMultiples(
        f'<figure class="small-multiples" role="img" aria-label="{html.escape(alt)}" '
        f'style="margin: 0; padding: 0">{heading}<div style="display: flex; flex-wrap: wrap; gap: 4px; '
        f'justify-content: center">{tags}</div></figure>')
    shown.panels = (draw, panels, title, (width, height))
    return shown


def _check_fmt(fmt: str, value) -> None:
    """``fmt`` must format one value with one positional field: ``"{}"`` or ``"I = {:g}"``."""
    what = "fmt must be a format string with one positional field, such as '{}' or 'I = {:g}'"
    if not isinstance(fmt, str):
        raise ValueError(f"{what}; got {shorten(fmt)}")
    try:
        fields = [f for _, f, _, _ in string.Formatter().parse(fmt) if f is not None]
    except ValueError:
        raise ValueError(f"{what}; got {shorten(fmt)} (unbalanced braces)") from None
    if fields != [""]:
        raise ValueError(f"{what}; got {shorten(fmt)} (fields {fields})")
    try:
        fmt.format(value)
    except (ValueError, TypeError) as err:
        raise ValueError(f"{what} that formats {shorten(value)}; got {shorten(fmt)} ({err})") from None


def live(fn: Callable, **controls):
    """``ipywidgets.interactive(fn, **controls)``: one widget per keyword, redrawn live.

    Controls are ipywidgets (``Dropdown``, ``FloatLogSlider``...) or anything
    ``interactive`` accepts (a list gives a dropdown, a tuple a slider).
    """
    import ipywidgets

    return ipywidgets.interactive(fn, **controls)


def html_table(rows: Sequence[dict], floatfmt: str | dict[str, str] = "{:,.1f}"):
    """Rows of dicts with the same keys as an ``IPython.display.HTML`` table.

    The table sits in its own horizontally scrolling box, so on a narrow screen it scrolls
    instead of hiding columns or widening the page.

    Floats are written with ``floatfmt``, one format for all columns or a dict from column
    name to format (other columns get ``"{:,.1f}"``); ``None`` (for example a precision a
    chip lacks) shows as a dash.
    """
    from html import escape


    rows = sequence("rows", rows, what="dicts (column name -> value)", empty=True)
    if not rows:
        raise ValueError("rows must hold at least one row, got none")
    if not all(isinstance(row, dict) for row in rows):
        bad = next(row for row in rows if not isinstance(row, dict))
        raise ValueError(f"rows must be dicts (column name -> value), got {shorten(bad)}")
    header = list(rows[0])
    for i, row in enumerate(rows):
        if set(row) != set(header):
            missing = [k for k in header if k not in row]
            extra = [k for k in row if k not in header]
            raise ValueError(
                f"rows must all have the keys of the first row, {shorten(header)}; row {i} "
                f"lacks {shorten(missing)} and adds {shorten(extra)}"
            )
    formats = floatfmt if isinstance(floatfmt, dict) else dict.fromkeys(header, floatfmt)
    for fmt in formats.values():
        _check_fmt(fmt, 1.0)

    pad = "padding: 0.15em 0.6em"

    def shown(value, column: str) -> str:
        if value is None:
            return "\u2013"
        if isinstance(value, float):
            return formats.get(column, "{:,.1f}").format(value)
        return str(value)

    cells = [[shown(row[k], k) for k in header] for row in rows]
    numeric = [all(row[k] is None or isinstance(row[k], float) for row in rows) for k in header]

    def td(text: str, right: bool) -> str:
        align = "; text-align: right" if right else ""
        return f'<td style="{pad}{align}">{escape(text)}</td>'

    head = "".join(f'<th style="{pad}">{escape(str(k))}</th>' for k in header)
    body = "".join("<tr>" + "".join(td(t, n) for t, n in zip(line, numeric, strict=True))
                   + "</tr>" for line in cells)
    # class llm-table: the first column stays in view while a wide table scrolls (book.css)
    table = (f'<table class="llm-table"><thead><tr>{head}</tr></thead>'
             f"<tbody>{body}</tbody></table>")
    html = f'<div style="overflow-x: auto; max-width: 100%">{table}</div>'
    return Table(html, [str(k) for k in header], cells, numeric)
