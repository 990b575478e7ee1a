"""Decode stage: encoded images plus per-image crop and flip become pixels in a batch buffer.

Python decides *what* to do (crop windows and flips, from the sampler's seeded RNG); the
native pool (``recio._native``, libjpeg-turbo on persistent pthreads, GIL released once per
batch) does it, writing straight into a preallocated ``out`` array. PNG and every other format
Pillow reads go through a Pillow path with the same parameters and the same output. Without the
extension, or with ``RECIO_DECODER=python``, the whole decoder runs on that path (slower; a
warning says so once).

Semantics shared by both backends:

* ``crops[i] = [x, y, w, h]`` in source pixels is intersected with the image (clamped); a
  window that misses the image gives status ``STATUS_BAD_PARAM``.
* The result equals Pillow's ``convert("RGB").crop(box).resize(size, filter)`` then a
  horizontal flip. Without DCT scaling the native path matches it to within one level (its
  resampler is Pillow's with 14-bit instead of 22-bit weights, for SIMD); when it decodes at
  a reduced DCT scale (``dct_scaling``) pixels differ by a level or two on average.
* Grayscale and CMYK images come out as RGB; ``channel_order="BGR"`` swaps.
* A JPEG libjpeg decodes past damaged data, with a warning, is not a success: cut short (also
  when an EOI marker pads the cut) is ``STATUS_TRUNCATED``, bad entropy codes
  ``STATUS_CORRUPT``; harmless warnings (extraneous bytes between markers) leave status 0
  (NOTE [libjpeg warnings] in ``native/decode_core.c``). Pillow does not report libjpeg's
  warnings, so on the Pillow path (the fallback backend) such JPEGs still decode with status 0.
* Memory: an image over ``max_pixels`` is refused from its header; and the pool's decodes,
  all threads and both paths, hold at most ``max_decode_bytes`` at once (default 1 GiB):
  each takes its estimated need before allocating and waits while others hold too much, and
  an image that alone needs more is refused (``STATUS_TOO_LARGE``).
* A failed image gets a non-zero status, its text in :meth:`DecodePool.last_errors`, and a
  zeroed slot in ``out``; the rest of the batch completes.

Modules: :mod:`~recio.decode.pool` (``DecodePool``: the decode API),
:mod:`~recio.decode.options` (``DecodeOptions``: interpolation, normalisation, layout),
:mod:`~recio.decode.batch` (one call's checked arguments, and its Pillow path),
:mod:`~recio.decode.jobs` (queued record batches: ``PendingRecords``, ``RecordsJob``),
:mod:`~recio.decode.status` (the status codes), :mod:`~recio.decode._pillow` (the Pillow
path), :mod:`~recio.decode.jpegcheck` (is an encoded image whole, before DALI sees it).
"""

from .options import DecodeOptions
from .pool import DecodePool, default_backend, features, native_available, raise_on_error
from .status import (
    STATUS_BAD_PARAM,
    STATUS_CORRUPT,
    STATUS_EMPTY,
    STATUS_NAMES,
    STATUS_NOMEM,
    STATUS_OK,
    STATUS_RECORD,
    STATUS_TOO_LARGE,
    STATUS_TRUNCATED,
    STATUS_UNSUPPORTED,
    Status,
)

__all__ = [
    "STATUS_BAD_PARAM",
    "STATUS_CORRUPT",
    "STATUS_EMPTY",
    "STATUS_NAMES",
    "STATUS_NOMEM",
    "STATUS_OK",
    "STATUS_RECORD",
    "STATUS_TOO_LARGE",
    "STATUS_TRUNCATED",
    "STATUS_UNSUPPORTED",
    "DecodeOptions",
    "DecodePool",
    "Status",
    "default_backend",
    "features",
    "native_available",
    "raise_on_error",
]
