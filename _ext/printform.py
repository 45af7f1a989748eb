"""The print edition: what the website collapses is hidden, and print forms are typeset.

On the website a cell tagged ``hide-input`` shows its output and folds its code behind a
toggle; paper has no toggle, so the LaTeX builder drops that code and keeps the output, as
``remove-input`` would. Cells tagged ``remove-cell`` or ``remove-input`` are already gone
from every builder's document (MyST-NB).

MyST-NB typesets every ``text/latex`` output as display math. The print forms of the book's
tables and hints (``course.widgets.Table``, ``course.registry.Hint``) are text, not math: they
begin with the line ``%print``, and this extension passes them to LaTeX as they are.
"""

from __future__ import annotations

from docutils import nodes

from llm_roofline.course.widgets import PRINT_MARK as MARK


def _drop_folded_code(app, doctree, docname) -> None:
    if app.builder.format != "latex":
        return
    for cell in list(doctree.findall(nodes.container)):
        if "tag_hide-input" not in cell.get("classes", []):
            continue
        for child in list(cell.children):
            if isinstance(child, nodes.container) and "cell_input" in child.get("classes", []):
                cell.remove(child)



def _typeset_print_forms(app, doctree, docname) -> None:
    if app.builder.format != "latex":
        return
    for block in list(doctree.findall(nodes.math_block)):
        text = block.astext()
        if "text_latex" in block.get("classes", []) and text.startswith(MARK):
            block.replace_self(nodes.raw("", text[len(MARK):], format="latex"))


def setup(app):
    app.connect("doctree-resolved", _drop_folded_code)
    app.connect("doctree-resolved", _typeset_print_forms)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
