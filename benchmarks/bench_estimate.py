"""Time one vectorised ``estimate`` sweep of 100,000 (batch, context) points; print JSON.

Run: ``python benchmarks/bench_estimate.py``. The first call also lambdifies the SymPy
expressions (once per model structure); the figure that matters is the best warm call.
"""

import json
import platform
import time

import numpy as np

import llm_roofline as lr


def main(repeats: int = 5) -> dict:
    batch, context = np.meshgrid(np.arange(1, 401), np.linspace(128, 7936, 250).astype(int))
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
        "python": platform.python_version(),
        "numpy": np.__version__,
        "machine": platform.machine(),
        "results": results,
    }


if __name__ == "__main__":
    print(json.dumps(main(), indent=2))
