"""MXNet's own ``ImageRecordIter`` as a baseline, run in a Python that has mxnet 1.9.1."""

from __future__ import annotations

import json
import subprocess

from .stages import summary

MXNET_SCRIPT = r"""
import json, sys, time
import mxnet as mx
rec, batch, threads, seconds, repeats, c, h, w = sys.argv[1:9]
batch, threads, repeats = int(batch), int(threads), int(repeats)
it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(int(c), int(h), int(w)),
    batch_size=batch, shuffle=True, random_resized_crop=True, min_random_area=0.08,
    max_random_area=1.0, min_aspect_ratio=3/4, max_aspect_ratio=4/3, rand_mirror=True,
    preprocess_threads=threads, dtype="uint8")
def run(limit):
    n = 0; t = time.perf_counter()
    while time.perf_counter() - t < limit:
        try:
            b = it.next()
        except StopIteration:
            it.reset(); continue
        b.data[0].wait_to_read(); n += batch - b.pad
    return n / (time.perf_counter() - t)
run(1.0)
print(json.dumps([run(float(seconds)) for _ in range(repeats)]))
"""


def stage_mxnet(rec, mxnet_python, threads, batch_size, shape, seconds, repeats) -> dict:
    """MXNet's own ImageRecordIter in a separate Python (it needs numpy 1.x)."""
    cmd = [
        mxnet_python,
        "-c",
        MXNET_SCRIPT,
        rec,
        str(batch_size),
        str(threads),
        str(seconds),
        str(repeats),
        *map(str, shape),
    ]
    out = subprocess.run(cmd, capture_output=True, text=True, timeout=600)
    if out.returncode:
        raise RuntimeError(out.stderr.strip().splitlines()[-1] if out.stderr else "failed")
    rates = json.loads(out.stdout.strip().splitlines()[-1])
    return {"images_per_s": summary(rates)}
