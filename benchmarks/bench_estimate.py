"""Time one vectorised ``estimate`` sweep of 100,000 (batch, context) points; print JSON.

The first call also lambdifies the SymPy expressions (once per model structure); the figure
that matters is the best warm call.

    python benchmarks/bench_estimate.py [--repeats 5] [--smoke]
"""

import argparse
import json
import platform
import sys
import time

import numpy as np

import llm_roofline as lr


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--repeats", type=int, default=5, help="warm calls timed; the best is kept")
    ap.add_argument("--smoke", action="store_true", help="a 100-point sweep, one warm call (CI)")
    args = ap.parse_args(argv)
    if not 1 <= args.repeats <= 1000:
        ap.error(f"--repeats must be from 1 to 1000, got {args.repeats}")
    n_batch, n_context = (10, 10) if args.smoke else (400, 250)
    repeats = 1 if args.smoke else args.repeats
    batch, context = np.meshgrid(np.arange(1, n_batch + 1),
                                 np.linspace(128, 7936, n_context).astype(int))
    results = {}
    for name, gpus in (("llama-3-70b", 4), ("deepseek-v3", 8)):
        cfg = lr.get_model(name)
        times = []
        for _ in range(repeats + 1):
            start = time.perf_counter()
            lr.estimate(cfg, "h100", batch, context, 256, weight_dtype="fp8", kv_dtype="fp8",
                        n_gpus=gpus)
            times.append(time.perf_counter() - start)
        results[name] = {"first_s": times[0], "best_warm_s": min(times[1:])}
    return {
        "benchmark": "estimate sweep",
        "points": int(batch.size),
        "smoke": args.smoke,
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "results": results,
    }


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
