"""apt.txt is complete, proved from what the build reads rather than from this machine's state.

A green run on a machine that happens to have a package proves nothing about the list (TeX Live's
pzdr.tfm came with texlive-fonts-recommended, which no list named). So: build the PDF, take every
system file XeLaTeX read (latexmk's recorder, the ``.fls``), every font the PDF embeds
(``pdffonts``, then fontconfig or kpsewhich) and every program the tests run, find
the Debian package that installed each (``dpkg -S``), and fail if that package is neither in
apt.txt nor pulled in by it without recommends (``apt-cache depends --recurse --no-recommends``).
tools/tex-packages.tsv, which names the package a failed TeX run lacks, must match the build.

Also the recovery of tools/pdf.py (`make book`, `make pdf`): a failed build leaves a folder that
the next build clears, and prints one line naming the missing file and its package.
"""

from __future__ import annotations

import importlib.util
import os
import shutil
import subprocess

import pytest

from conftest import ROOT

_spec = importlib.util.spec_from_file_location("pdf_tool", ROOT / "tools" / "pdf.py")
pdf = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(pdf)

# The programs the build and the tests run that come from Debian (apt.txt's reason to exist).
PROGRAMS = ("xelatex", "latexmk", "xindy", "pdftotext", "pdfinfo", "pdftoppm", "chromium", "node", "npm")
PZDR_ERROR = ("! Font \\XeTeXLink@font=pzdr at 0.00002pt not loadable: Metric (TFM) file or installed "
              "font not found.\n")


def listed(path=ROOT / "apt.txt") -> list[str]:
    return [word for line in path.read_text().splitlines() for word in line.split("#")[0].split()]


def closure(packages: list[str]) -> set[str]:
    """The packages, and every package they depend on (pre-depends included), recommends left out.
    Every alternative of an either-or dependency counts (apt-cache lists them all): a package brought
    only as a later alternative is counted as brought, so list what the book uses by name."""
    proc = subprocess.run(["apt-cache", "depends", "--recurse", "--no-recommends", "--no-suggests",
                           "--no-conflicts", "--no-breaks", "--no-replaces", "--no-enhances", *packages],
                          capture_output=True, text=True, check=True)
    return {line.strip("<>") for line in proc.stdout.splitlines() if line and not line[0].isspace()}


def uncovered(owned: dict, packages: list[str]) -> dict[str, list[str]]:
    """package -> the files it owns that the build needs, for packages the list does not bring."""
    brought = closure(packages)
    out: dict[str, list[str]] = {}
    for path, package in owned.items():
        if package not in brought:
            out.setdefault(package, []).append(os.path.basename(path))
    return out


def _need_debian():
    if shutil.which("dpkg") and shutil.which("apt-cache"):
        return
    if os.environ.get("CI") == "true":
        pytest.fail("the system-package checks need Debian's dpkg and apt-cache")
    pytest.skip("not a Debian machine: dpkg and apt-cache are missing")


@pytest.fixture(scope="module")
def pdf_inputs(built_pdf):
    _need_debian()
    files = pdf.read_files(built_pdf.parent)
    owned = pdf.build_inputs(built_pdf.parent)
    assert len(files) > 100 and len(owned) > len(files) // 2, \
        f"the PDF build's recorder lists {len(files)} system files, dpkg owns {len(owned)}"
    assert any(p.suffix == ".otf" for p in owned), "the fonts the PDF embeds are missing from the inputs"
    return owned


@pytest.mark.slow
def test_every_file_the_pdf_build_reads_comes_from_apt_txt(pdf_inputs):
    missing = uncovered(pdf_inputs, listed())
    assert not missing, "apt.txt does not bring these packages, whose files the PDF build read: " + \
        "; ".join(f"{pkg} ({', '.join(sorted(files)[:3])})" for pkg, files in sorted(missing.items()))


@pytest.mark.slow
def test_the_check_fails_when_a_needed_package_leaves_the_list(pdf_inputs):
    without = [p for p in listed() if p != "texlive-fonts-recommended"]
    missing = uncovered(pdf_inputs, without)
    assert "pzdr.tfm" in missing.get("texlive-fonts-recommended", []), missing


@pytest.mark.slow
def test_tex_packages_tsv_is_the_builds_own(built_pdf):
    _need_debian()
    recorded = pdf.record(built_pdf.parent)
    assert (ROOT / "tools" / "tex-packages.tsv").read_text() == recorded, \
        "tools/tex-packages.tsv is stale: python tools/pdf.py --record _build/latex > tools/tex-packages.tsv"


def test_every_program_the_tests_run_comes_from_apt_txt():
    _need_debian()
    absent = [p for p in PROGRAMS if shutil.which(p) is None]
    if absent:
        message = f"programs missing: {absent} (sudo apt-get install ... $(sed 's/#.*//' apt.txt))"
        if os.environ.get("CI") == "true":
            pytest.fail(message)
        pytest.skip(message)
    owned = pdf.owners([pdf.Path(shutil.which(p)).resolve() for p in PROGRAMS])
    assert len(owned) == len(PROGRAMS), f"no package owns {set(PROGRAMS) - {p.name for p in owned}}"
    missing = uncovered(owned, listed())
    assert not missing, f"apt.txt does not bring: {missing}"


def test_a_failed_tex_run_is_named_with_its_package(tmp_path):
    (tmp_path / "book.log").write_text("This is XeTeX\n" + PZDR_ERROR + "! Emergency stop.\n")
    assert pdf.missing_files(tmp_path) == ["pzdr.tfm"]
    (line,) = pdf.why(tmp_path)
    assert "pzdr.tfm is missing" in line and "texlive-fonts-recommended" in line and "apt.txt" in line
    (tmp_path / "book.log").write_text("! LaTeX Error: File `nosuch.sty' not found.\n")
    assert pdf.why(tmp_path) == ["XeLaTeX stopped: nosuch.sty is missing; `apt-file search nosuch.sty` "
                                 "names the Debian package that provides it"]


def test_a_build_after_a_failed_one_starts_afresh(tmp_path, monkeypatch, capsys):
    latex = tmp_path / "latex"
    monkeypatch.setitem(pdf.EDITIONS, "reader", ((), latex, {}))
    calls = []

    def failing(cmd, **kwargs):  # XeLaTeX stops: the log names pzdr, latexmk's records stay
        calls.append(sorted(p.name for p in latex.glob("*")) if latex.exists() else None)
        latex.mkdir(exist_ok=True)
        (latex / "book.log").write_text(PZDR_ERROR)
        (latex / "book.fdb_latexmk").write_text("stale")
        return subprocess.CompletedProcess(cmd, 1)

    def succeeding(cmd, **kwargs):
        calls.append(sorted(p.name for p in latex.glob("*")) if latex.exists() else None)
        latex.mkdir(exist_ok=True)
        (latex / "book.pdf").write_text("%PDF")
        return subprocess.CompletedProcess(cmd, 0)

    monkeypatch.setattr(pdf.subprocess, "run", failing)
    assert pdf.build("reader") == 1
    assert "pzdr.tfm is missing; it comes with Debian's texlive-fonts-recommended" in capsys.readouterr().err
    assert not (latex / pdf.STAMP).exists()
    monkeypatch.setattr(pdf.subprocess, "run", succeeding)
    assert pdf.build("reader") == 0
    assert calls == [None, None], "the second build must not see the failed build's records"
    assert (latex / pdf.STAMP).exists()
    assert pdf.build("reader") == 0 and calls[-1] == ["book.pdf"], "a good build is kept"
