"""``DecodePool``: the Python face of the native decode pool, with the Pillow path beside it."""

from __future__ import annotations

import os
import threading
import warnings
import weakref
from collections.abc import Sequence
from concurrent.futures import Future, ThreadPoolExecutor, wait
from typing import Any

import numpy as np

from .. import dist
from ..augment import KeyedDraw
from ..records.spans import Spans
from ._pillow import Budget, ByteBudget, pil_size
from .batch import DTYPES, DecodeJob
from .jobs import DecodedRecords, ExtentImages, PendingRecords, RecordsJob, crcs_array
from .options import INTERP, LAYOUTS, DecodeOptions
from .status import STATUS_NAMES, UNSUPPORTED_CODE, Status

try:
    from recio import _native
except ImportError:  # extension not built: the Python fallback takes over, visibly
    _native = None

_DCT = {"off": 0, "pow2": 1, "all": 2}
__all__ = [
    "DecodePool",
    "DecodedRecords",
    "ExtentImages",
    "PendingRecords",
    "RecordsJob",
    "default_backend",
    "features",
    "native_available",
    "raise_on_error",
]

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
        "interpolations": sorted(INTERP),
        "dtypes": [str(d) for d in DTYPES],
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


def _default_threads() -> int:
    """This rank's share of the cores it may run on (NOTE [resource plan])."""
    return dist.rank_threads()


