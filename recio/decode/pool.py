"""``DecodePool``: the Python face of the native decode pool, with the Pillow path beside it."""

from __future__ import annotations

import copy
import functools
import os
import threading
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any, NamedTuple

import numpy as np

from ..augment import KeyedDraw, apply_colour
from ..augment.geometry import plan, warp_image
from ..records.spans import Spans
from ._pillow import Budget, ByteBudget, pil_decode, pil_filters, pil_size
from .status import STATUS_NAMES, Status

try:
    from recio import _native
except ImportError:  # extension not built: the Python fallback takes over, visibly
    _native = None

_INTERP = {"bilinear": 0, "area": 1, "nearest": 2}
_LAYOUTS = {"NHWC": 0, "NCHW": 1}
_DCT = {"off": 0, "pow2": 1, "all": 2}
_DTYPES = (np.dtype(np.uint8), np.dtype(np.float32), np.dtype(np.float16))
_UNSUPPORTED = int(Status.UNSUPPORTED)  # an enum member's lookup costs a microsecond

_warned_slow = False
_warn_lock = threading.Lock()


def native_available() -> bool:
    """Whether the C extension is importable."""
    return _native is not None


def default_backend() -> str:
    """The backend an automatic ``DecodePool`` uses: ``RECIO_DECODER`` if set, else native."""
    env = os.environ.get("RECIO_DECODER", "").strip().lower()
    if env in ("native", "python"):
        return env
    if env not in ("", "auto"):
        raise ValueError(f"RECIO_DECODER must be 'native', 'python' or 'auto', got {env!r}")
    return "native" if _native is not None else "python"


def features() -> dict[str, Any]:
    """What this build can do, for ``recio info`` and bench reports."""
    return {
        "native": _native is not None,
        "default_backend": default_backend(),
        "libjpeg_turbo": getattr(_native, "LIBJPEG_TURBO_VERSION", None),
        "interpolations": sorted(_INTERP),
        "dtypes": [str(d) for d in _DTYPES],
    }


def _warn_slow_once(reason: str) -> None:
    global _warned_slow
    with _warn_lock:
        if _warned_slow:
            return
        _warned_slow = True
    warnings.warn(
        f"recio decodes on the slow Python fallback (Pillow): {reason}",
        RuntimeWarning,
        stacklevel=3,
    )


_INT32 = np.iinfo(np.int32)


def _int32_array(name: str, value: Any, shape: tuple[int, ...]) -> np.ndarray:
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


def _default_threads() -> int:
    try:
        return max(1, len(os.sched_getaffinity(0)))
    except AttributeError:  # not on Linux
        return max(1, os.cpu_count() or 1)


