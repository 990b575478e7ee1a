"""One image file → the bytes of its record: im2rec's per-image work.

JPEG → JPEG (the common case) stays in C: recio's native decoder crops and resizes, then
libjpeg-turbo encodes, in one call that releases the GIL, so im2rec's worker threads run
in parallel. EXIF-rotated JPEGs, PNGs and everything else Pillow reads go through Pillow.
``--pass-through`` checks the headers and keeps the bytes (with ``--restart-interval``,
a JPEG's bytes are transcoded losslessly, as ``recio optimize`` does). Every JPEG encoded
gets the restart markers ``restart`` asks for (NOTE [restart markers] in
:mod:`~recio.im2rec.optimize`).
"""

from __future__ import annotations

import dataclasses
import io
import os
import struct
import threading
from collections.abc import Sequence
from typing import NamedTuple

import numpy as np

from .. import decode
from ..records.format import IRHeader, ListEntry, pack
from .encoder import JpegEncoder, restart_code


class SkipImage(Exception):
    """This file cannot become a record; the message says why."""


@dataclasses.dataclass(frozen=True)
class EncodeOptions:
    """How each image becomes record bytes (MXNet's "Options for creating database")."""

    pass_through: bool = False
    resize: int = 0
    center_crop: bool = False
    quality: int = 95
    color: int = 1
    encoding: str = ".jpg"
    pack_label: bool = False
    # The largest output image (width x height x channels, before encoding) made from a
    # smaller source: ``--resize`` of a long thin strip (68 KB of PNG) asked for gigabytes.
    # An output no larger than its source is always made: decoding the source cost that.
    max_output_bytes: int = 64 << 20
    # Restart markers in every JPEG encoded: every N MCUs, "row", or 0 (none). With
    # pass_through, JPEGs are transcoded losslessly to get them (0 keeps their bytes).
    restart: int | str = 0

    def __post_init__(self) -> None:
        restart_code(self.restart)  # ValueError when it is not an interval
        if self.color not in (-1, 0, 1):
            raise ValueError(f"color must be -1, 0 or 1, not {self.color}")
        if self.encoding not in (".jpg", ".png"):
            raise ValueError(f"encoding must be '.jpg' or '.png', not {self.encoding!r}")
        if self.resize < 0:
            raise ValueError(f"resize must be >= 0, not {self.resize}")
        if self.encoding == ".jpg" and not 1 <= self.quality <= 100:
            raise ValueError(f"JPEG quality must be 1..100, not {self.quality}")
        if self.max_output_bytes < 1:
            raise ValueError(f"max_output_bytes must be positive, not {self.max_output_bytes}")


def record_header(entry: ListEntry, pack_label: bool) -> IRHeader:
    """MXNet's header: id = the .lst index; several labels only with ``--pack-label``."""
    if pack_label and len(entry.labels) > 1:
        return IRHeader(0, np.asarray(entry.labels, np.float32), entry.index, 0)
    return IRHeader(0, entry.labels[0] if entry.labels else 0.0, entry.index, 0)


_TJ = None
_TJ_LOCK = threading.Lock()


def _turbojpeg():
    global _TJ
    with _TJ_LOCK:
        if _TJ is None:
            from turbojpeg import TurboJPEG

            _TJ = TurboJPEG()
    return _TJ


def _sniff(data: bytes) -> str:
    if data[:3] == b"\xff\xd8\xff":
        return "jpeg"
    if data[:8] == b"\x89PNG\r\n\x1a\n":
        return "png"
    return "other"


_SOF_MARKERS = frozenset(range(0xC0, 0xD0)) - {0xC4, 0xC8, 0xCC}


class JpegHeader(NamedTuple):
    """What im2rec needs from a JPEG's headers, read without decoding."""

    width: int
    height: int
    orientation: int  # EXIF orientation, 1 = upright
    sampling: tuple[tuple[int, int], ...]  # (h, v) sampling factors per component


