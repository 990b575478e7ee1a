#!/usr/bin/env python3
"""Shards against one file holding the same records: what reading a set of shards costs.

    python tools/bench_shards.py [--count 4000] [--shards 8] [--rounds 7] [--batch 128]

Writes (in a temporary directory) ``--count`` 64x64 JPEG records into one ``.rec`` and, the
same records in the same order, into ``--shards`` shards. Then, side by side in interleaved
rounds, in turn forwards and backwards (medians reported):

* ``dispatch``: ``reader.read_batch`` on the one file against the single-file
  ``read_batch`` with no shard dispatch (``before_shards`` below, its local path copied):
  what the shards' type check adds to the single-file path, per batch;
* ``read_batch``: a shuffled batch read from the one file and from the shards (per-shard
  groups, each parsed from its own map, put back in slot order);
* ``iterator``: an ``ImageRecordIter`` epoch (shuffled, 2 decode threads, 64x64 uint8) over
  each, images per second.
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

sys.path.insert(0, os.path.dirname(os.path.dirname(os.path.abspath(__file__))))

from recio import ImageRecordIter  # noqa: E402
from recio.records.batch import _read_local_batch, read_batch  # noqa: E402
from recio.records.file import RecordFile  # noqa: E402
from recio.records.format import IRHeader, pack  # noqa: E402
from recio.records.recordio import MXIndexedRecordIO  # noqa: E402
from recio.records.shards import open_records  # noqa: E402


def jpegs(count: int) -> list[bytes]:
    rng = np.random.default_rng(0)
    out = []
    base = np.mgrid[0:64, 0:64].sum(0)[..., None] * np.array([2, 1, 3])
    for _ in range(count):
        pixels = np.clip(base + rng.integers(0, 60, (64, 64, 3)), 0, 255).astype(np.uint8)
        buf = io.BytesIO()
        Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def write(folder: str, images: list[bytes], shards: int) -> tuple[str, str]:
    one = f"{folder}/one.rec"
    with MXIndexedRecordIO(one[:-4] + ".idx", one, "w") as w:
        for i, image in enumerate(images):
            w.write_idx(i, pack(IRHeader(0, float(i % 10), i, 0), image))
    bounds = np.linspace(0, len(images), shards + 1).astype(int)
    for k in range(shards):
        rec = f"{folder}/set-{k:05d}-of-{shards:05d}.rec"
        with MXIndexedRecordIO(rec[:-4] + ".idx", rec, "w") as w:
            for i in range(bounds[k], bounds[k + 1]):
                w.write_idx(i, pack(IRHeader(0, float(i % 10), i, 0), images[i]))
    return one, f"{folder}/set"


def before_shards(records, positions, label_width):
    """``reader.read_batch``'s local path with no shard dispatch (no type check)."""
    positions = np.asarray(positions, dtype=np.int64)
    records.check_open()
    if records.is_local:
        return _read_local_batch(records, positions, label_width)
    raise ValueError("a local file")


def per_batch(fn, batches) -> float:
    """Seconds per call of ``fn`` over ``batches``."""
    start = time.perf_counter()
    for positions in batches:
        fn(positions)
    return (time.perf_counter() - start) / len(batches)


def epoch_rate(spec: str) -> float:
    with ImageRecordIter(
        spec, data_shape=(3, 64, 64), batch_size=128, shuffle=True, preprocess_threads=2,
        dtype="uint8",
    ) as it:  # fmt: skip
        start = time.perf_counter()
        n = sum(len(b.index) - b.pad for b in it)
    return n / (time.perf_counter() - start)


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("--count", type=int, default=4000)
    parser.add_argument("--shards", type=int, default=8)
    parser.add_argument("--rounds", type=int, default=7)
    parser.add_argument("--batch", type=int, default=128)
    args = parser.parse_args()
    with tempfile.TemporaryDirectory() as folder:
        one_url, stem = write(folder, jpegs(args.count), args.shards)
        one, union = RecordFile(one_url), open_records(stem)
        rng = np.random.default_rng(1)
        batches = [rng.permutation(args.count)[: args.batch] for _ in range(200)]
        times: dict[str, list[float]] = {}
        readers = [
            ("dispatch: read_batch before shards", lambda p: before_shards(one, p, 1)),
            ("dispatch: read_batch, one file", lambda p: read_batch(one, p, 1)),
            ("read_batch, shards", lambda p: read_batch(union, p, 1)),
        ]
        for r in range(args.rounds):
            for name, fn in readers if r % 2 else readers[::-1]:  # no order favoured
                times.setdefault(name, []).append(per_batch(fn, batches) * 1e6)
            for name, spec in (("iterator, one file", one_url), ("iterator, shards", stem)):
                times.setdefault(name, []).append(epoch_rate(spec))
        print(f"{args.count} records of 64x64, {args.shards} shards, batches of {args.batch}, ")
        print(f"medians of {args.rounds} interleaved rounds")
        for name, values in times.items():
            unit = "images/s" if name.startswith("iterator") else "us/batch"
            print(f"  {name:<34} {statistics.median(values):>10.1f} {unit}")
        med = {k: statistics.median(v) for k, v in times.items()}
        ratio = med["dispatch: read_batch, one file"] / med["dispatch: read_batch before shards"]
        print(f"  read_batch one file, now / before shards: {ratio:.3f}x")
        print(
            f"  iterator shards / one file: "
            f"{med['iterator, shards'] / med['iterator, one file']:.3f}x"
        )
        one.close()
        union.close()


if __name__ == "__main__":
    main()
