#!/usr/bin/env python3
"""What ``recio optimize`` gains and costs, side by side in one run.

    python tools/bench_optimize.py CORPUS.rec [--threads 2] [--seconds 2] [--rounds 3]

CORPUS.rec: a .rec of JPEGs as they came (``recio im2rec --pass-through`` of a folder from
tools/make_corpus.py). It is optimized into a temporary folder at each restart interval
(every MCU, every 2 and 4 MCUs, every MCU row), then, in interleaved rounds (each file and
stage in turn, so that a noisy machine slows all alike), measured:

* bytes: the files' sizes against the original's;
* full decode: PyTurboJPEG's whole-image decode on ``--threads`` threads (Pillow's for the
  PNG and CMYK images it refuses, which the other stages decode too);
* RRC-224 + flip: the native pool drawing RandomResizedCrop(224) + flip as it decodes, and
  the whole ``ImageRecordIter`` (reads, decode, batches);
* center-crop 224 (shorter side 256), as evaluation decodes;
* per image, ``optimize``'s lossless transcode against im2rec's re-encode (decode, encode
  at quality 95, same size) on the same pool, as rates and as one-thread CPU time
  (``--only-transcode``: that alone).

Prints medians of the rounds and the ratios its targets name, as JSON.
"""

from __future__ import annotations

import argparse
import json
import os
import statistics
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.bench.stages import (  # noqa: E402
    Data,
    decode_full,
    stage_iterator,
    stage_native_pool,
    stage_turbo_decode,
    timed,
)
from recio.decode import DecodePool  # noqa: E402
from recio.im2rec import JpegEncoder  # noqa: E402
from recio.im2rec.optimize import optimize  # noqa: E402

INTERVALS = {"1 MCU": 1, "2 MCUs": 2, "4 MCUs": 4, "row": "row"}


def jpeg_sizes(data: Data) -> list[tuple[int, int]]:
    import io

    from PIL import Image

    out = []
    for img in data.images:
        try:
            out.append(Image.open(io.BytesIO(img)).size)
        except OSError:
            out.append((0, 0))
    return out


def transcode_rates(data: Data, threads: int, rounds: int) -> dict:
    """Images/s of the lossless transcode and of im2rec's re-encode, same pool, same JPEGs."""
    jpegs = [img for img in data.images if img[:2] == b"\xff\xd8"]
    pairs = zip(jpeg_sizes(data), data.images, strict=True)
    sizes = np.array([s for s, img in pairs if img[:2] == b"\xff\xd8"])
    rates: dict[str, list[float]] = {"optimize": [], "re-encode q95": []}
    with DecodePool(threads, backend="native") as pool:
        enc = JpegEncoder(pool)
        enc.optimize_jpeg(jpegs[:8])
        for _ in range(rounds):
            start = time.perf_counter()
            enc.optimize_jpeg(jpegs, restart=1)
            rates["optimize"].append(len(jpegs) / (time.perf_counter() - start))
            start = time.perf_counter()
            enc.transcode_jpeg(jpegs, sizes.astype(np.int32), quality=95)
            rates["re-encode q95"].append(len(jpegs) / (time.perf_counter() - start))
    return {k: statistics.median(v) for k, v in rates.items()}


def transcode_cpu(data: Data, rounds: int) -> dict:
    """One-thread CPU ms per image of the lossless transcode and of im2rec's re-encode,
    taking turns, and the median of the per-round ratios (steadier than either time)."""
    jpegs = [img for img in data.images if img[:2] == b"\xff\xd8"]
    pairs = zip(jpeg_sizes(data), data.images, strict=True)
    sizes = np.array([s for s, img in pairs if img[:2] == b"\xff\xd8"], np.int32)
    ms: dict[str, list[float]] = {"optimize": [], "re-encode q95": []}
    with DecodePool(1, backend="native") as pool:
        enc = JpegEncoder(pool)
        steps = {
            "optimize": lambda: enc.optimize_jpeg(jpegs, restart=1),
            "re-encode q95": lambda: enc.transcode_jpeg(jpegs, sizes, quality=95),
        }
        for r in range(rounds):
            for name in sorted(steps, reverse=bool(r % 2)):
                start = time.process_time()
                steps[name]()
                ms[name].append((time.process_time() - start) / len(jpegs) * 1e3)
    ratios = [b / a for a, b in zip(ms["optimize"], ms["re-encode q95"], strict=True)]
    return {
        "ms per image": {k: statistics.median(v) for k, v in ms.items()},
        "re-encode / optimize, median per round": statistics.median(ratios),
    }


