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
MXNet's geometry (:mod:`.geometry`, one affine warp per image) draws from the uniforms
past colour's.
"""

from __future__ import annotations

import dataclasses
import functools
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .colour import COLOUR_VALUES, ColourDraws, ColourSpec, draw_colour
from .geometry import GeometrySpec, plan
from .keys import ATTEMPTS, CROP_UNIFORMS, GOLDEN_INT, MASK, keyed_uniform, mix_int

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
    geometry: GeometrySpec | None = None  # MXNet's geometry: each image warped (.geometry)

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
