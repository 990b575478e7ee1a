#!/usr/bin/env python3
"""Fetch-side storage benchmark: every record of a .rec, local vs S3 vs HDFS, side by side.

For each (storage, order) it runs the loop the iterator's reader thread runs, without
decoding: epoch order -> batches -> Prefetcher -> RecordFile.read_many, touching every
page of every payload. It prints MB/s, records/s, read amplification (bytes fetched per
payload byte, and per image) and CPU seconds per second of wall time.

    tools/s3_server.sh start; tools/hdfs_server.sh start
    python tools/bench_storage.py data/corpus.rec --upload \\
        --s3 s3://test/bench/corpus.rec --hdfs hdfs://127.0.0.1:9000/bench/corpus.rec

Orders: seq (index order), block (block shuffle), shuffle (global permutation); with
--parts N, rank 0's share of N ranks. Block shuffle's canonical partitions are
--block-parts (default: one per rank, --parts; the iterator's default is 8).
S3 options default to the test server (http://127.0.0.1:8333, AWS_* env or testing/testing).
"""

from __future__ import annotations

import argparse
import json
import os
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parent.parent))  # run from a checkout

from recio import storage  # noqa: E402
from recio.records.file import RecordFile
from recio.records.index import default_idx_path  # noqa: E402
from recio.sampling.sampler import Sampler  # noqa: E402
from recio.storage import Prefetcher  # noqa: E402


def read_batches(kind: str, n: int, args) -> tuple[list[np.ndarray], int | None]:
    """Rank 0's batches of one epoch (of ``--parts`` ranks), as the iterator's sampler makes
    them, and its fetch group (batches per job: a block-shuffle window, else None)."""
    shuffle = {"seq": "none", "block": "block", "shuffle": "global"}[kind]
    lanes = args.block_parts or args.parts
    sampler = Sampler(n, args.batch, num_parts=args.parts, shuffle=shuffle, seed=args.seed,
                      block_size=args.block_size, window=args.window,
                      block_parts=lanes)  # fmt: skip
    plans = [sampler.plan(0, s) for s in range(sampler.steps_in_epoch(0))]
    return [p.positions[: args.batch - p.pad] for p in plans], sampler.fetch_group()


def run(url: str, options: dict | None, kind: str, args, presign: bool = True) -> dict:
    fetch = storage.FetchOptions(
        gap=args.gap,
        max_request=args.max_request,
        concurrency=args.concurrency,
        presign_s3=presign,
    )
    rf = RecordFile(url, storage_options=options, fetch=fetch)
    batches, window = read_batches(kind, len(rf), args)
    # Global shuffle: coalescing cannot help, so each batch is its own job, more in flight.
    # Block shuffle: one window per job, as the iterator does (Sampler.fetch_group).
    group = 0 if kind == "shuffle" else args.group_bytes
    depth = args.depth * 2 if kind == "shuffle" else 1 if window else args.depth
    payload_bytes = records = 0
    checksum = 0
    t0, c0 = time.perf_counter(), time.process_time()
    jobs = Prefetcher(rf, batches, depth=depth, group_bytes=group, group_batches=window)
    for _, payloads in jobs:
        for p in payloads:
            a = np.frombuffer(p, np.uint8)
            checksum += int(a[::4096].sum())  # touch every page, as a decoder would
            payload_bytes += len(a)
        records += len(payloads)
    wall, cpu = time.perf_counter() - t0, time.process_time() - c0
    fetched = rf.source.stats["bytes"] if isinstance(rf.source, storage.FsspecSource) else None
    requests = rf.source.stats["requests"] if fetched is not None else None
    rf.close()
    return {
        "url": url,
        "order": kind,
        "records": records,
        "MB/s": payload_bytes / wall / 1e6,
        "rec/s": records / wall,
        "seconds": wall,
        "cpu/wall": cpu / wall,
        "requests": requests,
        "amplification": (fetched / payload_bytes) if fetched else 1.0,
        "KB fetched/image": (fetched or payload_bytes) / records / 1e3,
    }


