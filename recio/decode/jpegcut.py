"""Each image's bytes for a JPEG decoder outside recio, and its crop window there.

A restart-marked JPEG is cut to the segments that cover its crop window
(``_native.restart_cut``, NOTE [restart cut]): the decoder Huffman-decodes and transforms only
those, and only they cross to the device. An unmarked (or progressive) JPEG goes whole, with
the window as it is. Whatever the JPEG decoder cannot take (PNG and other formats, CMYK and
YCCK JPEGs) is left to recio's CPU decoder. Used by recio.gpu (torchvision's decoder) and
the DALI stage's source (``cut=True``).
"""

from __future__ import annotations

from dataclasses import dataclass

import numpy as np

from .pool import native_available

# libjpeg's J_COLOR_SPACE values the device decoders take (torchvision, nvJPEG: grey and
# YCbCr; RGB-coded JPEGs too); CMYK (4) and YCCK (5) go to recio's CPU decoder
_DEVICE_COLOURS = (1, 2, 3)


@dataclass(frozen=True)
class Piece:
    """One image as the JPEG decoder gets it.

    ``data``: the bytes to decode (the cut, or the whole JPEG); ``window``: the crop in the
    decoded image's pixels, ``(x, y, w, h)``; ``cut``: whether ``data`` is a cut.
    """

    data: bytes | memoryview | np.ndarray
    window: tuple[int, int, int, int]
    cut: bool


def _is_jpeg(data) -> bool:
    return len(data) >= 3 and bytes(data[:3]) == b"\xff\xd8\xff"


def cut_image(data, window, *, cut: bool = True) -> Piece | None:
    """The piece of one encoded image for the JPEG decoder, or None for the CPU decoder.

    Args:
        data: the encoded image (any buffer).
        window: ``(x, y, w, h)`` in the image's pixels.
        cut: cut restart-marked JPEGs to the window (False: every JPEG whole).
    """
    x, y, w, h = (int(v) for v in window)
    if not _is_jpeg(data):
        return None
    if not native_available():  # no header parse of our own: torchvision's decide
        return Piece(data, (x, y, w, h), False)
    from .. import _native

    found = _native.restart_cut(data, x, y, x + w, y + h)
    if found is None:
        return None  # libjpeg cannot read the header: the CPU decoder reports why
    piece, ox, oy, _, _, _, colorspace = found
    if colorspace not in _DEVICE_COLOURS:
        return None
    if piece is None or not cut:
        return Piece(data, (x, y, w, h), False)
    return Piece(piece, (x - ox, y - oy, w, h), True)


def cut_batch(images, windows: np.ndarray, *, cut: bool = True) -> list[Piece | None]:
    """:func:`cut_image` of each image with its row of ``windows`` (int (N, 4))."""
    return [cut_image(data, win, cut=cut) for data, win in zip(images, windows, strict=True)]
