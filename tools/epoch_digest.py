"""Digest of what the iterator delivers: record ids and pixels over whole epochs.

Run it before and after a change that must not alter the output (a refactor, a faster
kernel) and compare the two lines it prints:

    python tools/epoch_digest.py [--images 600] [--epochs 2]

It packs a small dataset of smooth, textured JPEGs of assorted sizes (deterministic), then
reads it with a few iterator settings (global and block shuffle, one and two ranks,
RandomResizedCrop + flip + normalisation, fixed-size crops, uint8, every colour
augmentation, MXNet's geometry warp) and hashes, per setting,
the record ids and the batch bytes of every batch.
"""

from __future__ import annotations

import argparse
import hashlib
import io
import json
import os
import sys
import tempfile

import numpy as np
from PIL import Image

sys.path.insert(0, os.path.join(os.path.dirname(os.path.abspath(__file__)), ".."))

from recio.pipeline.iterator import ImageRecordIter  # noqa: E402
from recio.records.recordio import IRHeader, MXIndexedRecordIO, pack  # noqa: E402

SETTINGS = {
    "rrc-global": dict(
        shuffle=True, random_resized_crop=True, rand_mirror=True, mean_r=123.7, mean_g=116.3,
        mean_b=103.5, std_r=58.4, std_g=57.1, std_b=57.4,
    ),
    "rrc-block-2ranks": dict(
        shuffle=True, shuffle_mode="block", random_resized_crop=True, rand_mirror=True,
        num_parts=2, part_index=1,
    ),
    "crop-uint8-nhwc": dict(
        shuffle=True, rand_crop=True, resize=72, dtype="uint8", layout="NHWC",
        last_batch="discard",
    ),
    "plain-rollover": dict(shuffle=False, resize=64, last_batch="rollover"),
    "colour-pca": dict(
        shuffle=True, rand_crop=True, random_h=10, random_s=20, random_l=15, brightness=0.3,
        contrast=0.2, saturation=0.4, pca_noise=0.1, max_random_contrast=0.2,
        max_random_illumination=10,
    ),
    "geometry-warp": dict(
        shuffle=True, max_rotate_angle=15, max_shear_ratio=0.1, max_aspect_ratio=0.2,
        min_random_scale=0.8, max_random_scale=1.2, pad=2, fill_value=17, rand_mirror=True,
        brightness=0.2,
    ),
}  # fmt: skip


def make_dataset(prefix: str, count: int) -> None:
    rng = np.random.default_rng(0)
    with MXIndexedRecordIO(prefix + ".idx", prefix + ".rec", "w") as out:
        for i in range(count):
            w, h = int(rng.integers(60, 200)), int(rng.integers(60, 200))
            yy, xx = np.mgrid[0:h, 0:w]
            base = np.stack([xx * 255 / w, yy * 255 / h, (xx + yy) * 127 / (w + h)], axis=-1)
            noise = rng.normal(0, 18, size=(h, w, 3))
            pixels = np.clip(base + noise, 0, 255).astype(np.uint8)
            buf = io.BytesIO()
            Image.fromarray(pixels).save(buf, format="JPEG", quality=90)
            out.write_idx(i, pack(IRHeader(0, float(i % 10), i, 0), buf.getvalue()))


def digest(rec: str, epochs: int, settings: dict, threads: int | str = 2) -> dict:
    ids, pixels = hashlib.sha256(), hashlib.sha256()
    batches = 0
    given = 4 if threads == "churn" else threads
    with ImageRecordIter(rec, (3, 48, 48), 32, seed=7, preprocess_threads=given, **settings) as it:
        for _ in range(epochs):
            for batch in it:
                if threads == "churn":  # the active threads changed every batch
                    it.pool.set_active_threads(1 + batches % it.pool.num_threads)
                ids.update(np.ascontiguousarray(batch.index).tobytes())
                ids.update(np.ascontiguousarray(batch.label).tobytes())
                pixels.update(np.ascontiguousarray(batch.data).tobytes())
                batches += 1
    return {"batches": batches, "ids": ids.hexdigest()[:16], "pixels": pixels.hexdigest()[:16]}


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--images", type=int, default=600)
    parser.add_argument("--epochs", type=int, default=2)
    parser.add_argument(
        "--threads",
        default="2",
        help="preprocess_threads: a number, 'auto', or 'churn' (4 threads, the active count "
        "changed every batch); the digests must not depend on it",
    )
    args = parser.parse_args()
    threads = int(args.threads) if args.threads.isdigit() else args.threads
    with tempfile.TemporaryDirectory() as tmp:
        prefix = os.path.join(tmp, "digest")
        make_dataset(prefix, args.images)
        rec = prefix + ".rec"
        result = {name: digest(rec, args.epochs, s, threads) for name, s in SETTINGS.items()}
    print(json.dumps(result, indent=1, sort_keys=True))
    return 0


if __name__ == "__main__":
    sys.exit(main())
