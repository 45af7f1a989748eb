"""Does the tiny NumPy Llama sit on the roofline it teaches? Prints JSON.

For a model whose weights (about 250 MB in float32) are far larger than the last-level
cache, at batch 1:

* a decode step should move its bytes (weights + KV cache) at >= 70 % of the host's copy
  bandwidth (memory-bound: GEMV);
* a prefill of 512 tokens should reach >= 60 % of the host's float32 matmul peak
  (compute-bound: GEMM).

Both are timed with the tally off and on. The host figures come from llm_roofline.measure,
and the BLAS kernel in use is reported (OPENBLAS_CORETYPE can force a slower one). A last
section times a decode step of a model so small that the Python around the operations is most
of its time: there the cost of the tally's bookkeeping, off and on, shows. The last section
times the pitfall the model avoids by keeping activations 2-D ``[tokens, features]``:
a stacked 3-D operand against a transposed weight, which NumPy runs as one BLAS call per
batch row (and einsum, here, without BLAS).

    python benchmarks/bench_tiny.py [--prompt 512] [--rounds 5] [--repeats 3]
"""

import argparse
import json
from statistics import median

import numpy as np

from llm_roofline import counts
from llm_roofline.measure import blas_info, copy_bandwidth, matmul_peak, matvec_bandwidth, median_seconds
from llm_roofline.models import ModelConfig
from llm_roofline.tiny import Tally, TinyLlama, weight_shapes

CFG = ModelConfig("bench-250MB", vocab_size=8192, hidden_size=1024, intermediate_size=2816,
                  n_layers=4, n_heads=16, n_kv_heads=4, head_dim=64, max_context=1024)


def profile(tally, phase, top=6):
    """The operations that took most of the phase's time, with their share."""
    rows = [r for r in tally.rows() if r["phase"] == phase]
    wall = sum(r["seconds"] for r in rows)
    rows.sort(key=lambda r: -r["seconds"])
    return {r["op"]: round(r["seconds"] / wall, 3) for r in rows[:top]}


def pitfall(repeats):
    """x @ W.T, a 134 MB weight: stacked 3-D ``[B, n, d]`` vs flat 2-D ``[B*n, d]``, GFLOP/s.

    NumPy runs a stacked product as one BLAS call per batch row, so a batched decode step
    reads the weights B times; einsum does not use BLAS at all here.
    """
    w = np.random.default_rng(0).standard_normal((8192, 4096), dtype=np.float32)
    out = {}
    for name, (b, n) in {"decode_batch_8": (8, 1), "prefill_batch_4x128": (4, 128)}.items():
        x3 = np.ones((b, n, w.shape[1]), np.float32)
        x2 = x3.reshape(b * n, w.shape[1])
        flops = 2 * b * n * w.size
        runs = {
            "stacked_3d_GFLOPS": lambda x3=x3: x3 @ w.T,
            "flat_2d_GFLOPS": lambda x2=x2: x2 @ w.T,
            "einsum_GFLOPS": lambda x3=x3: np.einsum("bnd,od->bno", x3, w),
        }
        out[name] = {k: flops / median_seconds(fn, repeats) / 1e9 for k, fn in runs.items()}
    return out


SMALL = ModelConfig("bench-small", vocab_size=256, hidden_size=64, intermediate_size=172,
                    n_layers=2, n_heads=4, n_kv_heads=2, head_dim=16, max_context=64)


