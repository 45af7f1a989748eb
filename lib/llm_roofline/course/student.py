"""The student edition of the chapter notebooks: the same notebooks with every solution removed.

A solution is a run of cells tagged ``solution`` (the gated ``{solution-start}`` ...
``{solution-end}`` markdown cells and the code cells between them). Outputs are cleared too,
so students start from a clean notebook.

    python -m llm_roofline.course.student notebooks/ _build/student/

The writer never loses a file (the gate of :func:`llm_roofline.validate.destination` and
:func:`~llm_roofline.validate.write_output`, shared by every writer of the library): it refuses
a destination that is its source folder (or inside it, or holds it) or is not a folder name
(``""`` is not the current folder), replaces a same-named file only if it is a student edition
it wrote itself (marked in the notebook's metadata) or with ``--force``, writes each file to a
temporary file renamed into place, and reads and checks every notebook before it writes any,
so an invalid notebook is named and nothing is half-written.
"""

from __future__ import annotations

import json
from pathlib import Path

from ..validate import (
    OneLineParser,
    _shown,
    boolean,
    destination,
    read_json,
    replaceable,
    shorten,
    source_folder,
    write_output,
)

__all__ = ["SOLUTION_TAG", "main", "strip_solutions", "write_student_edition"]

SOLUTION_TAG = "solution"


def strip_solutions(nb: dict) -> dict:
    """Return a copy of the notebook (nbformat 4 JSON as a dict) without solution cells or outputs."""
    if not isinstance(nb, dict) or not isinstance(nb.get("cells"), list):
        raise ValueError("expected a notebook: a dict with a 'cells' list (nbformat 4 JSON)")
    cells = []
    for i, cell in enumerate(nb["cells"]):
        if not isinstance(cell, dict) or "cell_type" not in cell:
            raise ValueError(f"cell {i} is not a notebook cell (a dict with a 'cell_type')")
        metadata = cell.get("metadata", {})
        if not isinstance(metadata, dict):
            raise ValueError(f"cell {i} metadata must be an object, got {shorten(metadata)}")
        tags = metadata.get("tags", [])
        if not isinstance(tags, list) or not all(isinstance(t, str) for t in tags):
            raise ValueError(f"cell {i} metadata.tags must be a list of strings, got "
                             f"{shorten(tags)}")
        if SOLUTION_TAG in tags:  # an exact tag: "nosolution" is another tag
            continue
        cell = dict(cell)
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    return {**nb, "cells": cells}


def _read(path: Path) -> dict:
    try:
        notebook = read_json("notebook", path)  # capped, strict JSON (no NaN), depth-safe
        return strip_solutions(notebook)
    except ValueError as err:
        reason = str(err).splitlines()[0] if str(err) else type(err).__name__
        raise ValueError(f"{_p(path)} is not a valid notebook: {reason}") from None


def _p(path) -> str:
    """A path for a message: as it is when short and printable, else quoted and shortened."""
    text = str(path)
    return text if len(text) <= 100 and text.isprintable() else _shown(text)


MARK = "llm_roofline.course.student"
"""The student edition's signature, in each notebook's metadata (``"written_by"``): a notebook
that carries it is the writer's own and is replaced on the next run; any other file of the same
name is left alone unless ``force``."""

_MARKER = f'"written_by": "{MARK}"'


def write_student_edition(src: Path, dest: Path, *, force: bool = False) -> list[Path]:
    """Write the student edition of every notebook in ``src`` into ``dest``; return the paths written.

    ``dest`` may not be ``src``, inside it, or hold it. A file already in ``dest`` is replaced
    only if it is the writer's own (a student edition, marked in its metadata) or with
    ``force=True``. Every notebook is read and checked before any is written, and each is
    written to a temporary file first and then renamed, so a failure leaves no partial file.
    """
    force = boolean("force", force)
    src = source_folder("source folder", src)
    try:
        notebooks = sorted(p for p in src.glob("*.ipynb") if p.is_file())
    except OSError as err:
        raise ValueError(f"cannot read {_p(src)}: {err.strerror or err}") from None
    if not notebooks:
        raise ValueError(f"no notebooks (*.ipynb) in {_p(src)}")
    try:
        dest = destination("destination", dest, sources=[src])
    except ValueError as err:
        if "overlaps" in str(err):
            raise ValueError(
                f"destination {_p(dest)} is the source folder {_p(src)} or overlaps it: the "
                "student edition would overwrite the notebooks with their solutions; choose "
                "another folder") from None
        raise
    editions = {path.name: _read(path) for path in notebooks}  # all checked before any is written
    texts = {}
    for name, nb in editions.items():
        nb["metadata"] = {**(nb.get("metadata") or {}), "written_by": MARK}
        try:
            texts[name] = json.dumps(nb, indent=1, ensure_ascii=False, allow_nan=False) + "\n"
        except (ValueError, TypeError, RecursionError) as err:
            raise ValueError(f"{_p(src / name)} is not a valid notebook: {err}") from None
    refused = []
    for name in texts:
        try:
            replaceable("the student edition's file", dest / name, marker=_MARKER, force=force)
        except ValueError as err:
            if "cannot be replaced" in str(err):
                raise
            refused.append(dest / name)
    if refused:
        names = ", ".join(_p(p.name) for p in refused)
        raise ValueError(f"{_p(dest)} already holds {names}, not written by the student edition: "
                         "use --force to overwrite")
    written = []
    try:
        dest.mkdir(parents=True, exist_ok=True)
    except OSError as err:
        raise ValueError(f"cannot write the student edition into {_p(dest)}: "
                         f"{err.strerror or type(err).__name__}") from None
    for name, text in texts.items():
        written.append(write_output("the student edition's file", dest / name, text,
                                    marker=_MARKER, force=True))
    return written


class _Parser(OneLineParser):
    """The student edition's command line: one-line errors, exit code 2."""

    label = "llm_roofline.course.student"


def main(argv: list[str] | None = None) -> None:
    parser = _Parser(prog="python -m llm_roofline.course.student",
                     description=__doc__.splitlines()[0])
    parser.add_argument("src", help="folder of chapter notebooks, e.g. notebooks/")
    parser.add_argument("dest",
                        help="folder to write the student edition into (not the source folder)")
    parser.add_argument("--force", action="store_true",
                        help="overwrite notebooks of the same name already in DEST (default: refuse)")
    args = parser.parse_args(argv)
    try:
        written = write_student_edition(args.src, args.dest, force=args.force)
    except ValueError as err:
        parser.error(str(err))
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
