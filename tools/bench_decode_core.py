"""The native decode core against PyTurboJPEG's plain decode: small images and RandomResizedCrop.

    python tools/bench_decode_core.py small CORPUS [--size 112] [--quality 95] [--count 512]
    python tools/bench_decode_core.py rrc CORPUS.rec [--size 224]
    ... [--repeats 7] [--against OTHER_CHECKOUT] [--only NAME] [--passes N]

``small``: the corpus's JPEGs cut to their centre square, resized to --size (Lanczos) and
encoded again at --quality (4:2:0), as face-recognition sets store their crops; each image
decoded whole at its own size, flipped (every other one), normalised to float32 NCHW, the
way ``ImageRecordIter(data_shape=(3, 112, 112), rand_mirror=True, mean_r=...)`` asks for.
``rrc``: a .rec's images, RandomResizedCrop(--size) + flip to uint8 NCHW, as ``recio bench``
draws them, through the decode pool alone and through the whole ``ImageRecordIter`` (an
epoch per turn, 2 threads, shuffled). Both against ``TurboJPEG().decode`` of the same bytes
(full size, to BGR), on one thread (``small``) or on two (``rrc``: what ``recio bench`` calls
the plain decode).

Every configuration runs once per round, the rounds repeat, and the median time per image is
reported (turns keep a noisy machine from favouring one); against another build, the median
of the rounds' CPU ratios too, which load moves less. --against loads another checkout's
built extension (its recio/_native*.so) and runs recio's configurations through it as well,
in the same turns: an A/B of two builds of the C code in one process.

For instruction counts, run one configuration once under callgrind, counting only inside the
decode call::

    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=rc_decode \\
        python tools/bench_decode_core.py small CORPUS --only "recio 1t" --passes 1
    valgrind --tool=callgrind --collect-atstart=no --toggle-collect=tjDecompress2 \\
        python tools/bench_decode_core.py small CORPUS --only "turbojpeg 1t" --passes 1

and divide the total by the images decoded (printed).
"""

from __future__ import annotations

import argparse
import contextlib
import io
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
sys.path.insert(0, str(Path(__file__).resolve().parent))
from checkouts import MEAN, STD, load_extension, without_lut_line  # noqa: E402

from recio.augment import CropSpec, KeyedDraw  # noqa: E402
from recio.augment import draws as draws_module  # noqa: E402
from recio.decode import DecodePool  # noqa: E402
from recio.decode import pool as pool_module  # noqa: E402
from recio.pipeline.iterator import ImageRecordIter  # noqa: E402
from recio.records.file import RecordFile  # noqa: E402
from recio.records.format import unpack_labels  # noqa: E402


def small_jpegs(corpus: Path, size: int, quality: int, count: int) -> list[bytes]:
    """The corpus's JPEGs (sorted by path) as size x size JPEGs at quality, 4:2:0.

    A JPEG already size x size is taken as it is (a folder --write made, say).
    """
    out = []
    for path in sorted(corpus.rglob("*.jpg")):
        with Image.open(path) as im:
            if im.size == (size, size):
                out.append(path.read_bytes())
                if len(out) == count:
                    break
                continue
            im = im.convert("RGB")
            side = min(im.size)
            x, y = (im.width - side) // 2, (im.height - side) // 2
            im = im.resize((size, size), Image.Resampling.LANCZOS, box=(x, y, x + side, y + side))
        buf = io.BytesIO()
        im.save(buf, "JPEG", quality=quality, subsampling="4:2:0")
        out.append(buf.getvalue())
        if len(out) == count:
            break
    return out


def rec_images(rec: Path) -> list[bytes]:
    """The image bytes of every record of a .rec (its .idx beside it)."""
    with RecordFile(str(rec)) as rf:
        payloads = [bytes(p) for p in rf.read_many(range(len(rf)))]
    return [p[unpack_labels(p)[2] :] for p in payloads]


