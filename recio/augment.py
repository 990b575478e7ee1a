"""What to do to each image: crop windows, flips and colour, keyed per record.

The decoder does the pixel work; this module decides, in source pixels, which window of
each image becomes the output. Every draw of a record is a function of ``(seed, epoch,
record)`` alone (:class:`KeyedDraw`: counter-based uniforms, splitmix64 over the counter),
so it does not depend on the batch, rank, worker or thread the record lands in, nor on the
world size: a resumed or resharded run repeats it. The decode threads draw each image's
window themselves once its header gives the size (native/draw.c); :func:`draw_keyed` is
the same arithmetic in numpy, bit for bit: the reference, and the draws of a build without
the extension.

Colour (:class:`ColourSpec`: MXNet's HLS jitter, brightness, contrast, saturation, PCA
lighting, random contrast and illumination) is drawn from the same key, from uniforms past
the crop's (so turning it on changes no window or flip), and applied by the decoder to the
output pixels (native/colour.c; :func:`apply_colour` is its numpy reference, the Pillow
path's). MXNet's geometry (:class:`recio.geometry.GeometrySpec`, one affine warp per image)
draws from the uniforms past colour's.
"""

from __future__ import annotations

import dataclasses
import functools
import math
from dataclasses import dataclass, field

import numpy as np

from .geometry import GeometrySpec, check_int, check_number, plan

try:
    from . import _native
except ImportError:  # built without the extension (RECIO_NO_NATIVE=1)
    _native = None

_ATTEMPTS = 10  # torchvision's RandomResizedCrop tries 10 windows before its fallback
_UNIFORMS = _ATTEMPTS * 4 + 1  # four per attempt, then the flip's
# Colour's uniforms follow (native/draw.h): HLS h, s, l; brightness, contrast, saturation;
# three normals of two each (PCA); random contrast, random illumination.
_COLOUR_FIRST = _UNIFORMS + 1
_COLOUR_UNIFORMS = 14


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


# PCA lighting's eigenvalues and eigenvectors (rows: R, G, B) of ImageNet's pixel covariance,
# on the 0..255 scale: the ones MXNet's augmenter and GluonCV use.
PCA_EIGVAL = (55.46, 4.794, 1.148)
PCA_EIGVEC = (
    (-0.5675, 0.7192, 0.4009),
    (-0.5808, -0.0045, -0.8140),
    (-0.5836, -0.6948, 0.4203),
)


def _check_at_least(name: str, value: object, minimum: float) -> float:
    value = check_number(name, value, finite=False)
    if not value >= minimum:  # (NaN fails too)
        raise ValueError(f"{name} must be at least {minimum}, not {value}")
    return value


