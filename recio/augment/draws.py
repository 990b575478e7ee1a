"""What to do to each image: crop windows, flips and colour, keyed per record.

The decoder does the pixel work; this module decides, in source pixels, which window of
each image becomes the output. Every draw of a record is a function of ``(seed, epoch,
record)`` alone (:class:`KeyedDraw`: counter-based uniforms, :mod:`.keys`),
so it does not depend on the batch, rank, worker or thread the record lands in, nor on the
world size: a resumed or resharded run repeats it. The decode threads draw each image's
window themselves once its header gives the size (native/draw.c); :func:`draw_keyed` is
the same arithmetic in numpy, bit for bit: the reference, and the draws of a build without
the extension.

Colour (:mod:`.colour`) is drawn from the same key, from uniforms past the crop's (so
turning it on changes no window or flip), and applied by the decoder to the output pixels.
MXNet's geometry (:class:`~.geometry_spec.GeometrySpec`, one affine warp per image) draws
from the uniforms past colour's: :func:`plan` gives a record's warp (native/draw.c's
rc_draw_warp, bit for bit), composed with the crop window :meth:`KeyedDraw.windows` draws;
with a geometry, the windows are the boxes the warps read.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .colour import COLOUR_VALUES, ColourDraws, ColourSpec, draw_colour
from .geometry_spec import AREA, CONSTANT, CUBIC, LANCZOS4, LINEAR, REPLICATE, GeometrySpec, Warp
from .keys import (
    ANGLE_UNIFORM,
    ATTEMPTS,
    CROP_SIZE_UNIFORM,
    CROP_UNIFORMS,
    CROP_X_UNIFORM,
    CROP_Y_UNIFORM,
    FLIP_UNIFORM,
    GOLDEN_INT,
    INTERP_UNIFORM,
    LAST_UNIFORM,
    MASK,
    RATIO_UNIFORM,
    SCALE_UNIFORM,
    SHEAR_UNIFORM,
    keyed_uniform,
    mix_int,
)

try:
    from .. import _native
except ImportError:  # built without the extension (RECIO_NO_NATIVE=1)
    _native = None


@dataclass(frozen=True)
class CropSpec:
    """How windows are chosen; the MXNet ImageRecordIter names map onto it."""

    out_height: int
    out_width: int
    resize: int = -1  # shorter side is scaled to this before cropping (<= 0: no resize)
    rand_crop: bool = False  # random position instead of the centre
    random_resized_crop: bool = False  # torchvision's RandomResizedCrop
    min_area: float = 0.08
    max_area: float = 1.0
    min_aspect: float = 3 / 4
    max_aspect: float = 4 / 3
    rand_mirror: bool = False
    mirror: bool = False  # MXNet's mirror: every image flipped (with rand_mirror: as well)

    def __post_init__(self) -> None:
        if self.out_height < 1 or self.out_width < 1:
            raise ValueError(
                f"the output size must be positive, not {self.out_height}x{self.out_width}"
            )
        if not 0 < self.min_area <= self.max_area <= 1:
            raise ValueError(
                "need 0 < min_random_area <= max_random_area <= 1, not "
                f"min_random_area={self.min_area}, max_random_area={self.max_area}"
            )
        if not 0 < self.min_aspect <= self.max_aspect:
            raise ValueError(
                "need 0 < min_aspect_ratio <= max_aspect_ratio, not "
                f"min_aspect_ratio={self.min_aspect}, max_aspect_ratio={self.max_aspect}"
            )


@dataclass(frozen=True)
class KeyedDraw:
    """The draws of one epoch: each record's window and flip from ``(seed, epoch, record)``.

    ``record`` is the record's number in the dataset (its position in the index). The
    decode pool takes one to draw as it decodes (``DecodePool.decode_batch(draw=)``);
    :meth:`windows` gives the same draws for known sizes.
    """

    spec: CropSpec
    seed: int
    epoch: int
    colour: ColourSpec = field(default_factory=ColourSpec)
    geometry: GeometrySpec | None = None  # MXNet's geometry: each image warped (plan)

    def __post_init__(self) -> None:
        if self.geometry is not None and self.spec.random_resized_crop and self.geometry.pad:
            raise ValueError("pad does not combine with random_resized_crop (as in MXNet)")

    @functools.cached_property
    def epoch_key(self) -> int:
        """The 64-bit key every record's draws of this epoch start from."""
        return mix_int(mix_int((self.seed + GOLDEN_INT) & MASK) ^ (self.epoch * GOLDEN_INT & MASK))

    def native(self) -> Any:
        """The draw as the native pool takes it: a ``recio._native.Draw``, checked once.

        Every field is passed by the name of rc_draw's field (NOTE [named parameters] in
        native/bind_options.c); colour and geometry as their own ``native()`` dicts.
        """
        s = self.spec
        return _native.Draw(
            out_w=s.out_width,
            out_h=s.out_height,
            resize=s.resize,
            rand_crop=int(s.rand_crop),
            rrc=int(s.random_resized_crop),
            rand_mirror=int(s.rand_mirror),
            min_area=s.min_area,
            max_area=s.max_area,
            min_aspect=s.min_aspect,
            max_aspect=s.max_aspect,
            epoch_key=self.epoch_key,
            mirror=int(s.mirror),
            colour=self.colour.native(),
            geometry=None if self.geometry is None else self.geometry.native(),
        )

    def colours(self, records: np.ndarray) -> ColourDraws:
        """The colour draws of ``records`` (what the decoder applies to each)."""
        records = np.ascontiguousarray(records, dtype=np.int64).reshape(-1)
        if _native is None:
            return draw_colour(self.colour, self.seed, self.epoch, records)
        values = np.empty((len(records), COLOUR_VALUES), dtype=np.float64)
        _native.draw_colours(self.native(), records, values)
        return ColourDraws.of(values)

    def windows(
        self, sizes: np.ndarray, records: np.ndarray, epochs: np.ndarray | None = None
    ) -> tuple[np.ndarray, np.ndarray]:
        """Crop windows (int32 N×4: x, y, w, h) and flips (bool N) of ``records``, of ``sizes``.

        With a geometry, each window is the source box the warp's taps read (empty, all
        zeros, when every output pixel is fill).

        ``sizes`` (N×2: width, height; below 1 counts as 1) are the records' images;
        ``epochs``, where given, the epoch each one draws from instead of ``self.epoch``
        (a rollover batch reaching into the next epoch's order).
        """
        sizes = np.ascontiguousarray(sizes, dtype=np.int32).reshape(-1, 2)
        records = np.ascontiguousarray(records, dtype=np.int64)
        if epochs is not None and not (epochs == self.epoch).all():
            windows = np.empty((len(records), 4), dtype=np.int32)
            flips = np.empty(len(records), dtype=bool)
            for epoch in np.unique(epochs).tolist():
                mine = epochs == epoch
                draw = dataclasses.replace(self, epoch=epoch)
                windows[mine], flips[mine] = draw.windows(sizes[mine], records[mine])
            return windows, flips
        if _native is None and self.geometry is not None:
            pairs = zip(sizes.tolist(), records.tolist(), strict=True)
            warps = [plan(self, w, h, r) for (w, h), r in pairs]
            windows = np.array([w.crop for w in warps], dtype=np.int32).reshape(-1, 4)
            return windows, np.array([w.flip for w in warps], dtype=bool)
        if _native is None:
            return draw_keyed(self.spec, np.maximum(sizes, 1), self.seed, self.epoch, records)
        windows = np.empty((len(records), 4), dtype=np.int32)
        flips = np.empty(len(records), dtype=np.uint8)
        _native.draw_windows(self.native(), sizes, records, windows, flips)
        return windows, flips.view(bool)


