"""The student edition of the chapter notebooks: the same notebooks with every solution removed.

A solution is a run of cells tagged ``solution`` (the gated ``{solution-start}`` ...
``{solution-end}`` markdown cells and the code cells between them). Outputs are cleared too,
so students start from a clean notebook.

    python -m llm_roofline.student notebooks/ _build/student/
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

SOLUTION_TAG = "solution"


def strip_solutions(nb: dict) -> dict:
    """Return a copy of the notebook (nbformat 4 JSON as a dict) without solution cells or outputs."""
    if not isinstance(nb, dict) or "cells" not in nb:
        raise ValueError("expected a notebook: a dict with a 'cells' list (nbformat 4 JSON)")
    cells = []
    for cell in nb["cells"]:
        if SOLUTION_TAG in cell.get("metadata", {}).get("tags", []):
            continue
        cell = dict(cell)
        if cell.get("cell_type") == "code":
            cell["outputs"], cell["execution_count"] = [], None
        cells.append(cell)
    return {**nb, "cells": cells}


def write_student_edition(src: Path, dest: Path) -> list[Path]:
    """Write the student edition of every notebook in ``src`` into ``dest``; return the paths written."""
    src, dest = Path(src), Path(dest)
    notebooks = sorted(src.glob("*.ipynb"))
    if not notebooks:
        raise ValueError(f"no notebooks (*.ipynb) in {src}")
    dest.mkdir(parents=True, exist_ok=True)
    written = []
    for path in notebooks:
        out = dest / path.name
        out.write_text(json.dumps(strip_solutions(json.loads(path.read_text())), indent=1) + "\n")
        written.append(out)
    return written


def main(argv: list[str] | None = None) -> None:
    parser = argparse.ArgumentParser(prog="python -m llm_roofline.student",
                                     description=__doc__.splitlines()[0])
    parser.add_argument("src", type=Path, help="folder of chapter notebooks, e.g. notebooks/")
    parser.add_argument("dest", type=Path, help="folder to write the student edition into")
    args = parser.parse_args(argv)
    try:
        written = write_student_edition(args.src, args.dest)
    except ValueError as err:
        parser.error(str(err))
    for path in written:
        print(path)


if __name__ == "__main__":
    main()
