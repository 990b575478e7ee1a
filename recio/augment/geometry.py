"""MXNet's default augmenter's geometry as one affine warp per image, sampled once.

MXNet's ``ImageRecordIter`` (``src/io/image_aug_default.cc``) resizes the shorter side
(``cv::resize``), warps (``cv::warpAffine``: rotation, shear, scale, aspect ratio, image size
limits), pads with ``fill_value`` and crops (the output size, or a random square resized to
it), each stage resampling the last one's pixels. recio composes the stages into one map from
output pixels to source pixels (:func:`plan`) and samples the source once through it, as
warpAffine samples (native/warp.c; :func:`warp_image` is its numpy reference, the Pillow
path's): where MXNet runs a lone warpAffine and a crop, the pixels are OpenCV's; where it
resamples two or three times, they are within a few levels of it (tests/data/README.md).

Every draw is keyed by ``(seed, epoch, record)`` (:class:`.draws.KeyedDraw`, :mod:`.keys`), from
uniforms after the crop's, flip's and colour's, so turning the geometry on changes none of
those. The arithmetic here is native/draw.c's, operation for operation (MXNet's float32
where MXNet computes in float32), so both give the same map bit for bit.
"""

from __future__ import annotations

import dataclasses
import math
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from .._checks import check_int, check_number
from .keys import FLIP_UNIFORM, GEOMETRY_FIRST, keyed_uniform

if TYPE_CHECKING:
    from .draws import KeyedDraw

# How an iterator or dataset resamples without geometry parameters: recio's Pillow-exact,
# antialiasing filters, or OpenCV's as MXNet runs them (cv::resize, inter_method's filter).
RESAMPLE = ("pillow", "opencv")
INTER_METHODS = {
    0: "nearest",
    1: "bilinear",
    2: "bicubic",
    3: "area",
    4: "Lanczos",
    9: "by direction",
    10: "random",
}
NEAREST, LINEAR, CUBIC, AREA, LANCZOS4 = range(5)  # OpenCV's codes (native/warp.h)
CONSTANT, REPLICATE = 0, 1  # how taps outside the source are treated (native/warp.h)

# The geometry's uniforms (native/draw.h): after the crop's, the flip's and colour's.
_SHEAR, _ANGLE, _SCALE, _RATIO, _CROP_SIZE, _CROP_Y, _CROP_X, _INTERP = range(
    GEOMETRY_FIRST, GEOMETRY_FIRST + 8
)
_LAST = _INTERP


