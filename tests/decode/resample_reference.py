"""A numpy reference of native/resample.c's crop resample (Pillow's separable filters in 14-bit
fixed point) and decode_core.c's store: the bytes recio's passes must give, whatever SIMD.

The coefficients are computed with the C code's double arithmetic in the same order
(Python floats are doubles), so the integer weights are the same; the passes are plain
integer sums: the vertical pass over the window's rows first (rounded to 8 bits), then the
horizontal one, then the mirror and the store.
"""

from __future__ import annotations

import numpy as np

PRECISION_BITS = 14
INTERPOLATIONS = ("bilinear", "area", "nearest")


def coefficients(in_size: int, in0: float, in1: float, out_size: int, interp: str) -> list:
    """Per output sample: (first input index, integer weights), as resample.c's precompute."""
    scale = (in1 - in0) / out_size
    if interp == "nearest":
        taps, v = [], in0 + scale * 0.5
        for _ in range(out_size):
            x = 0 if v < 0.0 else int(v)
            taps.append((min(x, in_size - 1), [1 << PRECISION_BITS]))
            v += scale
        return taps
    box = interp == "area"
    filterscale = max(scale, 1.0)
    support = (0.5 if box else 1.0) * filterscale
    ss = 1.0 / filterscale
    taps = []
    for xx in range(out_size):
        center = in0 + (xx + 0.5) * scale
        xmin = max(int(center - support + 0.5), 0)
        xmax = max(min(int(center + support + 0.5), in_size) - xmin, 0)
        k = []
        for x in range(xmax):
            t = (x + xmin - center + 0.5) * ss
            k.append((1.0 if -0.5 < t <= 0.5 else 0.0) if box else max(0.0, 1.0 - abs(t)))
        ww = 0.0
        for v in k:
            ww += v
        weights, total, before = [], 0.0, 0
        for v in k if ww != 0.0 else []:
            total += v / ww
            upto = int(0.5 + total * (1 << PRECISION_BITS))
            weights.append(upto - before)
            before = upto
        taps.append((xmin, weights))
    return taps


def _pass(rows: np.ndarray, taps: list) -> np.ndarray:
    """One pass along axis 0 of int64 `rows`: each output the rounded, clipped weighted sum."""
    out = np.empty((len(taps), *rows.shape[1:]), np.int64)
    for i, (first, weights) in enumerate(taps):
        acc = np.full(rows.shape[1:], 1 << (PRECISION_BITS - 1), np.int64)
        for j, w in enumerate(weights):
            acc += rows[first + j] * w
        out[i] = np.clip(acc >> PRECISION_BITS, 0, 255)
    return out


def resample(
    pixels: np.ndarray, box: tuple, out_w: int, out_h: int, interp: str, flip: bool
) -> np.ndarray:
    """pixels (H, W, 3) uint8 over box (x0, y0, x1, y1) to (out_h, out_w, 3) uint8."""
    h, w = pixels.shape[:2]
    x0, y0, x1, y1 = box
    vertical = _pass(pixels.astype(np.int64), coefficients(h, y0, y1, out_h, interp))
    rows = _pass(vertical.transpose(1, 0, 2), coefficients(w, x0, x1, out_w, interp))
    out = rows.transpose(1, 0, 2).astype(np.uint8)
    return out[:, ::-1] if flip else out


def store_nchw(rgb: np.ndarray, lut: np.ndarray | None) -> np.ndarray:
    """The NCHW store of an (H, W, 3) uint8 output: the bytes, or each level's table entry."""
    planes = rgb.transpose(2, 0, 1)
    if lut is None:
        return np.ascontiguousarray(planes)
    return np.stack([lut[c][planes[c]] for c in range(3)])


def window_of(width: int, height: int, rng: np.random.Generator) -> tuple:
    """A random fractional window inside a width x height image."""
    x0, y0 = rng.uniform(0, width - 1), rng.uniform(0, height - 1)
    x1 = x0 + rng.uniform(0.3, width - x0) if width - x0 > 0.3 else float(width)
    y1 = y0 + rng.uniform(0.3, height - y0) if height - y0 > 0.3 else float(height)
    return (x0, y0, min(x1, float(width)), min(y1, float(height)))