class DecodePool:
    """A persistent pool that decodes batches of encoded images into preallocated arrays.

    Args:
        num_threads: decode threads; default: the cores this process may run on.
        backend: ``"native"``, ``"python"`` or None (``RECIO_DECODER``, else native if built).
        max_pixels: images with more pixels are refused (status ``STATUS_TOO_LARGE``)
            before anything is allocated for them.
        max_decode_bytes: the memory the pool's decodes may hold at once, all threads and
            both paths together (default 1 GiB; None: no limit). Before it allocates, each
            decode takes what it will need (estimated from the header: a progressive JPEG's
            whole-image coefficient buffer, the decoded rows of the crop, Pillow's copies),
            waiting while others hold too much; an image that alone needs more is refused
            (``STATUS_TOO_LARGE``). This bounds what a small pathological file (a 15 KB PNG
            of 11000x11000 pixels of one colour) costs per batch, whatever the thread count.
        dct_scaling: which libjpeg DCT-domain scales the native path may use when the crop is
            at least that much larger than the output: ``"pow2"`` (1/2, 1/4, 1/8; SIMD IDCT),
            ``"all"`` (every N/8: slower, non-SIMD IDCT, and further from Pillow on detailed
            photos) or ``"off"``.
        roi_decode: decode only the rows and columns a crop needs (native path).

    The pool is shut down by :meth:`close`, on leaving a ``with`` block, and at interpreter
    exit.
    """

    def __init__(
        self,
        num_threads: int | None = None,
        *,
        backend: str | None = None,
        max_pixels: int = 128_000_000,
        max_decode_bytes: int | None = 1 << 30,
        dct_scaling: str = "pow2",
        roi_decode: bool = True,
    ) -> None:
        if num_threads is None:
            num_threads = _default_threads()
        if not isinstance(num_threads, int) or not 1 <= num_threads <= 1024:
            raise ValueError(f"num_threads must be an int in 1..1024, got {num_threads!r}")
        if max_pixels < 1:
            raise ValueError(f"max_pixels must be positive, got {max_pixels}")
        if max_decode_bytes is not None and not (
            isinstance(max_decode_bytes, int) and 1 <= max_decode_bytes < 1 << 63
        ):
            raise ValueError(
                f"max_decode_bytes must be a positive int or None, got {max_decode_bytes!r}"
            )
        if dct_scaling not in _DCT:
            raise ValueError(f"dct_scaling must be one of {sorted(_DCT)}, got {dct_scaling!r}")
        if backend is None:
            backend = default_backend()
            if backend == "python":
                _warn_slow_once(
                    "RECIO_DECODER=python" if _native is not None else "recio._native not built"
                )
        elif backend not in ("native", "python"):
            raise ValueError(f"backend must be 'native' or 'python', got {backend!r}")
        if backend == "native" and _native is None:
            raise ImportError("backend='native' but the extension recio._native is not built")
        self.backend: str = backend
        self.num_threads: int = num_threads
        self.max_pixels = int(max_pixels)
        self.max_decode_bytes = max_decode_bytes
        self._budget: Budget
        self._dct_mode = _DCT[dct_scaling]
        self._roi = int(bool(roi_decode))
        self._last = threading.local()  # each thread's last batch: errors (None: none), n
        self._native: Any = None
        self._executor: ThreadPoolExecutor | None = None
        self._closed = False
        self._close_lock = threading.Lock()
        self._start()

    def _start(self) -> None:
        self._pid = os.getpid()
        # Python threads: the whole decoder on the fallback backend; on the native one, the
        # PNGs & co. of a batch, decoded in parallel (Pillow releases the GIL). They start
        # only when first used.
        self._executor = ThreadPoolExecutor(self.num_threads, thread_name_prefix="recio-dec")
        limit = self.max_decode_bytes or 0
        if self.backend == "native":
            # one budget for both paths: the Pillow part reserves from the C pool's
            self._native = _native.Pool(self.num_threads, limit)
            self._budget = _NativeBudget(self._native)
            self._finalizer = weakref.finalize(self, _close_both, self._native, self._executor)
        else:
            self._budget = ByteBudget(limit)
            self._finalizer = weakref.finalize(self, self._executor.shutdown, wait=True)

    def _check_open(self) -> None:
        if self._closed:
            raise ValueError("DecodePool is closed")
        if os.getpid() != self._pid:  # forked child: the parent's threads do not exist here
            self._finalizer.detach()
            self._start()

    def close(self) -> None:
        """Stops and joins the decode threads. Idempotent.

        A close() that races another returns when the threads are joined, not before.
        """
        with self._close_lock:  # the finalizer runs once: a second caller must wait for it
            self._closed = True
            self._finalizer()

    def __enter__(self) -> DecodePool:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def __repr__(self) -> str:
        state = "closed" if self._closed else "open"
        return f"DecodePool(backend={self.backend!r}, num_threads={self.num_threads}, {state})"

    def last_errors(self) -> list[str | None]:
        """Error text per image of this thread's last batch (None where the status was 0).

        Per thread: batches may run from several threads at once (the iterator's decode
        threads), each reading its own batch's errors.
        """
        errors = getattr(self._last, "errors", [])
        return [None] * self._last.n if errors is None else list(errors)

    def image_sizes(self, buffers: Sequence[Any] | Spans) -> np.ndarray:
        """Image sizes from the headers only: int32 (N, 2) [width, height], -1 if unreadable.

        ``buffers`` as in :meth:`decode_batch`.
        """
        self._check_open()
        n = len(buffers)
        sizes = np.full((n, 2), -2, dtype=np.int32)
        if self.backend == "native":
            images, spans = _native_images(buffers)
            self._native.image_sizes(images, sizes, *spans)
        todo = np.flatnonzero(sizes[:, 0] == -2).tolist()
        for i in todo:  # header reads: cheaper here than a hand-off to another thread
            sizes[i] = pil_size(buffers[i])
        return sizes

    def decode_batch(
        self,
        buffers: Sequence[Any] | Spans,
        out: np.ndarray,
        *,
        crops: np.ndarray | None = None,
        flips: np.ndarray | None = None,
        draw: KeyedDraw | None = None,
        records: np.ndarray | None = None,
        interpolation: str = "bilinear",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        layout: str = "NHWC",
        channel_order: str = "RGB",
        scale: float = 1.0,
        mean_img: np.ndarray | None = None,
    ) -> np.ndarray:
        """Decodes ``buffers`` into ``out[:len(buffers)]`` and returns an int32 status per image.

        Args:
            buffers: encoded images, any contiguous buffer-protocol objects (bytes, memoryview
                slices of an mmap), or :class:`~recio.spans.Spans` of one buffer (the reader's
                local batches: one buffer view for the batch); they are read in place.
            out: C-contiguous uint8, float32 or float16 array, (N, H, W, 3) for NHWC or
                (N, 3, H, W) for NCHW, N >= len(buffers).
            crops: integers (N, 4) [x, y, w, h] in source pixels, clamped to the image; None
                for the whole image. Any integer dtype; a value int32 cannot hold (or a
                fractional float) is a ValueError, never wrapped.
            flips: (N,), flip horizontally where true (non-zero).
            draw: instead of crops and flips, each image's window and flip drawn for its
                record (``records``, int64 (N,)) as it is decoded, from the size in its header.
            records: the record number of each image, the key of its draws (with ``draw``).
            interpolation: "bilinear", "area" (Pillow BOX) or "nearest".
            mean: per output channel on the 0..255 scale; float outputs only:
                ``out = (pixel - mean) / std``.
            std: per output channel on the 0..255 scale, as ``mean``.
            layout: "NHWC" or "NCHW".
            channel_order: "RGB" or "BGR".
            scale: MXNet's ``scale``, float outputs only: ``out = (pixel - mean) / std *
                scale``.
            mean_img: a mean image, float32 outputs only: (3, H, W) per output channel on
                the 0..255 scale, taken from every image instead of ``mean`` (MXNet's
                ``mean_img``).

        With ``draw``, its colour augmentation (:class:`~recio.augment.ColourSpec`) runs on
        each image's pixels before they are normalised, and its random contrast and
        illumination in the normalisation (float32 outputs).

        Returns:
            int32 (len(buffers),) statuses; 0 is success (see ``STATUS_NAMES``).

        Raises:
            ValueError: bad ``out`` shape, dtype, contiguity or other arguments (before any
                work is done).
        """
        self._check_open()
        n = len(buffers)
        job = _Job.build(
            n, out, crops, flips, draw, records, interpolation, mean, std, layout, channel_order,
            scale, mean_img,
        )  # fmt: skip
        status = np.zeros(n, dtype=np.int32)
        errors: list[str | None] | None = None  # None: no image failed
        if self.backend == "native" and n:
            images, spans = _native_images(buffers)
            starts, lengths = spans or (None, None)
            errors = self._native.decode_batch(
                images, job.out, status, self._job_options(job), job.crops, job.flips, starts,
                lengths, job.records,
            )  # fmt: skip
            todo = np.flatnonzero(status == _UNSUPPORTED).tolist() if errors is not None else []
        else:
            todo = list(range(n))
        self._finish(job, buffers, status, errors, todo)
        return status

    def decode_records(
        self,
        base: Any,
        offsets: np.ndarray,
        out: np.ndarray,
        *,
        label_width: int = 1,
        draw: KeyedDraw | None = None,
        records: np.ndarray | None = None,
        interpolation: str = "bilinear",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        layout: str = "NHWC",
        channel_order: str = "RGB",
        scale: float = 1.0,
        mean_img: np.ndarray | None = None,
    ) -> DecodedRecords:
        """Parse the records at byte ``offsets`` of ``base`` and decode their images, in one call.

        ``base`` is the map of a ``.rec`` (any bytes-like object); each decode thread parses
        its records' frame and IRHeader (NOTE [batch parse] in recio/reader.py) and decodes
        the image into ``out``. A record that is not plainly one frame with its header
        inside ``base`` gets status ``Status.RECORD`` and is left for the caller to read the
        exact way (:func:`recio.reader.read_batch`); so does every record on the Python
        backend. Other arguments as :meth:`decode_batch`.
        """
        return self.submit_records(
            base, offsets, out, label_width=label_width, draw=draw, records=records,
            interpolation=interpolation, mean=mean, std=std, layout=layout,
            channel_order=channel_order, scale=scale, mean_img=mean_img,
        ).result()  # fmt: skip

    def submit_records(
        self,
        base: Any,
        offsets: np.ndarray,
        out: np.ndarray,
        *,
        label_width: int = 1,
        draw: KeyedDraw | None = None,
        records: np.ndarray | None = None,
        interpolation: str = "bilinear",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        layout: str = "NHWC",
        channel_order: str = "RGB",
        scale: float = 1.0,
        mean_img: np.ndarray | None = None,
    ) -> PendingRecords:
        """:meth:`decode_records`, queued: returns at once, the pool decodes meanwhile.

        ``base`` may also be a list of bytes-like objects, one per record (a remote batch's
        extents as fetched): record ``i`` is then at ``offsets[i]`` of ``base[i]``, and its
        image inside it (NOTE [unjoined extents] in recio/iterator.py).

        The pool's threads work through the queued batches in turn, going from one to the
        next without a Python thread waking up in between (NOTE [job queue] in
        native/pool.c). ``out`` and ``base`` are written / read until the job is finished:
        keep them until :meth:`PendingRecords.result` (which also finishes what the native
        pool leaves: Pillow's formats, the failed slots zeroed). Arguments are checked here,
        before anything is queued.
        """
        self._check_open()
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        n = len(offsets)
        job = _Job.build(
            n, out, None, None, draw, records, interpolation, mean, std, layout, channel_order,
            scale, mean_img,
        )  # fmt: skip
        width = int(label_width)
        if width < 1:
            raise ValueError(f"label_width must be at least 1, not {label_width}")
        labels = np.zeros((n, width), dtype=np.float32)
        ids = np.full(n, -1, dtype=np.int64)
        starts, lengths = np.zeros(n, dtype=np.int64), np.zeros(n, dtype=np.int64)
        status = np.full(n, int(Status.RECORD), dtype=np.int32)
        handle = None
        if self.backend == "native" and n:
            handle = self._native.submit_records(
                base, offsets, labels, ids, starts, lengths, job.out, status,
                self._job_options(job), job.crops, job.flips, job.records,
            )  # fmt: skip
        return PendingRecords(self, job, base, status, labels, ids, starts, lengths, handle)

    def records_job(
        self,
        out_shape: tuple[int, ...],
        dtype: Any,
        *,
        label_width: int = 1,
        draw: KeyedDraw | None = None,
        interpolation: str = "bilinear",
        mean: Sequence[float] | None = None,
        std: Sequence[float] | None = None,
        layout: str = "NHWC",
        channel_order: str = "RGB",
        scale: float = 1.0,
        mean_img: np.ndarray | None = None,
    ) -> RecordsJob:
        """:meth:`submit_records` for many batches into outputs of one image shape and dtype.

        Everything the batches share (the checked options, the lookup table, the draw's
        native parameters) is made here once, so that each :meth:`RecordsJob.submit` does
        little more than allocate its batch's small arrays and queue it (native backend;
        the Python one takes :meth:`submit_records`' path). ``out_shape``: any batch size.
        """
        probe = np.empty((0, *tuple(out_shape)[1:]), dtype=dtype)
        records = None if draw is None else np.zeros(0, dtype=np.int64)
        job = _Job.build(
            0, probe, None, None, draw, records, interpolation, mean, std, layout, channel_order,
            scale, mean_img,
        )  # fmt: skip
        width = int(label_width)
        if width < 1:
            raise ValueError(f"label_width must be at least 1, not {label_width}")
        kwargs = dict(
            label_width=width, draw=draw, interpolation=interpolation, mean=mean, std=std,
            layout=layout, channel_order=channel_order, scale=scale, mean_img=mean_img,
        )  # fmt: skip
        return RecordsJob(self, job, kwargs, probe.shape[1:], probe.dtype)

    def _job_options(self, job: _Job) -> Any:
        """The native pool's ``JobOptions`` of ``job``: every option by name, checked once."""
        return _native.JobOptions(
            out_h=job.height,
            out_w=job.width,
            layout=_LAYOUTS[job.layout],
            itemsize=job.out.itemsize,
            interp=_INTERP[job.interpolation],
            bgr=int(job.bgr),
            dct_mode=self._dct_mode,
            roi=self._roi,
            max_pixels=self.max_pixels,
            lut=job.lut,
            draw=None if job.draw is None else job.draw.native(),
            gain=job.gain,
            mean_img=job.mean_img,
        )

    def _finish(self, job: _Job, buffers: Any, status: np.ndarray, errors, todo: list) -> None:
        """Decode the ``todo`` images with Pillow, zero the failed slots, keep the errors."""
        if todo:  # PNG & co. on the native backend (usually few), everything on the fallback

            def run(i: int) -> tuple[int, str | None]:
                return job.decode_pil(i, buffers[i], self.max_pixels, self._budget)

            if errors is None:
                errors = [None] * len(status)
            for i, (st, err) in zip(todo, self._run_pillow(run, todo), strict=True):
                status[i], errors[i] = st, err
        if errors is not None:  # None: the native pool says no image failed
            failed = np.flatnonzero(status)
            job.out[failed] = 0  # failed slots are zeroed so that the batch is deterministic
        self._last.errors, self._last.n = errors, len(status)

    def _run_pillow(self, run: Any, todo: list[int]) -> list[tuple[int, str | None]]:
        """run(i) for every i in todo, on the Pillow threads when more than one.

        Whatever happens (close() from another thread shutting the threads down between two
        hand-offs, an exception), no decode handed off still writes into ``out`` once this
        returns or raises: what has not started is cancelled, what runs is waited for.
        """
        if len(todo) == 1:
            return [run(todo[0])]
        futures: list[Future] = []
        try:
            for i in todo:
                futures.append(self._executor.submit(run, i))
            return [f.result() for f in futures]
        except RuntimeError:
            if self._closed:  # close() from another thread shut the executor down
                raise ValueError("DecodePool is closed") from None
            raise
        finally:
            for f in futures:
                f.cancel()
            wait(futures)

    def transcode_jpeg(
        self,
        buffers: Sequence[Any],
        sizes: np.ndarray,
        *,
        crops: np.ndarray | None = None,
        quality: int = 95,
        gray: bool = False,
        interpolation: str = "bilinear",
    ) -> tuple[np.ndarray, list[bytes | None]]:
        """JPEGs → crop → resize → JPEGs again, without leaving C (native backend only).

        Args:
            buffers: encoded JPEGs (any contiguous buffer-protocol objects).
            sizes: integers (N, 2) output [width, height] per image (int32 range, as crops).
            crops: integers (N, 4) [x, y, w, h] in source pixels, or None for whole images;
                a value int32 cannot hold is a ValueError, as in :meth:`decode_batch`.
            quality: 1..100; colour output is YCbCr 4:2:0, as OpenCV and MXNet write it.
            gray: one luma channel instead of colour.
            interpolation: as in :meth:`decode_batch`.

        Returns:
            int32 statuses and, per image, the new JPEG's bytes (None where the status is
            not 0; the text is in :meth:`last_errors`). Non-JPEG inputs get
            ``Status.UNSUPPORTED``: they are for the caller to handle another way.
        """
        self._check_open()
        if self.backend != "native":
            raise RuntimeError("transcode_jpeg needs the native backend")
        if not 1 <= quality <= 100:
            raise ValueError(f"quality must be in 1..100, got {quality}")
        if interpolation not in _INTERP:
            raise ValueError(f"interpolation must be one of {sorted(_INTERP)}")
        n = len(buffers)
        sizes = _int32_array("sizes", sizes, (n, 2))
        if crops is not None:
            crops = _int32_array("crops", crops, (n, 4))
        status = np.zeros(n, dtype=np.int32)
        results = self._native.transcode_batch(
            buffers,
            status=status,
            crops=crops,
            sizes=sizes,
            quality=int(quality),
            gray=int(bool(gray)),
            interp=_INTERP[interpolation],
            dct_mode=self._dct_mode,
            max_pixels=self.max_pixels,
        )
        self._last.errors = [None if st == 0 else r for st, r in zip(status, results, strict=True)]
        self._last.n = n
        return status, [r if st == 0 else None for st, r in zip(status, results, strict=True)]

    def im2rec_batch(
        self,
        paths: Sequence[bytes],
        prefixes: Sequence[bytes],
        options: dict[str, int],
    ) -> tuple[bytes, np.ndarray, np.ndarray, np.ndarray]:
        """im2rec's records of plain JPEG files, made and framed in C (native backend only).

        Args:
            paths: each file's path (bytes).
            prefixes: each record's IRHeader and labels (bytes), put before its JPEG.
            options: ``resize``, ``center_crop``, ``color``, ``quality`` and
                ``max_output_bytes`` by name, as :class:`recio.im2rec.EncodeOptions` holds
                them.

        Returns:
            The frames of the records made, one after another, and per file its int32
            status (0: made; ``Status.UNSUPPORTED``: left to the caller's Python path),
            int64 length in the frames and uint32 checksum (:func:`recio.im2rec.make_batch`
            is the caller, NOTE [im2rec in C] in native/im2rec_core.h).
        """
        self._check_open()
        if self.backend != "native":
            raise RuntimeError("im2rec_batch needs the native backend")
        n = len(paths)
        status = np.zeros(n, np.int32)
        lengths = np.zeros(n, np.int64)
        crcs = np.zeros(n, np.uint32)
        frames = self._native.im2rec_batch(
            paths, prefixes, status, lengths, crcs, **options, dct_mode=self._dct_mode,
            max_pixels=self.max_pixels,
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
    ) -> bytes:
        """RGB pixels another library decoded → crop → resize → JPEG (native backend only).

        Args:
            pixels: uint8 (height, width, 3), e.g. ``np.asarray`` of a Pillow RGB image.
            size: output (width, height).
            crop: (x, y, w, h) inside the image, or None for all of it; resized as Pillow's
                ``resize(size, box=...)`` does.
            quality: 1..100; the JPEG is YCbCr 4:2:0, as :meth:`transcode_jpeg` writes.
            interpolation: as in :meth:`decode_batch`.

        Raises:
            ValueError: bad arguments, or the reason the image could not be encoded.
        """
        self._check_open()
        if self.backend != "native":
            raise RuntimeError("resize_encode needs the native backend")
        if interpolation not in _INTERP:
            raise ValueError(f"interpolation must be one of {sorted(_INTERP)}")
        pixels = np.ascontiguousarray(pixels, dtype=np.uint8)
        if pixels.ndim != 3 or pixels.shape[2] != 3:
            raise ValueError(f"pixels must have shape (height, width, 3), got {pixels.shape}")
        height, width = pixels.shape[:2]
        x, y, w, h = crop if crop is not None else (0, 0, width, height)
        out_w, out_h = size
        return self._native.resize_encode(
            pixels,
            width=width,
            height=height,
            crop=(x, y, w, h),
            out_w=out_w,
            out_h=out_h,
            quality=int(quality),
            interp=_INTERP[interpolation],
        )


