"""The print edition: what the website collapses is hidden, and print forms are typeset.

On the website a cell tagged ``hide-input`` shows its output and folds its code behind a
toggle; paper has no toggle, so the LaTeX builder drops that code and keeps the output, as
``remove-input`` would. Cells tagged ``remove-cell`` or ``remove-input`` are already gone
from every builder's document (MyST-NB).

MyST-NB typesets every ``text/latex`` output as display math. The print forms of the book's
tables and hints (``course.widgets.Table``, ``course.registry.Hint``) are text, not math: they
begin with the line ``%print``, and this extension passes them to LaTeX as they are.

The live calculator (``book/calculator.md``) cannot run on paper. Its print form is a worked
example: the directive ``calculator-example`` runs the library's command line,
``llm-roofline estimate ...``, with the arguments it is given, when the book is built, and sets
the command and what it prints as literal text (the page holds it in an ``{only} latex`` block,
so the website does not show it).

A figure's caption is the paragraph after it that starts **Figure C.k.** (CONTRIBUTING.md). On
paper it stays on the figure's page: no page break between the figure and its caption, nor
inside the caption; where both do not fit, they move to the next page together.

The student edition of the PDF (``make pdf-student``) is the same build with the environment
variable ``BOOK_EDITION=student``: every worked solution (the gated ``solution-start`` ...
``solution-end`` run, merged by sphinx-exercise into one solution node, and any cell tagged
``solution``) is removed, and the file is ``physics-of-llm-inference-student.pdf``.
sphinx-exercise's own ``hide_solutions`` is not enough: it drops a gated solution's title but
leaves the text and code cells between its start and its end.
"""

from __future__ import annotations

import contextlib
import io
import os
import re
import shlex
from pathlib import Path

from docutils import nodes
from sphinx.util.docutils import SphinxDirective
from sphinx_exercise.nodes import solution_node

from llm_roofline import cli
from llm_roofline.course.widgets import PRINT_MARK as MARK

STUDENT = os.environ.get("BOOK_EDITION", "") == "student"


def _drop_folded_code(app, doctree, docname) -> None:
    if app.builder.format != "latex":
        return
    for cell in list(doctree.findall(nodes.container)):
        if "tag_hide-input" not in cell.get("classes", []):
            continue
        for child in list(cell.children):
            if isinstance(child, nodes.container) and "cell_input" in child.get("classes", []):
                cell.remove(child)



CAPTION = re.compile(r"Figure \d+\.\d+\.$")
KEEP = r"\nopagebreak\begingroup\interlinepenalty=10000"  # no break before the caption, nor in it


def is_caption(node) -> bool:
    """A paragraph that starts with a bold "Figure C.k." (MyST may put an empty text node first)."""
    if not isinstance(node, nodes.paragraph):
        return False
    first = next((child for child in node.children
                  if not (isinstance(child, nodes.Text) and not child.strip())), None)
    return isinstance(first, nodes.strong) and bool(CAPTION.match(first.astext().strip()))


def _keep_captions_with_figures(app, doctree, docname) -> None:
    if app.builder.format != "latex":
        return
    for caption in [p for p in doctree.findall(nodes.paragraph) if is_caption(p)]:
        parent = caption.parent
        at = parent.index(caption)
        parent.insert(at + 1, nodes.raw("", "\n\\par\\endgroup\n", format="latex"))
        parent.insert(at, nodes.raw("", "\n" + KEEP + "\n", format="latex"))


def _typeset_print_forms(app, doctree, docname) -> None:
    if app.builder.format != "latex":
        return
    for block in list(doctree.findall(nodes.math_block)):
        text = block.astext()
        if "text_latex" in block.get("classes", []) and text.startswith(MARK):
            block.replace_self(nodes.raw("", text[len(MARK):], format="latex"))


def _student_cache(app, config) -> None:
    """The student edition is built under _build/student: it reads the main build's execution cache."""
    if STUDENT and not config.nb_execution_cache_path:
        config.nb_execution_cache_path = str(Path(app.srcdir) / "_build" / ".jupyter_cache")


def _student_file(app, env, docnames) -> None:
    """The student edition's file name and title page. Jupyter Book sets ``latex_documents`` after
    the configuration is read, so it is renamed here, when the build starts reading."""
    if not STUDENT:
        return
    docs = []
    for start, target, title, *rest in app.config.latex_documents:
        if not target.endswith("-student.tex"):
            target, title = target.removesuffix(".tex") + "-student.tex", f"{title} (student edition)"
        docs.append((start, target, title, *rest))
    app.config.latex_documents = docs


def _drop_solutions(app, doctree) -> None:
    if not STUDENT:
        return
    for node in list(doctree.findall(solution_node)):
        node.parent.remove(node)
    for cell in list(doctree.findall(nodes.container)):
        if "tag_solution" in cell.get("classes", []) and cell.parent is not None:
            cell.parent.remove(cell)


class CalculatorExample(SphinxDirective):
    """``llm-roofline <arguments>`` run at build time: the command and its output, as literal text."""

    required_arguments = 1
    final_argument_whitespace = True

    def run(self):
        argv = shlex.split(self.arguments[0])
        out = io.StringIO()
        with contextlib.redirect_stdout(out):
            code = cli.main(argv)
        if code:
            raise self.error(f"llm-roofline {self.arguments[0]} failed: {out.getvalue()}")
        command = nodes.literal_block(text="$ llm-roofline " + " \\\n    ".join(_lines(argv)))
        report = nodes.literal_block(text=out.getvalue().rstrip())
        for block in (command, report):
            block["language"] = "text"
        report["classes"].append("calculator-example")
        return [command, report]


def _lines(argv: list[str]) -> list[str]:
    """The arguments two options to a line, so that the command fits the page."""
    words, lines = [shlex.quote(a) for a in argv], []
    head = words.pop(0)
    pairs = []
    while words:
        pairs.append(" ".join(words[:2]) if len(words) > 1 and not words[1].startswith("--")
                     else words[0])
        words = words[2:] if len(words) > 1 and not words[1].startswith("--") else words[1:]
    lines.append(head)
    for i in range(0, len(pairs), 3):
        lines.append(" ".join(pairs[i:i + 3]))
    return [lines[0] + " " + lines[1], *lines[2:]] if len(lines) > 1 else lines


def setup(app):
    app.connect("config-inited", _student_cache)
    app.connect("env-before-read-docs", _student_file)
    app.connect("doctree-read", _drop_solutions)
    app.add_directive("calculator-example", CalculatorExample)
    app.connect("doctree-resolved", _drop_folded_code)
    app.connect("doctree-resolved", _typeset_print_forms)
    app.connect("doctree-resolved", _keep_captions_with_figures)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
