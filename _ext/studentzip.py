"""The student edition as a download of the website: ``downloads/student-edition.zip``.

After an HTML build, every chapter notebook is written without its solutions
(``llm_roofline.course.student``, the writer behind ``make student``) and zipped with the
requirements, so an instructor hands it out without building anything.
"""

from __future__ import annotations

import tempfile
import zipfile
from pathlib import Path

ZIP = "downloads/student-edition.zip"


def _write_zip(app, exception) -> None:
    if exception is not None or app.builder.format != "html":
        return
    from llm_roofline.course.student import write_student_edition

    root = Path(app.srcdir)
    target = Path(app.outdir) / ZIP
    target.parent.mkdir(parents=True, exist_ok=True)
    with tempfile.TemporaryDirectory() as tmp:
        written = write_student_edition(root / "notebooks", Path(tmp) / "student")
        with zipfile.ZipFile(target, "w", zipfile.ZIP_DEFLATED) as archive:
            for path in sorted(written):
                archive.write(path, f"student-edition/{path.name}")
            archive.write(root / "requirements.txt", "student-edition/requirements.txt")


def setup(app):
    app.connect("build-finished", _write_zip)
    return {"parallel_read_safe": True, "parallel_write_safe": True}
