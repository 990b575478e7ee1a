"""Decode benchmark: RandomResizedCrop + flip on an image folder, side by side in one run.

Usage: python tools/bench_decode.py CORPUS_DIR [--limit 512] [--batch 128] [--repeats 5]

Every configuration runs once per round, rounds are repeated, and the median time is reported
(interleaving keeps a noisy shared machine from favouring one configuration). Baselines in the
same run: Pillow decode + crop + resize + flip on one thread, and PyTurboJPEG full-size decode
alone on one thread. Megapixels/s counts source pixels of the images decoded.
"""

from __future__ import annotations

import argparse
import contextlib
import io
import math
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path

import numpy as np
from PIL import Image

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))
from recio import decode  # noqa: E402


def random_resized_crops(
    sizes: np.ndarray, rng: np.random.Generator, scale=(0.08, 1.0), ratio=(3 / 4, 4 / 3)
) -> np.ndarray:
    """torchvision's RandomResizedCrop.get_params, vectorised over images (x, y, w, h)."""
    crops = np.zeros((len(sizes), 4), np.int32)
    log_ratio = np.log(ratio)
    for i, (width, height) in enumerate(sizes):
        area = width * height
        for _ in range(10):
            target = area * rng.uniform(*scale)
            aspect = math.exp(rng.uniform(*log_ratio))
            w = round(math.sqrt(target * aspect))
            h = round(math.sqrt(target / aspect))
            if 0 < w <= width and 0 < h <= height:
                crops[i] = (rng.integers(0, width - w + 1), rng.integers(0, height - h + 1), w, h)
                break
        else:  # centre crop at the clamped ratio
            w, h = width, height
            if width / height < ratio[0]:
                h = round(width / ratio[0])
            elif width / height > ratio[1]:
                w = round(height * ratio[1])
            crops[i] = ((width - w) // 2, (height - h) // 2, w, h)
    return crops


def pillow_rrc(bufs, crops, flips, out) -> None:
    """The baseline: Pillow on one thread, same semantics as DecodePool."""
    size = (out.shape[2], out.shape[1])
    for i, b in enumerate(bufs):
        x, y, w, h = (int(v) for v in crops[i])
        im = Image.open(io.BytesIO(b)).convert("RGB").crop((x, y, x + w, y + h))
        im = im.resize(size, Image.Resampling.BILINEAR)
        if flips[i]:
            im = im.transpose(Image.Transpose.FLIP_LEFT_RIGHT)
        out[i] = np.asarray(im)


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    ap.add_argument("corpus", type=Path)
    ap.add_argument("--limit", type=int, default=512, help="images used (default 512)")
    ap.add_argument("--batch", type=int, default=128)
    ap.add_argument("--repeats", type=int, default=5)
    ap.add_argument("--seed", type=int, default=0)
    args = ap.parse_args(argv)

    files = sorted(p for p in args.corpus.rglob("*") if p.suffix.lower() in (".jpg", ".png"))
    files = files[: args.limit]
    bufs = [p.read_bytes() for p in files]
    n, bs = len(bufs), args.batch
    rng = np.random.default_rng(args.seed)
    with decode.DecodePool(1) as probe:
        sizes = probe.image_sizes(bufs)
    crops = random_resized_crops(sizes, rng)
    flips = rng.random(n) < 0.5
    is_jpeg = [b[:2] == b"\xff\xd8" for b in bufs]
    mpix = float((sizes[:, 0].astype(np.int64) * sizes[:, 1]).sum()) / 1e6
    jpeg_bufs = [b for b, j in zip(bufs, is_jpeg, strict=True) if j]
    jpeg_mpix = float(sum(int(w) * int(h) for (w, h), j in zip(sizes, is_jpeg, strict=True) if j))
    jpeg_mpix /= 1e6
    print(f"corpus: {n} images ({sum(is_jpeg)} JPEG), {mpix / n:.3f} MP mean, batch {bs}")
    print(f"native: {decode.features()}")

    out224 = np.zeros((bs, 224, 224, 3), np.uint8)
    out128 = np.zeros((bs, 128, 128, 3), np.uint8)

    def batched(run_batch: Callable, out: np.ndarray) -> Callable[[], None]:
        def run() -> None:
            for s in range(0, n, bs):
                run_batch(bufs[s : s + bs], crops[s : s + bs], flips[s : s + bs], out)

        return run

    pools: list[decode.DecodePool] = []

    def native(threads: int, out: np.ndarray, jpeg_only: bool = False, **kw):
        p = decode.DecodePool(threads, backend="native", **kw)
        pools.append(p)

        def run_batch(b, c, f, o):
            st = p.decode_batch(b, o, crops=c, flips=f)
            assert not st.any(), p.last_errors()

        if not jpeg_only:
            return batched(run_batch, out)
        jpeg = np.flatnonzero(is_jpeg)
        j_bufs, j_crops, j_flips = [bufs[i] for i in jpeg], crops[jpeg], flips[jpeg]

        def run() -> None:  # the same JPEGs PyTurboJPEG decodes, for a like-for-like ratio
            for s in range(0, len(j_bufs), bs):
                run_batch(j_bufs[s : s + bs], j_crops[s : s + bs], j_flips[s : s + bs], out)

        return run

    configs: dict[str, tuple[Callable[[], None], int, float]] = {
        "pillow 1t (decode+crop+resize+flip)": (batched(pillow_rrc, out224), n, mpix),
    }
    try:
        from turbojpeg import TurboJPEG

        tj = TurboJPEG()

        def tj_full() -> None:
            for b in jpeg_bufs:
                with contextlib.suppress(OSError):  # TurboJPEG refuses the CMYK JPEG
                    tj.decode(b)

        configs["pyturbojpeg 1t full decode only"] = (tj_full, len(jpeg_bufs), jpeg_mpix)
    except (ImportError, RuntimeError) as e:
        print(f"PyTurboJPEG unavailable: {e}")
    if decode.native_available():
        configs.update(
            {
                "native 1t 224": (native(1, out224), n, mpix),
                "native 1t 224, JPEGs only": (
                    native(1, out224, jpeg_only=True),
                    len(jpeg_bufs),
                    jpeg_mpix,
                ),
                "native 2t 224": (native(2, out224), n, mpix),
                "native 1t 128": (native(1, out128), n, mpix),
                "native 2t 128": (native(2, out128), n, mpix),
                "lever 1t 224 full decode (dct off, roi off)": (
                    native(1, out224, dct_scaling="off", roi_decode=False),
                    n,
                    mpix,
                ),
                "lever 1t 224 roi only": (native(1, out224, dct_scaling="off"), n, mpix),
                "lever 1t 224 dct all + roi": (native(1, out224, dct_scaling="all"), n, mpix),
                "lever 1t 224 dct pow2, no roi": (native(1, out224, roi_decode=False), n, mpix),
                "lever 1t 128 full decode (dct off, roi off)": (
                    native(1, out128, dct_scaling="off", roi_decode=False),
                    n,
                    mpix,
                ),
                "lever 1t 128 dct all + roi": (native(1, out128, dct_scaling="all"), n, mpix),
            }
        )
    python_pool = decode.DecodePool(2, backend="python")
    pools.append(python_pool)

    def python_batch(b, c, f, o):
        python_pool.decode_batch(b, o, crops=c, flips=f)

    configs["python fallback 2t 224"] = (batched(python_batch, out224), n, mpix)

    times: dict[str, list[float]] = {k: [] for k in configs}
    for fn, _, _ in configs.values():  # warm-up: page in buffers, grow scratch memory
        fn()
    for _ in range(args.repeats):
        for name, (fn, _, _) in configs.items():
            t0 = time.perf_counter()
            fn()
            times[name].append(time.perf_counter() - t0)
    for p in pools:
        p.close()

    rate = {k: configs[k][1] / statistics.median(v) for k, v in times.items()}
    print(f"\n{'configuration':48s} {'images/s':>9s} {'MP/s':>7s}  (median of {args.repeats})")
    for k, v in times.items():
        med = statistics.median(v)
        print(f"{k:48s} {configs[k][1] / med:9.0f} {configs[k][2] / med:7.1f}")

    def ratio(a: str, b: str) -> str:
        return f"{rate[a] / rate[b]:.2f}x" if a in rate and b in rate else "n/a"

    pil, tjf = "pillow 1t (decode+crop+resize+flip)", "pyturbojpeg 1t full decode only"
    full224, full128 = (f"lever 1t {s} full decode (dct off, roi off)" for s in (224, 128))
    print("\nratios")
    for label, a, b in [
        ("native 1t / pillow 1t (want >= 1.5)", "native 1t 224", pil),
        (
            "native 1t / pyturbojpeg full decode, same JPEGs (want >= 1.0)",
            "native 1t 224, JPEGs only",
            tjf,
        ),
        ("native 2t / native 1t (want >= 1.85)", "native 2t 224", "native 1t 224"),
        ("native 128 / native 224, 1t (want >= 1.5)", "native 1t 128", "native 1t 224"),
        ("roi lever at 224 (roi only / full decode)", "lever 1t 224 roi only", full224),
        ("dct lever at 224 (default / roi only)", "native 1t 224", "lever 1t 224 roi only"),
        ("both levers at 224 (default / full decode)", "native 1t 224", full224),
        ("both levers at 128 (default / full decode)", "native 1t 128", full128),
    ]:
        print(f"  {label:62s} {ratio(a, b)}")

    if decode.native_available():  # accuracy of the fast path against the Pillow baseline
        k = min(n, 256)
        ref = np.zeros((k, 224, 224, 3), np.uint8)
        got = np.zeros_like(ref)
        pillow_rrc(bufs[:k], crops[:k], flips[:k], ref)
        with decode.DecodePool(2, backend="native") as p:
            p.decode_batch(bufs[:k], got, crops=crops[:k], flips=flips[:k])
        d = np.abs(got.astype(np.int32) - ref).reshape(k, -1)
        print(
            f"\naccuracy vs Pillow (224, default levers, {k} images): mean MAD {d.mean():.3f}, "
            f"worst image MAD {d.mean(1).max():.3f}, max {d.max()}"
        )
    return 0


if __name__ == "__main__":
    sys.exit(main())
