"""The Colab path: a fresh environment holding only what a notebook's hidden install cell installs
(plus the kernel and runner a Jupyter front end brings) runs every chapter notebook.

Colab opens a notebook alone, with none of requirements.txt. The notebook's first code cell installs
the library from the repository when it is missing. This test reads that cell's `%pip install`
line, builds a new virtual environment, installs the same requirements (the library from this
checkout instead of from the repository's URL, since the tests run offline; extras such as
``[widgets]`` kept), adds ipykernel and nbclient, and executes each notebook in it, top to bottom
in a fresh kernel, offline (a network namespace with only loopback): a notebook that reaches for
the network, prints a warning or draws a figure too small for a phone fails
(tests/run_notebook.py). This is the book's one full execution test of the notebooks.
"""

from __future__ import annotations

import json
import os
import re
import shlex
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from conftest import ROOT, notebooks, offline_prefix

pytestmark = pytest.mark.slow

RUNNER_TOOLS = ["ipykernel", "nbclient", "nbformat"]  # what Colab/Jupyter bring to run a notebook


def install_requirements(path: Path) -> list[str]:
    """The requirements the notebook's hidden install cell passes to %pip install, as written."""
    cells = json.loads(path.read_text())["cells"]
    first = "".join(next(c for c in cells if c["cell_type"] == "code")["source"])
    line = next((ln for ln in first.splitlines() if "%pip install" in ln), None)
    if line is None:
        raise AssertionError(f"{path.name}: no %pip install line in the first code cell")
    args = shlex.split(line.split("%pip install", 1)[1])
    return [a for a in args if not a.startswith("-")]


def local_equivalent(requirement: str, source: Path = ROOT) -> str:
    """``llm-roofline[widgets] @ git+URL`` becomes ``<source>[widgets]``; others stay."""
    m = re.match(r"^\s*llm[-_]roofline\s*(\[[^\]]*\])?\s*@\s*git\+\S+$", requirement)
    return f"{source}{m.group(1) or ''}" if m else requirement


def test_install_line_is_read_as_written(tmp_path):
    nb = tmp_path / "x.ipynb"
    cell = ('import importlib.util\nif importlib.util.find_spec("llm_roofline") is None:\n'
            '    %pip install --quiet "llm-roofline[widgets] @ git+https://github.com/a/b" sympy\n')
    nb.write_text(json.dumps({"cells": [{"cell_type": "code", "source": cell}]}))
    reqs = install_requirements(nb)
    assert reqs == ["llm-roofline[widgets] @ git+https://github.com/a/b", "sympy"]
    assert [local_equivalent(r) for r in reqs] == [f"{ROOT}[widgets]", "sympy"]


@pytest.fixture(scope="module")
def colab_env(tmp_path_factory) -> Path:
    """A fresh venv with the union of every notebook's install-cell requirements and the runner."""
    # the library as the repository holds it, copied so that building it leaves nothing in the checkout
    source = tmp_path_factory.mktemp("source")
    for name in ("pyproject.toml", "README.md"):
        shutil.copy(ROOT / name, source / name)
    shutil.copytree(ROOT / "lib", source / "lib", ignore=shutil.ignore_patterns("__pycache__", "*.egg-info"))
    reqs = sorted({local_equivalent(r, source) for path in notebooks() for r in install_requirements(path)})
    venv = tmp_path_factory.mktemp("colab") / "venv"
    subprocess.run([sys.executable, "-m", "venv", str(venv)], check=True)
    python = venv / "bin" / "python"
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    proc = subprocess.run([str(python), "-m", "pip", "install", "--quiet", *reqs, *RUNNER_TOOLS],
                          capture_output=True, text=True, env=env, timeout=900)
    assert proc.returncode == 0, f"pip install {reqs} failed:\n{(proc.stdout + proc.stderr)[-4000:]}"
    return python


@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_notebook_runs_with_only_what_its_install_cell_installs(colab_env, path, tmp_path):
    env = {k: v for k, v in os.environ.items() if k not in ("PYTHONPATH", "VIRTUAL_ENV")}
    env.update(MPLBACKEND="Agg", JUPYTER_DATA_DIR=str(tmp_path / "data"), JUPYTER_PATH="",
               JUPYTER_CONFIG_DIR=str(tmp_path / "config"))
    runner = ROOT / "tests" / "run_notebook.py"
    proc = subprocess.run([*offline_prefix(), str(colab_env), str(runner), str(path)],
                          capture_output=True, text=True, env=env, timeout=900, cwd=tmp_path)
    log = re.sub(r"\x1b\[[0-9;]*m", "", proc.stdout + proc.stderr)
    missing = re.findall(r"ModuleNotFoundError.{0,40}?No module named '([\w.]+)'", log)
    log = log[-3000:]
    assert proc.returncode == 0, (
        f"{path.name} fails in an environment holding only {install_requirements(path)}"
        + (f": it imports {sorted(set(missing))}, which the install cell does not install" if missing else "")
        + f"\n{log}"
    )
