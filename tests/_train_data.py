"""Small learnable .rec files for the training tests: the sample shapes at 40-64 px."""

from __future__ import annotations

import io
import os

import numpy as np

from recio.bench.sample import SHAPES, sample_image
from recio.format import IRHeader, pack
from recio.recordio import MXIndexedRecordIO


def make_shapes_rec(
    path: str, num_images: int, seed: int = 0, sides: tuple[int, int] = (40, 64)
) -> str:
    """Write ``num_images`` coloured-shape JPEGs (class = shape) to ``path`` and its .idx."""
    rng = np.random.default_rng(seed)
    with MXIndexedRecordIO(os.path.splitext(path)[0] + ".idx", path, "w") as writer:
        for key in range(num_images):
            label = key % len(SHAPES)
            size = tuple(int(v) for v in rng.integers(sides[0], sides[1] + 1, size=2))
            buf = io.BytesIO()
            sample_image(rng, label, size).save(buf, "JPEG", quality=90)
            writer.write_idx(key, pack(IRHeader(0, float(label), key, 0), buf.getvalue()))
    return path