def upload(local: str, url: str, options: dict | None) -> None:
    for src, dst in ((local, url), (default_idx_path(local), default_idx_path(url))):
        fs, path = storage.filesystem(dst, options)
        if fs.exists(path) and fs.size(path) == os.path.getsize(src):
            continue
        out = storage.AtomicOutput(dst, options)
        with open(src, "rb") as f:
            while chunk := f.read(8 << 20):
                out.write(chunk)
        out.commit()


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(
        description=__doc__, formatter_class=argparse.RawDescriptionHelpFormatter
    )
    ap.add_argument("rec", help="local .rec (with its .idx)")
    ap.add_argument("--s3", help="s3:// URL of the same file")
    ap.add_argument("--hdfs", help="hdfs:// (or webhdfs://) URL of the same file")
    ap.add_argument(
        "--s3-endpoint", default=os.environ.get("RECIO_S3_ENDPOINT", "http://127.0.0.1:8333")
    )
    ap.add_argument("--upload", action="store_true", help="copy the local file to the URLs first")
    ap.add_argument("--orders", default="seq,block,shuffle")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--depth", type=int, default=2, help="fetch jobs in flight")
    ap.add_argument("--group-bytes", type=int, default=32 << 20)
    ap.add_argument("--max-request", type=int, default=16 << 20)
    ap.add_argument("--gap", type=int, default=256 << 10)
    ap.add_argument("--concurrency", type=int, default=8)
    ap.add_argument("--block-size", type=int, default=256)
    ap.add_argument("--window", type=int, default=4)
    ap.add_argument("--seed", type=int, default=0)
    ap.add_argument("--parts", type=int, default=1, help="ranks; rank 0's share is read")
    ap.add_argument("--block-parts", type=int, help="block shuffle's partitions (default: --parts)")
    ap.add_argument("--repeat", type=int, default=2, help="runs per case; the best is kept")
    ap.add_argument("--json", help="also write the results here")
    args = ap.parse_args(argv)
    s3_options = {
        "endpoint_url": args.s3_endpoint,
        "key": os.environ.get("AWS_ACCESS_KEY_ID", "testing"),
        "secret": os.environ.get("AWS_SECRET_ACCESS_KEY", "testing"),
    }
    targets = [("local", args.rec, None, True)]
    if args.s3:  # ranges over a presigned URL (recio's default), and one botocore call each
        targets.append(("s3", args.s3, s3_options, True))
        targets.append(("s3-boto", args.s3, s3_options, False))
    if args.hdfs:
        options = {"user": "root"} if args.hdfs.startswith("web") else None
        targets.append(("hdfs", args.hdfs, options, True))
    if args.upload:
        for _, url, options, _ in targets[1:]:
            upload(args.rec, url, options)
    results = []
    head = f"{'storage':8} {'order':8} {'MB/s':>8} {'rec/s':>8} {'vs local':>8} {'cpu/wall':>8} "
    print(head + f"{'requests':>8} {'ampl.':>6} {'KB/img':>7}")  # s3-boto: presign_s3=False
    for kind in args.orders.split(","):
        local_rate = None
        for name, url, options, presign in targets:
            best = max(
                (run(url, options, kind, args, presign) for _ in range(args.repeat)),
                key=lambda r: r["rec/s"],
            )
            best["storage"] = name
            results.append(best)
            local_rate = local_rate or best["rec/s"]
            print(
                f"{name:8} {kind:8} {best['MB/s']:8.1f} {best['rec/s']:8.0f} "
                f"{best['rec/s'] / local_rate:8.2f} {best['cpu/wall']:8.2f} "
                f"{best['requests'] if best['requests'] is not None else '-':>8} "
                f"{best['amplification']:6.2f} {best['KB fetched/image']:7.1f}",
                flush=True,
            )
    if args.json:
        Path(args.json).write_text(json.dumps(results, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
