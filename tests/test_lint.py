"""The code follows the project's ruff settings (pyproject.toml): no unused imports, sorted imports, ..."""

import subprocess
import sys
from pathlib import Path

from conftest import ROOT


def test_ruff_is_clean():
    ruff = Path(sys.executable).parent / "ruff"
    proc = subprocess.run([str(ruff), "check", "lib", "tests", "benchmarks"], cwd=ROOT,
                          capture_output=True, text=True)
    assert proc.returncode == 0, proc.stdout + proc.stderr
