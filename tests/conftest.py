"""Shared fixtures: where things are, and the built book (built once per test session)."""

from __future__ import annotations

import os
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"


def toc_files() -> list[str]:
    """Every file named in _toc.yml (without suffix), root first, in reading order."""
    toc = yaml.safe_load((ROOT / "_toc.yml").read_text())
    files = [toc["root"]]

    def walk(entries):
        for entry in entries or []:
            if "file" in entry:
                files.append(entry["file"])
            walk(entry.get("sections"))

    for part in toc.get("parts", []):
        walk(part.get("chapters"))
    return files


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


@pytest.fixture(scope="session")
def built_book() -> Path:
    """Build the book exactly as `make book` does (warnings are errors) and return _build/html."""
    cmd = [
        str(Path(sys.executable).parent / "jupyter-book"),
        "build", str(ROOT), "--builder", "html", "--warningiserror", "--nitpick", "--keep-going",
    ]
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env=os.environ.copy())
    log = proc.stdout + proc.stderr
    (ROOT / "_build").mkdir(exist_ok=True)
    (ROOT / "_build" / "build.log").write_text(log)
    assert proc.returncode == 0, f"jupyter-book build failed (see _build/build.log):\n{log[-6000:]}"
    return HTML