@dataclass(frozen=True)
class GeometrySpec:
    """MXNet's default augmenter's geometry: the affine warp, padding and square crops.

    The parameters keep MXNet's names, defaults and meanings: a random rotation in whole
    degrees in ``[-max_rotate_angle, max_rotate_angle]`` (``rotate`` > 0 fixes it), a shear
    in ``[-max_shear_ratio, max_shear_ratio]``, a scale in ``[min_random_scale,
    max_random_scale]`` and an aspect ratio in ``[1 - max_aspect_ratio, 1 + max_aspect_ratio]``
    (``[min_aspect_ratio, max_aspect_ratio]`` when ``min_aspect_ratio`` is given) make one
    affine warp onto an image of the scaled size, clipped to ``[min_img_size, max_img_size]``;
    ``pad`` adds a border of ``fill_value``; ``min_crop_size``/``max_crop_size`` crop a random
    square resized to the output. ``inter_method`` is OpenCV's interpolation (0 nearest,
    1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 by direction, 10 random); a warp samples
    area as bilinear, as warpAffine does.

    A draw with a geometry (``KeyedDraw(geometry=...)``) samples every image through the warp
    with OpenCV's filters, even with all the defaults (MXNet's resize and centre crop, as
    MXNet resamples); without one, recio's Pillow-exact filters and crop windows. The
    iterators and datasets pass a geometry on when it is :attr:`enabled`: a parameter other
    than MXNet's default, or ``resample="opencv"`` (OpenCV's resampling with no geometry
    parameter at all, to evaluate on the pixels MXNet trained on); ``resample="pillow"``,
    the default, leaves a geometry of defaults off.
    """

    max_rotate_angle: int = 0
    rotate: int = -1
    max_shear_ratio: float = 0.0
    max_aspect_ratio: float = 0.0
    min_aspect_ratio: float | None = None
    max_crop_size: int = -1
    min_crop_size: int = -1
    max_random_scale: float = 1.0
    min_random_scale: float = 1.0
    max_img_size: float = 1e10
    min_img_size: float = 0.0
    pad: int = 0
    fill_value: int = 255
    inter_method: int = 1
    resample: str = "pillow"  # "opencv": sampled as above even with all the defaults

    def __post_init__(self) -> None:
        for name in ("max_rotate_angle", "rotate", "max_crop_size", "min_crop_size", "pad"):
            object.__setattr__(self, name, check_int(name, getattr(self, name)))
        numbers = ("max_shear_ratio", "max_aspect_ratio", "max_random_scale", "min_random_scale",
                   "min_img_size")  # fmt: skip
        for name in numbers:
            object.__setattr__(self, name, check_number(name, getattr(self, name)))
        # MXNet's default is 1e10, "no limit": infinity means the same
        object.__setattr__(
            self, "max_img_size", check_number("max_img_size", self.max_img_size, finite=False)
        )
        if self.min_aspect_ratio is not None:
            value = check_number("min_aspect_ratio", self.min_aspect_ratio)
            object.__setattr__(self, "min_aspect_ratio", value)
        if not 0 <= self.max_rotate_angle <= 360:
            raise ValueError(f"max_rotate_angle must be in [0, 360], not {self.max_rotate_angle}")
        if not -1 <= self.rotate <= 360:
            raise ValueError(f"rotate must be an angle in [0, 360] (-1: off), not {self.rotate}")
        if self.max_shear_ratio < 0:
            raise ValueError(f"max_shear_ratio must be at least 0, not {self.max_shear_ratio}")
        lo, hi = self.aspect_range
        if not 0 < lo <= hi:
            raise ValueError(
                "the aspect ratio range must be positive and ordered, not "
                f"max_aspect_ratio={self.max_aspect_ratio}, "
                f"min_aspect_ratio={self.min_aspect_ratio} (range [{lo}, {hi}])"
            )
        for name in ("max_crop_size", "min_crop_size"):
            if getattr(self, name) == 0 or getattr(self, name) < -1:
                raise ValueError(f"{name} must be positive (-1: off), not {getattr(self, name)}")
        if self.crop_sizes and not self.crop_sizes[0] <= self.crop_sizes[1]:
            raise ValueError(
                "need min_crop_size <= max_crop_size, not "
                f"min_crop_size={self.min_crop_size}, max_crop_size={self.max_crop_size}"
            )
        if not 0 < self.min_random_scale <= self.max_random_scale:
            raise ValueError(
                "need 0 < min_random_scale <= max_random_scale, not "
                f"min_random_scale={self.min_random_scale}, "
                f"max_random_scale={self.max_random_scale}"
            )
        if not 0 <= self.min_img_size <= self.max_img_size:
            raise ValueError(
                "need 0 <= min_img_size <= max_img_size, not "
                f"min_img_size={self.min_img_size}, max_img_size={self.max_img_size}"
            )
        if not 0 <= self.pad <= 1 << 16:
            raise ValueError(f"pad must be in [0, 65536], not {self.pad}")
        fill = check_int("fill_value", self.fill_value)
        if not 0 <= fill <= 255:
            raise ValueError(f"fill_value must be in [0, 255], not {fill}")
        object.__setattr__(self, "fill_value", fill)
        if not isinstance(self.resample, str) or self.resample not in RESAMPLE:
            raise ValueError(
                f"resample must be one of {', '.join(map(repr, RESAMPLE))}, not {self.resample!r}"
            )
        if self.inter_method not in INTER_METHODS or isinstance(self.inter_method, bool):
            names = ", ".join(f"{k} {v}" for k, v in INTER_METHODS.items())
            raise ValueError(
                f"inter_method must be one of OpenCV's ({names}), not {self.inter_method!r}"
            )

    @property
    def aspect_range(self) -> tuple[float, float]:
        """The warp's aspect ratios, as MXNet chooses them from the two parameters."""
        if self.min_aspect_ratio is None:
            return (1 - self.max_aspect_ratio, 1 + self.max_aspect_ratio)
        return (self.min_aspect_ratio, self.max_aspect_ratio)

    @property
    def crop_sizes(self) -> tuple[int, int] | None:
        """``(min_crop_size, max_crop_size)`` when the square crop is on (one given: both)."""
        if self.min_crop_size == -1 and self.max_crop_size == -1:
            return None
        lo = self.min_crop_size if self.min_crop_size != -1 else self.max_crop_size
        hi = self.max_crop_size if self.max_crop_size != -1 else self.min_crop_size
        return (lo, hi)

    @property
    def warp(self) -> bool:
        """Whether MXNet runs its warpAffine stage (its own test, parameter by parameter)."""
        lo, hi = self.aspect_range
        return bool(
            self.max_rotate_angle > 0
            or self.max_shear_ratio > 0
            or self.rotate > 0
            or self.max_random_scale != 1
            or self.min_random_scale != 1
            or (lo, hi) != (1, 1)
            or self.max_img_size != 1e10
            or self.min_img_size != 0
        )

    @property
    def enabled(self) -> bool:
        """Whether images go through the warp: OpenCV's resampling asked for, or MXNet's.

        That is, ``resample="opencv"`` or any parameter other than MXNet's default
        (``fill_value`` alone changes nothing).
        """
        return (
            self.warp
            or self.pad > 0
            or self.crop_sizes is not None
            or self.inter_method != 1
            or self.resample == "opencv"
        )

    def non_default(self) -> list[str]:
        """The parameters given other than MXNet's defaults."""
        default = GeometrySpec()
        return [
            f.name
            for f in dataclasses.fields(self)
            if getattr(self, f.name) != getattr(default, f.name)
        ]

    def native(self) -> dict[str, int | float]:
        """The geometry as the native pool takes it: rc_geom's fields by name.

        native/bind_options.c reads each by its name (NOTE [named parameters]).
        """
        lo, hi = self.aspect_range
        crop_lo, crop_hi = self.crop_sizes or (-1, -1)
        return {
            "affine": int(self.warp),
            "max_rotate_angle": self.max_rotate_angle,
            "rotate": self.rotate,
            "max_shear_ratio": self.max_shear_ratio,
            "min_ratio": lo,
            "max_ratio": hi,
            "min_random_scale": self.min_random_scale,
            "max_random_scale": self.max_random_scale,
            "min_img_size": self.min_img_size,
            "max_img_size": self.max_img_size,
            "min_crop_size": crop_lo,
            "max_crop_size": crop_hi,
            "pad": self.pad,
            "fill_value": self.fill_value,
            "inter_method": self.inter_method,
        }