@dataclass(frozen=True)
class ColourSpec:
    """MXNet's colour augmentation of each output image, before normalisation.

    In the order MXNet's ``ImageRecordIter`` applies them (to 8-bit pixels, rounded and
    clipped after each step):

    - ``random_h``/``random_s``/``random_l``: HLS jitter. The pixels go to OpenCV's 8-bit
      HLS (H in 0..180), get ``int(U(-v, v))`` added per channel, clipped to 0..180 /
      0..255 (the hue is clipped, not turned round), and come back.
    - ``brightness``: pixels times ``1 + U(-b, b)``.
    - ``contrast``: ``p * a + mean_gray * (1 - a)``, ``a = 1 + U(-c, c)``.
    - ``saturation``: ``p * a + gray * (1 - a)`` per pixel, ``a = 1 + U(-s, s)``. Grey is
      MXNet's: the luma weights taken in the wrong order, 0.114 R + 0.587 G + 0.299 B.
    - ``pca_noise``: AlexNet's PCA lighting: ``eigvec @ (N(0, pca_noise) * eigval)`` added
      (:data:`PCA_EIGVAL`, :data:`PCA_EIGVEC`).
    - ``max_random_contrast``/``max_random_illumination``: in the normalisation, MXNet's
      ``((p - mean) * (1 + U(-c, c)) + U(-i, i)) * scale / std`` (float outputs).

    ``U`` and ``N`` are each image's own draws, keyed like its crop (:class:`KeyedDraw`).
    """

    random_h: int = 0
    random_s: int = 0
    random_l: int = 0
    brightness: float = 0.0
    contrast: float = 0.0
    saturation: float = 0.0
    pca_noise: float = 0.0
    max_random_contrast: float = 0.0
    max_random_illumination: float = 0.0

    def __post_init__(self) -> None:
        for name, top in (("random_h", 180), ("random_s", 255), ("random_l", 255)):
            value = check_int(name, getattr(self, name))
            if not 0 <= value <= top:
                raise ValueError(f"{name} must be in [0, {top}], not {value}")
            object.__setattr__(self, name, value)
        for f in dataclasses.fields(self)[3:]:
            object.__setattr__(self, f.name, _check_at_least(f.name, getattr(self, f.name), 0.0))
        if self.max_random_contrast >= 1:
            raise ValueError(
                f"max_random_contrast must be below 1 (a factor 1 - c must stay positive), "
                f"not {self.max_random_contrast}"
            )

    @property
    def hls(self) -> bool:
        """Whether the HLS jitter runs (MXNet converts whenever one of the three is set)."""
        return bool(self.random_h or self.random_s or self.random_l)

    @property
    def pixels(self) -> bool:
        """Whether the 8-bit pixels change (everything but the normalisation's two)."""
        return self.hls or bool(
            self.brightness or self.contrast or self.saturation or self.pca_noise
        )

    @property
    def affine(self) -> bool:
        """Whether the normalisation draws a contrast factor or an illumination shift."""
        return bool(self.max_random_contrast or self.max_random_illumination)

    @property
    def enabled(self) -> bool:
        """Whether any colour augmentation is on."""
        return self.pixels or self.affine

    def native(self) -> tuple:
        """The colour part of a draw, as the native pool takes it."""
        return tuple(getattr(self, f.name) for f in dataclasses.fields(self))


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
    geometry: GeometrySpec | None = None  # MXNet's geometry: each image warped (recio.geometry)

    def __post_init__(self) -> None:
        if self.geometry is not None and self.spec.random_resized_crop and self.geometry.pad:
            raise ValueError("pad does not combine with random_resized_crop (as in MXNet)")

    @functools.cached_property
    def epoch_key(self) -> int:
        """The 64-bit key every record's draws of this epoch start from."""
        return _mix_int(
            _mix_int((self.seed + _GOLDEN_INT) & _MASK) ^ (self.epoch * _GOLDEN_INT & _MASK)
        )

    def native(self) -> tuple:
        """The draw as the native pool takes it."""
        s = self.spec
        return (
            s.out_width, s.out_height, s.resize, int(s.rand_crop), int(s.random_resized_crop),
            int(s.rand_mirror), s.min_area, s.max_area, s.min_aspect, s.max_aspect,
            self.epoch_key, None if self.geometry is None else self.geometry.native(),
            int(s.mirror), *self.colour.native(),
        )  # fmt: skip

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
    uniform = keyed_uniform(seed, epoch, samples, _UNIFORMS)
    flips = uniform[:, -1] < 0.5 if spec.rand_mirror else np.zeros(len(sizes), dtype=bool)
    flips = flips | spec.mirror  # MXNet: (rand_mirror and a coin) or mirror
    return _windows(spec, sizes, uniform[:, :-1].reshape(-1, _ATTEMPTS, 4)), flips


_GOLDEN_INT, _MASK = 0x9E3779B97F4A7C15, (1 << 64) - 1
_GOLDEN = np.uint64(_GOLDEN_INT)


def _mix_int(x: int) -> int:
    """:func:`_mix` of one Python integer (below 2**64)."""
    x = (x ^ (x >> 30)) * 0xBF58476D1CE4E5B9 & _MASK
    x = (x ^ (x >> 27)) * 0x94D049BB133111EB & _MASK
    return x ^ (x >> 31)


def _mix(x: np.ndarray) -> np.ndarray:
    """splitmix64's finaliser: a bijection of uint64 that scrambles every bit."""
    x = (x ^ (x >> np.uint64(30))) * np.uint64(0xBF58476D1CE4E5B9)
    x = (x ^ (x >> np.uint64(27))) * np.uint64(0x94D049BB133111EB)
    return x ^ (x >> np.uint64(31))


def keyed_uniform(seed: int, epoch: int, samples: np.ndarray, count: int) -> np.ndarray:
    """``count`` uniform floats in [0, 1) per sample: counter-based, (len(samples), count).

    Value ``k`` of sample ``s`` is a hash of ``(seed, epoch, s, k)`` (splitmix64 over the
    counter), so any subset of samples, in any order or grouping, gets the same values.
    """
    with np.errstate(over="ignore"):
        key = _mix(np.uint64(seed % (1 << 64)) + _GOLDEN)
        key = _mix(key ^ (np.uint64(epoch % (1 << 64)) * _GOLDEN))
        per_sample = _mix(key ^ np.asarray(samples, dtype=np.int64).astype(np.uint64))
        counters = np.arange(1, count + 1, dtype=np.uint64) * _GOLDEN
        bits = _mix(per_sample[:, None] + counters[None, :])
    return (bits >> np.uint64(11)).astype(np.float64) * (1.0 / (1 << 53))


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


