"""Every chapter notebook executes top to bottom in a fresh kernel, offline."""

from __future__ import annotations

import os
import shutil
import subprocess
import sys

import pytest

from conftest import ROOT, notebooks

RUNNER = ROOT / "tests" / "run_notebook.py"


def _offline_prefix() -> list[str]:
    """A new network namespace with only loopback (the kernel talks to us over it), when we may make one."""
    if shutil.which("unshare") and shutil.which("ip"):
        probe = subprocess.run(["unshare", "--net", "true"], capture_output=True)
        if probe.returncode == 0:
            return ["unshare", "--net", "sh", "-c", 'ip link set lo up && exec "$@"', "offline"]
    if os.environ.get("CI") == "true":
        pytest.fail("cannot create a network namespace to execute notebooks offline")
    return []


@pytest.mark.slow
@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_notebook_executes_offline_in_a_fresh_kernel(path):
    cmd = [*_offline_prefix(), sys.executable, str(RUNNER), str(path)]
    env = {**os.environ, "MPLBACKEND": "Agg"}
    proc = subprocess.run(cmd, capture_output=True, text=True, env=env, timeout=600)
    assert proc.returncode == 0, f"{path.name} failed:\n{(proc.stdout + proc.stderr)[-5000:]}"


@pytest.mark.slow
@pytest.mark.parametrize("path", notebooks(), ids=lambda p: p.name)
def test_student_edition_executes(path, tmp_path):
    """Without its solution cells a notebook still runs: nothing later needs a solution's variables."""
    from llm_roofline.course.student import write_student_edition

    student = next(p for p in write_student_edition(path.parent, tmp_path) if p.name == path.name)
    cmd = [*_offline_prefix(), sys.executable, str(RUNNER), str(student)]
    proc = subprocess.run(cmd, capture_output=True, text=True, env={**os.environ, "MPLBACKEND": "Agg"},
                          timeout=600)
    log = (proc.stdout + proc.stderr)[-5000:]
    assert proc.returncode == 0, f"student edition of {path.name} failed:\n{log}"
