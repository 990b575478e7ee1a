"""Small test images made on the fly, and the decode backends to run tests on."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image


def make_pixels(width: int, height: int, seed: int = 0, noise: float = 3.0) -> np.ndarray:
    """Smooth colour gradients plus mild noise: realistic for JPEG, easy to compare."""
    rng = np.random.default_rng(seed)
    yy, xx = np.mgrid[0:height, 0:width].astype(np.float64)
    img = np.stack(
        [
            128 + 100 * np.sin(xx / (width / 3.0) + seed),
            255 * yy / max(height - 1, 1),
            128 + 90 * np.cos((xx + yy) / (width / 2.0)),
        ],
        axis=-1,
    )
    img += rng.normal(0, noise, img.shape)
    return np.clip(img, 0, 255).astype(np.uint8)


def encode(
    width: int,
    height: int,
    *,
    mode: str = "RGB",
    fmt: str = "JPEG",
    seed: int = 0,
    **save_args: object,
) -> bytes:
    """An encoded test image of the given size and Pillow mode (RGB, L, CMYK)."""
    img = Image.fromarray(make_pixels(width, height, seed)).convert(mode)
    buf = io.BytesIO()
    if fmt == "JPEG":
        save_args.setdefault("quality", 90)
    img.save(buf, fmt, **save_args)
    return buf.getvalue()


def backends() -> list[object]:
    """The decode backends to parametrize over: "native" needs the C extension."""
    return [pytest.param("native", marks=pytest.mark.needs_native), "python"]
