"""The numpy reference of native/warp.c: one image's warp, sampled as OpenCV samples.

:func:`warp_image` gives the pixels native/warp.c gives for a :class:`~.geometry_spec.Warp`
(OpenCV's warpAffine arithmetic for 8-bit images; cv::resize's per axis where the border
replicates): the tests' reference, and the Pillow path's warp.
"""

from __future__ import annotations

import math

import numpy as np

from .geometry_spec import AREA, CUBIC, LANCZOS4, LINEAR, NEAREST, REPLICATE, Warp

__all__ = ["warp_image"]

_f32 = np.float32


_AB_BITS, _INTER_BITS, _TAB = 10, 5, 32
_COEF_BITS = 15


def _taps_linear(x: np.float32) -> list[np.float32]:
    return [_f32(1) - x, x]


def _taps_cubic(x: np.float32) -> list[np.float32]:
    A, one = _f32(-0.75), _f32(1)
    c0 = ((A * (x + one) - _f32(5) * A) * (x + one) + _f32(8) * A) * (x + one) - _f32(4) * A
    c1 = ((A + _f32(2)) * x - (A + _f32(3))) * x * x + one
    c2 = ((A + _f32(2)) * (one - x) - (A + _f32(3))) * (one - x) * (one - x) + one
    return [c0, c1, c2, one - c0 - c1 - c2]


def _taps_lanczos(x: np.float32) -> list[np.float32]:
    s45 = 0.70710678118654752440084436210485
    cs = [(1, 0), (-s45, -s45), (0, 1), (s45, -s45), (-1, 0), (s45, s45), (0, -1), (-s45, s45)]
    if x < _f32(1.1920929e-07):
        return [_f32(1) if i == 3 else _f32(0) for i in range(8)]
    y0 = -float(x + _f32(3)) * math.pi * 0.25  # (x + 3 in float, as OpenCV's C++)
    s0, c0 = math.sin(y0), math.cos(y0)
    coeffs, total = [], _f32(0)
    for i in range(8):
        y = -float(x + _f32(3) - _f32(i)) * math.pi * 0.25
        coeffs.append(_f32((cs[i][0] * s0 + cs[i][1] * c0) / (y * y)))
        total = total + coeffs[-1]
    total = _f32(1) / total
    return [c * total for c in coeffs]


_TABLES: dict[int, np.ndarray] = {}


def _table(k: int) -> np.ndarray:
    """OpenCV's 2-D tap table for k x k taps: int32 [32 * 32, k, k] (native/warp.c)."""
    if k in _TABLES:
        return _TABLES[k]
    taps = {2: _taps_linear, 4: _taps_cubic, 8: _taps_lanczos}[k]
    one_d = [taps(_f32(i) / _f32(_TAB)) for i in range(_TAB)]
    tab = np.zeros((_TAB * _TAB, k, k), dtype=np.int32)
    c = k // 2
    for fy in range(_TAB):
        for fx in range(_TAB):
            t = tab[fy * _TAB + fx]
            for i in range(k):
                for j in range(k):
                    t[i, j] = int(np.rint(one_d[fy][i] * one_d[fx][j] * _f32(1 << _COEF_BITS)))
            diff = int(t.sum()) - (1 << _COEF_BITS)
            lo = hi = (c, c)
            for i in range(c, min(c + 2, k)):
                for j in range(c, min(c + 2, k)):
                    if t[i, j] < t[lo]:
                        lo = (i, j)
                    elif t[i, j] > t[hi]:
                        hi = (i, j)
            if diff < 0:
                t[hi] -= diff
            elif diff > 0:
                t[lo] -= diff
    _TABLES[k] = tab
    return tab


def _sat_round(v: np.ndarray) -> np.ndarray:
    """OpenCV's saturate_cast<int>(double): nearest, ties to even, clamped to int32."""
    v = np.nan_to_num(v, nan=-(2.0**31), posinf=2.0**31 - 1, neginf=-(2.0**31))
    return np.rint(np.clip(v, -(2.0**31), 2.0**31 - 1)).astype(np.int64)


_RS_BITS = 11  # cv::resize's INTER_RESIZE_COEF_BITS


def _axis_taps(interp: int, box: bool, s: float, scale: float, n: int) -> list[tuple[int, int]]:
    """native/warp.c's axis_taps: (source index, 11-bit weight) of one sample along an axis."""
    one = 1 << _RS_BITS
    edge = s + 0.5 - 0.5 * scale  # the sample's left edge, cv's dx * scale
    clamp = lambda i: min(max(i, 0), n - 1)  # noqa: E731
    if interp == NEAREST:
        return [(clamp(math.floor(edge)), one)]
    if interp == AREA and box:  # computeResizeAreaTab, clipped to the source: float weights
        return _box_taps(edge, s, scale, n)
    if interp == AREA:  # area enlarging: a linear step at each source pixel's edge
        sx = math.floor(edge)
        fx = _f32((edge + scale - (sx + 1)) / scale)
        fx = _f32(0) if fx <= 0 else fx - _f32(math.floor(fx))
    else:
        fx = _f32(s)
        sx = math.floor(fx)
        fx = fx - _f32(sx)
    if interp == CUBIC:
        first, c = sx - 1, _taps_cubic(fx)
    elif interp == LANCZOS4:
        first, c = sx - 3, _taps_lanczos(fx)
    else:  # linear, and area's linear form
        if sx < 0:
            fx, sx = _f32(0), 0
        if sx >= n - 1:
            fx, sx = _f32(0), n - 1
        first, c = sx, _taps_linear(fx)
    return [(clamp(first + i), int(np.rint(w * _f32(one)))) for i, w in enumerate(c)]


