"""Writes tests/data/sampling/: one small JPEG per sampling factor libjpeg accepts.

Pillow writes 4:4:4, 4:2:2 and 4:2:0 only, so the files are made by libjpeg-turbo's cjpeg
(Debian: libjpeg-turbo-progs) with -sample: every luma sampling h x v (h, v in 1..4) whose
MCU fits libjpeg's limit of 10 blocks with two 1x1 chroma components, a few with subsampled
chroma of their own, greyscale, and CMYK (Pillow's, Adobe-inverted); each baseline and
progressive. 101x83 pixels of smooth noise: several MCUs of every sampling, odd edges.
The tests read the files as they are; run this only to change them.

    python tools/make_sampling_corpus.py
"""

from __future__ import annotations

import io
import subprocess
from pathlib import Path

import numpy as np
from PIL import Image

OUT = Path(__file__).resolve().parent.parent / "tests" / "data" / "sampling"
WIDTH, HEIGHT = 101, 83

# luma h x v with chroma 1x1: h * v + 2 blocks per MCU, at most 10
LUMA = [(h, v) for h in range(1, 5) for v in range(1, 5) if h * v + 2 <= 10]
# chroma components subsampled less than luma (cjpeg -sample takes one HxV per component)
MIXED = ["2x2,1x2,1x1", "2x2,2x1,1x1", "4x1,2x1,2x1", "3x2,1x2,1x1"]


def pixels() -> Image.Image:
    rng = np.random.default_rng(43)
    small = rng.integers(0, 256, (HEIGHT // 6 + 2, WIDTH // 6 + 2, 3), dtype=np.uint8)
    return Image.fromarray(small).resize((WIDTH, HEIGHT), Image.Resampling.BICUBIC)


def cjpeg(ppm: bytes, *args: str) -> bytes:
    return subprocess.run(
        ["cjpeg", "-quality", "85", *args], input=ppm, capture_output=True, check=True
    ).stdout


def main() -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    for old in OUT.glob("*.jpg"):
        old.unlink()
    image = pixels()
    ppm = io.BytesIO()
    image.save(ppm, "PPM")
    pgm = io.BytesIO()
    image.convert("L").save(pgm, "PPM")
    samplings = {f"{h}x{v}": f"{h}x{v},1x1,1x1" for h, v in LUMA}
    samplings.update({s.replace(",", "_"): s for s in MIXED})
    for mode in ("baseline", "progressive"):
        extra = ["-progressive"] if mode == "progressive" else []
        for name, sample in samplings.items():
            data = cjpeg(ppm.getvalue(), "-sample", sample, *extra)
            (OUT / f"{name}-{mode}.jpg").write_bytes(data)
        (OUT / f"grey-{mode}.jpg").write_bytes(cjpeg(pgm.getvalue(), *extra))
        cmyk = io.BytesIO()
        image.convert("CMYK").save(cmyk, "JPEG", quality=85, progressive=mode == "progressive")
        (OUT / f"cmyk-{mode}.jpg").write_bytes(cmyk.getvalue())


if __name__ == "__main__":
    main()
