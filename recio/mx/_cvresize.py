"""``cv::resize`` on 8-bit images as MXNet 1.9.1's wheel runs it (OpenCV 3.4, SSE2).

Each axis's taps come from OpenCV's own double-precision formulas (``(dx + 0.5) * scale -
0.5``; nearest ``floor(dx * scale)``; area-enlarging's edge step), then the two integer
passes OpenCV runs: 11-bit weights along the rows, then down the columns, the linear one
as ``VResizeLinearVec_32s8u`` and the cubic one as ``VResizeCubicVec_32s8u`` (float32 over
eight-value steps, integer for the rest of a row). Area shrinking on both axes (box
averages) is :func:`recio.augment.geometry.warp_image`'s.
"""

from __future__ import annotations

import functools
import math

import numpy as np

from ..augment.geometry import AREA, CUBIC, LANCZOS4, LINEAR, NEAREST, REPLICATE, Warp, warp_image
from ..augment.warp_reference import taps_cubic, taps_lanczos, taps_linear

_BITS = 11
_ONE = 1 << _BITS
_f32 = np.float32


@functools.lru_cache(maxsize=64)  # a dataset's images mostly share a few sizes
def _taps(interp: int, src: int, dst: int, rows: bool) -> tuple[np.ndarray, np.ndarray]:
    """Per output index: the source indices (clamped) and their 11-bit weights.

    OpenCV moves a linear tap that starts outside the source to its edge along the rows
    only; down the columns both taps read the edge row with their own weights.
    """
    inv_scale = dst / src
    scale = 1.0 / inv_scale
    k = {CUBIC: 4, LANCZOS4: 8}.get(interp, 2)
    half = k // 2
    index = np.zeros((dst, k), dtype=np.int64)
    weight = np.zeros((dst, k), dtype=np.int64)
    for d in range(dst):
        if interp == AREA:
            s = math.floor(d * scale)
            f = _f32((d + 1) - (s + 1) * inv_scale)
            f = _f32(0) if f <= 0 else f - _f32(math.floor(f))
        else:
            f = _f32((d + 0.5) * scale - 0.5)
            s = math.floor(f)
            f = f - _f32(s)
        if k == 2 and not rows and s < 0:
            f, s = _f32(0), 0
        if k == 2 and not rows and s >= src - 1:
            f, s = _f32(0), src - 1
        c = taps_cubic(f) if k == 4 else taps_lanczos(f) if k == 8 else taps_linear(f)
        for j in range(k):
            index[d, j] = min(max(s - half + 1 + j, 0), src - 1)
            weight[d, j] = int(np.rint(c[j] * _f32(_ONE)))
    index.flags.writeable = weight.flags.writeable = False  # shared through the cache
    return index, weight


def resize(pixels: np.ndarray, w: int, h: int, interp: int) -> np.ndarray:
    """``pixels`` (H x W x C uint8) resized to h x w with OpenCV's ``interp`` code."""
    height, width, channels = pixels.shape
    if interp == LINEAR and width == 2 * w and height == 2 * h:
        interp = AREA  # OpenCV averages 2x2 boxes for an exact halving
    if interp == NEAREST:
        xs = np.minimum(np.floor(np.arange(w) * (1.0 / (w / width))).astype(np.int64), width - 1)
        ys = np.minimum(np.floor(np.arange(h) * (1.0 / (h / height))).astype(np.int64), height - 1)
        return np.ascontiguousarray(pixels[ys][:, xs])
    if interp == AREA and width >= w and height >= h:
        sx, sy = width / w, height / h
        warp = Warp(
            (sx, 0.0, 0.5 * sx - 0.5, 0.0, sy, 0.5 * sy - 0.5),
            0,
            0,
            AREA,
            REPLICATE,
            0,
            (0, 0, width, height),
            False,
        )
        if channels == 3:
            return warp_image(pixels, warp, w, h)
        planes = [
            warp_image(np.repeat(pixels[:, :, c : c + 1], 3, 2), warp, w, h)[:, :, 0]
            for c in range(channels)
        ]
        return np.stack(planes, axis=2)
    xi, xw = _taps(interp, width, w, rows=False)
    yi, yw = _taps(interp, height, h, rows=True)
    # along the rows: H x w x C integer sums scaled by 2^11 (int32 holds 255 * 2^11 * 8 taps)
    src = pixels.astype(np.int32)
    rows = src[:, xi[:, 0]] * xw[:, 0, None].astype(np.int32)
    for j in range(1, xi.shape[1]):
        rows += src[:, xi[:, j]] * xw[:, j, None].astype(np.int32)
    rows = rows.astype(np.int64)
    taps = [rows[yi[:, j]] for j in range(yi.shape[1])]  # each h x w x C
    if interp in (LINEAR, AREA):
        b0, b1 = yw[:, 0, None, None], yw[:, 1, None, None]
        out = (((taps[0] >> 4) * b0) >> 16) + (((taps[1] >> 4) * b1) >> 16)
        out = (out + 2) >> 2
    else:
        acc = sum(t * yw[:, j, None, None] for j, t in enumerate(taps))
        out = (acc + (1 << (2 * _BITS - 1))) >> (2 * _BITS)
        if interp == CUBIC:
            out = _cubic_sse(taps, yw, out, w * channels)
    return np.clip(out, 0, 255).astype(np.uint8)


def _cubic_sse(taps, yw, exact, row_len: int) -> np.ndarray:
    """The vector part of OpenCV's cubic column pass: float32 sums rounded to even."""
    vec = row_len - row_len % 8 if row_len >= 8 else 0
    scale = _f32(1.0 / (_ONE * _ONE))
    b = [(yw[:, j].astype(np.float32) * scale)[:, None, None] for j in range(4)]
    x = [t.astype(np.float32) for t in taps]
    s = (x[0] * b[0] + x[1] * b[1]) + x[2] * b[2] + x[3] * b[3]
    s = np.rint(s).astype(np.int64)
    out = exact.reshape(exact.shape[0], -1).copy()
    out[:, :vec] = s.reshape(s.shape[0], -1)[:, :vec]
    return out.reshape(exact.shape)
