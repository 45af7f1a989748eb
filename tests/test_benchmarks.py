"""Every script in benchmarks/ answers --help with its usage (and starts nothing), and runs in a
smoke mode (tiny sizes, seconds) printing JSON: CI notices a benchmark that breaks."""

import json
import subprocess
import sys
from pathlib import Path

import pytest

ROOT = Path(__file__).resolve().parent.parent
SCRIPTS = sorted(p.name for p in (ROOT / "benchmarks").glob("bench_*.py"))


def run(*args, timeout=120):
    return subprocess.run([sys.executable, *args], cwd=ROOT, capture_output=True, text=True,
                          timeout=timeout)


def test_every_benchmark_is_covered():
    assert SCRIPTS == ["bench_book.py", "bench_estimate.py", "bench_host.py", "bench_tiny.py"]


@pytest.mark.parametrize("script", SCRIPTS)
def test_help_prints_the_usage_and_runs_nothing(script):
    proc = run(f"benchmarks/{script}", "--help", timeout=60)
    assert proc.returncode == 0, proc.stderr
    assert proc.stdout.startswith(f"usage: {script}") and "--smoke" in proc.stdout


@pytest.mark.parametrize("script", SCRIPTS)
def test_smoke_mode_prints_json(script):
    proc = run(f"benchmarks/{script}", "--smoke")
    assert proc.returncode == 0, proc.stderr[-2000:]
    report = json.loads(proc.stdout)
    assert isinstance(report, dict) and report
    if script == "bench_tiny.py":
        assert {"decode_fraction_of_copy", "prefill_fraction_of_gemm"} <= set(report["ratios"])
        assert report["blas"]["numpy"]["library"]
        assert report["config"]["smoke"] is True
    if script == "bench_host.py":
        assert report["read_GBps"] > 0 and set(report["spread"]) >= {"copy", "matmul"}
    if script == "bench_book.py":
        assert report["smoke"] is True and report["tools_missing"] == []


def test_a_bad_argument_is_one_line_not_a_traceback():
    proc = run("benchmarks/bench_tiny.py", "--prompt", "5000", "--no-torch")
    assert proc.returncode == 2 and "Traceback" not in proc.stderr
    assert "--prompt must be from 1 to" in proc.stderr
