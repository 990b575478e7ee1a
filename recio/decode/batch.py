"""One decode call's checked arguments, and the Pillow path of its images.

:class:`DecodeJob` is what :class:`~recio.decode.DecodePool` makes of a call: the output
array checked against the :class:`~recio.decode.options.DecodeOptions`, the crops and flips
(or the draw that makes them), the normalisation's tables. The native pool gets it as one
``JobOptions`` (``DecodePool.job_options``); the images it leaves go through
:meth:`DecodeJob.decode_pil`.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from ..augment import KeyedDraw, apply_colour
from ..augment.draws import plan
from ..augment.warp_reference import warp_image
from ._pillow import Budget, pil_decode, pil_filters, pil_size
from .options import DecodeOptions, lut, lut_line

DTYPES = (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float16))


_INT32 = np.iinfo(np.int32)


def int32_array(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
    """``value`` as a C-contiguous int32 array of ``shape``, never wrapped.

    A value int32 cannot hold (a window past 2**31 in int64, say) is a ValueError naming it
    and where it is, as is a fractional or non-finite float: numpy's cast would wrap or
    truncate it silently.
    """
    a = np.asarray(value)
    if a.shape != shape:
        raise ValueError(f"{name} must have shape {shape}, got {a.shape}")
    if a.dtype == np.int32:
        return np.ascontiguousarray(a)
    if a.dtype.kind == "O":  # Python ints beyond int64, or not numbers at all
        items = a.ravel().tolist()
        if not all(isinstance(v, int) for v in items):
            raise ValueError(f"{name} must hold integers, got {a.dtype} values")
        bad = [i for i, v in enumerate(items) if not _INT32.min <= v <= _INT32.max]
        if bad:
            where = np.unravel_index(bad[0], shape)
            value = items[bad[0]]
            raise ValueError(f"{name}{list(map(int, where))} = {value} is outside int32")
        return np.array(items, dtype=np.int32).reshape(shape)
    if a.dtype.kind not in "biuf":
        raise ValueError(f"{name} must hold integers, got dtype {a.dtype}")
    with np.errstate(invalid="ignore"):
        outside = ~((a >= _INT32.min) & (a <= _INT32.max))  # NaN too
        fraction = (np.trunc(a) != a) & ~outside if a.dtype.kind == "f" else None
    limits = f"is outside int32 ({_INT32.min}..{_INT32.max})"
    for bad, what in ((outside, limits), (fraction, "is not a whole number")):
        if bad is not None and bad.any():
            where = tuple(int(i) for i in np.argwhere(bad)[0])
            raise ValueError(f"{name}{list(where)} = {a[where].item()!r} {what}")
    return np.ascontiguousarray(a, dtype=np.int32)


class DecodeJob:
    """The checked, normalised arguments of one decode call."""

    out: np.ndarray
    crops: np.ndarray | None
    flips: np.ndarray | None
    draw: KeyedDraw | None
    records: np.ndarray | None
    lut: np.ndarray | None
    lut_line: np.ndarray | None  # float64 (3, 2): a float32 table as level * a + b, per channel
    gain: np.ndarray | None  # float32 (3,): scale / std, where a table per image is made
    mean_img: np.ndarray | None  # float32 (3, H, W): the mean image times gain
    height: int
    width: int
    layout: str
    bgr: bool
    interpolation: str

    @classmethod
    def build(
        cls,
        n: int,
        out: np.ndarray,
        crops: Any,
        flips: Any,
        draw: KeyedDraw | None,
        records: Any,
        options: DecodeOptions,
    ) -> DecodeJob:
        """Checks a call's arguments for ``n`` images (ValueError before any work)."""
        job = cls()
        if not isinstance(out, np.ndarray):
            raise ValueError(f"out must be a numpy array, got {type(out).__name__}")
        if out.dtype not in DTYPES:
            raise ValueError(f"out.dtype must be uint8, float32 or float16, got {out.dtype}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("out must be a writeable C-contiguous array")
        layout, mean, std = options.layout, options.mean, options.std
        scale, mean_img = options.scale, options.mean_img
        channel_axis = 3 if layout == "NHWC" else 1
        if out.ndim != 4 or out.shape[channel_axis] != 3:
            want = "(N, H, W, 3)" if layout == "NHWC" else "(N, 3, H, W)"
            raise ValueError(f"out.shape must be {want} for {layout}, got {out.shape}")
        if out.shape[0] < n:
            raise ValueError(f"out holds {out.shape[0]} images, the batch has {n}")
        job.height, job.width = out.shape[1:3] if layout == "NHWC" else out.shape[2:4]
        if job.height < 1 or job.width < 1:
            raise ValueError(f"out has an empty image shape {out.shape}")
        job.out = out[:n]
        job.layout = layout
        job.bgr = options.channel_order == "BGR"
        job.interpolation = options.interpolation
        job.crops = None
        if crops is not None:
            c = int32_array("crops", crops, (n, 4))
            if n and (c[:, 2:] <= 0).any():
                raise ValueError("crop widths and heights must be positive")
            job.crops = c
        job.flips = None
        if flips is not None:
            f = np.asarray(flips)
            if f.shape != (n,):
                raise ValueError(f"flips must have shape ({n},), got {f.shape}")
            job.flips = np.ascontiguousarray(f != 0, dtype=np.uint8)  # 256 is true, not 0
        job.draw, job.records = draw, None
        if draw is not None:
            if crops is not None or flips is not None:
                raise ValueError("give crops and flips, or draw, not both")
            job.records = np.ascontiguousarray(records, dtype=np.int64)
            if job.records.shape != (n,):
                raise ValueError(f"records must have shape ({n},) to draw, got {job.records.shape}")
            # the pool writes the windows and flips it draws here
            job.crops = np.zeros((n, 4), dtype=np.int32)
            job.flips = np.zeros(n, dtype=np.uint8)
        job.lut = job.lut_line = job.gain = job.mean_img = None
        affine = draw is not None and draw.colour.affine
        if out.dtype == np.uint8:
            if mean is not None or std is not None or scale != 1 or mean_img is not None:
                raise ValueError("mean/std, scale and mean_img need a float32 or float16 out")
            if affine:
                raise ValueError("max_random_contrast/illumination need a float32 out")
        else:
            job.lut = lut(out.dtype, mean, std, scale)
            if out.dtype == np.float32:
                job.lut_line = lut_line(mean, std, scale)
        if affine or mean_img is not None:
            if out.dtype != np.float32:
                raise ValueError(
                    "max_random_contrast/illumination and mean_img need a float32 out, "
                    f"not {out.dtype}"
                )
            s = np.ones(3) if std is None else np.asarray(std, dtype=np.float64)
            job.gain = (scale / s).astype(np.float32)
        if mean_img is not None:
            m = np.asarray(mean_img, dtype=np.float64)
            if m.shape != (3, job.height, job.width):
                raise ValueError(
                    f"mean_img must have shape (3, {job.height}, {job.width}), got {m.shape}"
                )
            if mean is not None and np.any(np.asarray(mean) != 0):
                raise ValueError("give mean or mean_img, not both")
            job.mean_img = np.ascontiguousarray(m * (scale / s)[:, None, None], dtype=np.float32)
        return job

    def decode_pil(
        self, i: int, buf: Any, max_pixels: int, budget: Budget | None = None
    ) -> tuple[int, str | None]:
        """Decodes image i with Pillow into its slot; returns (status, error)."""
        if self.draw is not None and self.draw.geometry is not None:
            return self._decode_warped(i, buf, max_pixels, budget)
        if self.draw is not None:  # the pool could not read the header: draw from Pillow's
            windows, flips = self.draw.windows(np.array([pil_size(buf)]), self.records[i : i + 1])
            self.crops[i], self.flips[i] = windows[0], flips[0]
        crop = None if self.crops is None else self.crops[i]
        flip = bool(self.flips[i]) if self.flips is not None else False
        resample = pil_filters()[self.interpolation]
        status, err, pixels = pil_decode(
            buf, crop, flip, self.width, self.height, resample, max_pixels, budget
        )
        if pixels is not None:
            self._store(i, pixels)
        return status, err

    def _store(self, i: int, pixels: np.ndarray) -> None:
        """Image i's RGB pixels (cropped, mirrored), coloured, into its slot in the output."""
        colour = self.draw.colour if self.draw is not None else None
        draws = None
        if colour is not None and colour.enabled:
            draws = self.draw.colours(self.records[i : i + 1])
        if colour is not None and colour.pixels:
            pixels = apply_colour(pixels, colour, draws, 0)
        if self.bgr:
            pixels = pixels[..., ::-1]
        contrast, shift = (1.0, 0.0) if draws is None else draws.affine[0]
        if self.gain is not None and (
            self.mean_img is not None or contrast != 1 or shift != 0
        ):  # this image's own table, as native/decode_core.c's store_norm
            f32 = np.float32
            lut = self.lut * f32(contrast) + (f32(shift) * self.gain)[:, None]
            pixels = lut[np.arange(3), pixels]
            if self.mean_img is not None:
                pixels = pixels - f32(contrast) * self.mean_img.transpose(1, 2, 0)
        elif self.lut is not None:
            pixels = self.lut[np.arange(3), pixels]
        self.out[i] = pixels.transpose(2, 0, 1) if self.layout == "NCHW" else pixels

    def _decode_warped(
        self, i: int, buf: Any, max_pixels: int, budget: Budget | None
    ) -> tuple[int, str | None]:
        """decode_pil through the draw's geometry: the whole image decoded, then warped."""
        w, h = pil_size(buf)
        warp = plan(self.draw, w, h, int(self.records[i]))
        self.crops[i], self.flips[i] = warp.crop, warp.flip
        status, err, pixels = pil_decode(
            buf, None, False, max(w, 1), max(h, 1), 0, max_pixels, budget
        )
        if pixels is not None:
            pixels = warp_image(pixels, warp, self.width, self.height)
            self._store(i, pixels[:, ::-1] if warp.flip else pixels)
        return status, err
