"""Colour augmentation's cost: RandomResizedCrop(224) + flip, with and without MXNet's
brightness/contrast/saturation 0.4 and pca_noise 0.1, side by side in one run; optionally
MXNet 1.9.1's ImageRecordIter with the same settings on the same .rec.

    python tools/bench_colour.py [--rec data.rec] [--images 300] [--rounds 5] [--threads 2]
                                 [--dtype float32] [--normalize]
                                 [--mxnet /path/to/mxnet-venv/bin/python]

Each round reads one epoch in every setting (their order turned round each round) and
prints images/s and images per CPU second of this process (steadier on a shared machine);
the summary is the median per setting and the ratio to RRC + flip alone.
Without --rec it builds recio's sample dataset (JPEGs of 160-480 px sides) in a temporary
directory. ``--normalize`` adds ImageNet's mean/std (the store's table is then looked up).

For instruction counts, ``--decode-only SETTING`` decodes the first ``--count`` records of
the .rec once (one ``decode_batch``, one thread, ``--layout``) in that setting, for callgrind::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_decode_drawn \
        python tools/bench_colour.py --rec R.rec --decode-only rrc+flip+colour --count 16
"""

from __future__ import annotations

import argparse
import json
import resource
import statistics
import subprocess
import tempfile
import time

import numpy as np

from recio import ImageRecordIter
from recio.augment import ColourSpec, CropSpec, KeyedDraw
from recio.bench.sample import build_sample_rec
from recio.decode import DecodePool
from recio.records.recordio import MXIndexedRecordIO, unpack

COLOUR = {"brightness": 0.4, "contrast": 0.4, "saturation": 0.4, "pca_noise": 0.1}
BASE = {"data_shape": (3, 224, 224), "batch_size": 32, "random_resized_crop": True,
        "rand_mirror": True, "shuffle": True, "dtype": "float32"}  # fmt: skip
SETTINGS = {"rrc+flip": {}, "rrc+flip+colour": COLOUR}
IMAGENET = {"mean_r": 123.68, "mean_g": 116.78, "mean_b": 103.94, "std_r": 58.4,
            "std_g": 57.12, "std_b": 57.38}  # fmt: skip

MXNET = """
import json, sys, time
import mxnet as mx
rec, threads, rounds = sys.argv[1], int(sys.argv[2]), int(sys.argv[3])
colour = json.loads(sys.argv[4])
it = mx.io.ImageRecordIter(path_imgrec=rec, data_shape=(3, 224, 224), batch_size=32,
    random_resized_crop=True, rand_mirror=True, shuffle=True, min_random_area=0.08,
    max_random_area=1.0, min_aspect_ratio=3 / 4, max_aspect_ratio=4 / 3,
    preprocess_threads=threads, verbose=False, **colour)
rates = []
for _ in range(rounds):
    it.reset()
    n, t = 0, time.perf_counter()
    for b in it:
        b.data[0].wait_to_read()
        n += 32 - b.pad
    rates.append(n / (time.perf_counter() - t))
print(json.dumps(rates))
"""


def cpu_seconds() -> float:
    """This process's CPU time so far, all threads (steadier than wall time under load)."""
    r = resource.getrusage(resource.RUSAGE_SELF)
    return r.ru_utime + r.ru_stime


def epoch_rate(rec: str, threads: int, extra: dict) -> tuple[float, float]:
    """One epoch's images per second and per CPU second."""
    with ImageRecordIter(rec, preprocess_threads=threads, **{**BASE, **extra}) as it:
        n, t, c = 0, time.perf_counter(), cpu_seconds()
        for b in it:
            n += len(b.index) - b.pad
        return n / (time.perf_counter() - t), n / (cpu_seconds() - c)