def small_model_overhead(repeats):
    """Microseconds per decode step (batch 1, context 17) of :data:`SMALL`, tally off and on."""
    model = TinyLlama.random(SMALL, seed=0)
    _, cache = model.prefill(np.arange(16)[None], max_len=32)
    last = np.array([3])

    def step(on):
        model.decode(last, cache, tally=Tally() if on else None)
        cache.length -= 1

    # several rounds, alternating, so that a busy machine slows both alike; median of rounds
    times = {False: [], True: []}
    for _ in range(5):
        for on in (False, True):
            times[on].append(median_seconds(lambda on=on: step(on), repeats))
    return {"decode_us_tally_off": 1e6 * median(times[False]),
            "decode_us_tally_on": 1e6 * median(times[True])}


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--prompt", type=int, default=512, help="prefill length = decode context")
    ap.add_argument("--rounds", type=int, default=5, help="rounds of host + model timings")
    ap.add_argument("--repeats", type=int, default=3, help="timed runs per figure and round")
    args = ap.parse_args()

    model = TinyLlama.random(CFG, seed=0, dtype=np.float32)
    weight_mb = sum(int(np.prod(s)) for s in weight_shapes(CFG).values()) * 4 / 1e6
    prompt = np.random.default_rng(0).integers(0, CFG.vocab_size, (1, args.prompt))
    _, cache = model.prefill(prompt)
    last = prompt[:, -1]

    def prefill(on):
        model.prefill(prompt, tally=Tally() if on else None)

    def step(on):  # one decode step at context prompt + 1, then rewind so every run is the same
        model.decode(last, cache, tally=Tally() if on else None)
        cache.length -= 1

    # FLOPs as executed (the whole score block, then masked) and as a causal kernel needs them
    pre = counts.op_costs(CFG, 1, args.prompt, weight_dtype="fp32", causal=False)
    pre_causal = counts.op_costs(CFG, 1, args.prompt, weight_dtype="fp32", causal=True)
    dec = counts.op_costs(CFG, 1, 1, args.prompt, weight_dtype="fp32")
    # what a decode step must move: every weight but the embedding table, and the KV cache
    weights_kv = sum(w.nbytes for k, w in model.w.items() if k != "model.embed_tokens.weight")
    weights_kv += dec["kv_read"].bytes_read

    # Host and model are timed in the same rounds, so that a busy machine slows both alike;
    # each figure is the median over rounds.
    keys = ("copy_GBps", "matvec_GBps", "matmul_GFLOPS", "prefill_s", "prefill_tally_s",
            "decode_s", "decode_tally_s")
    rounds = {k: [] for k in keys}
    for _ in range(args.rounds):
        rounds["copy_GBps"].append(copy_bandwidth(512, args.repeats))
        rounds["matvec_GBps"].append(matvec_bandwidth(512, args.repeats))
        rounds["matmul_GFLOPS"].append(matmul_peak(2048, args.repeats))
        for on in (False, True):
            rounds["prefill_tally_s" if on else "prefill_s"].append(
                median_seconds(lambda on=on: prefill(on), args.repeats))
            rounds["decode_tally_s" if on else "decode_s"].append(
                median_seconds(lambda on=on: step(on), 5 * args.repeats))
    m = {k: median(v) for k, v in rounds.items()}
    decode_GBps = weights_kv / m["decode_s"] / 1e9
    prefill_GFLOPS = counts.total(pre).flops / m["prefill_s"] / 1e9

    tally = Tally()
    model.prefill(prompt, tally=tally)
    model.decode(last, cache, tally=tally)
    cache.length -= 1

    report = {
        "config": {"name": CFG.name, "weights_MB": weight_mb, "batch": 1, "prompt": args.prompt},
        "host": {k: m[k] for k in ("copy_GBps", "matvec_GBps", "matmul_GFLOPS")}
        | {"blas": blas_info()},
        "decode_step": {
            "bytes_weights_and_kv": weights_kv,
            "bytes_counted": counts.total(dec).bytes,
            "seconds_tally_off": m["decode_s"],
            "seconds_tally_on": m["decode_tally_s"],
            "GBps_weights_and_kv": decode_GBps,
            "fraction_of_copy_bandwidth": decode_GBps / m["copy_GBps"],
            "fraction_of_matvec_bandwidth": decode_GBps / m["matvec_GBps"],
            "target_fraction_of_copy": 0.70,
            "note": "copy bandwidth counts 2 x size (STREAM); write-allocate can make the bus "
                    "carry up to 3 x size on x86, so this read-mostly step may exceed 100 % of "
                    "it; compare with fraction_of_matvec_bandwidth",
            "profile": profile(tally, "decode"),
        },
        "prefill": {
            "flops_executed": counts.total(pre).flops,
            "flops_causal": counts.total(pre_causal).flops,
            "seconds_tally_off": m["prefill_s"],
            "seconds_tally_on": m["prefill_tally_s"],
            "GFLOPS_executed": prefill_GFLOPS,
            "fraction_of_matmul_peak": prefill_GFLOPS / m["matmul_GFLOPS"],
            "target_fraction_of_peak": 0.60,
            "profile": profile(tally, "prefill"),
        },
        "rounds": rounds,
        "small_model_python_overhead": small_model_overhead(400 * args.repeats),
        "pitfall_stacked_3d_matmul": pitfall(args.repeats),
    }
    print(json.dumps(report, indent=2))


if __name__ == "__main__":
    main()