class DecodedRecords(NamedTuple):
    """What :meth:`DecodePool.decode_records` gives: per record its status, header and image."""

    status: np.ndarray  # int32 (N,), 0 decoded; Status.RECORD: left to the exact parse
    labels: np.ndarray  # float32 (N, label_width); flag 0 gives its label in every column
    ids: np.ndarray  # int64 (N,) from the IRHeaders, -1 where unparsed
    images: Spans | ExtentImages  # where each image is (empty where unparsed)


def _images(base: Any, starts: np.ndarray, lengths: np.ndarray) -> Spans | ExtentImages:
    """Each record's image: spans of ``base``, or (a list of extents) inside its own."""
    if isinstance(base, list | tuple):
        return ExtentImages(base, starts, lengths)
    return Spans.inside(memoryview(base).cast("B"), starts, lengths)


class ExtentImages(Sequence):
    """Item ``i`` is ``extents[i][starts[i]:][:lengths[i]]`` (sliced when asked for)."""

    __slots__ = ("extents", "lengths", "starts")

    def __init__(self, extents: Sequence[Any], starts: np.ndarray, lengths: np.ndarray) -> None:
        self.extents, self.starts, self.lengths = extents, starts, lengths

    def __len__(self) -> int:
        return len(self.extents)

    def __getitem__(self, i: int) -> memoryview:  # type: ignore[override]
        start = int(self.starts[i])
        return memoryview(self.extents[i]).cast("B")[start : start + int(self.lengths[i])]


