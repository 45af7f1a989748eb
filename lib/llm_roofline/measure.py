"""Micro-benchmarks of the host: memory bandwidth and float32 matmul peak, its roofline constants.

Each figure is the median of ``repeats`` timed runs after one warm-up run. Bandwidths are in
GB/s (1e9 bytes per second), compute in GFLOP/s (1e9 FLOP per second). Defaults are modest so
a notebook call takes a couple of seconds; a benchmark passes larger sizes. The bandwidth
arrays must be far larger than the last-level cache (tens of MB on current CPUs), or the
figure measures the cache, not the memory.

Copy counts bytes as STREAM does: the array read plus the array written, ``2 x size``. On most
x86 CPUs an ordinary store first reads the destination line into the cache (write-allocate),
so the memory bus can carry up to ``3 x size`` (less where the copy uses non-temporal stores,
as a large ``memcpy`` may), and a read-only kernel such as a GEMV can then run above "100 % of
copy bandwidth". Compare read-only kernels with :func:`matvec_bandwidth`.
"""

from __future__ import annotations

import ctypes
import os
from statistics import median
from time import perf_counter

import numpy as np

MB = 10**6


def _positive_int(value, field: str) -> int:
    if isinstance(value, bool) or not isinstance(value, int) or value < 1:
        raise ValueError(f"{field} must be a positive int, got {value!r}")
    return value


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn()``, in seconds, after one untimed call."""
    _positive_int(repeats, "repeats")
    fn()  # warm up: page in the arrays, start the BLAS threads
    times = []
    for _ in range(repeats):
        t0 = perf_counter()
        fn()
        times.append(perf_counter() - t0)
    return median(times)


def copy_bandwidth(size_mb: int = 128, repeats: int = 5) -> float:
    """STREAM-like copy of a ``size_mb`` MB float32 array into another, in GB/s.

    Counts the bytes read plus the bytes written (2 x size), as STREAM's copy does; with
    write-allocate caches (most x86 CPUs) the bus may carry up to 3 x size (module notes).
    """
    n = _positive_int(size_mb, "size_mb") * MB // 4
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    return 2 * src.nbytes / median_seconds(lambda: np.copyto(dst, src), repeats) / 1e9


def matvec_bandwidth(size_mb: int = 128, repeats: int = 5) -> float:
    """Read-only traffic: a float32 matrix of ``size_mb`` MB times a vector, in GB/s.

    This is the decode step of a language model: every weight read once, two FLOPs each.
    Counts the matrix, the vector and the result.
    """
    cols = 4096
    rows = max(1, _positive_int(size_mb, "size_mb") * MB // (4 * cols))
    w = np.ones((rows, cols), np.float32)
    x = np.ones(cols, np.float32)
    moved = w.nbytes + x.nbytes + rows * 4
    return moved / median_seconds(lambda: w @ x, repeats) / 1e9


def matmul_peak(n: int = 1024, repeats: int = 5) -> float:
    """float32 ``n x n`` by ``n x n`` matrix product, ``2 n^3`` FLOPs, in GFLOP/s."""
    _positive_int(n, "n")
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n), dtype=np.float32)
    b = rng.standard_normal((n, n), dtype=np.float32)
    out = np.empty_like(a)
    return 2 * n**3 / median_seconds(lambda: np.matmul(a, b, out=out), repeats) / 1e9


def _openblas_calls() -> dict:
    """Ask a loaded OpenBLAS for its kernel (core name), thread count and build config."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return {}
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_", "64_"), ("", "64_"), ("", "")):
            try:
                core = getattr(lib, f"{prefix}openblas_get_corename{suffix}")
                threads = getattr(lib, f"{prefix}openblas_get_num_threads{suffix}")
                config = getattr(lib, f"{prefix}openblas_get_config{suffix}")
            except AttributeError:
                continue
            core.restype = config.restype = ctypes.c_char_p
            return {
                "kernel": core().decode(),
                "threads": int(threads()),
                "config": config().decode().strip(),
            }
    return {}


def blas_info() -> dict:
    """The BLAS NumPy calls: library name and version, kernel and thread count where known.

    Uses ``threadpoolctl`` if it is installed, else asks a loaded OpenBLAS directly, else
    reports what NumPy was built with. Unknown values are None. Also reports the
    ``OPENBLAS_*`` environment variables, which can change the kernel OpenBLAS picks.
    """
    info = {"library": None, "version": None, "kernel": None, "threads": None}
    try:
        blas = np.show_config(mode="dicts")["Build Dependencies"]["blas"]
        info["library"], info["version"] = blas.get("name"), blas.get("version")
    except (KeyError, TypeError, ValueError):
        pass
    try:
        from threadpoolctl import threadpool_info
    except ImportError:
        info |= _openblas_calls()
    else:
        for pool in threadpool_info():
            if pool.get("user_api") == "blas":
                info |= {"library": pool.get("internal_api"), "version": pool.get("version"),
                         "kernel": pool.get("architecture"), "threads": pool.get("num_threads")}
                break
    info["env"] = {k: v for k, v in sorted(os.environ.items()) if k.startswith("OPENBLAS")}
    return info


def measure_host(bandwidth_mb: int = 128, matmul_n: int = 1024, repeats: int = 5) -> dict:
    """All the host figures as plain data: the two bandwidths, the matmul peak, the BLAS."""
    return {
        "copy_GBps": copy_bandwidth(bandwidth_mb, repeats),
        "matvec_GBps": matvec_bandwidth(bandwidth_mb, repeats),
        "matmul_GFLOPS": matmul_peak(matmul_n, repeats),
        "bandwidth_mb": bandwidth_mb,
        "matmul_n": matmul_n,
        "repeats": repeats,
        "cpu_count": os.cpu_count(),
        "blas": blas_info(),
    }
