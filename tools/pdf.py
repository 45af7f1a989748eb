"""Build the PDF edition as `make book` does, recover from a failed build, and say what TeX lacks.

    python tools/pdf.py [--student]      build _build/latex (or the student edition's) with XeLaTeX
    python tools/pdf.py --why DIR        one line per file a failed TeX run in DIR could not find
    python tools/pdf.py --record DIR     the TeX Live files and fonts a good build in DIR read,
                                         with the Debian package of each (tools/tex-packages.tsv
                                         is this, kept current by tests/test_system_packages.py)

A build that fails leaves latexmk's records behind, and the next run then answers "Nothing to do
... All targets are up-to-date" although no PDF was written. So a good build leaves a stamp
(``.built``) in its LaTeX folder, and a build that finds the folder without one starts from an
empty folder: the notebooks' results stay in the execution cache, so only LaTeX runs again.

When XeLaTeX stops on a file it cannot find (a font metric such as ``pzdr.tfm``, a ``.sty``), the
build prints one line naming the file and the Debian package that provides it, read from
tools/tex-packages.tsv: the files a complete build reads, each with its package.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PACKAGES = ROOT / "tools" / "tex-packages.tsv"
STAMP = ".built"
EDITIONS = {  # edition -> (the jupyter-book arguments, the LaTeX folder, the environment)
    "reader": ((), ROOT / "_build" / "latex", {}),
    "student": (("--path-output", str(ROOT / "_build" / "student")),
                ROOT / "_build" / "student" / "_build" / "latex", {"BOOK_EDITION": "student"}),
}
MISSING = (  # what a TeX log says when it cannot find a file, and the file's name from it
    (re.compile(r"^! Font \\\S+?=(\S+?)(?::\S*)? at \S+ not loadable: Metric \(TFM\) file", re.M),
     lambda name: f"{name}.tfm"),
    (re.compile(r"^! (?:LaTeX|Package \w+) Error: File `([^']+)' not found", re.M), lambda name: name),
    (re.compile(r'^! Package fontspec Error: The font "([^"]+)" cannot be found', re.M),
     lambda name: name),
    (re.compile(r"^! I can't find file `([^']+)'", re.M), lambda name: name),
)


def known_packages() -> dict[str, str]:
    """tools/tex-packages.tsv: file name -> the Debian package that ships it."""
    rows = (line.split("\t") for line in PACKAGES.read_text().splitlines()
            if line.strip() and not line.startswith("#"))
    return {name: package for name, package in rows}


def missing_files(latex_dir: Path) -> list[str]:
    """The files the TeX runs in ``latex_dir`` stopped on, in the order their logs name them."""
    found: list[str] = []
    for log in sorted(Path(latex_dir).glob("*.log")):
        text = log.read_text(errors="replace")
        for pattern, name in MISSING:
            for match in pattern.finditer(text):
                if name(match.group(1)) not in found:
                    found.append(name(match.group(1)))
    return found


def why(latex_dir: Path) -> list[str]:
    """One line per missing file: what it is and how to install it."""
    packages = known_packages()
    lines = []
    for name in missing_files(latex_dir):
        package = packages.get(name)
        if package:
            lines.append(f"XeLaTeX stopped: {name} is missing; it comes with Debian's {package}, listed in "
                         "apt.txt: sudo apt-get install --no-install-recommends $(sed 's/#.*//' apt.txt)")
        else:
            lines.append(f"XeLaTeX stopped: {name} is missing; `apt-file search {name}` names the Debian "
                         "package that provides it")
    return lines


def read_files(latex_dir: Path) -> list[Path]:
    """Every system file (outside the build folder) the TeX runs in ``latex_dir`` read: latexmk's
    recorder (``.fls``, on by default) lists them as INPUT lines."""
    latex_dir = Path(latex_dir).resolve()
    files: set[Path] = set()
    for fls in latex_dir.glob("*.fls"):
        for line in fls.read_text(errors="replace").splitlines():
            if line.startswith("INPUT "):
                path = Path(line[6:])
                path = (path if path.is_absolute() else latex_dir / path).resolve()
                if not path.is_relative_to(latex_dir) and path.is_file():
                    files.add(path)
    return sorted(files)


def font_files(pdf: Path) -> list[Path]:
    """The font file of every font embedded in ``pdf`` (``pdffonts``): an OpenType face XeLaTeX found
    through fontconfig (``fc-list :postscriptname=...``), or a Type 1 face from TeX Live
    (``kpsewhich name.pfb``). Neither kind is in the recorder's list."""
    listing = subprocess.run(["pdffonts", str(pdf)], capture_output=True, text=True, check=True).stdout
    files: set[Path] = set()
    for line in listing.splitlines()[2:]:
        name = re.sub(r"^[A-Z]{6}\+", "", line.split()[0]).removesuffix("-Identity-H")
        found = subprocess.run(["fc-list", f":postscriptname={name}", "file"],
                               capture_output=True, text=True).stdout.split(":")[0].strip()
        if not found:
            found = subprocess.run(["kpsewhich", f"{name.lower()}.pfb"], capture_output=True,
                                   text=True).stdout.strip()
        if not found:
            raise ValueError(f"{pdf} embeds the font {name}, which neither fontconfig nor TeX Live finds")
        files.add(Path(found).resolve())
    return sorted(files)