class PendingRecords:
    """A :meth:`DecodePool.submit_records` batch: wait for it, then take its result once."""

    __slots__ = ("_base", "_handle", "_job", "_pool", "_result", "_rows", "failed")

    def __init__(self, pool, job, base, status, labels, ids, starts, lengths, handle) -> None:
        # job: the batch's _Job, or (RecordsJob, out, crops, flips, records) to make it from
        # where an image needs it (Pillow, the failed slots)
        self._pool, self._job, self._base, self._handle = pool, job, base, handle
        self._rows = (status, labels, ids, starts, lengths)
        self._result: DecodedRecords | None = None
        self.failed: bool | None = None  # after result(): whether any status is not 0

    def wait(self, timeout: float | None = None) -> bool:
        """Wait (GIL released) until the native pool is done, at most ``timeout`` seconds.

        Returns whether it is done; :meth:`result` then returns without waiting for it.
        """
        return True if self._handle is None else self._handle.wait(timeout)

    def result(self) -> DecodedRecords:
        """What :meth:`DecodePool.decode_records` returns; waits for the pool first.

        Its errors are this thread's :meth:`DecodePool.last_errors`.

        Raises:
            ValueError: the pool was closed before every image was decoded.
        """
        if self._result is not None:
            return self._result
        status, labels, ids, starts, lengths = self._rows
        n = len(status)
        errors: list[str | None] | None = None
        todo: list[int] = []
        if self._handle is not None:
            errors = self._handle.result()
            self._handle = None  # its buffer views are released
            todo = np.flatnonzero(status == _UNSUPPORTED).tolist() if errors is not None else []
        elif n:
            errors = [None] * n
        images = _images(self._base, starts, lengths)
        pool = self._pool
        if errors is None:  # every image decoded: nothing to finish
            pool._last.errors, pool._last.n = None, n
        else:
            job = self._job
            if not isinstance(job, _Job):
                job = job[0].job_for(*job[1:])
            pool._finish(job, images, status, errors, todo)
        self.failed = errors is not None and bool(status.any())
        self._result = DecodedRecords(status, labels, ids, images)
        return self._result