def _box_taps(edge: float, s: float, scale: float, n: int) -> list[tuple[int, np.float32]]:
    """Area's box along one axis: (source index, float32 weight), OpenCV's order."""
    f1, f2 = max(edge, 0.0), min(edge + scale, float(n))
    cell = min(scale, f2 - f1)
    if not cell > 0:
        return [(min(max(math.floor(s), 0), n - 1), _f32(1))]
    s1, s2 = math.ceil(f1), math.floor(f2)
    s2 = min(s2, n - 1)
    s1 = min(s1, s2)
    taps = []
    if s1 - f1 > 1e-3:
        taps.append((s1 - 1, _f32((s1 - f1) / cell)))
    taps += [(i, _f32(1.0 / cell)) for i in range(s1, s2)]
    if f2 - s2 > 1e-3:
        taps.append((s2, _f32(min(min(f2 - s2, 1.0), cell) / cell)))
    return taps[:4096]


def _area_image(src: np.ndarray, warp: Warp, cx, cy, out_w: int, out_h: int) -> np.ndarray:
    """Area's box average of every sample (native/warp.c's area_pixel).

    OpenCV's float sums in its order, or for whole scales its integer sums.
    """
    m = warp.m
    H, W = src.shape[:2]
    ix, iy = round(m[0]), round(m[4])
    fast = abs(m[0] - ix) < 2.220446049250313e-16 and abs(m[4] - iy) < 2.220446049250313e-16

    def taps(centres, scale, n):  # per sample, padded with zero weights (sums unchanged)
        lists = [_box_taps(c + 0.5 - 0.5 * scale, c, scale, n) for c in centres.tolist()]
        k = max(len(t) for t in lists)
        idx = np.zeros((len(lists), k), dtype=np.int64)
        alpha = np.zeros((len(lists), k), dtype=np.float32)
        count = np.array([len(t) for t in lists])
        for o, t in enumerate(lists):
            idx[o, : len(t)] = [i for i, _ in t]
            alpha[o, : len(t)] = [a for _, a in t]
        return idx, alpha, count

    xi, xa, xn = taps(cx, m[0], W)
    yi, ya, yn = taps(cy, m[4], H)
    area = ix * iy if fast else 0
    whole = (yn[:, None] * xn[None, :]) == area
    pixels = np.zeros((out_h, out_w, 3), dtype=np.float32)
    sums = np.zeros((out_h, out_w, 3), dtype=np.int64)
    for i in range(yi.shape[1]):
        rows = src[yi[:, i]]  # out_h x W x 3
        h = np.zeros((out_h, out_w, 3), dtype=np.float32)
        for j in range(xi.shape[1]):
            p = rows[:, xi[:, j]]  # out_h x out_w x 3
            h += p.astype(np.float32) * xa[None, :, j, None]
            if area:
                used = (i < yn)[:, None, None] & (j < xn)[None, :, None]
                sums += np.where(used, p, 0)
        pixels += ya[:, i, None, None] * h
    out = np.clip(np.rint(pixels), 0, 255).astype(np.uint8)
    if area:
        scaled = np.rint(sums.astype(np.float32) * _f32(1 / area))
        fast_px = (sums + 2) >> 2 if area == 4 else scaled
        out = np.where(whole[..., None], np.clip(fast_px, 0, 255).astype(np.uint8), out)
    return out


def _axis_matrix(interp, box, centres, scale, n) -> tuple[np.ndarray, np.ndarray]:
    """Each sample's weights over the n source pixels (int64, len(centres) x n).

    Also which samples are centred in the source (the others are fill).
    """
    weights = np.zeros((len(centres), n), dtype=np.int64)
    inside = (centres >= -0.5) & (centres < n - 0.5)
    for o in np.flatnonzero(inside).tolist():
        for i, w in _axis_taps(interp, box, float(centres[o]), scale, n):
            weights[o, i] += w
    return weights, inside