@dataclass(frozen=True)
class Warp:
    """One image's warp, from output pixels to source pixels.

    Output pixel (x, y) samples the source at ``m`` applied to ``(x + off_x, y + off_y)``
    (pixel centres at integers).
    ``interp`` is OpenCV's code (area sampled as bilinear), ``border`` CONSTANT (taps outside
    the source are ``fill``) or REPLICATE (a sample centred in the source takes its edge for
    outside taps; one centred outside is ``fill``); ``crop`` (x, y, w, h) the source pixels the
    taps read, ``flip`` whether the output is mirrored after.
    """

    m: tuple[float, float, float, float, float, float]
    off_x: int
    off_y: int
    interp: int
    border: int
    fill: int
    crop: tuple[int, int, int, int]
    flip: bool


_f32 = np.float32


def _compose(b: list[float], c: list[float]) -> list[float]:
    """The 2x3 affine map ``b`` after ``c`` (native/draw.c's compose, the same operations)."""
    return [
        b[0] * c[0] + b[1] * c[3],
        b[0] * c[1] + b[1] * c[4],
        b[0] * c[2] + b[1] * c[5] + b[2],
        b[3] * c[0] + b[4] * c[3],
        b[3] * c[1] + b[4] * c[4],
        b[3] * c[2] + b[4] * c[5] + b[5],
    ]


