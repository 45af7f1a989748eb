"""Shared fixtures: where things are, and the built book (built once per test session)."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest
import yaml

ROOT = Path(__file__).resolve().parent.parent
HTML = ROOT / "_build" / "html"
SCREENSHOTS = ROOT / "_build" / "screenshots"
PDF = ROOT / "_build" / "latex" / "physics-of-llm-inference.pdf"
STUDENT_PDF = ROOT / "_build" / "student" / "_build" / "latex" / "physics-of-llm-inference-student.pdf"
TEX_TOOLS = ("xelatex", "latexmk", "xindy", "pdftotext", "pdfinfo")


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


def offline_prefix() -> list[str]:
    """A command prefix that runs in a new network namespace with only loopback (a kernel talks
    to its client over it), so that a notebook reaching for the network fails; empty where no
    namespace can be made, except in CI, where that fails the test."""
    if shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
    if os.environ.get("CI") == "true":
        pytest.fail("cannot create a network namespace to execute notebooks offline")
    return []


def notebooks() -> list[Path]:
    return sorted((ROOT / "notebooks").glob("*.ipynb"))


def tex_missing() -> list[str]:
    """The TeX Live and poppler tools the PDF edition needs that this machine lacks."""
    return [tool for tool in TEX_TOOLS if shutil.which(tool) is None]


def _run(cmd: list[str], log: str, env: dict | None = None) -> None:
    proc = subprocess.run(cmd, cwd=ROOT, capture_output=True, text=True, env={**os.environ, **(env or {})})
    text = proc.stdout + proc.stderr
    (ROOT / "_build").mkdir(exist_ok=True)
    (ROOT / "_build" / log).write_text(text)
    assert proc.returncode == 0, f"{' '.join(cmd[-3:])} failed (see _build/{log}):\n{text[-6000:]}"


def _jupyter_book(*args: str, log: str) -> None:
    _run([str(Path(sys.executable).parent / "jupyter-book"), "build", str(ROOT), *args], log)


def _pdf(*args: str, log: str) -> None:
    """The PDF as `make pdf` (or `make pdf-student`) builds it: tools/pdf.py."""
    _run([sys.executable, str(ROOT / "tools" / "pdf.py"), *args], log)


def _need_tex() -> None:
    missing = tex_missing()
    if missing:
        message = f"the PDF edition needs TeX Live and poppler-utils; missing: {', '.join(missing)}"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)


@pytest.fixture(scope="session")
def built_pdf() -> Path:
    """Build the PDF edition as `make book` does first (XeLaTeX, warnings as errors); return its path.

    Skipped on a machine without TeX Live (failed under CI). It executes the notebooks into the
    jupyter cache (_build/.jupyter_cache) that the website's build then reads, and the other way
    round: whichever runs first warms the cache for the other."""
    _need_tex()
    _pdf(log="build-pdf.log")
    assert PDF.is_file(), f"{PDF} was not written"
    return PDF


@pytest.fixture(scope="session")
def built_student_pdf(built_pdf) -> Path:
    """`make pdf-student`: the PDF without worked solutions (after the PDF: the cache is warm)."""
    _pdf("--student", log="build-student-pdf.log")
    assert STUDENT_PDF.is_file(), f"{STUDENT_PDF} was not written"
    return STUDENT_PDF


@pytest.fixture(scope="session")
def built_book(request) -> Path:
    """Build the book exactly as `make book` does and return _build/html: the PDF first, then the
    website with warnings as errors, which copies the PDF in and links it. Without TeX Live (and
    not under CI) the website is built alone, as `make html` does, with no PDF link."""
    if not tex_missing() or os.environ.get("CI") == "true":
        request.getfixturevalue("built_pdf")
    _jupyter_book("--builder", "html", "--warningiserror", "--nitpick", "--keep-going", log="build.log")
    return HTML
