"""The PDF edition as a download of the website: ``downloads/physics-of-llm-inference.pdf``.

``make book`` builds the PDF first (``_build/latex``, which also warms the execution cache),
then the website. When the HTML build finds the PDF, this extension copies it into the site
and the left sidebar shows a link to it (``_ext/templates/pdf-edition.html``, listed in
``html_sidebars``). ``make html`` builds the website alone, for a machine without TeX: with no
PDF there is no link, rather than one that leads nowhere. When the PDF appears or goes between
two builds, every page is written again, so that no page keeps the other state.
"""

from __future__ import annotations

import shutil
from pathlib import Path

FOLDER = "downloads"


def pdf_name(config) -> str:
    """The PDF's file name: the LaTeX target's, ``.tex`` made ``.pdf``."""
    return Path(config.latex_documents[0][1]).with_suffix(".pdf").name


def _source(app) -> Path:
    return Path(app.outdir).parent / "latex" / pdf_name(app.config)


def _copy(app, env, added=(), changed=(), removed=()) -> list[str]:
    """Copy the PDF into the site when the HTML build starts reading (Jupyter Book names the PDF,
    ``latex_documents``, after the builder is made), or remove a stale copy when there is no PDF.
    When the link appears or goes, every page is read and written again to show it or drop it."""
    if getattr(app.builder, "format", "") != "html":
        return []
    target = Path(app.outdir) / FOLDER / pdf_name(app.config)
    source = _source(app)
    if source.is_file():
        target.parent.mkdir(parents=True, exist_ok=True)
        shutil.copyfile(source, target)
        href = f"{FOLDER}/{target.name}"
    else:
        target.unlink(missing_ok=True)
        href = None
    before = getattr(env, "pdf_edition", "unknown")
    env.pdf_edition = href
    return sorted(env.found_docs) if before != href else []


def _link(app, pagename, templatename, context, doctree) -> None:
    href = getattr(app.env, "pdf_edition", None)
    context["pdf_edition"] = context["pathto"](href, 1) if href else None


def setup(app):
    app.connect("env-get-outdated", _copy)
    app.connect("html-page-context", _link)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