class RecordsJob:
    """:meth:`DecodePool.records_job`: the shared arguments of many ``submit_records``."""

    __slots__ = (
        "_drawn", "_dtype", "_job", "_kwargs", "_options", "_pool", "_shape", "_width",
    )  # fmt: skip

    def __init__(self, pool: DecodePool, job: _Job, kwargs: dict, shape: tuple, dtype) -> None:
        self._pool, self._job, self._kwargs = pool, job, kwargs
        self._width, self._shape, self._dtype = kwargs["label_width"], shape, dtype
        self._drawn = job.draw is not None
        # the native JobOptions every batch shares (None: the Python backend)
        self._options = pool._job_options(job) if pool.backend == "native" else None

    def submit(
        self, base: Any, offsets: np.ndarray, out: np.ndarray, records: np.ndarray | None = None
    ) -> PendingRecords:
        """:meth:`DecodePool.submit_records` of ``offsets`` (int64) into ``out``.

        ``records``: the keys of the draws (int64, one per offset), with a draw.
        """
        pool = self._pool
        pool._check_open()
        n = len(offsets)
        if (
            type(out) is not np.ndarray
            or out.shape[1:] != self._shape
            or out.dtype != self._dtype
            or out.shape[0] < n
            or not out.flags.c_contiguous
            or not out.flags.writeable
        ):
            raise ValueError(
                f"out must be a writeable C-contiguous {self._dtype} array of at least {n}"
                f" images of shape {self._shape}, got {getattr(out, 'shape', type(out))}"
            )
        if self._options is None or not n or offsets.dtype != np.int64:
            return pool.submit_records(base, offsets, out, records=records, **self._kwargs)
        if out.shape[0] != n:
            out = out[:n]
        labels = np.zeros((n, self._width), dtype=np.float32)
        ids, starts, lengths = np.empty(n, np.int64), np.empty(n, np.int64), np.empty(n, np.int64)
        status = np.empty(n, dtype=np.int32)  # every slot's is written (parse or decode)
        crops = flips = keys = None
        if self._drawn:
            if records is None or len(records) != n or records.dtype != np.int64:
                raise ValueError(f"records must be int64 of shape ({n},) to draw")
            crops, flips = np.zeros((n, 4), dtype=np.int32), np.zeros(n, dtype=np.uint8)
            keys = records
        handle = pool._native.submit_records(
            base, offsets, labels, ids, starts, lengths, out, status, self._options, crops, flips,
            keys,
        )  # fmt: skip
        job = (self, out, crops, flips, records)
        return PendingRecords(pool, job, base, status, labels, ids, starts, lengths, handle)

    @property
    def native(self) -> bool:
        """Whether :meth:`queue` may be used (the native backend)."""
        return self._options is not None

    def queue(
        self, base: Any, offsets: np.ndarray, out: np.ndarray, records: np.ndarray | None, rows
    ) -> tuple[Any, np.ndarray, np.ndarray]:
        """:meth:`submit`'s native call alone, into the caller's arrays (native backend).

        For a caller that made ``out`` as :meth:`submit` checks it (the native call checks
        the sizes again, for memory safety), ``offsets`` int64 and, with a draw, ``records``
        int64, one per offset. ``rows``: ``(status, starts, lengths, crops, flips)`` for
        ``n = len(offsets)`` images (int32 n, int64 n, int64 n, int32 n×4, uint8 n), the
        caller's to reuse once the batch is finished: every slot's status, start and length
        is written, and with a draw its crop and flip before they are read. Returns the
        native handle and the batch's fresh labels and ids; :meth:`pending` makes the
        :class:`PendingRecords` of it.
        """
        self._pool._check_open()
        n = len(offsets)
        labels = np.zeros((n, self._width), dtype=np.float32)
        ids = np.empty(n, np.int64)
        status, starts, lengths, crops, flips = rows
        if not self._drawn:
            crops = flips = records = None
        handle = self._pool._native.submit_records(
            base, offsets, labels, ids, starts, lengths, out, status, self._options, crops, flips,
            records,
        )  # fmt: skip
        return handle, labels, ids

    def pending(self, base, out, records, rows, handle, labels, ids) -> PendingRecords:
        """The :class:`PendingRecords` of a :meth:`queue` call (its arguments and result)."""
        status, starts, lengths, crops, flips = rows
        if not self._drawn:  # none drawn: the images are whole
            crops = flips = None
        job = (self, out, crops, flips, records)
        return PendingRecords(self._pool, job, base, status, labels, ids, starts, lengths, handle)

    def job_for(self, out: np.ndarray, crops, flips, records) -> _Job:
        """The _Job of one batch (for the images the native pool leaves to Pillow)."""
        job = copy.copy(self._job)
        job.out, job.crops, job.flips, job.records = out, crops, flips, records
        return job


