#!/usr/bin/env python3
"""The iterator end to end from local disk, S3 and HDFS, side by side, in alternating rounds.

    python tools/bench_remote_iter.py LOCAL.rec --s3 s3://test/bench/corpus.rec \\
        --hdfs hdfs://127.0.0.1:9000/bench/corpus.rec [--upload] [--seconds 8] [--rounds 3]

RandomResizedCrop(224) + flip, uint8 NCHW, batch 128, 2 decode threads: the same
iterator settings everywhere; only the URL and the shuffle mode change. Each
round runs every configuration for ``--seconds`` (after a warm-up batch), so
load on a shared machine hits them alike; medians of rounds, ratios to local,
and bytes fetched per image (read amplification) for the remote ones.
S3 options default to the test server (http://127.0.0.1:8333, testing/testing).
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from recio import storage  # noqa: E402
from recio.pipeline.iterator import ImageRecordIter  # noqa: E402


def s3_options() -> dict:
    return {
        "endpoint_url": os.environ.get("RECIO_S3_ENDPOINT", "http://127.0.0.1:8333"),
        "key": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        "secret": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
    }


def upload(local: str, url: str, options: dict) -> None:
    fs, path = storage.filesystem(url, options)
    fs.put_file(local, path)
    fs.put_file(local[:-4] + ".idx", path[:-4] + ".idx")


def run_for(it: ImageRecordIter, seconds: float) -> float:
    stream = iter(it)
    done = 0
    start = time.perf_counter()
    while time.perf_counter() - start < seconds:
        try:
            batch = next(stream)
        except StopIteration:
            stream = iter(it)
            continue
        done += len(batch.index) - batch.pad
    return done / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("local")
    parser.add_argument("--s3")
    parser.add_argument("--hdfs")
    parser.add_argument("--upload", action="store_true", help="copy the local .rec/.idx first")
    parser.add_argument("--seconds", type=float, default=8.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--batch-size", type=int, default=128)
    parser.add_argument("--json")
    args = parser.parse_args()

    targets = [("local", args.local, None)]
    if args.s3:
        targets.append(("S3", args.s3, s3_options()))
    if args.hdfs:
        targets.append(("HDFS", args.hdfs, None))
    if args.upload:
        for _, url, options in targets[1:]:
            upload(args.local, url, options or {})
    configs = []
    for name, url, options in targets:
        configs.append((f"{name}, global shuffle", url, options, "global"))
        if name != "local":
            configs.append((f"{name}, block shuffle", url, options, "block"))
    iters = {}
    for label, url, options, mode in configs:
        iters[label] = ImageRecordIter(
            url, (3, 224, 224), args.batch_size, shuffle=True, seed=0, shuffle_mode=mode,
            random_resized_crop=True, rand_mirror=True, dtype="uint8",
            preprocess_threads=args.threads, storage_options=options,
        )  # fmt: skip
        next(iter(iters[label]))  # warm-up: threads, connections, size cache
    rates: dict[str, list[float]] = {label: [] for label in iters}
    for _ in range(args.rounds):
        for label, it in iters.items():
            rates[label].append(run_for(it, args.seconds))
    local = statistics.median(rates["local, global shuffle"])
    results = {}
    for label, it in iters.items():
        median = statistics.median(rates[label])
        entry = {"images_per_s": median, "rounds": rates[label], "ratio_to_local": median / local}
        stats = getattr(it.records.source, "stats", None)
        if stats:
            images = it.stats.decoded or 1
            entry["bytes_fetched_per_image"] = stats["bytes"] / images
            entry["requests"] = stats["requests"]
            entry["retries"] = stats["retries"]
        results[label] = entry
        it.close()
        extra = ""
        if "bytes_fetched_per_image" in entry:
            extra = f"  {entry['bytes_fetched_per_image'] / 1e3:,.1f} KB fetched/image"
        print(f"{label:<24} {median:8,.0f} images/s  {median / local:5.2f}x local{extra}")
    if args.json:
        with open(args.json, "w") as f:
            json.dump(results, f, indent=1)


if __name__ == "__main__":
    main()
