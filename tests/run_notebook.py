"""Execute one notebook top to bottom in a fresh kernel; exit non-zero on the first error, on
any warning printed into an output (a page shows its outputs: a warning there is a defect), or
on a figure whose smallest text would be drawn under MIN_PHONE_PX on a phone.

A figure on the website scales down to the text column, 368 CSS px wide in a 400 px window
(measured in Chromium), so a figure drawn wider than that shrinks its text too. Before the
notebook runs, a cell the page never sees wraps ``plt.show`` and the canvas's
``print_figure`` (a scrubber saves its frames with it) to record, for every figure shown, its
smallest visible text (points at the figure's dpi) and its width in pixels as drawn.

Used by test_launch.py inside a network namespace with no route out, so a notebook that
reaches for the network fails.  Usage: python run_notebook.py NOTEBOOK
"""

import json
import sys
from pathlib import Path

import nbformat
from nbclient import NotebookClient

PHONE_COLUMN_PX = 368  # the text column of a 400 px window
MIN_PHONE_PX = 6.5     # the smallest figure text a phone may show ("about 7 CSS px")
MARK = "FIGURE-TEXT-SIZES:"

RECORD = '''
import matplotlib, matplotlib.pyplot as _plt
from matplotlib.backend_bases import FigureCanvasBase as _Canvas
from matplotlib.text import Text as _Text
_figure_text = []

def _record(fig, dpi=None, tight=True):
    dpi = float(dpi or fig.dpi)
    sizes = [t.get_fontsize() for t in fig.findobj(_Text)
             if t.get_visible() and t.get_text().strip() and t.get_alpha() != 0]
    if not sizes:
        return
    renderer = fig.canvas.get_renderer()
    width = (fig.get_tightbbox(renderer).width if tight else fig.get_size_inches()[0]) * dpi
    entry = {"cell": get_ipython().execution_count, "pt": min(sizes),
             "px": min(sizes) * dpi / 72, "width": width}
    if entry not in _figure_text:  # a scrubber saves each of its frames
        _figure_text.append(entry)

_show = _plt.show
def _recording_show(*args, **kwargs):
    figures = [_plt.figure(number) for number in _plt.get_fignums()]
    for fig in figures:
        _record(fig)
    result = _show(*args, **kwargs)
    for fig in figures:  # as the inline backend does once it has shown them
        _plt.close(fig)
    return result
_plt.show = _recording_show

_print_figure = _Canvas.print_figure
def _recording_print_figure(self, *args, **kwargs):
    dpi = kwargs.get("dpi")
    _record(self.figure, None if dpi in (None, "figure") else dpi, kwargs.get("bbox_inches") == "tight")
    return _print_figure(self, *args, **kwargs)
_Canvas.print_figure = _recording_print_figure
'''

path = Path(sys.argv[1])
nb = nbformat.read(path, as_version=4)
code_cells = [i for i, cell in enumerate(nb.cells) if cell.cell_type == "code"]
nb.cells.insert(0, nbformat.v4.new_code_cell(RECORD))
nb.cells.append(nbformat.v4.new_code_cell(f'import json; print("{MARK}" + json.dumps(_figure_text))'))
resources = {"metadata": {"path": str(path.parent)}}
NotebookClient(nb, timeout=120, kernel_name="python3", resources=resources).execute()
recorded = "".join(out.get("text", "") for out in nb.cells[-1].outputs if out.get("output_type") == "stream")
figures = json.loads(recorded.split(MARK, 1)[1])
nb.cells = nb.cells[1:-1]

warnings = [
    (i, line)
    for i, cell in enumerate(nb.cells) if cell.cell_type == "code"
    for out in cell.get("outputs", []) if out.get("output_type") == "stream"
    and out.get("name") == "stderr"
    for line in out.get("text", "").splitlines() if "Warning" in line
]
small = {}
for fig in figures:
    shown = fig["px"] * min(1.0, PHONE_COLUMN_PX / fig["width"])
    # while a cell runs the kernel already counts the next one; execution 1 records
    cell = code_cells[fig["cell"] - 3]
    if shown < MIN_PHONE_PX - 1e-9:
        small[cell] = (f"cell {cell}: a figure {fig['width']:.0f} px wide with {fig['pt']:g}-pt "
                       f"text shows it at {shown:.1f} CSS px in a 400 px window "
                       f"(under {MIN_PHONE_PX})")
for i, line in warnings:
    print(f"{path.name}: cell {i} prints a warning: {line[:300]}")
for message in small.values():
    print(f"{path.name}: {message}")
if warnings or small:
    sys.exit(1)
print(f"{path.name}: {len(code_cells)} code cells executed, no warning, "
      f"{len(figures)} figures legible on a phone")
