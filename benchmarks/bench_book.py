"""How long the book takes: executing every notebook, a cold build, and a rebuild with nothing changed.

Prints JSON. The targets (issue: foundation) are all notebooks under 120 s on 2 cores and a
no-change rebuild under 20 s, which the execution cache makes possible. At its defaults it runs
for several minutes; ``--smoke`` checks the tools it calls and prints the plan without running
them (seconds: CI), ``--notebooks PATTERN`` times only some notebooks, ``--no-build`` skips the
builds.

    .venv/bin/python benchmarks/bench_book.py [--notebooks '0[12]_*'] [--no-build] [--smoke]
"""

from __future__ import annotations

import argparse
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


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--notebooks", default="*", help="glob of the notebooks to time (default: all)")
    ap.add_argument("--no-build", action="store_true", help="time the notebooks only")
    ap.add_argument("--smoke", action="store_true",
                    help="check the tools and print the plan, run nothing (seconds: CI)")
    args = ap.parse_args(argv)
    notebooks = sorted((ROOT / "notebooks").glob(f"{args.notebooks}.ipynb"
                                                 if not args.notebooks.endswith(".ipynb")
                                                 else args.notebooks))
    if not notebooks:
        ap.error(f"--notebooks {args.notebooks!r} matches no notebook in notebooks/")
    book = BIN / "jupyter-book"
    runner = ROOT / "tests" / "run_notebook.py"
    if args.smoke:
        missing = [str(p) for p in (book, runner) if not p.exists()]
        return {"smoke": True, "cpu_count": os.cpu_count(), "tools_missing": missing,
                "would_time": [nb.name for nb in notebooks],
                "would_build": not args.no_build}
    per_notebook = {
        nb.name: round(timed([sys.executable, str(ROOT / "tests" / "run_notebook.py"), str(nb)]), 2)
        for nb in notebooks
    }
    cold = cached = None
    if not args.no_build:
        with tempfile.TemporaryDirectory() as out:
            build = [str(book), "build", str(ROOT), "--path-output", out,
                     "--builder", "html", "--warningiserror", "--keep-going"]
            cold = round(timed(build), 2)
            cached = round(timed(build), 2)
    total = sum(per_notebook.values())
    return {
        "cpu_count": os.cpu_count(),
        "notebooks_s": per_notebook,
        "notebooks_total_s": round(total, 2),
        "cold_build_s": cold,
        "cached_rebuild_s": cached,
        "targets": {"notebooks_total_s": 120, "cached_rebuild_s": 20},
        "within_targets": total < 120 and (cached is None or cached < 20),
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
