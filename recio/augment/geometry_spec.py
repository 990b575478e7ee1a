"""MXNet's geometry parameters (:class:`GeometrySpec`) and one image's warp (:class:`Warp`).

What the iterator is asked for and what a record's plan comes to: the plan itself is drawn
in :mod:`.draws` (:func:`~.draws.plan`, with the crop windows it composes with), the warp's
pixels sampled by native/warp.c (numpy reference: :mod:`.warp_reference`).
"""

from __future__ import annotations

import dataclasses
from dataclasses import dataclass

from .._checks import check_int, check_number

__all__ = [
    "AREA",
    "CONSTANT",
    "CUBIC",
    "INTER_METHODS",
    "LANCZOS4",
    "LINEAR",
    "NEAREST",
    "REPLICATE",
    "RESAMPLE",
    "GeometrySpec",
    "Warp",
]

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
