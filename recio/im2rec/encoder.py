"""The native pool's encoder API: what im2rec does to JPEGs in C.

:class:`JpegEncoder` drives a native :class:`~recio.decode.DecodePool`'s threads (and its
decode budget) for JPEG → JPEG transcodes (:meth:`~JpegEncoder.transcode_jpeg`), RGB pixels
→ JPEG (:meth:`~JpegEncoder.resize_encode`, im2rec's PNGs) and whole records of plain JPEG
files (:meth:`~JpegEncoder.im2rec_batch`, NOTE [im2rec in C] in native/im2rec_core.h), and
lossless JPEG → JPEG transcodes that add restart markers (:meth:`~JpegEncoder.optimize_jpeg`,
what ``recio optimize`` does to each image).
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any, Literal

import numpy as np

from ..decode import DecodePool
from ..decode.batch import int32_array
from ..decode.options import INTERP


class JpegEncoder:
    """The encoder API of a native ``DecodePool``: its threads, its budget, its errors.

    Args:
        pool: a pool of the native backend (RuntimeError otherwise). Closing it closes
            this encoder.
    """

    def __init__(self, pool: DecodePool) -> None:
        if pool.backend != "native":
            raise RuntimeError("JpegEncoder needs the native backend")
        self.pool = pool

    def last_errors(self) -> list[str | None]:
        """Error text per image of this thread's last call (the pool's ``last_errors``)."""
        return self.pool.last_errors()

    def transcode_jpeg(
        self,
        buffers: Sequence[Any],
        sizes: np.ndarray,
        *,
        crops: np.ndarray | None = None,
        quality: int = 95,
        gray: bool = False,
        interpolation: str = "bilinear",
        restart: int | str = 0,
    ) -> tuple[np.ndarray, list[bytes | None]]:
        """JPEGs → crop → resize → JPEGs again, without leaving C.

        Args:
            buffers: encoded JPEGs (any contiguous buffer-protocol objects).
            sizes: integers (N, 2) output [width, height] per image (int32 range, as crops).
            crops: integers (N, 4) [x, y, w, h] in source pixels, or None for whole images;
                a value int32 cannot hold is a ValueError, as in ``DecodePool.decode_batch``.
            quality: 1..100; colour output is YCbCr 4:2:0, as OpenCV and MXNet write it.
            gray: one luma channel instead of colour.
            interpolation: as in ``DecodePool.decode_batch``.
            restart: restart markers, as :meth:`optimize_jpeg` takes them (0: none).

        Returns:
            int32 statuses and, per image, the new JPEG's bytes (None where the status is
            not 0; the text is in :meth:`last_errors`). Non-JPEG inputs get
            ``Status.UNSUPPORTED``: they are for the caller to handle another way.
        """
        native = self.pool.native_pool()
        if not 1 <= quality <= 100:
            raise ValueError(f"quality must be in 1..100, got {quality}")
        if interpolation not in INTERP:
            raise ValueError(f"interpolation must be one of {sorted(INTERP)}")
        n = len(buffers)
        sizes = int32_array("sizes", sizes, (n, 2))
        if crops is not None:
            crops = int32_array("crops", crops, (n, 4))
        status = np.zeros(n, dtype=np.int32)
        results = native.transcode_batch(
            buffers,
            status=status,
            crops=crops,
            sizes=sizes,
            quality=int(quality),
            gray=int(bool(gray)),
            interp=INTERP[interpolation],
            dct_mode=self.pool.dct_mode,
            max_pixels=self.pool.max_pixels,
            restart=restart_code(restart),
        )
        errors = [None if st == 0 else r for st, r in zip(status, results, strict=True)]
        self.pool.remember_errors(errors, n)  # this thread's, for the pool's last_errors()
        return status, [r if st == 0 else None for st, r in zip(status, results, strict=True)]

    def optimize_jpeg(
        self, buffers: Sequence[Any], *, restart: int | Literal["row"] = 1
    ) -> tuple[np.ndarray, list[bytes | None]]:
        """JPEGs → the same DCT coefficients in a baseline JPEG with restart markers.

        Lossless: no decode, no requantisation, so each new JPEG decodes to exactly the
        pixels of its source. Progressive JPEGs become baseline; the Huffman tables are
        optimised for the image; APPn (EXIF, ICC) and COM segments are kept.

        Args:
            buffers: encoded JPEGs (any contiguous buffer-protocol objects).
            restart: a restart marker every ``restart`` MCUs (1..65535), every MCU row
                (``"row"``), or none (0).

        Returns:
            int32 statuses and, per image, the new JPEG's bytes (None where the status is
            not 0; the text is in :meth:`last_errors`): ``Status.UNSUPPORTED`` for data that
            is not a JPEG, ``CORRUPT`` or ``TRUNCATED`` for a JPEG libjpeg warns about
            (its decode is not well defined, so it is best kept as it is).
        """
        native = self.pool.native_pool()
        code = restart_code(restart)
        n = len(buffers)
        status = np.zeros(n, dtype=np.int32)
        results = native.lossless_batch(
            buffers, status=status, restart=code, max_pixels=self.pool.max_pixels
        )
        errors = [None if st == 0 else r for st, r in zip(status, results, strict=True)]
        self.pool.remember_errors(errors, n)
        return status, [r if st == 0 else None for st, r in zip(status, results, strict=True)]

    def im2rec_batch(
        self,
        paths: Sequence[bytes],
        prefixes: Sequence[bytes],
        options: dict[str, int],
    ) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
        """im2rec's records of plain JPEG files, made and framed in C.

        Args:
            paths: each file's path (bytes).
            prefixes: each record's IRHeader and labels (bytes), put before its JPEG.
            options: ``resize``, ``center_crop``, ``color``, ``quality``,
                ``max_output_bytes`` and ``restart`` (its native code) by name, as
                :class:`recio.im2rec.EncodeOptions` holds them.

        Returns:
            The frames of the records made, one after another, and per file its int32
            status (0: made; ``Status.UNSUPPORTED``: left to the caller's Python path),
            int64 length in the frames and uint32 checksum
            (:func:`recio.im2rec.transcode.make_batch` is the caller, NOTE [im2rec in C] in
            native/im2rec_core.h).
        """
        native = self.pool.native_pool()
        n = len(paths)
        status = np.zeros(n, np.int32)
        lengths = np.zeros(n, np.int64)
        crcs = np.zeros(n, np.uint32)
        frames = native.im2rec_batch(
            paths, prefixes, status, lengths, crcs, **options, dct_mode=self.pool.dct_mode,
            max_pixels=self.pool.max_pixels,
        )  # fmt: skip
        return frames, status, lengths, crcs

    def resize_encode(
        self,
        pixels: np.ndarray,
        size: tuple[int, int],
        *,
        crop: tuple[int, int, int, int] | None = None,
        quality: int = 95,
        interpolation: str = "bilinear",
        restart: int | str = 0,
    ) -> bytes:
        """RGB pixels another library decoded → crop → resize → JPEG.

        Args:
            pixels: uint8 (height, width, 3), e.g. ``np.asarray`` of a Pillow RGB image.
            size: output (width, height).
            crop: (x, y, w, h) inside the image, or None for all of it; resized as Pillow's
                ``resize(size, box=...)`` does.
            quality: 1..100; the JPEG is YCbCr 4:2:0, as :meth:`transcode_jpeg` writes.
            interpolation: as in ``DecodePool.decode_batch``.
            restart: restart markers, as :meth:`optimize_jpeg` takes them (0: none).

        Raises:
            ValueError: bad arguments, or the reason the image could not be encoded.
        """
        native = self.pool.native_pool()
        if interpolation not in INTERP:
            raise ValueError(f"interpolation must be one of {sorted(INTERP)}")
        pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
        if pixels.ndim != 3 or pixels.shape[2] != 3:
            raise ValueError(f"pixels must have shape (height, width, 3), got {pixels.shape}")
        height, width = pixels.shape[:2]
        x, y, w, h = crop if crop is not None else (0, 0, width, height)
        out_w, out_h = size
        return native.resize_encode(
            pixels,
            width=width,
            height=height,
            crop=(x, y, w, h),
            out_w=out_w,
            out_h=out_h,
            quality=int(quality),
            interp=INTERP[interpolation],
            restart=restart_code(restart),
        )


def restart_code(restart: int | str) -> int:
    """The native code of a restart interval: MCUs (>= 0), or -1 for one per MCU row."""
    if restart == "row":
        return -1
    if isinstance(restart, bool) or not isinstance(restart, int) or not 0 <= restart <= 65535:
        raise ValueError(f"restart must be 0..65535 MCUs or 'row', got {restart!r}")
    return restart