def draw_keyed(
    spec: CropSpec, sizes: np.ndarray, seed: int, epoch: int, samples: np.ndarray
) -> tuple[np.ndarray, np.ndarray]:
    """The numpy reference of :meth:`KeyedDraw.windows`: windows and flips of ``samples``.

    ``sizes`` (N×2: width, height) at least 1.
    """
    uniform = keyed_uniform(seed, epoch, samples, CROP_UNIFORMS)
    flips = uniform[:, -1] < 0.5 if spec.rand_mirror else np.zeros(len(sizes), dtype=bool)
    flips = flips | spec.mirror  # MXNet: (rand_mirror and a coin) or mirror
    return _windows(spec, sizes, uniform[:, :-1].reshape(-1, ATTEMPTS, 4)), flips


def _windows(spec: CropSpec, sizes: np.ndarray, uniform: np.ndarray) -> np.ndarray:
    """Crop windows for images of ``sizes`` from ``uniform`` draws (N, attempts, 4)."""
    width = np.maximum(sizes[:, 0], 1).astype(np.float64)
    height = np.maximum(sizes[:, 1], 1).astype(np.float64)
    if spec.random_resized_crop:
        return _random_resized(spec, width, height, uniform)
    return _fixed_size(spec, width, height, uniform[:, 0, 2:])


