"""``mx.image``'s decode and resize calls, with MXNet 1.9.1's pixels.

MXNet decodes with OpenCV and resizes with ``cv::resize``. ``imdecode`` decodes with Pillow
(libjpeg-turbo, the same integer DCT and upsampling as OpenCV's libjpeg) into RGB, or BGR
with ``to_rgb=0``, or the luma plane with ``flag=0`` (shape H x W x 1), turning a JPEG by
its EXIF orientation as OpenCV does. ``imresize`` and ``resize_short`` run OpenCV 3.4's
resize arithmetic as MXNet 1.9.1's wheel runs it (:mod:`recio.mx._cvresize`), with MXNet's
``interp`` codes: 0 nearest, 1 bilinear, 2 bicubic, 3 area, 4 Lanczos, 9 chosen from the
sizes, 10 random. A PNG's grey (``flag=0``) is Pillow's luma, within one level of the
libpng conversion OpenCV asks for.
tests/mx/test_golden.py checks every call against MXNet 1.9.1's output.
"""

from __future__ import annotations

import io
import random
from typing import Any

import numpy as np

from ..errors import DecodeError
from ._cvresize import resize
from .ndarray import NDArray, unwrap
from .unsupported import unsupported

__all__ = ["copyMakeBorder", "imdecode", "imresize", "resize_short"]

# OpenCV's border types (cv::BorderTypes) -> numpy.pad's mode
_BORDERS = {0: "constant", 1: "edge", 2: "symmetric", 3: "wrap", 4: "reflect"}


def _pixels(src: Any, call: str) -> np.ndarray:
    array = unwrap(src) if isinstance(src, NDArray) else np.asarray(src)
    if array.ndim != 3:
        raise ValueError(f"mx.image.{call}: an H x W x C image, not shape {array.shape}")
    return array


def imdecode(buf: Any, flag: int = 1, to_rgb: int = 1, out: Any = None, **kwargs: Any) -> NDArray:
    """Decode an encoded image (bytes, or a uint8 array of them) to H x W x C uint8.

    ``flag=1``: three channels, RGB (``to_rgb=0``: BGR); ``flag=0``: one channel, grey.
    Undecodable bytes raise :class:`recio.errors.DecodeError`.
    """
    from PIL import Image, ImageOps, UnidentifiedImageError

    data = unwrap(buf).tobytes() if isinstance(buf, NDArray) else bytes(buf)
    try:
        with Image.open(io.BytesIO(data)) as image:
            jpeg = image.format == "JPEG"
            if jpeg and not flag:
                image.draft("L", image.size)  # libjpeg's own luma output, as OpenCV asks for
            if jpeg and "exif" in image.info:  # (most JPEGs have none: no parse)
                image = ImageOps.exif_transpose(image)
            pixels = np.asarray(image.convert("L" if not flag else "RGB"))
    except (OSError, ValueError, SyntaxError, UnidentifiedImageError) as e:
        raise DecodeError(
            f"mx.image.imdecode: not a decodable image ({len(data)} bytes): {e}"
        ) from e
    if not flag:
        pixels = pixels[:, :, None]
    elif not to_rgb:
        pixels = pixels[:, :, ::-1]
    pixels = np.ascontiguousarray(pixels)
    if out is not None:
        out[:] = pixels
        return out
    return NDArray(pixels)


def _interp(interp: int, sizes: tuple[int, int, int, int]) -> int:
    """MXNet's ``_get_interp_method``: 9 from the sizes, 10 at random, else the code itself."""
    if interp == 9:
        old_h, old_w, new_h, new_w = sizes
        if new_h > old_h and new_w > old_w:
            return 2
        if new_h < old_h and new_w < old_w:
            return 3
        return 1
    if interp == 10:
        return random.randint(0, 4)
    if interp not in range(5):
        raise ValueError(f"mx.image: interp is 0..4, 9 or 10, not {interp}")
    return interp


def imresize(src: Any, w: int, h: int, interp: int = 1, out: Any = None) -> NDArray:
    """``src`` (H x W x C uint8) resized to ``h`` x ``w``, as ``cv::resize`` with ``interp``."""
    pixels = _pixels(src, "imresize")
    if pixels.dtype != np.uint8:
        raise ValueError(f"mx.image.imresize: uint8 pixels, not {pixels.dtype}")
    if w <= 0 or h <= 0:
        raise ValueError(f"mx.image.imresize: a positive size, not {w} x {h}")
    height, width = pixels.shape[:2]
    resized = resize(pixels, w, h, _interp(interp, (height, width, h, w)))
    if out is not None:
        out[:] = resized
        return out
    return NDArray(resized)


def resize_short(src: Any, size: int, interp: int = 2) -> NDArray:
    """``src`` resized so its shorter side is ``size``, keeping the aspect ratio (MXNet's sizes)."""
    height, width = _pixels(src, "resize_short").shape[:2]
    if height > width:
        new_h, new_w = size * height // width, size
    else:
        new_h, new_w = size, size * width // height
    return imresize(src, new_w, new_h, _interp(interp, (height, width, new_h, new_w)))


def copyMakeBorder(  # noqa: N802 (MXNet's name)
    src: Any,
    top: int,
    bot: int,
    left: int,
    right: int,
    type: int = 0,  # noqa: A002 (MXNet's keyword)
    value: float = 0.0,
    values: Any = (),
    out: Any = None,
) -> NDArray:
    """``src`` padded as ``cv::copyMakeBorder`` with border ``type``.

    0 constant (``value``, or ``values`` per channel), 1 replicate, 2 reflect, 3 wrap,
    4 reflect-101.
    """
    pixels = _pixels(src, "copyMakeBorder")
    if type not in _BORDERS:
        raise ValueError(f"mx.image.copyMakeBorder: type is 0..4, not {type}")
    pad = ((top, bot), (left, right), (0, 0))
    if type == 0:
        fill = np.asarray(values if len(values) else [value] * pixels.shape[2], dtype=np.float64)
        padded = np.empty(
            (pixels.shape[0] + top + bot, pixels.shape[1] + left + right, pixels.shape[2]),
            dtype=pixels.dtype,
        )
        padded[:] = fill.round().astype(pixels.dtype) if pixels.dtype == np.uint8 else fill
        padded[top : top + pixels.shape[0], left : left + pixels.shape[1]] = pixels
    else:
        padded = np.pad(pixels, pad, mode=_BORDERS[type])
    if out is not None:
        out[:] = padded
        return out
    return NDArray(padded)


def __getattr__(name: str) -> Any:
    return unsupported(f"mx.image.{name}", name)
