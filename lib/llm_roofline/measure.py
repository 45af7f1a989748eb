"""Micro-benchmarks of the host: memory bandwidth and float32 matmul peak, its roofline constants.

:func:`timing` is the careful way to time anything: warmed, preallocated buffers; a call long
enough is timed alone, a short one repeated until a sample rises far above the timer; the
best of several samples and their spread; the wall clock and the thread's CPU time, so that
a run can tell it waited for a core. :func:`measure_roofline` and
:func:`llm_roofline.machine.profile` both time with it, on a thread count fixed by
:func:`blas_threads`, and :func:`disturbance` says in a sentence when a run was disturbed.

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

Sizes are checked before anything is allocated: a size beyond :data:`MAX_SIZE_MB`, or whose
arrays would not fit in the memory available now, raises ``ValueError`` (never
``MemoryError``). :func:`measure_roofline` measures everything chapter 8 needs (a read
bandwidth per working-set size, the hierarchical roofline's slopes; copy; the matmul peak at
a dtype) with a progress bar, and :func:`timed_seconds` can report the best run instead of
the median: on a shared machine the best run is the one no other process disturbed, which
is what STREAM reports too.
"""

from __future__ import annotations

import ctypes
import os
from statistics import median
from time import perf_counter, thread_time

import numpy as np

from . import validate
from .validate import available_bytes  # noqa: F401  (tests replace it here)

__all__ = [
    "BLOCK_MB", "DISTURBED_SPREAD", "LONG_CALL_S", "MAX_SIZE_MB", "Progress", "available_bytes", "blas_info",
    "blas_thread_count",
    "blas_threads", "copy_bandwidth", "cpu_name", "default_clock", "disturbance", "dram_size_mb",
    "last_level_cache_bytes", "load_average", "matmul_peak", "matvec_bandwidth", "measure_host",
    "memory_free_bytes", "process_limit_bytes",
    "measure_roofline", "median_seconds", "timed_seconds", "timing", "total_memory_bytes",
]

MB = 10**6
MAX_SIZE_MB = 2_048
"""The largest array a bandwidth benchmark accepts, MB (2 GB): far past any CPU's cache, and a
copy of it takes well under a second a run."""

_STATISTICS = ("median", "min")
_MATMUL_DTYPES = {"fp32": np.float32, "fp64": np.float64}

MAX_REPEATS = 1000
"""The most timed runs a benchmark takes (each one reads its whole array)."""

MAX_MATMUL_N = 16_384
"""The largest matrix a matmul benchmark multiplies: ``2 n^3`` = 8.8 TFLOP, a minute of a CPU."""


def _positive_int(value, field: str, maximum: int = validate.MAX_COUNT) -> int:
    return validate.integer(field, value, maximum=maximum)


def _repeats(value) -> int:
    return validate.integer("repeats", value, maximum=MAX_REPEATS)