def jpeg_header(data: bytes) -> JpegHeader:
    """Parse a JPEG's marker segments up to the frame header; SkipImage if malformed.

    A missing end-of-image marker means the file was cut short.
    """
    n = len(data)
    # Entropy-coded data never holds FF D9 (FF is stuffed), so EOI is reliable; the
    # tail window allows trailing bytes that some cameras append.
    if data.rfind(b"\xff\xd9", max(0, n - 65536)) < 0:
        raise SkipImage("truncated JPEG (no end-of-image marker)")
    pos, orientation = 2, 1
    while pos + 4 <= n:
        if data[pos] != 0xFF:
            raise SkipImage(f"corrupt JPEG (no marker at byte {pos})")
        marker = data[pos + 1]
        if marker == 0xFF:  # fill byte
            pos += 1
            continue
        (length,) = struct.unpack_from(">H", data, pos + 2)
        if marker == 0xE1 and data[pos + 4 : pos + 10] == b"Exif\0\0":
            orientation = exif_orientation(data[pos + 10 : pos + 2 + length])
        elif marker in _SOF_MARKERS and pos + 10 <= n:
            height, width, ncomp = struct.unpack_from(">HHB", data, pos + 5)
            if not width or not height:
                raise SkipImage(f"corrupt JPEG (frame size {width}x{height})")
            factors = data[pos + 11 : pos + 11 + 3 * ncomp : 3]
            sampling = tuple((f >> 4, f & 15) for f in factors)
            return JpegHeader(width, height, orientation, sampling)
        pos += 2 + length
    raise SkipImage("corrupt JPEG (no frame header)")


def jpeg_info(data: bytes) -> tuple[int, int, int]:
    """``(width, height, exif_orientation)`` of a JPEG; SkipImage if malformed or cut short."""
    h = jpeg_header(data)
    return h.width, h.height, h.orientation


def exif_orientation(tiff: bytes) -> int:
    """The EXIF Orientation tag (1-8) of an APP1 segment's TIFF block; 1 where it has none."""
    try:
        order = {b"II": "<", b"MM": ">"}[tiff[:2]]
        (ifd,) = struct.unpack_from(order + "I", tiff, 4)
        (count,) = struct.unpack_from(order + "H", tiff, ifd)
        for i in range(count):
            tag, kind, _, value = struct.unpack_from(order + "HHI4s", tiff, ifd + 2 + 12 * i)
            if tag == 0x0112 and kind == 3:
                orientation = struct.unpack_from(order + "H", value)[0]
                return orientation if 1 <= orientation <= 8 else 1
    except (KeyError, struct.error):
        pass
    return 1


def check_image(data: bytes) -> None:
    """Cheap validity check for ``--pass-through``: headers only, no decode."""
    kind = _sniff(data)
    if kind == "jpeg":
        jpeg_header(data)
    elif kind == "png":
        if b"IEND" not in data[-32:]:
            raise SkipImage("truncated PNG (no IEND chunk)")
    else:
        _open_pillow(data)


def _open_pillow(data: bytes):
    from PIL import Image, UnidentifiedImageError

    try:
        return Image.open(io.BytesIO(data))
    except UnidentifiedImageError:
        raise SkipImage("not an image (unrecognised format)") from None


def output_size(width: int, height: int, resize: int) -> tuple[int, int]:
    """MXNet's ``--resize``: the shorter side becomes ``resize``, the other scales (floor)."""
    if not resize:
        return width, height
    if height > width:
        return resize, height * resize // width
    return width * resize // height, resize


def check_output_size(
    source: tuple[int, int], size: tuple[int, int], channels: int, limit: int
) -> None:
    """SkipImage when the output image would be over ``limit`` bytes and larger than its source.

    Sizes are (width, height); bytes are width x height x channels, before encoding (what the
    resize and the encoder hold).
    """
    need = size[0] * size[1] * channels
    if need > limit and need > source[0] * source[1] * channels:
        raise SkipImage(
            f"output {size[0]}x{size[1]} from a {source[0]}x{source[1]} image is {need >> 20} MiB"
            f" of pixels, over the limit of {limit >> 20} MiB (max_output_bytes)"
        )


def crop_box(width: int, height: int, center_crop: bool) -> tuple[int, int, int, int]:
    """``(x0, y0, x1, y1)`` of the square MXNet's ``--center-crop`` keeps (or the whole)."""
    if not center_crop:
        return 0, 0, width, height
    if height > width:
        margin = (height - width) // 2
        return 0, margin, width, margin + width
    margin = (width - height) // 2
    return margin, 0, margin + height, height


# libjpeg-turbo subsampling → chroma (x, y) factors; TJSAMP_GRAY (3) has no chroma.

