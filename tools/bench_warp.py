"""MXNet's geometry through the warp against RandomResizedCrop + flip alone, side by side.

    python tools/bench_warp.py [--corpus DIR] [--count 128] [--size 224] [--threads 2]
        [--repeats 7] [--only NAME] [--passes N]

Decodes the same JPEGs (a folder's, or synthetic ones of 160..480 pixels a side, like
``recio bench``'s sample) with the native pool to uint8 NCHW, RandomResizedCrop(--size) +
flip, in these configurations:

- ``rrc+flip``: recio's crop window and Pillow-exact resampler (no geometry);
- ``rrc+flip+rotate10+shear0.1``: the same windows warped by a random rotation in
  [-10, 10] degrees and shear in [-0.1, 0.1] (``GeometrySpec(max_rotate_angle=10,
  max_shear_ratio=0.1)``), bilinear, sampled once;
- ``rrc+flip, opencv``: the windows through the warp with no rotation (``GeometrySpec()``:
  OpenCV's bilinear instead of Pillow's filter);
- ``rrc+flip+rotate10+shear0.1+colour``: the warp, then brightness, contrast and saturation
  0.4 and PCA lighting 0.1 on its output (``ColourSpec``).

Every configuration runs once per round, the rounds repeat, and the median time per image and
each one's ratio of images per second to ``rrc+flip`` are printed: wall time, and the CPU time
of the process (all decode threads; steadier on a shared machine). For instruction counts on a
noisy machine, run one configuration once under callgrind, counting inside the decode::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_decode_drawn \\
        python tools/bench_warp.py --only "rrc+flip" --passes 1 --threads 1

and divide the total by the images decoded (printed).
"""

from __future__ import annotations

import argparse
import io
import statistics
import sys
import time
from pathlib import Path

import numpy as np

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recio.augment import ColourSpec, CropSpec, KeyedDraw  # noqa: E402
from recio.augment.geometry import GeometrySpec  # noqa: E402
from recio.bench.sample import sample_image  # noqa: E402
from recio.decode import DecodePool  # noqa: E402


def jpegs(corpus: Path | None, count: int) -> list[bytes]:
    if corpus is not None:
        files = sorted(p for p in corpus.rglob("*") if p.suffix.lower() in (".jpg", ".jpeg"))
        return [p.read_bytes() for p in files[:count]]
    rng = np.random.default_rng(0)
    out = []
    for i in range(count):
        size = tuple(int(v) for v in rng.integers(160, 481, size=2))
        buf = io.BytesIO()
        sample_image(rng, i % 4, size).save(buf, "JPEG", quality=90)
        out.append(buf.getvalue())
    return out


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--corpus", type=Path, help="a folder of JPEGs (default: synthetic)")
    parser.add_argument("--count", type=int, default=128)
    parser.add_argument("--size", type=int, default=224)
    parser.add_argument("--threads", type=int, default=2)
    parser.add_argument("--repeats", type=int, default=7)
    parser.add_argument("--passes", type=int, default=3, help="decodes of the set per turn")
    parser.add_argument("--only", help="run this configuration alone")
    args = parser.parse_args()
    images = jpegs(args.corpus, args.count)
    spec = CropSpec(args.size, args.size, random_resized_crop=True, rand_mirror=True)
    warp = GeometrySpec(max_rotate_angle=10, max_shear_ratio=0.1)
    colour = ColourSpec(brightness=0.4, contrast=0.4, saturation=0.4, pca_noise=0.1)
    configs = {  # (geometry, colour)
        "rrc+flip": (None, ColourSpec()),
        "rrc+flip+rotate10+shear0.1": (warp, ColourSpec()),
        "rrc+flip, opencv": (GeometrySpec(), ColourSpec()),
        "rrc+flip+rotate10+shear0.1+colour": (warp, colour),
    }
    if args.only:
        configs = {args.only: configs[args.only]}
    out = np.empty((len(images), 3, args.size, args.size), dtype=np.uint8)
    records = np.arange(len(images))
    times: dict[str, list[float]] = {name: [] for name in configs}
    cpu: dict[str, list[float]] = {name: [] for name in configs}
    with DecodePool(args.threads) as pool:
        for _ in range(args.repeats if not args.only else 1):
            for name, (geometry, colour) in configs.items():
                start, start_cpu = time.perf_counter(), time.process_time()
                for epoch in range(args.passes):
                    draw = KeyedDraw(spec, 0, epoch, colour, geometry)
                    status = pool.decode_batch(
                        images, out, draw=draw, records=records, layout="NCHW"
                    )
                    assert (status == 0).all(), pool.last_errors
                n = args.passes * len(images)
                times[name].append((time.perf_counter() - start) / n)
                cpu[name].append((time.process_time() - start_cpu) / n)
    print(f"{len(images)} JPEGs, {args.threads} threads, {args.passes * len(images)} per turn")
    first = next(iter(times))
    base, base_cpu = statistics.median(times[first]), statistics.median(cpu[first])
    for name in times:
        wall, used = statistics.median(times[name]), statistics.median(cpu[name])
        print(
            f"{name:34s} wall {wall * 1e6:7.1f} us/image ({base / wall:4.2f}x)   "
            f"cpu {used * 1e6:7.1f} us/image ({base_cpu / used:4.2f}x)"
        )


if __name__ == "__main__":
    main()
