"""MXNet's colour augmentation: its parameters, each record's draws, their pixels.

native/colour.c applies them in the decoder; :func:`apply_colour` is its numpy reference,
the Pillow path's.

The draws are keyed like the crop's (:mod:`.keys`), from the uniforms after the crop's
and the flip's, so turning colour on changes no window or flip.
"""

from __future__ import annotations

import math
from dataclasses import dataclass

import numpy as np

from .._checks import check_int, check_number
from .keys import COLOUR_FIRST, COLOUR_UNIFORMS, keyed_uniform

# PCA lighting's eigenvalues and eigenvectors (rows: R, G, B) of ImageNet's pixel covariance,
# on the 0..255 scale: the ones MXNet's augmenter and GluonCV use.
PCA_EIGVAL = (55.46, 4.794, 1.148)
PCA_EIGVEC = (
    (-0.5675, 0.7192, 0.4009),
    (-0.5808, -0.0045, -0.8140),
    (-0.5836, -0.6948, 0.4203),
)


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
        for name in _FACTORS:
            object.__setattr__(
                self, name, check_number(name, getattr(self, name), finite=False, minimum=0.0)
            )
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

    def native(self) -> dict[str, int | float]:
        """The colour part of a draw, as the native pool takes it: rc_colour's fields by name.

        native/bind_options.c reads each by its name (NOTE [named parameters]), so neither side's
        order matters.
        """
        return {
            "random_h": self.random_h,
            "random_s": self.random_s,
            "random_l": self.random_l,
            "brightness": self.brightness,
            "contrast": self.contrast,
            "saturation": self.saturation,
            "pca_noise": self.pca_noise,
            "max_random_contrast": self.max_random_contrast,
            "max_random_illumination": self.max_random_illumination,
        }


# ColourSpec's non-negative factors (its fields past the three HLS shifts)
_FACTORS = ("brightness", "contrast", "saturation", "pca_noise", "max_random_contrast",
            "max_random_illumination")  # fmt: skip


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
    u = keyed_uniform(seed, epoch, records, COLOUR_FIRST + COLOUR_UNIFORMS - 1)
    u = u[:, COLOUR_FIRST - 1 :]

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