def _fixed_size(spec: CropSpec, width, height, position) -> np.ndarray:
    """Centre (or random-position) crop of the output size, after the optional shorter-side resize.

    Without ``resize``, an image smaller than the output gives its largest
    window of the output's aspect ratio (then scaled up by the decoder).
    """
    out_w, out_h = float(spec.out_width), float(spec.out_height)
    # source pixels per output pixel
    scale = np.minimum(width, height) / spec.resize if spec.resize > 0 else np.ones_like(width)
    scale = np.minimum(scale, np.minimum(width / out_w, height / out_h))
    w = np.maximum(np.round(out_w * scale), 1)
    h = np.maximum(np.round(out_h * scale), 1)
    fx = position[:, 0] if spec.rand_crop else 0.5
    fy = position[:, 1] if spec.rand_crop else 0.5
    x = np.floor((width - w + (1 if spec.rand_crop else 0)) * fx)
    y = np.floor((height - h + (1 if spec.rand_crop else 0)) * fy)
    x = np.clip(x, 0, width - w)
    y = np.clip(y, 0, height - h)
    return np.stack([x, y, w, h], 1).astype(np.int32)


def _random_resized(spec: CropSpec, width, height, uniform) -> np.ndarray:
    """The window of torchvision's RandomResizedCrop, vectorised over the batch."""
    area = (width * height)[:, None]
    scale = spec.min_area + (spec.max_area - spec.min_area) * uniform[..., 0]
    log_lo, log_hi = np.log(spec.min_aspect), np.log(spec.max_aspect)
    aspect = np.exp(log_lo + (log_hi - log_lo) * uniform[..., 1])
    w = np.round(np.sqrt(area * scale * aspect))
    h = np.round(np.sqrt(area * scale / aspect))
    fits = (w > 0) & (h > 0) & (w <= width[:, None]) & (h <= height[:, None])
    first = np.argmax(fits, axis=1)
    rows = np.arange(len(width))
    ok = fits[rows, first]
    w, h = w[rows, first], h[rows, first]
    x = np.floor((width - w + 1) * uniform[rows, first, 2])
    y = np.floor((height - h + 1) * uniform[rows, first, 3])
    # Fallback (no attempt fits): the centre window, aspect clamped to the range.
    ratio = width / height
    fw = np.where(
        ratio < spec.min_aspect,
        width,
        np.where(ratio > spec.max_aspect, np.round(height * spec.max_aspect), width),
    )
    fh = np.where(
        ratio < spec.min_aspect,
        np.round(width / spec.min_aspect),
        np.where(ratio > spec.max_aspect, height, height),
    )
    w = np.where(ok, w, fw)
    h = np.where(ok, h, fh)
    x = np.where(ok, x, np.floor((width - fw) / 2))
    y = np.where(ok, y, np.floor((height - fh) / 2))
    x = np.clip(x, 0, np.maximum(width - w, 0))
    y = np.clip(y, 0, np.maximum(height - h, 0))
    return np.stack([x, y, np.maximum(w, 1), np.maximum(h, 1)], 1).astype(np.int32)


# ---- MXNet's geometry: a record's warp (native/draw.c's rc_draw_warp, bit for bit) ----

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
    s = _f32(u(SHEAR_UNIFORM)) * shear_max * _f32(2) - shear_max
    angle = 0
    if g.max_rotate_angle > 0:
        angle = math.floor(u(ANGLE_UNIFORM) * (2 * g.max_rotate_angle + 1)) - g.max_rotate_angle
    if g.rotate > 0:
        angle = g.rotate
    a = _f32(math.cos(angle / 180.0 * math.pi))
    b = _f32(math.sin(angle / 180.0 * math.pi))
    lo_s, hi_s = _f32(g.min_random_scale), _f32(g.max_random_scale)
    scale = _f32(u(SCALE_UNIFORM)) * (hi_s - lo_s) + lo_s
    lo_r, hi_r = (_f32(v) for v in g.aspect_range)
    ratio = _f32(u(RATIO_UNIFORM)) * (hi_r - lo_r) + lo_r
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
    uniforms = keyed_uniform(draw.seed, draw.epoch, np.array([record]), LAST_UNIFORM)[0]

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
        cw = ch = sizes[0] + math.floor(u(CROP_SIZE_UNIFORM) * (sizes[1] - sizes[0] + 1))

    def offset(spare: int, k: int) -> int:
        return math.floor(u(k) * (spare + 1)) if spec.rand_crop and spare >= 0 else _half(spare)

    x0, y0 = offset(cols - cw, CROP_X_UNIFORM), offset(rows - ch, CROP_Y_UNIFORM)
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
        interp = math.floor(u(INTERP_UNIFORM) * 5)
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