_TJSAMP_GRAY, _TJSAMP_420, _TJPF_RGB, _TJPF_GRAY = 3, 2, 0, 6


def encode_image(data: bytes, opts: EncodeOptions) -> bytes:
    """Image file bytes → the bytes to store (re-encoded, or as-is with pass-through)."""
    (result,) = encode_images([data], opts)
    if isinstance(result, SkipImage):
        raise result
    return result


def encode_images(datas: Sequence[bytes], opts: EncodeOptions) -> list[bytes | SkipImage]:
    """:func:`encode_image` for many files: per file, the bytes or the SkipImage saying why not.

    The JPEGs that C re-encodes go in one call (one GIL release for the lot).
    """
    out: list[bytes | SkipImage | None] = [None] * len(datas)
    encoder = _native_encoder() if opts.encoding == ".jpg" and not opts.pass_through else None
    jobs: dict[bool, list[tuple[int, _NativeJob]]] = {False: [], True: []}  # by grey output
    for i, data in enumerate(datas):
        job = _reported(_native_job, data, opts) if encoder is not None else None
        if isinstance(job, _NativeJob):
            jobs[job.gray].append((i, job))
        else:  # not for C, or already a SkipImage
            out[i] = job or _reported(_encode_one, data, opts)
    for gray, todo in jobs.items():
        if not todo:
            continue
        status, jpegs = encoder.transcode_jpeg(
            [datas[i] for i, _ in todo],
            np.array([job.size for _, job in todo], np.int32),
            crops=np.array([job.crop for _, job in todo], np.int32),
            quality=opts.quality,
            gray=gray,
            restart=opts.restart,
        )
        errors = encoder.last_errors()
        for (i, _), st, jpeg, err in zip(todo, status, jpegs, errors, strict=True):
            if jpeg is not None:
                out[i] = jpeg
            elif st == decode.STATUS_TRUNCATED:
                out[i] = SkipImage(f"truncated JPEG ({err})")
            else:  # Pillow decides (and says) what is wrong with what libjpeg-turbo refused
                out[i] = _reported(_encode_pillow, datas[i], opts)
    return out  # type: ignore[return-value]


def _reported(step, data: bytes, opts: EncodeOptions):
    """``step(data, opts)``, or the SkipImage saying why not.

    One bad image never ends the run, it is reported.
    """
    try:
        return step(data, opts)
    except SkipImage as exc:
        return exc
    except Exception as exc:
        return SkipImage(f"{type(exc).__name__}: {exc}")


def _encode_one(data: bytes, opts: EncodeOptions) -> bytes:
    if not data:
        raise SkipImage("empty file")
    if opts.pass_through:
        check_image(data)
        if opts.restart and _sniff(data) == "jpeg":
            return _restart_marked(data, opts)
        return data
    return _encode_pillow(data, opts)


def _restart_marked(jpeg: bytes, opts: EncodeOptions) -> bytes:
    """The JPEG losslessly transcoded with opts' restart markers.

    A JPEG that cannot be (damaged: its decode is not well defined) keeps its bytes.
    """
    encoder = _native_encoder()
    if encoder is None:
        raise SkipImage("restart markers need recio's native extension")
    status, (out,) = encoder.optimize_jpeg([jpeg], restart=opts.restart)
    return out if status[0] == 0 else jpeg


class _NativeJob(NamedTuple):
    size: tuple[int, int]
    crop: tuple[int, int, int, int]  # x, y, w, h
    gray: bool


def _native_job(data: bytes, opts: EncodeOptions) -> _NativeJob | None:
    """What C does with this file, or None when it is not a JPEG for C.

    EXIF-rotated JPEGs go through Pillow, which applies the orientation.
    """
    if not data or _sniff(data) != "jpeg":
        return None
    header = jpeg_header(data)
    if header.orientation != 1:
        return None
    x0, y0, x1, y1 = crop_box(header.width, header.height, opts.center_crop)
    size = output_size(x1 - x0, y1 - y0, opts.resize)
    gray = opts.color == 0 or (opts.color == -1 and len(header.sampling) == 1)
    source = (header.width, header.height)
    check_output_size(source, size, 1 if gray else 3, opts.max_output_bytes)
    return _NativeJob(size, (x0, y0, x1 - x0, y1 - y0), gray)