def _size_mb(value, field: str, arrays: int) -> int:
    """``value`` (MB per array) if it is a whole number of MB whose ``arrays`` arrays fit now.

    At most :data:`MAX_SIZE_MB`, and at most half the available memory for all the arrays
    together (the rest is the notebook's, and the system's).
    """
    size = validate.integer(field, value, minimum=1, maximum=MAX_SIZE_MB)
    free = memory_free_bytes()
    if free is not None and arrays * size * MB > free // 2:
        limit = max(free // 2 // (arrays * MB), 0)
        raise ValueError(
            f"{field} must be at most {limit:,} MB here: {arrays} array(s) of {size:,} MB would "
            f"take more than half of the {free / MB:,.0f} MB of memory available now"
        )
    return size


def process_limit_bytes() -> int | None:
    """The most memory this process may hold, bytes: the smaller of its address-space limit
    (``RLIMIT_AS``) and its cgroup's ``memory.max`` (v2) or ``memory.limit_in_bytes`` (v1);
    None when neither is set."""
    limits = []
    try:
        import resource

        soft = resource.getrlimit(resource.RLIMIT_AS)[0]
        if soft not in (resource.RLIM_INFINITY, -1) and soft > 0:
            limits.append(int(soft))
    except (ImportError, OSError, ValueError):
        pass
    for path in ("/sys/fs/cgroup/memory.max", "/sys/fs/cgroup/memory/memory.limit_in_bytes"):
        try:
            with open(path) as f:
                text = f.read().strip()
        except OSError:
            continue
        if text.isdigit() and int(text) < 2**60:
            limits.append(int(text))
    return min(limits) if limits else None


def _process_bytes() -> int:
    """What the process holds now: its address space for RLIMIT_AS (VmSize), a lower bound."""
    try:
        with open("/proc/self/status") as f:
            for line in f:
                if line.startswith("VmSize:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    return 0


def memory_free_bytes() -> int | None:
    """Memory a new allocation can have now, bytes: the system's available memory, capped by
    what the process's own limit (:func:`process_limit_bytes`) leaves; None if unknown."""
    free = available_bytes()
    limit = process_limit_bytes()
    if limit is not None:
        room = max(0, limit - _process_bytes())
        free = room if free is None else min(free, room)
    return free


def timed_seconds(fn, repeats: int, statistic: str = "median") -> float:
    """Wall time of ``fn()`` in seconds: the median (or ``"min"``, the best) of ``repeats``
    timed calls after one untimed warm-up call."""
    _repeats(repeats)
    statistic = validate.choice("statistic", statistic, _STATISTICS)
    if not callable(fn):
        raise ValueError(f"fn must be a function of no arguments, got {validate.shorten(fn)}")
    fn()  # warm up: page in the arrays, start the BLAS threads
    times = []
    for _ in range(repeats):
        t0 = perf_counter()
        fn()
        times.append(perf_counter() - t0)
    return median(times) if statistic == "median" else min(times)


DISTURBED_SPREAD = 0.25
"""A timing whose median run is this much slower than its best (25 %) was disturbed: another
process, a throttled core. Its best run may still be clean, but the page says so."""

MAX_INNER = 1_000_000
"""The most calls of an operation one timed repetition makes (a call of a few ns)."""


LONG_CALL_S = 50e-6
"""A call at least this long (50 us, hundreds of times the timer's cost) is timed alone."""


_CLOCKS = ("wall", "cpu")


def timing(fn, repeats: int = 5, min_seconds: float = 0.005, clock: str = "wall") -> dict:
    """Time ``fn()`` the careful way and return plain data.

    ``fn`` is a function of no arguments, or a list of them that do the same work on
    different buffers (one weight matrix per layer, say), called in turn. After a warm-up
    call of each, a call at least :data:`LONG_CALL_S` long is timed alone, ``repeats``
    times over the list (each sample a clean call: a short sample is more likely to fall
    between two time slices of another program); shorter calls are timed ``inner`` at a
    time, with ``inner`` chosen so that a repetition lasts at least ``min_seconds`` (far
    above the timer's resolution and the loop's cost), ``repeats`` repetitions.

    Each sample is read on two clocks: the wall clock and this thread's CPU time.
    ``clock="cpu"`` reports the CPU time, which leaves out the time the operating system
    gave the core to another program; it is right for work on one thread only (one BLAS
    thread: :func:`blas_threads`), and wrong for a BLAS on several.

    ``seconds`` is the best time per call, ``median_s`` the median, ``spread`` median /
    best - 1 (0 on a quiet machine; above :data:`DISTURBED_SPREAD` when another program
    interfered), ``waited`` the share of the wall time the thread was not running (median
    wall / median CPU - 1: for one thread, the time it waited for a core), ``inner`` the
    calls per sample and ``samples`` how many. Whatever ``fn`` allocates is part of what is
    timed: give it buffers made beforehand.
    """
    repeats = _repeats(repeats)
    min_seconds = validate.real("min_seconds", min_seconds, minimum=1e-6, maximum=60,
                                unit="seconds")
    clock = validate.choice("clock", clock, _CLOCKS)
    fns = list(fn) if isinstance(fn, list | tuple) else [fn]
    if not fns or not all(callable(f) for f in fns):
        raise ValueError(f"fn must be a function of no arguments or a non-empty list of them, "
                         f"got {validate.shorten(fn)}")
    t0 = perf_counter()
    for f in fns:
        f()  # warm up: page in the buffers, start the BLAS threads, fill the caches
    once = (perf_counter() - t0) / len(fns)
    wall, cpu = [], []
    if once >= LONG_CALL_S:
        for _ in range(repeats):
            for f in fns:
                c0, t0 = thread_time(), perf_counter()
                f()
                t1, c1 = perf_counter(), thread_time()
                wall.append(t1 - t0)
                cpu.append(c1 - c0)
        inner = 1
    else:
        inner = 1
        while True:  # calibrate: enough cycles that a repetition lasts min_seconds
            t0 = perf_counter()
            for _ in range(inner):
                for f in fns:
                    f()
            elapsed = perf_counter() - t0
            if elapsed >= min_seconds or inner >= MAX_INNER:
                break
            inner = min(MAX_INNER, max(2 * inner, int(1.2 * inner * min_seconds / max(elapsed, 1e-9))))
        calls = inner * len(fns)
        for _ in range(repeats):
            c0, t0 = thread_time(), perf_counter()
            for _ in range(inner):
                for f in fns:
                    f()
            t1, c1 = perf_counter(), thread_time()
            wall.append((t1 - t0) / calls)
            cpu.append((c1 - c0) / calls)
        inner = calls
    times = cpu if clock == "cpu" else wall
    if clock == "cpu" and min(times) <= 0:  # a clock too coarse for these calls
        times = wall
    best, mid = min(times), median(times)
    mid_cpu = median(cpu)
    return {"seconds": best, "median_s": mid, "spread": mid / best - 1 if best > 0 else 0.0,
            "waited": max(0.0, median(wall) / mid_cpu - 1) if mid_cpu > 0 else 0.0,
            "inner": inner, "samples": len(times), "clock": clock}


def load_average() -> float | None:
    """The system's load average over the last minute (runnable processes), None if unknown."""
    try:
        return float(os.getloadavg()[0])
    except (OSError, AttributeError):
        return None


def default_clock(threads: int | None, clock: str | None = None) -> str:
    """``clock`` if given, else :func:`timing`'s clock for work on ``threads`` threads:
    ``"cpu"`` on one thread, ``"wall"`` on several (or an unknown number)."""
    if clock is not None:
        return validate.choice("clock", clock, _CLOCKS)
    return "cpu" if threads == 1 else "wall"


def disturbance(spreads: dict, limit: float = DISTURBED_SPREAD, load: float | None = None,
                cpus: int | None = None, waited: dict | None = None) -> str | None:
    """One sentence naming the timings whose repetitions spread beyond ``limit``, those that
    waited for a core more than ``limit`` of their time (``waited``), and the load if above
    the CPU count; or None when the run looks undisturbed.

    ``spreads`` and ``waited`` map a name to a spread or a wait, as :func:`timing` reports.
    """
    limit = validate.real("limit", limit, minimum=0, maximum=100)
    if not isinstance(spreads, dict):
        raise ValueError(f"spreads must map names to spreads, got {validate.shorten(spreads)}")
    wide = sorted(((float(v), str(k)) for k, v in spreads.items() if float(v) > limit),
                  reverse=True)
    busy = load is not None and cpus is not None and load > cpus
    if waited is not None and not isinstance(waited, dict):
        raise ValueError(f"waited must map names to shares, got {validate.shorten(waited)}")
    slow = sorted(((float(v), str(k)) for k, v in (waited or {}).items() if float(v) > limit),
                  reverse=True)
    if not wide and not busy and not slow:
        return None
    parts = []
    if slow:
        names = ", ".join(f"{k} (+{v:.0%})" for v, k in slow[:4])
        more = f" and {len(slow) - 4} more" if len(slow) > 4 else ""
        parts.append(f"the wall clock ran more than {limit:.0%} past the CPU time (the thread "
                     f"waited for a core) for {names}{more}")
    if wide:
        names = ", ".join(f"{k} (+{v:.0%})" for v, k in wide[:4])
        more = f" and {len(wide) - 4} more" if len(wide) > 4 else ""
        parts.append(f"the median repetition ran more than {limit:.0%} slower than the best for "
                     f"{names}{more}")
    if busy:
        parts.append(f"the load average was {load:.1f} on {cpus} CPUs")
    return ("This run was disturbed: " + "; ".join(parts) + ". Another program was using the "
            "machine; the best repetitions are shown, but treat the numbers with care.")


class blas_threads:  # noqa: N801  (a context manager, used as a function)
    """``with blas_threads(n):`` runs the BLAS (OpenBLAS, as NumPy's wheels ship it) on ``n``
    threads, and restores the previous count after. ``n=None`` keeps the current count. Where
    the count cannot be set (another BLAS), it does nothing; :func:`blas_info` says which."""

    def __init__(self, n: int | None = None):
        self.n = None if n is None else validate.integer("threads", n, maximum=1024)
        self._before = None

    @staticmethod
    def _calls():
        found = _openblas_functions("get_num_threads", "set_num_threads")
        if found is None:
            return None
        get, put = found
        put.argtypes = [ctypes.c_int]
        return get, put

    def __enter__(self):
        calls = self._calls() if self.n is not None else None
        if calls is not None:
            get, put = calls
            self._before = (put, int(get()))
            put(self.n)
        return self

    def __exit__(self, *exc):
        if self._before is not None:
            put, n = self._before
            put(n)
        return False


_GET_THREADS: list = []  # OpenBLAS's get_num_threads, looked up once (None: no OpenBLAS)


def blas_thread_count() -> int:
    """The threads the BLAS runs on now (as :class:`blas_threads` set them), 1 where unknown:
    a call of a few hundred nanoseconds, for code that splits its own work as the BLAS does."""
    if not _GET_THREADS:
        found = _openblas_functions("get_num_threads")
        _GET_THREADS.append(None if found is None else found[0])
    get = _GET_THREADS[0]
    return max(1, int(get())) if get is not None else 1


def median_seconds(fn, repeats: int) -> float:
    """Median wall time of ``repeats`` calls of ``fn()``, in seconds, after one untimed call."""
    return timed_seconds(fn, repeats, "median")


BLOCK_MB = 4
"""The size of one timed call of :func:`measure_roofline`'s bandwidth kernels (MB): a larger
working set is a pool of such blocks, called in turn, each call timed alone, as the
operations of a model are."""


def _blocks(size: int) -> list[int]:
    """``size`` MB as blocks of at most :data:`BLOCK_MB` MB."""
    return [BLOCK_MB] * (size // BLOCK_MB) + ([size % BLOCK_MB] if size % BLOCK_MB else [])


def _copy_kernel(size_mb, pooled: bool = False):
    """A copy of a ``size_mb`` MB float32 array into another: (function, bytes counted);
    ``pooled``: (a list of functions, one per block, bytes of one block)."""
    size = _size_mb(size_mb, "size_mb", arrays=2)
    if pooled:
        pairs = [(np.ones(b * MB // 4, np.float32), np.empty(b * MB // 4, np.float32))
                 for b in _blocks(size)]
        return ([lambda s=s, d=d: np.copyto(d, s) for s, d in pairs],
                2 * pairs[0][0].nbytes)
    n = size * MB // 4
    src = np.ones(n, np.float32)
    dst = np.empty_like(src)
    return (lambda: np.copyto(dst, src)), 2 * src.nbytes


def _matvec_kernel(size_mb, pooled: bool = False):
    """A float32 GEMV over a ``size_mb`` MB matrix into a preallocated vector, as the tiny
    model runs one (a vector times a matrix stored ``[d_in, d_out]``: ``x @ W``, which
    OpenBLAS streams faster on one core than ``W @ x``): (function, bytes counted: the matrix,
    the vector and the result); ``pooled``: a list of GEMVs, one per block of
    :data:`BLOCK_MB` MB, and the bytes of one."""
    size = _size_mb(size_mb, "size_mb", arrays=1)
    if pooled:
        cols = 4096  # rows of 16 KB stream faster than rows of 4 KB (by 10-20 % on one core)
        rows = max(1, min(size, BLOCK_MB) * MB // (4 * cols))
        x = np.ones(rows, np.float32)
        y = np.empty(cols, np.float32)
        ws = [np.ones((rows, cols), np.float32) for _ in range(max(1, size // BLOCK_MB))]
        return ([lambda w=w: np.matmul(x, w, out=y) for w in ws],
                ws[0].nbytes + x.nbytes + y.nbytes)
    cols = 4096 if size >= 16 else 1024  # small sizes: enough columns for every thread
    rows = max(1, size * MB // (4 * cols))
    w = np.ones((rows, cols), np.float32)
    x = np.ones(rows, np.float32)
    y = np.empty(cols, np.float32)
    return (lambda: np.matmul(x, w, out=y)), w.nbytes + x.nbytes + y.nbytes


def _matmul_kernel(n, dtype):
    """An ``n x n`` by ``n x n`` product into a preallocated matrix: (function, FLOPs)."""
    _positive_int(n, "n", MAX_MATMUL_N)
    key = validate.choice("dtype", dtype, _MATMUL_DTYPES,
                          aliases={"float32": "fp32", "float64": "fp64", "float": "fp32"})
    kind = _MATMUL_DTYPES[key]
    _size_mb(max(1, -(-n * n * np.dtype(kind).itemsize // MB)), f"n={n}: each matrix", arrays=3)
    rng = np.random.default_rng(0)
    a = rng.standard_normal((n, n)).astype(kind)
    b = rng.standard_normal((n, n)).astype(kind)
    out = np.empty_like(a)
    return (lambda: np.matmul(a, b, out=out)), 2 * n**3


def copy_bandwidth(size_mb: int = 128, repeats: int = 5, statistic: str = "median") -> float:
    """STREAM-like copy of a ``size_mb`` MB float32 array into another, in GB/s.

    Counts the bytes read plus the bytes written (2 x size), as STREAM's copy does; with
    write-allocate caches (most x86 CPUs) the bus may carry up to 3 x size (module notes).
    NumPy copies on one core. A size whose two arrays do not fit in memory raises ValueError.
    """
    _repeats(repeats)
    statistic = validate.choice("statistic", statistic, _STATISTICS)
    fn, moved = _copy_kernel(size_mb)
    return moved / timed_seconds(fn, repeats, statistic) / 1e9


def matvec_bandwidth(size_mb: int = 128, repeats: int = 5, statistic: str = "median") -> float:
    """Read-only traffic: a float32 matrix of ``size_mb`` MB times a vector, in GB/s.

    This is the decode step of a language model: every weight read once, two FLOPs each.
    Counts the matrix, the vector and the result. The BLAS runs it on all its threads.
    """
    _repeats(repeats)
    statistic = validate.choice("statistic", statistic, _STATISTICS)
    fn, moved = _matvec_kernel(size_mb)
    return moved / timed_seconds(fn, repeats, statistic) / 1e9


def matmul_peak(n: int = 1024, repeats: int = 5, dtype: str = "fp32",
                statistic: str = "median") -> float:
    """``n x n`` by ``n x n`` matrix product in ``dtype`` ("fp32" or "fp64"), ``2 n^3``
    FLOPs, in GFLOP/s."""
    _positive_int(n, "n", MAX_MATMUL_N)
    _repeats(repeats)
    statistic = validate.choice("statistic", statistic, _STATISTICS)
    fn, flops = _matmul_kernel(n, dtype)
    return flops / timed_seconds(fn, repeats, statistic) / 1e9


def _openblas_functions(*names: str):
    """The functions ``openblas_<name>`` of a loaded OpenBLAS (NumPy's wheels prefix and suffix
    them: ``scipy_openblas_<name>64_``), in the order named; None if no loaded library has them."""
    try:
        with open("/proc/self/maps") as f:
            paths = {line.split()[-1] for line in f if "openblas" in line.lower()}
    except OSError:
        return None
    for path in sorted(paths):
        try:
            lib = ctypes.CDLL(path)
        except OSError:
            continue
        for prefix, suffix in (("scipy_", "64_"), ("", "64_"), ("", "")):
            try:
                return [getattr(lib, f"{prefix}openblas_{name}{suffix}") for name in names]
            except AttributeError:
                continue
    return None


def _openblas_calls() -> dict:
    """Ask a loaded OpenBLAS for its kernel (core name), thread count and build config."""
    found = _openblas_functions("get_corename", "get_num_threads", "get_config")
    if found is None:
        return {}
    core, threads, config = found
    core.restype = config.restype = ctypes.c_char_p
    return {"kernel": core().decode(), "threads": int(threads()),
            "config": config().decode().strip()}


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
    _repeats(repeats)
    _positive_int(matmul_n, "matmul_n", MAX_MATMUL_N)
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


def cpu_name() -> str:
    """The processor's model name (``/proc/cpuinfo`` on Linux, else ``platform``)."""
    import platform

    try:
        with open("/proc/cpuinfo") as f:
            for line in f:
                if line.lower().startswith("model name"):
                    return line.split(":", 1)[1].strip()
    except OSError:
        pass
    return platform.processor() or platform.machine() or "unknown CPU"


def last_level_cache_bytes() -> int | None:
    """Size of the largest CPU cache the OS reports (Linux sysfs), bytes; None if unknown.

    A virtual machine may report its host's cache, or a made-up one: the read-bandwidth
    sweep of :func:`measure_roofline` shows where the cache really ends.
    """
    sizes = []
    base = "/sys/devices/system/cpu/cpu0/cache"
    try:
        names = os.listdir(base)
    except OSError:
        return None
    units = {"K": 2**10, "M": 2**20, "G": 2**30}
    for name in names:
        try:
            with open(f"{base}/{name}/size") as f:
                text = f.read().strip()
        except OSError:
            continue
        if text and text[-1] in units and text[:-1].isdigit():
            sizes.append(int(text[:-1]) * units[text[-1]])
    return max(sizes) if sizes else None


def total_memory_bytes() -> int | None:
    """The machine's physical memory, bytes (psutil, else ``os.sysconf``); None if unknown."""
    try:
        import psutil
    except ImportError:
        pass
    else:
        return int(psutil.virtual_memory().total)
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


class Progress:
    """A text progress bar that updates in place in Jupyter and reads right when saved.

    In a notebook it is one display output updated with ``update_display``: a live bar while
    it runs, and its last state (``[##########] 6/6 ... done``) is what the saved notebook
    and the website show. Outside IPython it prints nothing. ``step(label)`` advances it.
    """

    def __init__(self, total: int, title: str = "measuring", show: bool = True):
        self.total, self.done, self.title = _positive_int(total, "total"), 0, title
        self._start = perf_counter()
        self._handle = None
        if show:
            try:
                from IPython import get_ipython
                from IPython.display import display
            except ImportError:
                return
            if get_ipython() is not None:
                self._handle = display(self._text("starting"), display_id=True)

    def _text(self, label: str):
        from IPython.display import Pretty

        width = 20
        filled = width * self.done // self.total
        bar = "#" * filled + "." * (width - filled)
        return Pretty(f"{self.title} [{bar}] {self.done}/{self.total} {label}")

    def step(self, label: str = "") -> None:
        """Mark one more step done; ``label`` says what comes next (or what was done)."""
        self.done = min(self.done + 1, self.total)
        if self._handle is not None:
            if self.done == self.total:
                label = f"done in {perf_counter() - self._start:.1f} s"
            self._handle.update(self._text(label))


def dram_size_mb() -> int:
    """A read-benchmark size (MB) past the last-level cache: twice the cache the OS reports,
    at least 256 MB, at most 1,024 MB and a quarter of the memory available."""
    llc = last_level_cache_bytes() or 32 * MB
    free = memory_free_bytes()
    top = 1024 if free is None else max(16, min(1024, free // 4 // MB))
    return int(min(max(256, 2 * llc // MB), top))


def measure_roofline(
    sweep_mb: tuple[int, ...] = (1, 4, 16, 64),
    dram_mb: int | None = None,
    copy_mb: int | None = None,
    matmul_n: int = 1024,
    dtype: str = "fp32",
    repeats: int = 5,
    statistic: str = "min",
    progress: bool = True,
    *,
    threads: int | None = None,
    min_seconds: float = 0.005,
    clock: str | None = None,
) -> dict:
    """The host's roofline as plain data: a read bandwidth per working-set size, copy
    bandwidth, the matmul peak in ``dtype``, how much each one's repetitions spread, and
    what produced them.

    ``read_sweep`` maps each size of ``sweep_mb`` and ``dram_mb`` (MB) to the GEMV read
    bandwidth there (GB/s): a size that fits in a cache reads at that cache's speed.
    ``read_GBps`` is the one at ``dram_mb`` (default :func:`dram_size_mb`, past the
    last-level cache): main memory's slope. ``cache_GBps`` is the fastest of the sweep, the
    cache's slope. Copy uses two arrays of ``copy_mb`` (default half of ``dram_mb``).

    Each figure is timed by :func:`timing` on preallocated buffers, exactly as
    :func:`llm_roofline.machine.profile` times a model's operations: a working set larger
    than :data:`BLOCK_MB` is a pool of blocks called in turn, each call timed alone (a read
    of the pool's last block finds the first one evicted, as a model's next layer finds its
    weights), ``repeats`` samples per block, the BLAS on ``threads``
    threads (default: as many as it has now; :func:`blas_threads`). ``statistic="min"``
    keeps the best repetition (another program can only slow a run down), ``"median"`` the
    median. ``spread`` gives each figure's median / best - 1, ``disturbed`` a sentence when
    a spread passes :data:`DISTURBED_SPREAD` (else None), ``load`` the load average before
    and after. Bandwidths in GB/s, the peak in GFLOP/s. With ``progress`` a text bar shows
    the steps. ``clock`` is :func:`timing`'s (default: ``"cpu"`` on one thread, where it
    leaves out the time another program held the core, else ``"wall"``); ``waited`` gives
    each figure's share of time spent waiting for a core.
    """
    _repeats(repeats)
    statistic = validate.choice("statistic", statistic, _STATISTICS)
    _positive_int(matmul_n, "matmul_n", MAX_MATMUL_N)
    progress = validate.boolean("progress", progress)
    if threads is not None:
        threads = validate.integer("threads", threads, maximum=1024)
    min_seconds = validate.real("min_seconds", min_seconds, minimum=1e-6, maximum=60,
                                unit="seconds")
    if isinstance(sweep_mb, str | bytes) or not isinstance(sweep_mb, tuple | list) or not sweep_mb:
        raise ValueError(f"sweep_mb must be a non-empty list of sizes in MB, got "
                         f"{validate.shorten(sweep_mb)}")
    dram = dram_size_mb() if dram_mb is None else _size_mb(dram_mb, "dram_mb", arrays=1)
    copy_mb = max(1, dram // 2) if copy_mb is None else _size_mb(copy_mb, "copy_mb", arrays=2)
    sizes = sorted({_size_mb(s, "sweep_mb", arrays=1) for s in sweep_mb} | {dram})
    key = validate.choice("dtype", dtype, _MATMUL_DTYPES,
                          aliases={"float32": "fp32", "float64": "fp64", "float": "fp32"})
    bar = Progress(len(sizes) + 2, "measuring the host", show=progress)
    pick = "seconds" if statistic == "min" else "median_s"
    load_before = load_average()
    sweep, spread, waited = {}, {}, {}
    with blas_threads(threads):
        used = blas_info().get("threads")
        clock = default_clock(used if threads is None else threads, clock)
        for size in sizes:
            fn, moved = _matvec_kernel(size, pooled=True)
            t = timing(fn, repeats, min_seconds, clock)
            sweep[size], spread[f"read {size} MB"] = moved / t[pick] / 1e9, t["spread"]
            waited[f"read {size} MB"] = t["waited"]
            bar.step(f"read {size} MB: {sweep[size]:.1f} GB/s")
        fn, moved = _copy_kernel(copy_mb, pooled=True)
        t = timing(fn, repeats, min_seconds, clock)
        copy, spread["copy"], waited["copy"] = moved / t[pick] / 1e9, t["spread"], t["waited"]
        del fn
        bar.step(f"copy 2 x {copy_mb} MB: {copy:.1f} GB/s")
        fn, flops = _matmul_kernel(matmul_n, key)
        t = timing(fn, repeats, min_seconds, clock)
        peak, spread["matmul"], waited["matmul"] = flops / t[pick] / 1e9, t["spread"], t["waited"]
        bar.step(f"matmul {matmul_n}: {peak:.1f} GFLOP/s")
    load = {"before": load_before, "after": load_average()}
    busiest = max((v for v in load.values() if v is not None), default=None)
    return {
        "read_GBps": sweep[dram],
        "cache_GBps": max(sweep.values()),
        "copy_GBps": copy,
        "matmul_GFLOPS": peak,
        "dtype": key,
        "read_sweep": {str(k): v for k, v in sweep.items()},
        "read_mb": dram,
        "copy_mb": copy_mb,
        "matmul_n": matmul_n,
        "repeats": repeats,
        "statistic": statistic,
        "min_seconds": min_seconds,
        "threads": used if threads is None else threads,
        "clock": clock,
        "spread": spread,
        "waited": waited,
        "load": load,
        "disturbed": disturbance(spread, load=busiest, cpus=os.cpu_count(), waited=waited),
        "cpu": cpu_name(),
        "cpu_count": os.cpu_count(),
        "last_level_cache_bytes": last_level_cache_bytes(),
        "memory_bytes": total_memory_bytes(),
        "blas": blas_info(),
    }
