"""CPU time per image of the native decode pool: one thread, RandomResizedCrop 224 + flip.

    python tools/bench_pool_cpu.py [REC]        # default: the built-in sample (400 JPEGs)

Process CPU (user + system) rather than wall time, so that other jobs on a shared machine
disturb it less; the best of 3 passes over 12 batches of 64. To compare two builds, run it
in turn with each on PYTHONPATH (e.g. a git worktree of the older commit with its extension
built in place) and compare the medians of several rounds.
"""

from __future__ import annotations

import os
import resource
import sys
import tempfile

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.bench.sample import build_sample_rec  # noqa: E402
from recio.decode import DecodePool  # noqa: E402
from recio.records.file import RecordFile  # noqa: E402
from recio.records.format import unpack  # noqa: E402

BATCH, BATCHES = 64, 12


def cpu_seconds() -> float:
    usage = resource.getrusage(resource.RUSAGE_SELF)
    return usage.ru_utime + usage.ru_stime


def main() -> int:
    with tempfile.TemporaryDirectory() as tmp:
        rec = sys.argv[1] if len(sys.argv) > 1 else build_sample_rec(tmp, 400)
        with RecordFile(rec) as records:
            images = [bytes(unpack(records.read(i))[1]) for i in range(len(records))]
    pool = DecodePool(1)
    sizes = pool.image_sizes(images)
    spec = CropSpec(224, 224, random_resized_crop=True, rand_mirror=True)
    out = np.empty((BATCH, 224, 224, 3), np.uint8)
    batches = []
    for step in range(BATCHES):
        k = (step * BATCH) % (len(images) - BATCH)
        windows, flips = KeyedDraw(spec, 0, step).windows(
            sizes[k : k + BATCH], np.arange(k, k + BATCH)
        )
        batches.append((images[k : k + BATCH], windows, flips))
    for imgs, windows, flips in batches[:3]:  # warm-up
        pool.decode_batch(imgs, out, crops=windows, flips=flips)
    passes = []
    for _ in range(3):
        start = cpu_seconds()
        for imgs, windows, flips in batches:
            pool.decode_batch(imgs, out, crops=windows, flips=flips)
        passes.append((cpu_seconds() - start) / (BATCH * BATCHES) * 1e6)
    print(f"{min(passes):.1f} us of CPU per image (best of 3 passes of {BATCH * BATCHES})")
    return 0


if __name__ == "__main__":
    sys.exit(main())