class DecodePool:
    """A persistent pool that decodes batches of encoded images into preallocated arrays.

    Args:
        num_threads: decode threads; default: this process's share of the cores it may run
            on, the node's local ranks sharing them, one left to the caller from a share of
            3 on (:func:`recio.dist.rank_threads`).
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
        self.dct_mode = _DCT[dct_scaling]  # the native pool's code of dct_scaling
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

    def set_active_threads(self, k: int) -> int:
        """Let ``k`` of the native pool's threads decode and park the others; returns ``k``.

        Parked threads keep their state and come back at once (NOTE [parked threads] in
        native/pool.c); what a batch decodes to does not depend on the count. The Python
        backend has no native threads to park: it keeps ``num_threads`` and returns that.
        """
        self._check_open()
        if self._native is None:
            return self.num_threads
        return int(self._native.set_active(int(k)))

    def activity(self) -> tuple[int, float, float]:
        """(active threads, seconds the native threads spent decoding, their CPU seconds).

        All threads together, from the pool's start; two readings give a stage's busy time
        (:mod:`recio.pipeline.stage_times`); the CPU seconds leave out the time the OS gave
        other threads meanwhile. ``(num_threads, 0.0, 0.0)`` on the Python backend.
        """
        if self._native is None or os.getpid() != self._pid:
            return self.num_threads, 0.0, 0.0
        return self._native.activity()

    def native_pool(self) -> Any:
        """The native pool, checked as every call checks it (open; in a forked child, its own).

        For the calls of other stages on the same threads (im2rec's encoder,
        :class:`recio.im2rec.JpegEncoder`).
        """
        self._check_open()
        return self._native

    def remember_errors(self, errors: list[str | None] | None, n: int) -> None:
        """What :meth:`last_errors` gives this thread: ``errors`` of its last ``n`` images.

        ``errors``: per image, its text (None where it decoded); None: every image decoded.
        """
        self._last.errors, self._last.n = errors, n

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
        options: DecodeOptions | None = None,
        **option_fields: Any,
    ) -> np.ndarray:
        """Decodes ``buffers`` into ``out[:len(buffers)]`` and returns an int32 status per image.

        Args:
            buffers: encoded images, any contiguous buffer-protocol objects (bytes, memoryview
                slices of an mmap), or :class:`~recio.records.spans.Spans` of one buffer (the
                reader's local batches: one buffer view for the batch); they are read in place.
            out: C-contiguous uint8, float32 or float16 array, (N, H, W, 3) for NHWC or
                (N, 3, H, W) for NCHW, N >= len(buffers).
            crops: integers (N, 4) [x, y, w, h] in source pixels, clamped to the image; None
                for the whole image. Any integer dtype; a value int32 cannot hold (or a
                fractional float) is a ValueError, never wrapped.
            flips: (N,), flip horizontally where true (non-zero).
            draw: instead of crops and flips, each image's window and flip drawn for its
                record (``records``, int64 (N,)) as it is decoded, from the size in its header.
            records: the record number of each image, the key of its draws (with ``draw``).
            options: interpolation, normalisation and layout
                (:class:`~recio.decode.options.DecodeOptions`; default: its defaults).
            **option_fields: DecodeOptions' fields by name (``interpolation=``, ``mean=``,
                ``std=``, ``layout=``, ``channel_order=``, ``scale=``, ``mean_img=``), put
                into ``options``.

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
        options = DecodeOptions.of(options, option_fields)
        job = DecodeJob.build(n, out, crops, flips, draw, records, options)
        status = np.zeros(n, dtype=np.int32)
        errors: list[str | None] | None = None  # None: no image failed
        if self.backend == "native" and n:
            images, spans = _native_images(buffers)
            starts, lengths = spans or (None, None)
            errors = self._native.decode_batch(
                images,
                job.out,
                status,
                self.job_options(job),
                job.crops,
                job.flips,
                starts,
                lengths,
                job.records,
            )
            todo = np.flatnonzero(status == UNSUPPORTED_CODE).tolist() if errors is not None else []
        else:
            todo = list(range(n))
        self.finish_batch(job, buffers, status, errors, todo)
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
        options: DecodeOptions | None = None,
        **option_fields: Any,
    ) -> DecodedRecords:
        """Parse the records at byte ``offsets`` of ``base`` and decode their images, in one call.

        ``base`` is the map of a ``.rec`` (any bytes-like object); each decode thread parses
        its records' frame and IRHeader (NOTE [batch parse] in recio/records/batch.py) and decodes
        the image into ``out``. A record that is not plainly one frame with its header
        inside ``base`` gets status ``Status.RECORD`` and is left for the caller to read the
        exact way (:func:`recio.records.batch.read_batch`); so does every record on the Python
        backend. Other arguments as :meth:`decode_batch`.
        """
        return self.submit_records(
            base,
            offsets,
            out,
            label_width=label_width,
            draw=draw,
            records=records,
            options=DecodeOptions.of(options, option_fields),
        ).result()

    def submit_records(
        self,
        base: Any,
        offsets: np.ndarray,
        out: np.ndarray,
        *,
        label_width: int = 1,
        draw: KeyedDraw | None = None,
        records: np.ndarray | None = None,
        options: DecodeOptions | None = None,
        crcs: np.ndarray | None = None,
        **option_fields: Any,
    ) -> PendingRecords:
        """:meth:`decode_records`, queued: returns at once, the pool decodes meanwhile.

        ``base`` may also be a list of bytes-like objects, one per record (a remote batch's
        extents as fetched): record ``i`` is then at ``offsets[i]`` of ``base[i]``, and its
        image inside it (NOTE [unjoined extents] in recio/pipeline/remote.py).

        The pool's threads work through the queued batches in turn, going from one to the
        next without a Python thread waking up in between (NOTE [job queue] in
        native/pool.c). ``out`` and ``base`` are written / read until the job is finished:
        keep them until :meth:`PendingRecords.result` (which also finishes what the native
        pool leaves: Pillow's formats, the failed slots zeroed). Arguments are checked here,
        before anything is queued.

        ``crcs`` (uint32, one per offset): each record the native pool parses gets its
        frames' CRC32C there, the checksum sidecar's, taken in the pass that gives the
        JPEG's whole-stream key (NOTE [one pass per record] in native/bind_pool.c); the
        records left to the exact parse (status ``Status.RECORD``, every record on the
        Python backend) are left as they were, for the caller to check.
        """
        self._check_open()
        offsets = np.ascontiguousarray(offsets, dtype=np.int64)
        n = len(offsets)
        options = DecodeOptions.of(options, option_fields)
        job = DecodeJob.build(n, out, None, None, draw, records, options)
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
                base,
                offsets,
                labels,
                ids,
                starts,
                lengths,
                job.out,
                status,
                self.job_options(job),
                job.crops,
                job.flips,
                job.records,
                crcs_array(crcs, n),
            )
        return PendingRecords(self, job, base, status, labels, ids, starts, lengths, handle)

    def records_job(
        self,
        out_shape: tuple[int, ...],
        dtype: Any,
        *,
        label_width: int = 1,
        draw: KeyedDraw | None = None,
        options: DecodeOptions | None = None,
        **option_fields: Any,
    ) -> RecordsJob:
        """:meth:`submit_records` for many batches into outputs of one image shape and dtype.

        Everything the batches share (the checked options, the lookup table, the draw's
        native parameters) is made here once, so that each :meth:`RecordsJob.submit` does
        little more than allocate its batch's small arrays and queue it (native backend;
        the Python one takes :meth:`submit_records`' path). ``out_shape``: any batch size.
        """
        probe = np.empty((0, *tuple(out_shape)[1:]), dtype=dtype)
        records = None if draw is None else np.zeros(0, dtype=np.int64)
        options = DecodeOptions.of(options, option_fields)
        job = DecodeJob.build(0, probe, None, None, draw, records, options)
        width = int(label_width)
        if width < 1:
            raise ValueError(f"label_width must be at least 1, not {label_width}")
        return RecordsJob(self, job, width, options, probe.shape[1:], probe.dtype)

    def job_options(self, job: DecodeJob) -> Any:
        """The native pool's ``JobOptions`` of ``job``: every option by name, checked once.

        Made once per :class:`RecordsJob`, for all its batches (native backend).
        """
        return _native.JobOptions(
            out_h=job.height,
            out_w=job.width,
            layout=LAYOUTS[job.layout],
            itemsize=job.out.itemsize,
            interp=INTERP[job.interpolation],
            bgr=int(job.bgr),
            dct_mode=self.dct_mode,
            roi=self._roi,
            max_pixels=self.max_pixels,
            lut=job.lut,
            lut_line=job.lut_line,
            draw=None if job.draw is None else job.draw.native(),
            gain=job.gain,
            mean_img=job.mean_img,
        )

    def finish_batch(
        self, job: DecodeJob, buffers: Any, status: np.ndarray, errors, todo: list
    ) -> None:
        """Finish a batch: the ``todo`` images with Pillow, the failed slots zeroed.

        The errors are kept for :meth:`last_errors`. ``errors``: the native pool's text per
        image, None where it says no image failed.
        """
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
        self.remember_errors(errors, len(status))

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