def _resize_image(src: np.ndarray, warp: Warp, out_w: int, out_h: int) -> np.ndarray:
    """REPLICATE: cv::resize's two integer passes along each axis (native/warp.c's resize_row)."""
    H, W = src.shape[:2]
    m = warp.m
    box = m[0] >= 1 and m[4] >= 1  # cv: area averages when both axes shrink
    cx = m[0] * (np.arange(out_w, dtype=np.float64) + warp.off_x) + m[2]
    cy = m[4] * (np.arange(out_h, dtype=np.float64) + warp.off_y) + m[5]
    in_x, in_y = (cx >= -0.5) & (cx < W - 0.5), (cy >= -0.5) & (cy < H - 0.5)
    if warp.interp == AREA and box:
        out = _area_image(src, warp, cx, cy, out_w, out_h)
        out[~(in_y[:, None] & in_x[None, :])] = warp.fill
        return out
    wx, in_x = _axis_matrix(warp.interp, box, cx, m[0], W)
    wy, in_y = _axis_matrix(warp.interp, box, cy, m[4], H)
    rows = np.einsum("xj,ijc->ixc", wx, src.astype(np.int64))  # H x out_w x 3
    acc = np.einsum("yi,ixc->yxc", wy, rows)
    if warp.interp == LINEAR or (warp.interp == AREA and not box):
        # OpenCV 3.4's SSE2 vertical pass (VResizeLinearVec_32s8u), which MXNet 1.9.1 runs:
        # each row's sum shifted right 4, 16-bit high products, then rounded off 2 bits.
        acc = np.zeros((out_h, out_w, 3), dtype=np.int64)
        for y in np.flatnonzero(in_y).tolist():
            (i0, b0), (i1, b1) = _axis_taps(warp.interp, box, float(cy[y]), m[4], H)
            acc[y] = (((rows[i0] >> 4) * b0) >> 16) + (((rows[i1] >> 4) * b1) >> 16)
        pixels = (acc + 2) >> 2
    elif warp.interp == NEAREST:
        pixels = acc >> (2 * _RS_BITS)
    else:
        pixels = (acc + (1 << (2 * _RS_BITS - 1))) >> (2 * _RS_BITS)
    out = np.clip(pixels, 0, 255).astype(np.uint8)
    out[~(in_y[:, None] & in_x[None, :])] = warp.fill
    return out


def warp_image(src: np.ndarray, warp: Warp, out_w: int, out_h: int) -> np.ndarray:
    """``src`` (H x W x 3 uint8) through ``warp``: out_h x out_w x 3 uint8.

    native/warp.c's pixels, before the flip (which the caller applies).
    """
    if warp.border == REPLICATE:
        return _resize_image(src, warp, out_w, out_h)
    H, W = src.shape[:2]
    m = warp.m
    xs = np.arange(out_w, dtype=np.float64) + warp.off_x
    ys = np.arange(out_h, dtype=np.float64) + warp.off_y
    nearest = warp.interp == NEAREST
    scale = 1 << _AB_BITS
    round_delta = scale // 2 if nearest else scale // _TAB // 2
    X = (_sat_round((m[1] * ys + m[2]) * scale) + round_delta)[:, None]
    Y = (_sat_round((m[4] * ys + m[5]) * scale) + round_delta)[:, None]
    X = X + _sat_round(m[0] * xs * scale)[None, :]
    Y = Y + _sat_round(m[3] * xs * scale)[None, :]
    out = np.empty((out_h, out_w, 3), dtype=np.uint8)
    fill = np.uint8(warp.fill)
    if nearest:
        sx, sy = X >> _AB_BITS, Y >> _AB_BITS
        inside = (sx >= 0) & (sy >= 0) & (sx < W) & (sy < H)
        out[:] = fill
        out[inside] = src[sy[inside], sx[inside]]
        return out
    k = 4 if warp.interp == CUBIC else 8 if warp.interp == LANCZOS4 else 2
    lead = k // 2 - 1
    fx, fy = X >> (_AB_BITS - _INTER_BITS), Y >> (_AB_BITS - _INTER_BITS)
    sx, sy = (fx >> _INTER_BITS) - lead, (fy >> _INTER_BITS) - lead
    weights = _table(k)[((fy & (_TAB - 1)) << _INTER_BITS) | (fx & (_TAB - 1))]  # oh, ow, k, k
    acc = np.zeros((out_h, out_w, 3), dtype=np.int64)
    srcw = src.astype(np.int64)
    for i in range(k):
        r = sy + i
        for j in range(k):
            c = sx + j
            w = weights[..., i, j].astype(np.int64)[..., None]
            ok = (r >= 0) & (r < H) & (c >= 0) & (c < W)
            taps = srcw[np.clip(r, 0, H - 1), np.clip(c, 0, W - 1)]
            acc += np.where(ok[..., None], taps, int(warp.fill)) * w
    pixels = np.clip((acc + (1 << (_COEF_BITS - 1))) >> _COEF_BITS, 0, 255).astype(np.uint8)
    outside = (sx >= W) | (sy >= H) | (sx + k <= 0) | (sy + k <= 0)
    pixels[outside] = fill
    out[:] = pixels
    return out
