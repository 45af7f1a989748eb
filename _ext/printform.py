"""The print edition hides what the website collapses.

On the website a cell tagged ``hide-input`` shows its output and folds its code behind a
toggle; paper has no toggle, so the LaTeX builder drops that code and keeps the output, as
``remove-input`` would. Cells tagged ``remove-cell`` or ``remove-input`` are already gone
from every builder's document (MyST-NB).
"""

from __future__ import annotations

from docutils import nodes


def _drop_folded_code(app, doctree, docname) -> None:
    if app.builder.format != "latex":
        return
    for cell in list(doctree.findall(nodes.container)):
        if "tag_hide-input" not in cell.get("classes", []):
            continue
        for child in list(cell.children):
            if isinstance(child, nodes.container) and "cell_input" in child.get("classes", []):
                cell.remove(child)


def setup(app):
    app.connect("doctree-resolved", _drop_folded_code)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
