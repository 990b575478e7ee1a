"""Images/s of the recio-fed DALI stage against DALI's own readers.mxnet, same graph, same run.

python tools/bench_dali.py DATA.rec [--batch-size 64] [--threads 2] [--seconds 3]
"""

from __future__ import annotations

import argparse
import json
import sys


def main(argv: list[str] | None = None) -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("rec", help=".rec file (its .idx beside it)")
    parser.add_argument("--idx", default=None)
    parser.add_argument("--batch-size", type=int, default=64)
    parser.add_argument("--size", type=int, default=224, help="output height and width")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=1.0, help="per round and pipeline")
    parser.add_argument("--rounds", type=int, default=15)
    parser.add_argument("--device", default="cpu", choices=["cpu", "gpu", "auto"])
    parser.add_argument("--json", action="store_true", help="print the whole result as JSON")
    args = parser.parse_args(argv)

    from recio.dali.bench import bench_pipelines

    res = bench_pipelines(
        args.rec,
        args.batch_size,
        (args.size, args.size),
        args.threads,
        args.seconds,
        rounds=args.rounds,
        device=args.device,
        idx=args.idx,
    )
    if args.json:
        print(json.dumps(res, indent=1))
        return 0
    print(f"device={res['device']} batch={args.batch_size} size={args.size} threads={args.threads}")
    for name, rate in res["images_per_s"].items():
        rounds = " ".join(f"{r:.0f}" for r in res["rounds"][name])
        print(f"  {name:14s} {rate:8.1f} images/s (median; rounds: {rounds})")
    print("  median of paired per-round ratios:")
    print(f"    recio / dali_mxnet         = {res['ratio_recio_vs_dali_mxnet']:.3f}")
    print(f"    recio_windows / dali_mxnet = {res['ratio_recio_windows_vs_dali_mxnet']:.3f}")
    return 0


if __name__ == "__main__":
    sys.exit(main())