def cpu_per_image(datas: dict, rounds: int) -> dict:
    """Process CPU µs per image on one thread (less sensitive to a busy machine than rates):
    PyTurboJPEG's full decode, the pool's RRC-224 + flip and its center crop."""
    from turbojpeg import TurboJPEG

    tj = TurboJPEG()
    rrc = KeyedDraw(CropSpec(224, 224, random_resized_crop=True, rand_mirror=True), 0, 0)
    centre = KeyedDraw(CropSpec(224, 224, resize=256), 0, 0)
    times: dict = {}
    with DecodePool(1, backend="native") as pool:
        out = np.empty((max(len(d.images) for d in datas.values()), 224, 224, 3), np.uint8)

        def full(d: Data) -> None:
            for b in d.images:
                decode_full(tj, b)  # (PNG, CMYK: Pillow's, as the other stages decode them)

        for _ in range(rounds):
            for name, d in datas.items():
                records = np.arange(len(d.images), dtype=np.int64)
                steps = {
                    "full decode": lambda d=d: full(d),
                    "RRC-224+flip": lambda d=d, r=records: pool.decode_batch(
                        d.images, out, draw=rrc, records=r
                    ),
                    "center-crop-224": lambda d=d, r=records: pool.decode_batch(
                        d.images, out, draw=centre, records=r
                    ),
                }
                for stage, step in steps.items():
                    start = time.process_time()
                    step()
                    per = (time.process_time() - start) / len(d.images) * 1e6
                    times.setdefault(stage, {}).setdefault(name, []).append(per)
    med = {s: {n: statistics.median(v) for n, v in per.items()} for s, per in times.items()}
    base = med["full decode"]["original"]
    return {
        "us_per_image": med,
        "speed vs original's full decode": {
            s: {n: base / v for n, v in per.items()} for s, per in med.items()
        },
    }


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    parser.add_argument("rec")
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--seconds", type=float, default=2.0)
    parser.add_argument("--rounds", type=int, default=3)
    parser.add_argument(
        "--only-transcode",
        action="store_true",
        help="only the per-image transcode against the re-encode (one thread, CPU time)",
    )
    args = parser.parse_args()
    if args.only_transcode:
        result = transcode_cpu(Data(args.rec, None, 128), args.rounds)
        print(json.dumps({"per image, one thread": result}, indent=1))
        return 0
    tmp = tempfile.mkdtemp(prefix="bench-optimize-")
    files = {"original": args.rec}
    command_s = {}
    for name, restart in INTERVALS.items():
        out = os.path.join(tmp, f"{restart}.rec")
        report = optimize(args.rec, out, restart=restart, num_thread=args.threads)
        files[name] = out
        command_s[name] = report.seconds
    datas = {name: Data(rec, None, 128) for name, rec in files.items()}
    result: dict = {"bytes": {n: sum(d.image_bytes) for n, d in datas.items()}}
    rrc = CropSpec(224, 224, random_resized_crop=True, rand_mirror=True)
    centre = CropSpec(224, 224, resize=256)
    stages = {
        "full decode (PyTurboJPEG)": lambda d, r: stage_turbo_decode(d, args.threads),
        "RRC-224+flip pool": lambda d, r: stage_native_pool(
            d, args.threads, rrc, (128, 3, 224, 224), np.uint8
        ),
        "center-crop-224 pool": lambda d, r: stage_native_pool(
            d, args.threads, centre, (128, 3, 224, 224), np.uint8
        ),
        "RRC-224+flip iterator": lambda d, r: stage_iterator(
            r, None, args.threads, 128, (3, 224, 224), "uint8"
        ),
    }
    rates: dict = {s: {n: [] for n in files} for s in stages}
    for _ in range(args.rounds):
        for stage, make in stages.items():
            for name, rec in files.items():
                step, close = make(datas[name], rec)
                try:
                    rates[stage][name].append(
                        timed(step, args.seconds, 1)["images_per_s"]["median"]
                    )
                finally:
                    close()
    med = {s: {n: statistics.median(v) for n, v in per.items()} for s, per in rates.items()}
    result["images_per_s"] = med
    base = med["full decode (PyTurboJPEG)"]["original"]
    result["ratios"] = {
        name: {
            "bytes vs original": result["bytes"][name] / result["bytes"]["original"],
            "full decode vs original's": med["full decode (PyTurboJPEG)"][name] / base,
            "RRC iterator vs original's full decode": med["RRC-224+flip iterator"][name] / base,
            "RRC pool vs original's full decode": med["RRC-224+flip pool"][name] / base,
            "center-crop pool vs original's full decode": med["center-crop-224 pool"][name] / base,
            "RRC iterator vs original's RRC iterator": med["RRC-224+flip iterator"][name]
            / med["RRC-224+flip iterator"]["original"],
        }
        for name in files
    }
    result["one thread, CPU"] = cpu_per_image(datas, max(args.rounds, 5))
    result["optimize command seconds"] = command_s
    result["per image, images/s"] = transcode_rates(datas["original"], args.threads, args.rounds)
    result["per image, one thread"] = transcode_cpu(datas["original"], max(args.rounds, 5))
    print(json.dumps(result, indent=1))
    return 0


if __name__ == "__main__":
    sys.exit(main())
