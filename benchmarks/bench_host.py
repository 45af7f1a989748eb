"""Print the host's roofline constants (llm_roofline.measure) as JSON.

The roofline chapter 8 measures (``measure.measure_roofline``: GEMV read bandwidth per
working-set size, copy bandwidth, float32 GEMM rate, each the best of several samples with its
spread, and a warning when the run was disturbed), on a fixed number of BLAS threads.

    python benchmarks/bench_host.py [--matmul-n 1024] [--repeats 5] [--threads N] [--smoke]
"""

import argparse
import json
import os
import sys

from llm_roofline.measure import measure_roofline


def main(argv=None) -> dict:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--dram-mb", type=int, default=None,
                    help="main-memory read size, MB (default: twice the last-level cache)")
    ap.add_argument("--matmul-n", type=int, default=1024, help="matmul matrix side")
    ap.add_argument("--repeats", type=int, default=5, help="samples per figure; the best is kept")
    ap.add_argument("--threads", type=int, default=os.cpu_count() or 1, help="BLAS threads")
    ap.add_argument("--smoke", action="store_true", help="tiny sizes, for seconds (CI)")
    args = ap.parse_args(argv)
    options = dict(dram_mb=args.dram_mb, matmul_n=args.matmul_n, repeats=args.repeats)
    if args.smoke:
        options = dict(sweep_mb=(1,), dram_mb=8, copy_mb=4, matmul_n=128, repeats=2)
    try:
        return measure_roofline(**options, threads=args.threads, progress=False)
    except ValueError as err:
        ap.error(str(err))


if __name__ == "__main__":
    print(json.dumps(main(sys.argv[1:]), indent=2))
