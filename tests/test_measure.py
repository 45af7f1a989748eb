"""measure.py: structure and sanity only (positive, finite, the right keys), never speed."""

import json
import math

import pytest

from llm_roofline import measure as M


def test_each_figure_is_positive_and_finite():
    for value in (M.copy_bandwidth(4, repeats=2), M.matvec_bandwidth(4, repeats=2),
                  M.matmul_peak(64, repeats=2)):
        assert isinstance(value, float) and math.isfinite(value) and value > 0


def test_median_seconds_warms_up_once_then_times_each_repeat():
    calls = []
    seconds = M.median_seconds(lambda: calls.append(1), repeats=3)
    assert len(calls) == 4 and isinstance(seconds, float) and seconds >= 0


def test_measure_host_is_plain_json_data():
    host = M.measure_host(bandwidth_mb=4, matmul_n=64, repeats=1)
    assert set(host) == {"copy_GBps", "matvec_GBps", "matmul_GFLOPS", "bandwidth_mb", "matmul_n",
                         "repeats", "cpu_count", "blas"}
    assert (host["bandwidth_mb"], host["matmul_n"], host["repeats"]) == (4, 64, 1)
    assert json.loads(json.dumps(host)) == host


def test_blas_info_reports_what_it_knows():
    info = M.blas_info()
    assert {"library", "version", "kernel", "threads", "env"} <= set(info)
    assert all(k.startswith("OPENBLAS") for k in info["env"])
    if info["threads"] is not None:
        assert info["threads"] >= 1


@pytest.mark.parametrize(
    "call, match",
    [
        (lambda: M.copy_bandwidth(0), "size_mb"),
        (lambda: M.matvec_bandwidth(2.5), "size_mb"),
        (lambda: M.matmul_peak(True), "n"),
        (lambda: M.matmul_peak(16, repeats=0), "repeats"),
    ],
)
def test_bad_sizes_are_rejected(call, match):
    with pytest.raises(ValueError, match=match):
        call()