COLOUR_VALUES = 11  # per record: HLS h, s, l; brightness, contrast, saturation; PCA r, g, b;
# the normalisation's contrast factor and illumination shift (native/draw.h, rc_colour)


@dataclass(frozen=True)
class ColourDraws:
    """Each record's colour draws (arrays of N), identities where a parameter is off."""

    hls: np.ndarray  # int32 (N, 3): the shifts of H, S, L (MXNet's int() of its uniform)
    alpha: np.ndarray  # float64 (N, 3): brightness, contrast and saturation factors
    pca: np.ndarray  # float64 (N, 3): the R, G, B shifts of PCA lighting
    affine: np.ndarray  # float64 (N, 2): the normalisation's contrast factor, illumination

    @classmethod
    def of(cls, values: np.ndarray) -> ColourDraws:
        """From the (N, COLOUR_VALUES) values native/draw.c writes."""
        return cls(values[:, 0:3].astype(np.int32), values[:, 3:6], values[:, 6:9], values[:, 9:11])

    def values(self) -> np.ndarray:
        """The (N, COLOUR_VALUES) float64 values, as native/draw.c writes them."""
        return np.concatenate([self.hls, self.alpha, self.pca, self.affine], axis=1).astype(
            np.float64
        )


def draw_colour(spec: ColourSpec, seed: int, epoch: int, records: np.ndarray) -> ColourDraws:
    """The numpy reference of the colour draws (:meth:`KeyedDraw.colours`), bit for bit."""
    records = np.asarray(records, dtype=np.int64).reshape(-1)
    n = len(records)
    u = keyed_uniform(seed, epoch, records, _COLOUR_FIRST + _COLOUR_UNIFORMS - 1)
    u = u[:, _COLOUR_FIRST - 1 :]

    def spread(k: int, v: float) -> np.ndarray:  # U(-v, v) as MXNet writes it: u * 2v - v
        return u[:, k] * (2 * v) - v

    hls = np.zeros((n, 3), dtype=np.int32)
    for k, v in enumerate((spec.random_h, spec.random_s, spec.random_l)):
        if v:
            hls[:, k] = np.trunc(spread(k, float(v))).astype(np.int32)  # C's (int) cast
    alpha = np.ones((n, 3))
    for k, v in enumerate((spec.brightness, spec.contrast, spec.saturation)):
        if v:
            alpha[:, k] = 1.0 + spread(3 + k, v)
    pca = np.zeros((n, 3))
    if spec.pca_noise:
        # Box-Muller, in Python's math (the C library's log, sqrt and cos, as draw.c)
        z = np.array(
            [
                [
                    _normal(a, b)
                    for a, b in zip(row[6:12:2].tolist(), row[7:12:2].tolist(), strict=True)
                ]
                for row in u
            ]
        ).reshape(n, 3)
        weights = z * spec.pca_noise * np.array(PCA_EIGVAL)
        vec = np.array(PCA_EIGVEC)
        for c in range(3):  # each sum in draw.c's order
            pca[:, c] = (vec[c, 0] * weights[:, 0] + vec[c, 1] * weights[:, 1]) + vec[
                c, 2
            ] * weights[:, 2]
    affine = np.zeros((n, 2))
    affine[:, 0] = 1.0 + spread(12, spec.max_random_contrast) if spec.max_random_contrast else 1.0
    if spec.max_random_illumination:
        affine[:, 1] = spread(13, spec.max_random_illumination)
    return ColourDraws(hls, alpha, pca, affine)


def _normal(u1: float, u2: float) -> float:
    """A standard normal from two uniforms (Box-Muller, 1 - u1 in (0, 1])."""
    return math.sqrt(-2.0 * math.log(1.0 - u1)) * math.cos(2.0 * math.pi * u2)


# ---- the pixels: numpy reference of native/colour.c, float32 as OpenCV computes ----

_F = np.float32
_INV255 = _F(1.0) / _F(255.0)


def _round_u8(x: np.ndarray) -> np.ndarray:
    """OpenCV's saturate_cast<uchar> of floats: round half to even, clip to 0..255."""
    return np.clip(np.rint(x), 0, 255).astype(np.uint8)


def gray_f32(rgb: np.ndarray) -> np.ndarray:
    """MXNet's grey for contrast and saturation, float32: 0.114 R + 0.587 G + 0.299 B.

    (The luma weights 0.299, 0.587, 0.114 applied to its BGR pixels in RGB's order.)
    """
    p = rgb.astype(_F)
    return (p[..., 2] * _F(0.299) + p[..., 1] * _F(0.587)) + p[..., 0] * _F(0.114)


