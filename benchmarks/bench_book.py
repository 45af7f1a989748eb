"""How long the book takes: executing every notebook, a cold build, and a rebuild with nothing changed.

Prints JSON. The targets (issue: foundation) are all notebooks under 120 s on 2 cores and a
no-change rebuild under 20 s, which the execution cache makes possible.

    .venv/bin/python benchmarks/bench_book.py
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

ROOT = Path(__file__).resolve().parent.parent
BIN = Path(sys.executable).parent


def timed(cmd: list[str]) -> float:
    start = time.perf_counter()
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True)
    elapsed = time.perf_counter() - start
    if proc.returncode:
        sys.exit(f"{' '.join(cmd)} failed:\n{(proc.stdout + proc.stderr)[-3000:]}")
    return elapsed


def main() -> None:
    notebooks = sorted((ROOT / "notebooks").glob("*.ipynb"))
    per_notebook = {
        nb.name: round(timed([sys.executable, str(ROOT / "tests" / "run_notebook.py"), str(nb)]), 2)
        for nb in notebooks
    }
    with tempfile.TemporaryDirectory() as out:
        build = [str(BIN / "jupyter-book"), "build", str(ROOT), "--path-output", out,
                 "--builder", "html", "--warningiserror", "--keep-going"]
        cold = timed(build)
        cached = timed(build)
    total = sum(per_notebook.values())
    print(json.dumps({
        "cpu_count": os.cpu_count(),
        "notebooks_s": per_notebook,
        "notebooks_total_s": round(total, 2),
        "cold_build_s": round(cold, 2),
        "cached_rebuild_s": round(cached, 2),
        "targets": {"notebooks_total_s": 120, "cached_rebuild_s": 20},
        "within_targets": total < 120 and cached < 20,
    }, indent=2))


if __name__ == "__main__":
    main()
