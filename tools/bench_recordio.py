"""Raw RecordIO read and index-scan throughput, side by side with MXNet's reader.

    python tools/bench_recordio.py CORPUS_DIR [--mxnet-python PATH] [--workdir DIR]

Packs the corpus (original JPEG bytes) into WORKDIR/corpus.rec once, then
measures from the page cache: reading every record's payload (memoryview and
bytes), rebuilding the index by scanning, and — when --mxnet-python points at
a Python with mxnet 1.9.1 — MXNet's MXRecordIO.read() loop on the same file.
Prints medians of several runs.
"""

from __future__ import annotations

import argparse
import os
import statistics
import subprocess
import time

from recio.records.file import RecordFile
from recio.records.format import IRHeader, pack, scan_offsets
from recio.records.recordio import MXIndexedRecordIO, MXRecordIO

MXNET_READ = r"""
import sys, time, mxnet as mx
r = mx.recordio.MXRecordIO(sys.argv[1], "r")
rates = []
for _ in range(int(sys.argv[2])):
    r.reset(); n = 0; nbytes = 0; t = time.perf_counter()
    while True:
        s = r.read()
        if s is None: break
        n += 1; nbytes += len(s)
    rates.append(nbytes / (time.perf_counter() - t))
rates.sort(); print(rates[len(rates) // 2])
"""


def pack_corpus(corpus: str, rec: str) -> None:
    if os.path.exists(rec):
        return
    classes = sorted(d for d in os.listdir(corpus) if os.path.isdir(os.path.join(corpus, d)))
    key = 0
    with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
        for label, name in enumerate(classes):
            for fname in sorted(os.listdir(os.path.join(corpus, name))):
                with open(os.path.join(corpus, name, fname), "rb") as f:
                    w.write_idx(key, pack(IRHeader(0, float(label), key, 0), f.read()))
                key += 1


def median_rate(work, repeats: int) -> float:
    work()  # warm the page cache
    rates = []
    for _ in range(repeats):
        start = time.perf_counter()
        amount = work()
        rates.append(amount / (time.perf_counter() - start))
    return statistics.median(rates)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("corpus")
    parser.add_argument("--workdir", default=".bench")
    parser.add_argument("--mxnet-python", help="a python with mxnet 1.9.1 installed")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    os.makedirs(args.workdir, exist_ok=True)
    rec = os.path.join(args.workdir, "corpus.rec")
    pack_corpus(args.corpus, rec)
    size = os.path.getsize(rec)
    print(f"{rec}: {size / 1e6:.1f} MB")

    def read_sequential_views() -> int:
        r = MXRecordIO(rec, "r")
        total = 0
        while (p := r.read_view()) is not None:
            total += len(p)
        r.close()
        return total

    def read_sequential_bytes() -> int:
        with MXRecordIO(rec, "r") as r:
            return sum(len(p) for p in r)

    rf = RecordFile(rec)

    def read_indexed_views() -> int:
        return sum(len(rf.read(i)) for i in range(len(rf)))

    def scan() -> int:
        scan_offsets(rf.source.buffer)
        return size

    results = {
        "sequential read, memoryview payloads": median_rate(read_sequential_views, args.repeats),
        "sequential read, bytes payloads (MXNet's read())": median_rate(
            read_sequential_bytes, args.repeats
        ),
        "indexed read (RecordFile.read), memoryview": median_rate(read_indexed_views, args.repeats),
        "index rebuild scan": median_rate(scan, args.repeats),
    }
    if args.mxnet_python:
        out = subprocess.run(
            [args.mxnet_python, "-c", MXNET_READ, rec, str(args.repeats)],
            capture_output=True,
            text=True,
            check=True,
        )
        results["MXNet 1.9.1 MXRecordIO.read() loop"] = float(out.stdout.split()[-1])
    for name, rate in results.items():
        print(f"{name:<50} {rate / 1e9:6.2f} GB/s")
    if args.mxnet_python:
        ours = results["sequential read, bytes payloads (MXNet's read())"]
        base = results["MXNet 1.9.1 MXRecordIO.read() loop"]
        print(f"ratio recio bytes read / MXNet read: {ours / base:.2f}")


if __name__ == "__main__":
    main()