def _native_images(buffers: Sequence[Any] | Spans) -> tuple[Any, tuple]:
    """How the native pool takes ``buffers``: the images argument, and (starts, lengths) or ()."""
    if isinstance(buffers, Spans):
        return buffers.base, (buffers.starts, buffers.lengths)
    return buffers, ()


class _NativeBudget:
    """The native pool's budget (NOTE [decode budget]), for the Pillow path beside it."""

    def __init__(self, pool: Any) -> None:
        self.limit = pool.max_decode_bytes
        self.reserve = pool.reserve
        self.release = pool.release


def _close_both(native: Any, executor: ThreadPoolExecutor) -> None:
    native.close()
    executor.shutdown(wait=True)


def raise_on_error(status: np.ndarray, errors: Sequence[str | None]) -> None:
    """Raises :class:`recio.errors.DecodeError` for the first failed image of a batch."""
    from recio.errors import DecodeError

    for i in np.flatnonzero(status):
        st = int(status[i])
        raise DecodeError(errors[i] or STATUS_NAMES.get(st, "error"), index=int(i), status=st)


def _lut(dtype: np.dtype, mean: Any, std: Any, scale: float = 1.0) -> np.ndarray:
    """The per-channel lookup table of ``(level - mean) / std * scale`` (both backends').

    Made once per (dtype, mean, std, scale) given as tuples, as an iterator's batches give
    them.
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
    lut = ((levels[None, :] - m[:, None]) / s[:, None] * scale).astype(dtype)  # (* 1: exact)
    lut.flags.writeable = False  # shared by the batches that hit the cache
    return lut


_cached_lut = functools.lru_cache(maxsize=16)(_make_lut)


class _Job:
    """The checked, normalised arguments of one decode_batch call."""

    out: np.ndarray
    crops: np.ndarray | None
    flips: np.ndarray | None
    draw: KeyedDraw | None
    records: np.ndarray | None
    lut: np.ndarray | None
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
        interpolation: str,
        mean: Sequence[float] | None,
        std: Sequence[float] | None,
        layout: str,
        channel_order: str,
        scale: float = 1.0,
        mean_img: Any = None,
    ) -> _Job:
        job = cls()
        if not isinstance(out, np.ndarray):
            raise ValueError(f"out must be a numpy array, got {type(out).__name__}")
        if out.dtype not in _DTYPES:
            raise ValueError(f"out.dtype must be uint8, float32 or float16, got {out.dtype}")
        if not out.flags.c_contiguous or not out.flags.writeable:
            raise ValueError("out must be a writeable C-contiguous array")
        if layout not in _LAYOUTS:
            raise ValueError(f"layout must be 'NHWC' or 'NCHW', got {layout!r}")
        if channel_order not in ("RGB", "BGR"):
            raise ValueError(f"channel_order must be 'RGB' or 'BGR', got {channel_order!r}")
        if interpolation not in _INTERP:
            allowed = sorted(_INTERP)
            raise ValueError(f"interpolation must be one of {allowed}, got {interpolation!r}")
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
        job.bgr = channel_order == "BGR"
        job.interpolation = interpolation
        job.crops = None
        if crops is not None:
            c = _int32_array("crops", crops, (n, 4))
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
        job.lut = job.gain = job.mean_img = None
        scale = float(scale)
        if not (np.isfinite(scale) and scale != 0):
            raise ValueError(f"scale must be finite and non-zero, got {scale}")
        affine = draw is not None and draw.colour.affine
        if out.dtype == np.uint8:
            if mean is not None or std is not None or scale != 1 or mean_img is not None:
                raise ValueError("mean/std, scale and mean_img need a float32 or float16 out")
            if affine:
                raise ValueError("max_random_contrast/illumination need a float32 out")
        else:
            job.lut = _lut(out.dtype, mean, std, scale)
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
