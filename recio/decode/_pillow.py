"""The Pillow path: every format Pillow reads, with the native path's crop, resize and flip.

It decodes what libjpeg-turbo does not (PNG & co.) on the native backend, and everything on
the fallback backend; results match the native path's semantics (:mod:`recio.decode`).
"""

from __future__ import annotations

import io
import threading
from typing import Any, Protocol

import numpy as np

from .status import Status


class Budget(Protocol):
    """The bytes a pool's decodes may hold at once (NOTE [decode budget], native/decode_core.h)."""

    limit: int  # 0: no limit

    def reserve(self, nbytes: int) -> bool:
        """Takes nbytes, waiting while others hold too much; False if it alone is over."""

    def release(self, nbytes: int) -> None:
        """Gives back what :meth:`reserve` took."""


class ByteBudget:
    """A :class:`Budget` in Python: the fallback backend's (the native one's lives in C)."""

    def __init__(self, limit: int) -> None:
        self.limit = limit
        self._used = 0
        self._freed = threading.Condition()

    def reserve(self, nbytes: int) -> bool:
        if not self.limit:
            return True
        if nbytes > self.limit:
            return False
        with self._freed:
            self._freed.wait_for(lambda: self._used + nbytes <= self.limit)
            self._used += nbytes
        return True

    def release(self, nbytes: int) -> None:
        if not self.limit:
            return
        with self._freed:
            self._used = max(self._used - nbytes, 0)
            self._freed.notify_all()


# (NOTE [decode budget]) glibc keeps what a thread frees in that thread's arena, so a decode in
# another thread allocates afresh and RSS holds one big image per thread, whatever the budget.
# After a big decode, before its share is given back, the freed memory is returned to the
# system (malloc_trim; the native path does the same).
TRIM_BYTES = 32 << 20
_trim: Any = None


def trim_memory() -> None:
    """Returns freed heap memory to the system (glibc's malloc_trim; elsewhere nothing)."""
    global _trim
    if _trim is None:
        try:
            import ctypes

            _trim = ctypes.CDLL(None).malloc_trim
            _trim.argtypes = [ctypes.c_size_t]
        except (OSError, AttributeError):  # not glibc
            _trim = False
    if _trim:
        _trim(0)


# Bytes per pixel of Pillow's image storage (every mode not here: 4, as "RGB", "LA", "I", "F").
_STORAGE_BYTES = {"1": 1, "L": 1, "P": 1, "I;16": 2, "I;16L": 2, "I;16B": 2, "I;16N": 2}
_STORAGE_BYTES |= {"BGR;15": 2, "BGR;16": 2, "BGR;24": 3}
# Bytes per pixel a format's decoder holds beside the image while it loads: libwebp's and
# libavif's whole decoded picture, OpenJPEG's int32 per component.
_DECODER_BYTES = {"WEBP": 4, "AVIF": 8, "JPEG2000": 16}


def decode_bytes(im: Any, box: tuple[int, int, int, int], size: tuple[int, int]) -> int:
    """About the most memory :func:`pil_decode` holds at once for an opened image.

    That is for ``im`` cropped to ``box`` and resized to ``size``: the decoded image, a
    format's own buffers (a progressive JPEG's coefficients), the crop, its RGB conversion,
    the resize's two passes and the array handed back. Errs high: the budget reserves it.
    """
    w, h = im.size
    x0, y0, x1, y1 = box
    cw, ch = x1 - x0, y1 - y0
    ow, oh = size
    bands = len(im.getbands())
    n = w * h * _STORAGE_BYTES.get(im.mode, 4)
    n += w * h * _DECODER_BYTES.get(im.format, 0)
    if im.format in ("JPEG", "MPO") and (im.info.get("progressive") or im.info.get("progression")):
        n += w * h * bands * 2  # libjpeg's whole-image coefficient buffer (16-bit each)
    if (cw, ch) != (w, h):
        n += cw * ch * _STORAGE_BYTES.get(im.mode, 4)
    if im.mode != "RGB":
        n += cw * ch * 4
    if (ow, oh) != (cw, ch):
        n += ow * ch * 4 + ow * oh * 4
    return n + ow * oh * (3 + 12)  # the array, and the float lookup of decode_pil