def _resize_map(ssize_w: int, ssize_h: int, dsize_w: int, dsize_h: int) -> list[float]:
    """cv::resize's map from its output's pixels to its input's (centres aligned)."""
    sx = 1.0 / (dsize_w / ssize_w)
    sy = 1.0 / (dsize_h / ssize_h)
    return [sx, 0.0, 0.5 * sx - 0.5, 0.0, sy, 0.5 * sy - 0.5]


def _mxnet_affine(g: GeometrySpec, u, cols: int, rows: int) -> tuple[list[float], int, int]:
    """MXNet's warpAffine stage for a cols x rows image: its map inverted, and its size.

    The matrix is computed in float32 as MXNet computes it, inverted in double as warpAffine
    inverts it.
    """
    shear_max = _f32(g.max_shear_ratio)
    s = _f32(u(_SHEAR)) * shear_max * _f32(2) - shear_max
    angle = 0
    if g.max_rotate_angle > 0:
        angle = math.floor(u(_ANGLE) * (2 * g.max_rotate_angle + 1)) - g.max_rotate_angle
    if g.rotate > 0:
        angle = g.rotate
    a = _f32(math.cos(angle / 180.0 * math.pi))
    b = _f32(math.sin(angle / 180.0 * math.pi))
    lo_s, hi_s = _f32(g.min_random_scale), _f32(g.max_random_scale)
    scale = _f32(u(_SCALE)) * (hi_s - lo_s) + lo_s
    lo_r, hi_r = (_f32(v) for v in g.aspect_range)
    ratio = _f32(u(_RATIO)) * (hi_r - lo_r) + lo_r
    hs = _f32(2) * scale / (_f32(1) + ratio)
    ws = ratio * hs
    min_img, max_img = _f32(g.min_img_size), _f32(g.max_img_size)
    new_w = max(min_img, min(max_img, scale * _f32(cols)))
    new_h = max(min_img, min(max_img, scale * _f32(rows)))
    m0, m3 = hs * a - s * b * ws, -b * ws
    m1, m4 = hs * b + s * a * ws, a * ws
    cw = m0 * _f32(cols) + m1 * _f32(rows)
    ch = m3 * _f32(cols) + m4 * _f32(rows)
    m2, m5 = (new_w - cw) / _f32(2), (new_h - ch) / _f32(2)
    m0, m1, m2, m3, m4, m5 = (float(v) for v in (m0, m1, m2, m3, m4, m5))
    d = m0 * m4 - m1 * m3
    d = 1.0 / d if d != 0 else 0.0
    a11, a22, a12, a21 = m4 * d, m0 * d, -m1 * d, -m3 * d
    inv = [a11, a12, -a11 * m2 - a12 * m5, a21, a22, -a21 * m2 - a22 * m5]
    return inv, int(new_w), int(new_h)


