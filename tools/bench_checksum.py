"""What verifying per-record checksums costs the iterator, end to end, side by side.

Writes a small dataset (JPEG records with their checksum sidecar), then iterates it with
``verify_checksums=False`` and ``True``, alternating, and prints each setting's median
images/s and the ratio. Local files (the native one-call path: one CRC32C call per record
in the decode thread) and the same bytes on fsspec's memory:// store (the remote path:
extents checked as they are fetched, before parsing).

    python tools/bench_checksum.py [--records 1024] [--size 112] [--repeats 7]
"""

from __future__ import annotations

import argparse
import io
import os
import statistics
import sys
import tempfile
import time

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from recio.format import IRHeader, pack  # noqa: E402
from recio.iterator import ImageRecordIter  # noqa: E402
from recio.recordio import MXIndexedRecordIO  # noqa: E402


def make(folder: str, n: int, size: int) -> str:
    rng = np.random.default_rng(0)
    rec = os.path.join(folder, "b.rec")
    with MXIndexedRecordIO(os.path.join(folder, "b.idx"), rec, "w") as w:
        for i in range(n):
            yy, xx = np.mgrid[0:size, 0:size]
            img = np.stack([xx * 255 // size, yy * 255 // size, (xx + yy + i) % 256], -1)
            img = np.clip(img + rng.integers(0, 30, img.shape), 0, 255).astype(np.uint8)
            out = io.BytesIO()
            Image.fromarray(img).save(out, format="JPEG", quality=90)
            w.write_idx(i, pack(IRHeader(0, float(i % 10), i, 0), out.getvalue()))
    return rec


def epoch_rate(url: str, out: int, verify: bool) -> float:
    with ImageRecordIter(
        url,
        data_shape=(3, out, out),
        batch_size=64,
        preprocess_threads=2,
        verify_checksums=verify,
    ) as it:
        start = time.perf_counter()
        n = sum(len(b.index) for b in it)
        return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser()
    parser.add_argument("--records", type=int, default=1024)
    parser.add_argument("--size", type=int, default=112, help="stored image side")
    parser.add_argument("--out", type=int, default=0, help="output side (default: --size)")
    parser.add_argument("--repeats", type=int, default=7)
    args = parser.parse_args()
    out = args.out or args.size
    with tempfile.TemporaryDirectory() as folder:
        rec = make(folder, args.records, args.size)
        mb = os.path.getsize(rec) / 1e6
        print(f"{args.records} records of {args.size}x{args.size} JPEG ({mb:.1f} MB), out {out}")
        import fsspec

        fs = fsspec.filesystem("memory")
        for ext in ("rec", "idx", "crc"):
            fs.pipe(f"/bench/b.{ext}", open(os.path.join(folder, f"b.{ext}"), "rb").read())
        for where, url in (("local", rec), ("memory://", "memory://bench/b.rec")):
            epoch_rate(url, out, True)  # warm up: page cache, pool, imports
            rates: dict[bool, list[float]] = {False: [], True: []}
            for _ in range(args.repeats):
                for verify in (False, True):
                    rates[verify].append(epoch_rate(url, out, verify))
            off, on = (statistics.median(rates[v]) for v in (False, True))
            ratios = [b / a for a, b in zip(rates[False], rates[True], strict=True)]
            print(
                f"{where:10s} off {off:8.0f} img/s  on {on:8.0f} img/s  "
                f"on/off median {statistics.median(ratios):.3f} "
                f"(cost {100 * (1 - statistics.median(ratios)):+.1f} %)"
            )


if __name__ == "__main__":
    main()