def native_available() -> bool:
    """Whether JPEG → JPEG runs in C (else every image goes through Pillow)."""
    return decode.native_available()


_worker = threading.local()


def _native_encoder() -> JpegEncoder | None:
    """This thread's encoder on a one-thread native pool (inline, in this thread), or None."""
    encoder = getattr(_worker, "encoder", False)
    if encoder is False:
        encoder = None
        if native_available():
            encoder = JpegEncoder(decode.DecodePool(1, backend="native"))
        _worker.encoder = encoder
    return encoder


def _encode_pillow(data: bytes, opts: EncodeOptions) -> bytes:
    """Any format Pillow reads (PNG, CMYK JPEG, EXIF-rotated ...) → JPEG or PNG."""
    from PIL import Image, ImageOps

    im = _open_pillow(data)
    # Before anything is decoded (the size is the same whichever way EXIF turns the image)
    box = crop_box(*im.size, opts.center_crop)
    channels = {0: 1, 1: 3}.get(opts.color, min(len(im.getbands()), 4))
    size = output_size(box[2] - box[0], box[3] - box[1], opts.resize)
    check_output_size(im.size, size, channels, opts.max_output_bytes)
    try:
        im = ImageOps.exif_transpose(im)
        if opts.color == 1:
            im = im.convert("RGB")
        elif opts.color == 0:
            im = im.convert("L")
        elif im.mode not in ("L", "RGB", "RGBA", "LA"):
            im = im.convert("RGBA" if "A" in im.getbands() or "transparency" in im.info else "RGB")
        else:
            im.load()
    except (OSError, SyntaxError, ValueError) as exc:
        raise SkipImage(f"corrupt image ({exc})") from None
    box = crop_box(*im.size, opts.center_crop)
    size = output_size(box[2] - box[0], box[3] - box[1], opts.resize)
    encoder = _native_encoder() if opts.encoding == ".jpg" and im.mode == "RGB" else None
    if encoder is not None:  # resize and encode in C: ~4x faster than Pillow's resize alone
        crop = (box[0], box[1], box[2] - box[0], box[3] - box[1])
        return encoder.resize_encode(
            np.asarray(im), size, crop=crop, quality=opts.quality, restart=opts.restart
        )
    if size != im.size or box != (0, 0, *im.size):
        im = im.resize(size, Image.Resampling.BILINEAR, box=box)
    if opts.encoding == ".png":
        out = io.BytesIO()
        im.save(out, format="PNG", compress_level=min(max(opts.quality, 0), 9))
        return out.getvalue()
    if im.mode in ("RGBA", "LA"):  # JPEG has no alpha
        im = im.convert(im.mode[:-1])
    tj = _turbojpeg()
    if im.mode == "L":
        jpeg = tj.encode(
            np.asarray(im),
            quality=opts.quality,
            pixel_format=_TJPF_GRAY,
            jpeg_subsample=_TJSAMP_GRAY,
        )
    else:
        jpeg = tj.encode(
            np.asarray(im), quality=opts.quality, pixel_format=_TJPF_RGB,
            jpeg_subsample=_TJSAMP_420,
        )  # fmt: skip
    return _restart_marked(jpeg, opts) if opts.restart else jpeg


def read_file(path: str) -> bytes:
    """A whole local file, in one read() where its size is known.

    That costs a third of ``open().read()``'s buffered objects for a 75 KB image.
    """
    fd = os.open(path, os.O_RDONLY)
    try:
        size = os.fstat(fd).st_size
        data = os.read(fd, size) if size else b""
        if len(data) < size or not size:  # cut short, or a size the file system does not know
            rest = []
            while chunk := os.read(fd, 1 << 20):
                rest.append(chunk)
            data += b"".join(rest)
        return data
    finally:
        os.close(fd)


def make_record(entry: ListEntry, root: str, opts: EncodeOptions) -> bytes:
    """Read ``entry``'s file under ``root`` and return the packed record payload."""
    ((payload, reason),) = make_records([entry], root, opts)
    if payload is None:
        raise SkipImage(reason)
    return payload