def _to_hls(p: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit RGB2HLS (H in 0..180) of (N, 3) RGB pixels."""
    r, g, b = (p[:, k].astype(_F) * _INV255 for k in range(3))
    vmax = np.maximum(np.maximum(r, g), b)
    vmin = np.minimum(np.minimum(r, g), b)
    diff = vmax - vmin
    light = (vmax + vmin) * _F(0.5)
    chroma = diff > np.finfo(np.float32).eps
    with np.errstate(divide="ignore", invalid="ignore"):
        sat = np.where(light < _F(0.5), diff / (vmax + vmin), diff / (_F(2) - vmax - vmin))
        step = _F(60) / diff
        hue = np.where(
            vmax == r,
            (g - b) * step,
            np.where(vmax == g, (b - r) * step + _F(120), (r - g) * step + _F(240)),
        )
    hue = np.where(hue < 0, hue + _F(360), hue)
    hue = np.where(chroma, hue, _F(0))
    sat = np.where(chroma, sat, _F(0))
    return np.stack(
        [_round_u8(hue * _F(0.5)), _round_u8(light * _F(255)), _round_u8(sat * _F(255))], 1
    )


_SECTORS = np.array([[1, 3, 0], [1, 0, 2], [3, 0, 1], [0, 2, 1], [0, 1, 3], [2, 1, 0]])


def _from_hls(hls: np.ndarray) -> np.ndarray:
    """OpenCV's 8-bit HLS2RGB of (N, 3) H (0..180), L, S values."""
    h = hls[:, 0].astype(_F)
    lum = hls[:, 1].astype(_F) * _INV255
    s = hls[:, 2].astype(_F) * _INV255
    p2 = np.where(lum <= _F(0.5), lum * (_F(1) + s), lum + s - lum * s)
    p1 = _F(2) * lum - p2
    h = h * (_F(6) / _F(180))
    h = np.where(h >= 6, h - _F(6), h)  # H is at most 180: one turn at most
    sector = np.floor(h).astype(np.int64)
    frac = h - sector.astype(_F)
    tab = np.stack([p2, p1, p1 + (p2 - p1) * (_F(1) - frac), p1 + (p2 - p1) * frac], 1)
    rows = np.arange(len(h))[:, None]
    out = tab[rows, _SECTORS[sector][:, ::-1]]  # (OpenCV's table gives b, g, r)
    grey = s == 0
    out[grey] = lum[grey, None]
    return _round_u8(out * _F(255))


def apply_colour(rgb: np.ndarray, spec: ColourSpec, draws: ColourDraws, i: int) -> np.ndarray:
    """Record ``i``'s colour of ``draws`` on uint8 RGB pixels (H, W, 3): a new array.

    The numpy reference of native/colour.c (the same float32 arithmetic, step by step).
    """
    shape = rgb.shape
    p = np.ascontiguousarray(rgb, dtype=np.uint8).reshape(-1, 3)
    if spec.hls:
        hls = _to_hls(p).astype(np.int32)
        dh, ds, dl = (int(v) for v in draws.hls[i])
        hls[:, 0] = np.clip(hls[:, 0] + dh, 0, 180)
        hls[:, 1] = np.clip(hls[:, 1] + dl, 0, 255)
        hls[:, 2] = np.clip(hls[:, 2] + ds, 0, 255)
        p = _from_hls(hls)
    if not (spec.brightness or spec.contrast or spec.saturation or spec.pca_noise):
        return p.reshape(shape)
    ab, ac, asat = (_F(v) for v in draws.alpha[i])
    # Each step rounds and clips (saturate_cast<uchar>), so the values stay whole numbers in
    # 0..255 and are kept as float32 between the steps, in place.
    f = p.astype(_F)
    if spec.brightness:
        f *= ab
        _round_clip(f)
    if spec.contrast:
        # the channels' sums, exact (a column at a time: numpy's sum over axis 0 is slower)
        r, g, b = (float(f[:, k].sum(dtype=np.float64)) for k in range(3))
        mean = (b * 0.299 + g * 0.587 + r * 0.114) / len(f)
        f *= ac
        f += _F((1.0 - float(draws.alpha[i, 1])) * mean)
        _round_clip(f)
    if spec.saturation:
        grey = gray_f32(f)
        grey *= _F(1.0 - float(draws.alpha[i, 2]))
        f *= asat
        f += grey[:, None]
        _round_clip(f)
    if spec.pca_noise:
        f += draws.pca[i].astype(_F)
        _round_clip(f)
    return f.astype(np.uint8).reshape(shape)


def _round_clip(x: np.ndarray) -> None:
    """:func:`_round_u8` in place, on float32: round half to even, clip to 0..255."""
    np.rint(x, out=x)
    np.clip(x, 0, 255, out=x)