def decode_only(rec: str, name: str, count: int, dtype: str, normalize: bool, layout: str) -> None:
    """One decode_batch of the first ``count`` records in setting ``name`` (for callgrind)."""
    idx = rec[: -len(".rec")] + ".idx"
    with MXIndexedRecordIO(idx, rec, "r") as r:
        bufs = [unpack(r.read_idx(k))[1] for k in list(r.keys)[:count]]
    colour = ColourSpec(**COLOUR) if "colour" in name else ColourSpec()
    draw = KeyedDraw(CropSpec(224, 224, random_resized_crop=True, rand_mirror=True), 0, 0, colour)
    shape = (len(bufs), 3, 224, 224) if layout == "NCHW" else (len(bufs), 224, 224, 3)
    out = np.zeros(shape, dtype)
    kw = {}
    if normalize:
        kw = {"mean": tuple(IMAGENET[f"mean_{c}"] for c in "rgb"),
              "std": tuple(IMAGENET[f"std_{c}"] for c in "rgb")}  # fmt: skip
    with DecodePool(1) as pool:
        status = pool.decode_batch(bufs, out, draw=draw, records=np.arange(len(bufs)),
                                   layout=layout, **kw)  # fmt: skip
    print(f"{name}: {len(bufs)} images decoded, {int((status != 0).sum())} failed")


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("--rec")
    ap.add_argument("--images", type=int, default=300)
    ap.add_argument("--rounds", type=int, default=5)
    ap.add_argument("--threads", type=int, default=2)
    ap.add_argument("--dtype", default="float32", choices=["float32", "float16", "uint8"])
    ap.add_argument("--normalize", action="store_true", help="ImageNet's mean/std")
    ap.add_argument("--mxnet", help="an MXNet 1.9.1 environment's python, for its baseline")
    ap.add_argument("--decode-only", choices=list(SETTINGS), help="one batch, for callgrind")
    ap.add_argument("--count", type=int, default=16, help="--decode-only's records")
    ap.add_argument("--layout", default="NCHW", choices=["NCHW", "NHWC"], help="--decode-only's")
    args = ap.parse_args()
    if args.decode_only:
        if not args.rec:
            ap.error("--decode-only needs --rec")
        decode_only(args.rec, args.decode_only, args.count, args.dtype, args.normalize, args.layout)
        return
    BASE["dtype"] = args.dtype
    if args.normalize:
        BASE.update(IMAGENET)
    with tempfile.TemporaryDirectory() as tmp:
        rec = args.rec or build_sample_rec(tmp, args.images)
        rates: dict[str, list[float]] = {name: [] for name in SETTINGS}
        cpu: dict[str, list[float]] = {name: [] for name in SETTINGS}
        for r in range(args.rounds):
            names = list(SETTINGS) if r % 2 == 0 else list(SETTINGS)[::-1]
            for name in names:
                wall, per_cpu = epoch_rate(rec, args.threads, SETTINGS[name])
                rates[name].append(wall)
                cpu[name].append(per_cpu)
            done = [f"{n} {rates[n][-1]:.0f}/s ({cpu[n][-1]:.0f}/cpu-s)" for n in SETTINGS]
            print(f"round {r}: " + ", ".join(done))
        if args.mxnet:
            for name, extra in SETTINGS.items():
                out = subprocess.run(
                    [args.mxnet, "-c", MXNET, rec, str(args.threads), str(args.rounds),
                     json.dumps({**extra, **(IMAGENET if args.normalize else {})})],
                    check=True, capture_output=True, text=True,
                )  # fmt: skip
                rates[f"mxnet {name}"] = json.loads(out.stdout.strip().splitlines()[-1])
    base = statistics.median(rates["rrc+flip"])
    for name, values in rates.items():
        med = statistics.median(values)
        print(f"{name:24s} median {med:7.0f} images/s  ({med / base:.3f} x rrc+flip)")
    base = statistics.median(cpu["rrc+flip"])
    for name, values in cpu.items():
        med = statistics.median(values)
        print(f"{name:24s} median {med:7.0f} images/cpu-s  ({med / base:.3f} x rrc+flip)")


if __name__ == "__main__":
    main()