def _half(spare: int) -> int:
    """C's ``spare / 2`` (truncated toward zero), as MXNet centres its crops."""
    return -(-spare // 2) if spare < 0 else spare // 2


def plan(draw: KeyedDraw, width: int, height: int, record: int) -> Warp:
    """The warp of ``record``, an image of ``width`` x ``height``, under ``draw``.

    ``draw`` has a geometry; the result is native/draw.c's rc_draw_warp, bit for bit.
    """
    g = draw.geometry
    if g is None:
        raise ValueError("plan needs a KeyedDraw with a geometry")
    spec = draw.spec
    uniforms = keyed_uniform(draw.seed, draw.epoch, np.array([record]), _LAST)[0]

    def u(k: int) -> float:
        return float(uniforms[k - 1])

    W, H = max(width, 1), max(height, 1)
    flip = bool(spec.rand_mirror and u(FLIP_UNIFORM) < 0.5) or spec.mirror
    G = [1.0, 0.0, 0.0, 0.0, 1.0, 0.0]
    cols, rows = W, H
    if spec.random_resized_crop:
        plain = dataclasses.replace(draw, geometry=None)
        win = plain.windows(np.array([[W, H]]), np.array([record]))[0][0].tolist()
        cols, rows = spec.out_width, spec.out_height
        G = _resize_map(win[2], win[3], cols, rows)
        G[2] += win[0]
        G[5] += win[1]
    elif spec.resize > 0:
        if H > W:
            rows, cols = spec.resize * H // W, spec.resize
        else:
            rows, cols = spec.resize, spec.resize * W // H
        G = _resize_map(W, H, cols, rows)
    if g.warp:
        inv, cols, rows = _mxnet_affine(g, u, cols, rows)
        G = _compose(G, inv)
    cols, rows = cols + 2 * g.pad, rows + 2 * g.pad
    cw, ch = spec.out_width, spec.out_height
    sizes = g.crop_sizes
    if sizes:
        cw = ch = sizes[0] + math.floor(u(_CROP_SIZE) * (sizes[1] - sizes[0] + 1))

    def offset(spare: int, k: int) -> int:
        return math.floor(u(k) * (spare + 1)) if spec.rand_crop and spare >= 0 else _half(spare)

    x0, y0 = offset(cols - cw, _CROP_X), offset(rows - ch, _CROP_Y)
    off_x = off_y = 0
    if sizes:
        K = _resize_map(cw, ch, spec.out_width, spec.out_height)
        K[2] += x0 - g.pad
        K[5] += y0 - g.pad
        G = _compose(G, K)
    else:
        off_x, off_y = x0 - g.pad, y0 - g.pad
    interp = g.inter_method
    if interp == 10:
        interp = math.floor(u(_INTERP) * 5)
    elif interp == 9:  # cubic to enlarge, area to shrink, else bilinear
        ex = math.sqrt(G[0] * G[0] + G[3] * G[3])
        ey = math.sqrt(G[1] * G[1] + G[4] * G[4])
        interp = CUBIC if ex < 1 and ey < 1 else AREA if ex > 1 and ey > 1 else LINEAR
    border = CONSTANT if g.warp else REPLICATE
    interp = LINEAR if interp == AREA and g.warp else interp
    m = tuple(G)
    out_w, out_h = spec.out_width, spec.out_height
    x_lo, y_lo, x_hi, y_hi = _bounds(m, off_x, off_y, interp, border, out_w, out_h, W, H)
    crop = (x_lo, y_lo, x_hi - x_lo, y_hi - y_lo)
    return Warp(m, off_x, off_y, interp, border, g.fill_value, crop, flip)  # type: ignore[arg-type]


def _reach(interp: int) -> tuple[int, int]:
    """Pixels the taps reach before a sample's whole pixel and past it (+1 for rounding)."""
    if interp == CUBIC:
        return 1, 3
    if interp == LANCZOS4:
        return 3, 5
    return 0, 2


def _bounds(m, off_x, off_y, interp, border, out_w, out_h, W, H) -> tuple[int, int, int, int]:
    """native/warp.c's rc_warp_bounds: the source box (x0, y0, x1, y1) the taps read."""
    xs, ys = [], []
    for cy in (0, 1):
        for cx in (0, 1):
            x = float((out_w - 1 if cx else 0) + off_x)
            y = float((out_h - 1 if cy else 0) + off_y)
            xs.append(m[0] * x + m[1] * y + m[2])
            ys.append(m[3] * x + m[4] * y + m[5])
    before, after = _reach(interp)
    box = border == REPLICATE and interp == AREA  # the box spans the sample's whole extent
    bx = int(min(math.ceil(abs(m[0]) / 2), 1e6)) if box else 0
    by = int(min(math.ceil(abs(m[4]) / 2), 1e6)) if box else 0
    big = 1e9
    x0 = math.floor(max(min(xs), -big)) - before - 1 - bx
    x1 = math.floor(min(max(xs), big)) + after + 1 + bx
    y0 = math.floor(max(min(ys), -big)) - before - 1 - by
    y1 = math.floor(min(max(ys), big)) + after + 1 + by
    box = (max(x0, 0), max(y0, 0), min(x1, W), min(y1, H))
    if box[2] <= box[0] or box[3] <= box[1]:
        return (0, 0, 0, 0)
    return box


# ---- the warp's pixels: OpenCV's warpAffine arithmetic for 8-bit images (native/warp.c) ----

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
