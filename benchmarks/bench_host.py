"""Print the host's roofline constants (measure.py) as JSON.

    python benchmarks/bench_host.py [--bandwidth-mb 512] [--matmul-n 2048] [--repeats 7]
"""

import argparse
import json

from llm_roofline.measure import measure_host


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--bandwidth-mb", type=int, default=512, help="bandwidth arrays, MB")
    ap.add_argument("--matmul-n", type=int, default=2048, help="matmul matrix side")
    ap.add_argument("--repeats", type=int, default=7, help="timed runs; the median is reported")
    args = ap.parse_args()
    print(json.dumps(measure_host(args.bandwidth_mb, args.matmul_n, args.repeats), indent=2))


if __name__ == "__main__":
    main()