def owners(paths: list[Path]) -> dict[Path, str]:
    """The Debian package that installed each path (``dpkg -S``); a path no package owns is left out."""
    out: dict[Path, str] = {}
    for start in range(0, len(paths), 200):
        chunk = [str(p) for p in paths[start:start + 200]]
        proc = subprocess.run(["dpkg", "-S", *chunk], capture_output=True, text=True)
        for line in proc.stdout.splitlines():
            package, _, path = line.partition(": ")
            if path in chunk:
                out[Path(path)] = package.split(":")[0].split(",")[0].strip()
    return out


def build_inputs(latex_dir: Path) -> dict[Path, str]:
    """Every system file a good build in ``latex_dir`` read (the recorder's list and the fonts its PDF
    embeds), with the Debian package that ships it."""
    latex_dir = Path(latex_dir)
    pdfs = [p for p in latex_dir.glob("*.pdf") if p.with_suffix(".fls").exists()]
    return owners(read_files(latex_dir) + [f for pdf in pdfs for f in font_files(pdf)])


def record(latex_dir: Path) -> str:
    """tools/tex-packages.tsv's text for the good build in ``latex_dir``."""
    rows = sorted({(p.name, pkg) for p, pkg in build_inputs(latex_dir).items()})
    head = ("# The TeX Live files and fonts a complete build of the PDF reads (latexmk's recorder and\n"
            "# the fonts the PDF embeds), each with the Debian package that ships it:\n"
            "# `python tools/pdf.py --record _build/latex` writes this.\n")
    return head + "".join(f"{name}\t{package}\n" for name, package in rows)


def build(edition: str = "reader") -> int:
    args, latex_dir, env = EDITIONS[edition]
    if latex_dir.exists() and not (latex_dir / STAMP).exists():
        shutil.rmtree(latex_dir)  # left by a failed build: latexmk would think it up to date
    (latex_dir / STAMP).unlink(missing_ok=True)
    jupyter_book = Path(sys.executable).parent / "jupyter-book"
    proc = subprocess.run([str(jupyter_book), "build", str(ROOT), "--builder", "pdflatex",
                           "--warningiserror", "--keep-going", *args],
                          cwd=ROOT, env={**os.environ, **env})
    if proc.returncode != 0:
        for line in why(latex_dir):
            print(line, file=sys.stderr)
        return proc.returncode
    (latex_dir / STAMP).touch()
    return 0


def main(argv: list[str]) -> int:
    if argv[:1] == ["--why"] and len(argv) == 2:
        lines = why(Path(argv[1]))
        print("\n".join(lines) if lines else f"no missing TeX file in the logs of {argv[1]}")
        return 0
    if argv[:1] == ["--record"] and len(argv) == 2:
        sys.stdout.write(record(Path(argv[1])))
        return 0
    if argv in ([], ["--student"]):
        return build("student" if argv else "reader")
    print(__doc__.split("\n\n")[1], file=sys.stderr)
    return 2


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))