def use_extension(pool: DecodePool, extension) -> None:
    """Runs ``pool``'s native calls on ``extension``'s Pool; their ``JobOptions`` and ``Draw``
    are made by ``extension`` too (a pool takes only its own module's)."""
    pool._native.close()
    pool._native = extension.Pool(pool.num_threads, pool.max_decode_bytes or 0)
    own = pool.job_options

    def job_options(job):
        saved = pool_module._native, draws_module._native
        pool_module._native = draws_module._native = extension
        try:
            return own(job)
        except TypeError:  # a build whose JobOptions takes no lut_line
            pool_module._native = without_lut_line(extension)
            return own(job)
        finally:
            pool_module._native, draws_module._native = saved

    pool.job_options = job_options


def recio_pool(threads: int, extension) -> DecodePool:
    """A DecodePool whose native pool comes from ``extension`` (None: this checkout's)."""
    pool = DecodePool(threads, backend="native")
    if extension is not None:
        use_extension(pool, extension)
    return pool


def turbo_runner(images: list[bytes], threads: int) -> Callable[[], int]:
    """PyTurboJPEG's plain decode of every image (to BGR, full size) on ``threads`` threads."""
    from concurrent.futures import ThreadPoolExecutor

    from turbojpeg import TurboJPEG

    tj = TurboJPEG()

    def one(buf: bytes) -> None:
        with contextlib.suppress(OSError):  # TurboJPEG refuses CMYK; PNGs are not JPEGs
            tj.decode(buf)

    if threads == 1:

        def run() -> int:
            for b in images:
                one(b)
            return len(images)

        return run
    executor = ThreadPoolExecutor(threads)

    def run_threads() -> int:
        list(executor.map(one, images, chunksize=16))
        return len(images)

    return run_threads


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("mode", choices=("small", "rrc"))
    ap.add_argument("source", type=Path, help="image folder (small) or .rec (rrc)")
    ap.add_argument("--size", type=int, help="output side (default: 112 small, 224 rrc)")
    ap.add_argument("--quality", type=int, default=95, help="small: JPEG quality (default 95)")
    ap.add_argument("--count", type=int, default=512, help="small: images (default 512)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=7)
    ap.add_argument("--against", type=Path, help="another checkout with its extension built")
    ap.add_argument("--only", help="run just this configuration (for callgrind)")
    ap.add_argument("--passes", type=int, help="with --only: passes over the images, no timing")
    ap.add_argument("--write", type=Path, help="small: save the small JPEGs in this folder, exit")
    args = ap.parse_args(argv)

    small = args.mode == "small"
    size = args.size or (112 if small else 224)
    images = (
        small_jpegs(args.source, size, args.quality, args.count)
        if small
        else rec_images(args.source)
    )
    if args.write:
        args.write.mkdir(parents=True, exist_ok=True)
        for i, b in enumerate(images):
            (args.write / f"{i:05d}.jpg").write_bytes(b)
        print(f"wrote {len(images)} JPEGs to {args.write}")
        return 0
    n, bs = len(images), args.batch
    with DecodePool(1) as probe:
        sizes = probe.image_sizes(images)
    windows, flips, batches = [], [], list(range(0, n, bs))
    for s in batches:
        if small:  # whole images, every other one flipped
            windows.append(None)
            flips.append(np.arange(s, min(s + bs, n)) % 2 == 1)
        else:
            spec = CropSpec(size, size, random_resized_crop=True, rand_mirror=True)
            w, f = KeyedDraw(spec, 0, 0).windows(sizes[s : s + bs], np.arange(s, min(s + bs, n)))
            windows.append(w)
            flips.append(f)
    if small:
        out = np.empty((bs, 3, size, size), np.float32)
        norm = {"mean": MEAN, "std": STD}
    else:
        out = np.empty((bs, 3, size, size), np.uint8)
        norm = {}
    print(
        f"{args.mode}: {n} images, {float(np.mean(sizes[:, 0] * sizes[:, 1])) / 1e6:.4f} MP "
        f"mean, {np.mean([len(b) for b in images]) / 1e3:.1f} kB mean, output {out.dtype} "
        f"{out.shape[1:]} NCHW, batch {bs}"
    )

    pools: list[DecodePool] = []

    def recio_runner(threads: int, extension=None) -> Callable[[], int]:
        pool = recio_pool(threads, extension)
        pools.append(pool)

        def run() -> int:
            for k, s in enumerate(batches):
                st = pool.decode_batch(
                    images[s : s + bs], out, crops=windows[k], flips=flips[k], layout="NCHW", **norm
                )
                if small:
                    assert not st.any(), pool.last_errors()
            return n

        return run

    iterators: list[ImageRecordIter] = []

    def iterator_runner(extension=None) -> Callable[[], int]:
        """One epoch of the whole ImageRecordIter, as ``recio bench`` runs it."""
        it = ImageRecordIter(
            str(args.source),
            (3, size, size),
            bs,
            shuffle=True,
            random_resized_crop=True,
            rand_mirror=True,
            preprocess_threads=2,
        )
        iterators.append(it)
        if extension is not None:
            use_extension(it.pool, extension)

        def run() -> int:
            return sum(bs - batch.pad for batch in it)

        return run

    configs: dict[str, Callable[[], int]] = {}
    tj_threads = 1 if small else 2
    configs[f"turbojpeg {tj_threads}t"] = turbo_runner(images, tj_threads)
    against = load_extension(args.against) if args.against else None
    for threads in (1, 2):
        configs[f"recio {threads}t"] = recio_runner(threads)
        if against is not None:
            configs[f"against {threads}t"] = recio_runner(threads, against)
    if not small:
        configs["iterator 2t"] = iterator_runner()
        if against is not None:
            configs["against iter 2t"] = iterator_runner(against)
    if args.only:
        if args.only not in configs:
            raise SystemExit(f"--only: one of {sorted(configs)}")
        configs = {args.only: configs[args.only]}
    if args.passes:
        done = sum(configs[args.only or next(iter(configs))]() for _ in range(args.passes))
        print(f"{done} images decoded")
        return 0

    times: dict[str, list[float]] = {k: [] for k in configs}
    cpu: dict[str, list[float]] = {k: [] for k in configs}
    for fn in configs.values():  # warm-up: scratch memory, pools started, caches
        fn()
    for _ in range(args.repeats):
        for name, fn in configs.items():
            c0, t0 = time.process_time(), time.perf_counter()
            count = fn()
            times[name].append((time.perf_counter() - t0) / count)
            cpu[name].append((time.process_time() - c0) / count)
    for p in pools:
        p.close()
    for it in iterators:
        it.close()
    med = {k: statistics.median(v) for k, v in times.items()}
    print(
        f"\n{'configuration':16s} {'us/image':>9s} {'images/s':>9s} {'CPU us/image':>13s}"
        f"  (medians of {args.repeats}; CPU: the whole process's)"
    )
    for k, v in med.items():
        print(f"{k:16s} {v * 1e6:9.1f} {1 / v:9.0f} {statistics.median(cpu[k]) * 1e6:13.1f}")
    base = f"turbojpeg {tj_threads}t"
    print(f"\nratios (throughput against {base}, higher is better)")
    for k, v in med.items():
        if k != base and base in med:
            per_round = [b / a for a, b in zip(times[k], times[base], strict=True)]
            print(
                f"  {k:14s} {med[base] / v:5.2f}x  (per round {min(per_round):.2f}-"
                f"{max(per_round):.2f})"
            )
    if against is not None:
        for t in (1, 2):
            a, b = f"recio {t}t", f"against {t}t"
            if a in med and b in med:
                per_cpu = statistics.median(cpu[b]) / statistics.median(cpu[a])
                # (each round's ratio: a busy machine moves both sides of a round alike)
                rounds = statistics.median(y / x for x, y in zip(cpu[a], cpu[b], strict=True))
                print(
                    f"  {a} / {b}: {med[b] / med[a]:.3f}x (CPU per image: {per_cpu:.3f}x; "
                    f"median of the rounds' CPU ratios: {rounds:.3f}x)"
                )
    return 0


if __name__ == "__main__":
    sys.exit(main())