def pil_filters() -> dict[str, int]:
    from PIL import Image

    return {
        "bilinear": Image.Resampling.BILINEAR,
        "area": Image.Resampling.BOX,
        "nearest": Image.Resampling.NEAREST,
    }


def pil_size(buf: Any) -> tuple[int, int]:
    from PIL import Image

    try:
        with Image.open(io.BytesIO(buf)) as im:
            return im.size
    except Exception:  # any unreadable header is reported as (-1, -1), never raised
        return (-1, -1)


def pil_decode(
    buf: Any,
    crop: np.ndarray | None,
    flip: bool,
    width: int,
    height: int,
    resample: int,
    max_pixels: int,
    budget: Budget | None = None,
) -> tuple[int, str | None, np.ndarray | None]:
    from PIL import Image, UnidentifiedImageError

    if len(memoryview(buf)) == 0:
        return Status.EMPTY, "empty buffer", None
    reserved = 0
    try:
        with Image.open(io.BytesIO(buf)) as im:
            w, h = im.size
            if w * h > max_pixels:
                msg = f"{w}x{h} image is over the limit of {max_pixels} pixels"
                return Status.TOO_LARGE, msg, None
            x0, y0, x1, y1 = 0, 0, w, h
            if crop is not None:  # the same clamping as the native path
                x, y, cw, ch = (int(v) for v in crop)
                x0, y0, x1, y1 = max(x, 0), max(y, 0), min(x + cw, w), min(y + ch, h)
                if x1 <= x0 or y1 <= y0:
                    return Status.BAD_PARAM, "crop window misses the image", None
            if budget is not None and budget.limit:
                need = decode_bytes(im, (x0, y0, x1, y1), (width, height))
                if not budget.reserve(need):
                    msg = (
                        f"{w}x{h} {im.format} image needs about {need >> 20} MiB to decode, "
                        f"over the budget of {budget.limit >> 20} MiB"
                    )
                    return Status.TOO_LARGE, msg, None
                reserved = need
            pixels = _pixels(im, (x0, y0, x1, y1), (width, height), resample)
    except UnidentifiedImageError:
        return Status.UNSUPPORTED, "not an image format Pillow reads", None
    except (OSError, ValueError, SyntaxError, Image.DecompressionBombError) as e:
        status = Status.TRUNCATED if "truncated" in str(e) else Status.CORRUPT
        return status, f"{type(e).__name__}: {e}", None
    except MemoryError:
        return Status.NOMEM, "out of memory", None
    except Exception as e:  # noqa: BLE001 - a plugin's own bug (NotImplementedError in DDS,
        # AttributeError in Spider) is still this image's error, never the batch's
        return Status.CORRUPT, f"{type(e).__name__}: {e}", None
    finally:
        if reserved:  # given back once the decoded image is freed (closing it does not)
            im = None
            if reserved >= TRIM_BYTES:
                trim_memory()
            budget.release(reserved)
    return Status.OK, None, pixels[:, ::-1] if flip else pixels


def _pixels(im: Any, box: tuple[int, int, int, int], size: tuple[int, int], resample: int):
    """Pillow's convert("RGB").crop(box).resize(size) of an opened image, as a uint8 array.

    Cropped before the conversion (pointwise for every mode: the same pixels), and an RGB
    image is not copied by a conversion: fewer whole-image copies than the plain chain.
    """
    im.load()
    rgb = im if box == (0, 0, *im.size) else im.crop(box)
    if rgb.mode != "RGB":
        rgb = rgb.convert("RGB")
    if rgb.size != size:
        rgb = rgb.resize(size, resample)
    return np.asarray(rgb)
