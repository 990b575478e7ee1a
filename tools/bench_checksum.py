"""What verifying per-record checksums costs the iterator, end to end, side by side.

Writes a small dataset (JPEG records with their checksum sidecar), then iterates it with
``verify_checksums=False`` and ``True``, alternating, and prints each setting's median
images/s (wall) and CPU time per image (all threads; steadier on a loaded machine), and
the median of the paired ratios. Local files (the native one-call path: one CRC32C call per record
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


def epoch_rate(url: str, out: int, verify: bool) -> tuple[float, float]:
    """One epoch: (images per second of wall time, CPU microseconds per image)."""
    with ImageRecordIter(
        url,
        data_shape=(3, out, out),
        batch_size=64,
        preprocess_threads=2,
        verify_checksums=verify,
    ) as it:
        start, cpu = time.perf_counter(), time.process_time()
        n = sum(len(b.index) for b in it)
        wall, cpu = time.perf_counter() - start, time.process_time() - cpu
        return n / wall, 1e6 * cpu / n


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
            with open(os.path.join(folder, f"b.{ext}"), "rb") as f:
                fs.pipe(f"/bench/b.{ext}", f.read())
        for where, url in (("local", rec), ("memory://", "memory://bench/b.rec")):
            epoch_rate(url, out, True)  # warm up: page cache, pool, imports
            runs: dict[bool, list[tuple[float, float]]] = {False: [], True: []}
            for _ in range(args.repeats):
                for verify in (False, True):
                    runs[verify].append(epoch_rate(url, out, verify))
            for k, what in ((0, "img/s (wall)"), (1, "CPU us/img")):
                off, on = (statistics.median(r[k] for r in runs[v]) for v in (False, True))
                pairs = zip(runs[False], runs[True], strict=True)
                ratio = statistics.median(b[k] / a[k] for a, b in pairs)
                cost = 100 * (1 - ratio) if k == 0 else 100 * (ratio - 1)
                print(
                    f"{where:10s} {what:13s} off {off:8.1f}  on {on:8.1f}  "
                    f"paired on/off median {ratio:.3f} (cost {cost:+.1f} %)"
                )


if __name__ == "__main__":
    main()
