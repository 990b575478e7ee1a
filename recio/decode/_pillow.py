"""The Pillow path: every format Pillow reads, with the native path's crop, resize and flip.

It decodes what libjpeg-turbo does not (PNG & co.) on the native backend, and everything on
the fallback backend; results match the native path's semantics (:mod:`recio.decode`).
"""

from __future__ import annotations

import io
from typing import Any

import numpy as np

from .status import Status


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
) -> tuple[int, str | None, np.ndarray | None]:
    from PIL import Image, UnidentifiedImageError

    if len(memoryview(buf)) == 0:
        return Status.EMPTY, "empty buffer", None
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
            rgb = im.convert("RGB")
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
    if (x0, y0, x1, y1) != (0, 0, w, h):
        rgb = rgb.crop((x0, y0, x1, y1))
    if rgb.size != (width, height):
        rgb = rgb.resize((width, height), resample)
    pixels = np.asarray(rgb)
    return Status.OK, None, pixels[:, ::-1] if flip else pixels