@dataclasses.dataclass
class RecordBatch:
    """A batch of list entries made into records: the framed ones C made, and the others.

    Attributes:
        frames: the records C made, framed as :func:`recio.records.format.encode_record` frames
            them (padding included), one after another in entry order.
        lengths: int64, per entry, its bytes in ``frames`` (0 for the others).
        crcs: uint32, per entry, its checksum as the sidecar keeps it (for those in frames).
        others: per entry, None where its record is in ``frames``, else the
            ``(payload, None)`` or ``(None, reason)`` of :func:`make_records`.
    """

    frames: bytes
    lengths: np.ndarray
    crcs: np.ndarray
    others: list[tuple[bytes | None, str | None] | None]


def native_batches(opts: EncodeOptions) -> bool:
    """Whether :func:`make_batch` makes records in C with ``opts`` (JPEG output, re-encoded)."""
    return (
        opts.encoding == ".jpg"
        and not opts.pass_through
        and opts.resize < 1 << 28
        and native_available()
    )


_SHARED: dict[int, JpegEncoder] = {}
_SHARED_LOCK = threading.Lock()


def _batch_encoder(threads: int) -> JpegEncoder:
    """The encoder on the pool of ``threads`` native threads this process's C batches share.

    Callers in several threads queue their batches on the one pool, whose threads go from
    one batch to the next without waiting: while a caller writes or makes the files C left
    to it, the next caller's batch is already running, so the cores stay busy.
    """
    with _SHARED_LOCK:
        encoder = _SHARED.get(threads)
        if encoder is None:
            pool = decode.DecodePool(threads, backend="native")
            encoder = _SHARED[threads] = JpegEncoder(pool)
    return encoder


def make_batch(
    entries: Sequence[ListEntry], root: str, opts: EncodeOptions, threads: int = 1
) -> RecordBatch:
    """:func:`make_records` of ``entries``, its plain JPEGs made and framed in one C call.

    The call reads the files, transcodes and frames with the GIL released, on a pool of
    ``threads`` native threads shared by every caller with the same ``threads``, and hands
    back every entry it does not make (not a JPEG, EXIF-rotated, unreadable, damaged,
    refused sizes: NOTE [im2rec in C] in native/im2rec_core.h) to :func:`make_records`,
    which makes them or says why not. The records are the bytes :func:`make_records`
    would make.
    """
    encoder = _batch_encoder(threads) if native_batches(opts) else None
    if encoder is None:
        n = len(entries)
        empty = np.zeros(n, np.int64), np.zeros(n, np.uint32)
        return RecordBatch(b"", *empty, make_records(entries, root, opts))
    limit = min(opts.max_output_bytes, (1 << 64) - 1)
    frames, status, lengths, crcs = encoder.im2rec_batch(
        [os.fsencode(os.path.join(root, e.path)) for e in entries],
        [pack(record_header(e, opts.pack_label), b"") for e in entries],
        {
            "resize": opts.resize,
            "center_crop": int(opts.center_crop),
            "color": opts.color,
            "quality": opts.quality,
            "max_output_bytes": limit,
            "restart": restart_code(opts.restart),
        },
    )
    others: list = [None] * len(entries)
    todo = np.flatnonzero(status).tolist()
    if todo:
        for i, made in zip(todo, make_records([entries[i] for i in todo], root, opts), strict=True):
            others[i] = made
    return RecordBatch(frames, lengths, crcs, others)


def make_records(
    entries: Sequence[ListEntry], root: str, opts: EncodeOptions
) -> list[tuple[bytes | None, str | None]]:
    """``(payload, None)`` or ``(None, reason)`` per entry: im2rec's work on one batch."""
    datas: list[bytes] = []
    read_errors: dict[int, str] = {}
    for i, entry in enumerate(entries):
        try:
            datas.append(read_file(os.path.join(root, entry.path)))
        except FileNotFoundError:
            read_errors[i] = "file not found"
            datas.append(b"")
        except OSError as exc:
            read_errors[i] = f"unreadable ({exc.strerror or exc})"
            datas.append(b"")
    results = encode_images(datas, opts)
    out: list[tuple[bytes | None, str | None]] = []
    for i, (entry, result) in enumerate(zip(entries, results, strict=True)):
        if i in read_errors:
            out.append((None, read_errors[i]))
        elif isinstance(result, SkipImage):
            out.append((None, str(result)))
        else:
            out.append((pack(record_header(entry, opts.pack_label), result), None))
    return out
