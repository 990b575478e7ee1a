"""``DecodeOptions``: what every image of a decode gets, beside its window and flip.

One frozen value per pipeline (an iterator or dataset makes it once), passed to every
:class:`~recio.decode.DecodePool` call as ``options=``; the pool checks it against each
call's output array (:mod:`.batch`). The lookup table of the normalisation is made here,
once per (dtype, mean, std, scale).
"""

from __future__ import annotations

import dataclasses
import functools
import math
from collections.abc import Mapping, Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

# the native pool's codes (native/decode_core.h: RC_INTERP_*, RC_LAYOUT_*)
INTERP = {"bilinear": 0, "area": 1, "nearest": 2}
LAYOUTS = {"NHWC": 0, "NCHW": 1}
CHANNEL_ORDERS = ("RGB", "BGR")


@dataclass(frozen=True, eq=False)
class DecodeOptions:
    """How a decode resamples, normalises and lays out its images.

    Args:
        interpolation: "bilinear", "area" (Pillow BOX) or "nearest".
        mean: per output channel on the 0..255 scale; float outputs only:
            ``out = (pixel - mean) / std * scale``.
        std: per output channel on the 0..255 scale, as ``mean``.
        layout: "NHWC" or "NCHW".
        channel_order: "RGB" or "BGR".
        scale: MXNet's ``scale``, float outputs only.
        mean_img: a mean image, float32 outputs only: (3, H, W) per output channel on the
            0..255 scale, taken from every image instead of ``mean`` (MXNet's ``mean_img``).

    ``mean`` and ``std`` are kept as tuples of floats (the lookup table's cache key).
    """

    interpolation: str = "bilinear"
    mean: Sequence[float] | None = None
    std: Sequence[float] | None = None
    layout: str = "NHWC"
    channel_order: str = "RGB"
    scale: float = 1.0
    mean_img: np.ndarray | None = None

    def __post_init__(self) -> None:
        if self.layout not in LAYOUTS:
            raise ValueError(f"layout must be 'NHWC' or 'NCHW', got {self.layout!r}")
        if self.channel_order not in CHANNEL_ORDERS:
            raise ValueError(f"channel_order must be 'RGB' or 'BGR', got {self.channel_order!r}")
        if self.interpolation not in INTERP:
            allowed = sorted(INTERP)
            raise ValueError(f"interpolation must be one of {allowed}, got {self.interpolation!r}")
        scale = float(self.scale)
        if not (math.isfinite(scale) and scale != 0):
            raise ValueError(f"scale must be finite and non-zero, got {scale}")
        object.__setattr__(self, "scale", scale)
        for name in ("mean", "std"):
            value = getattr(self, name)
            if value is not None:
                values = np.asarray(value, dtype=np.float64)
                values = tuple(values.tolist()) if values.ndim == 1 else values
                object.__setattr__(self, name, values)

    @classmethod
    def of(cls, options: DecodeOptions | None, keywords: Mapping[str, Any]) -> DecodeOptions:
        """``options`` (default: all defaults) with ``keywords`` (its fields by name) put in."""
        if options is None:
            return cls(**keywords)
        return dataclasses.replace(options, **keywords) if keywords else options


def lut(dtype: np.dtype, mean: Any, std: Any, scale: float = 1.0) -> np.ndarray:
    """The per-channel lookup table of ``(level - mean) / std * scale`` (both backends').

    Made once per (dtype, mean, std, scale) given as tuples, as :class:`DecodeOptions`
    holds them.
    """
    try:
        return _cached_lut(dtype, mean, std, scale)
    except TypeError:  # unhashable: lists, arrays
        return _make_lut(dtype, mean, std, scale)


def _make_lut(dtype: np.dtype, mean: Any, std: Any, scale: float = 1.0) -> np.ndarray:
    m = np.zeros(3) if mean is None else np.asarray(mean, dtype=np.float64)
    s = np.ones(3) if std is None else np.asarray(std, dtype=np.float64)
    if m.shape != (3,) or s.shape != (3,):
        raise ValueError("mean and std must have 3 values (one per output channel)")
    if not (np.isfinite(m).all() and np.isfinite(s).all()) or (s == 0).any():
        raise ValueError(f"mean/std must be finite and std non-zero, got {m}, {s}")
    levels = np.arange(256, dtype=np.float64)
    table = ((levels[None, :] - m[:, None]) / s[:, None] * scale).astype(dtype)  # (* 1: exact)
    table.flags.writeable = False  # shared by the batches that hit the cache
    return table


_cached_lut = functools.lru_cache(maxsize=16)(_make_lut)


def lut_line(mean: Any, std: Any, scale: float = 1.0) -> np.ndarray:
    """The float32 table of :func:`lut` as a line per channel: float64 (3, 2) of (a, b).

    ``level * a + b`` is ``(level - mean) / std * scale``; the native store computes the
    levels on it where it gives the table's bits exactly (NOTE [float store] in
    native/resample.h) and looks them up elsewhere.
    """
    m = np.zeros(3) if mean is None else np.asarray(mean, dtype=np.float64)
    s = np.ones(3) if std is None else np.asarray(std, dtype=np.float64)
    return np.ascontiguousarray(np.stack([scale / s, -m / s * scale], axis=1))
