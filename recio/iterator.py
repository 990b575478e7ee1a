"""ImageRecordIter: batches of decoded, augmented images, ready before the trainer asks.

    reader thread ──read_q──▶ decode thread (native pool, GIL released) ──ready_q──▶ __next__

The reader fetches the raw bytes of upcoming batches (zero-copy slices of an
mmap for local files, coalesced ranged reads for remote ones) and parses the
record headers; the decode thread draws crops and flips and has the native
pool write pixels straight into a preallocated batch array. Both queues are
bounded, so memory stays at about ``prefetch_buffer + 1`` batches.

Threads belong to a ``_Pipeline`` that the iterator owns; they never refer to
the iterator itself, so an iterator dropped without ``close()`` is collected
and its finalizer stops them. Errors in either thread travel through the
queue and are raised by ``__next__`` with their origin.
"""

from __future__ import annotations

import contextlib
import logging
import queue
import sys
import threading
import weakref
from collections.abc import Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from . import storage
from .augment import batch_rng, draw
from .decode import DecodePool
from .errors import DecodeError
from .params import PlannedIterator, read_plan, unpack_batch
from .prefetch import Lookahead, Prefetcher
from .trace import Tracer, maybe_span

log = logging.getLogger("recio")

_POLL = 0.1  # seconds between checks of the stop flag while blocked on a queue


@dataclass
class Batch:
    """One batch: ``data`` (N×C×H×W or N×H×W×C), ``label`` (float32, N or N×label_width),
    ``index`` (record ids from the headers), and ``pad`` (how many trailing samples are padding).
    """

    data: np.ndarray
    label: np.ndarray
    index: np.ndarray
    pad: int
    epoch: int = 0
    step: int = 0


@dataclass
class IterStats:
    """What the iterator has met: images decoded, and bad ones by policy."""

    decoded: int = 0
    skipped: int = 0  # corrupt images replaced by the next valid one (on_error="skip")
    replaced: int = 0  # corrupt images zero-filled in place (on_error="replace")
    bad_records: dict[int, str] = field(default_factory=dict)  # record id -> error


class _Stop(Exception):
    pass


class ImageRecordIter(PlannedIterator):
    """Iterate over a RecordIO image dataset in decoded, augmented batches.

    MXNet's ``mx.io.ImageRecordIter`` parameter names are accepted (so ported
    code keeps its arguments), plus keyword-only modern ones:

    ``last_batch`` ("pad" | "discard" | "rollover"; default from ``round_batch``),
    ``on_error`` ("skip" | "raise" | "replace"), ``kv`` (any object with ``.rank``
    and ``.num_workers``), ``storage_options`` (fsspec), ``shuffle_mode``
    ("global" | "block"), ``interpolation``, ``channel_order``, ``tracer`` (a
    ``recio.trace.Tracer`` that records read / decode / wait spans per thread).

    Iterating yields one epoch; iterating again (or ``reset()``) starts the next.
    ``state_dict()``/``load_state_dict()`` resume mid-epoch exactly: same record
    ids, same augmentation draws.
    """

    def __init__(
        self,
        path_imgrec: str,
        data_shape: Sequence[int],
        batch_size: int,
        path_imgidx: str | None = None,
        shuffle: bool = False,
        seed: int = 0,
        rand_crop: bool = False,
        random_resized_crop: bool = False,
        min_random_area: float = 0.08,
        max_random_area: float = 1.0,
        min_aspect_ratio: float = 3 / 4,
        max_aspect_ratio: float = 4 / 3,
        rand_mirror: bool = False,
        resize: int = -1,
        mean_r: float = 0.0,
        mean_g: float = 0.0,
        mean_b: float = 0.0,
        std_r: float = 1.0,
        std_g: float = 1.0,
        std_b: float = 1.0,
        dtype: str = "float32",
        layout: str = "NCHW",
        label_width: int = 1,
        preprocess_threads: int | None = None,
        prefetch_buffer: int = 4,
        part_index: int | None = None,
        num_parts: int | None = None,
        round_batch: bool = True,
        *,
        last_batch: str | None = None,
        on_error: str = "skip",
        kv: Any = None,
        storage_options: dict[str, Any] | None = None,
        shuffle_mode: str = "global",
        interpolation: str = "bilinear",
        channel_order: str = "RGB",
        tracer: Tracer | None = None,
        **unsupported: Any,
    ) -> None:
        if unsupported:
            raise TypeError(f"ImageRecordIter got unsupported arguments: {sorted(unsupported)}")
        if prefetch_buffer < 1:
            raise ValueError(f"prefetch_buffer must be at least 1, not {prefetch_buffer}")
        plan = read_plan(
            path_imgrec, data_shape, batch_size, path_imgidx=path_imgidx, shuffle=shuffle,
            seed=seed, rand_crop=rand_crop, random_resized_crop=random_resized_crop,
            min_random_area=min_random_area, max_random_area=max_random_area,
            min_aspect_ratio=min_aspect_ratio, max_aspect_ratio=max_aspect_ratio,
            rand_mirror=rand_mirror, resize=resize, mean=(mean_r, mean_g, mean_b),
            std=(std_r, std_g, std_b), dtype=dtype, layout=layout, label_width=label_width,
            part_index=part_index, num_parts=num_parts, round_batch=round_batch,
            last_batch=last_batch, on_error=on_error, kv=kv, storage_options=storage_options,
            shuffle_mode=shuffle_mode,
        )  # fmt: skip
        self.records, self.sampler, self.crop = plan.records, plan.sampler, plan.crop
        self.batch_size = batch_size
        self.data_shape = plan.data_shape
        self.dtype = np.dtype(dtype)
        self.layout = layout
        self.label_width = label_width
        self.prefetch_buffer = prefetch_buffer
        self.on_error = on_error
        self.seed = seed
        self.part_index, self.num_parts = plan.part_index, plan.num_parts
        self.interpolation = interpolation
        self.channel_order = channel_order
        self.mean, self.std = plan.mean, plan.std
        self.pool = DecodePool(preprocess_threads)
        self.stats = IterStats()
        self.tracer = tracer
        # Image sizes never change: cache them so only the first epoch reads headers.
        self._sizes = np.full((len(self.records), 2), -1, dtype=np.int32)
        self._pipeline: _Pipeline | None = None
        self._lookahead = Lookahead()  # remote sources: the next epoch's first fetches
        self._finalizer = weakref.finalize(self, _shutdown, [None], self.pool, self._lookahead)

    # --- shapes ----------------------------------------------------------------------

    @property
    def batch_shape(self) -> tuple[int, ...]:
        c, h, w = self.data_shape
        n = self.batch_size
        return (n, c, h, w) if self.layout == "NCHW" else (n, h, w, c)

    @property
    def provide_data(self) -> list[tuple[str, tuple[int, ...]]]:
        """MXNet's description of the data: [("data", shape)]."""
        return [("data", self.batch_shape)]

    @property
    def provide_label(self) -> list[tuple[str, tuple[int, ...]]]:
        shape = (self.batch_size,) if self.label_width == 1 else (self.batch_size, self.label_width)
        return [("softmax_label", shape)]

    # --- iteration ---------------------------------------------------------------------

    def __iter__(self) -> ImageRecordIter:
        if self._epoch_done:
            self._advance_epoch()
        return self

    def __next__(self) -> Batch:
        if self._epoch_done:
            raise StopIteration
        if self._step >= len(self):
            self._epoch_done = True
            self._stop_pipeline()
            raise StopIteration
        if self._pipeline is None:
            self._start_pipeline()
        with maybe_span(self.tracer, "consumer wait"):
            item = self._pipeline.get()
        if isinstance(item, _Failure):
            self._stop_pipeline()
            raise item.error
        batch, stats = item
        self._merge_stats(stats)
        self._step += 1
        return batch

    next = __next__  # MXNet's DataIter spelling

    def reset(self) -> None:
        """Start the next epoch (MXNet's reset: reshuffles when shuffle is on)."""
        if self._step > 0 or self._epoch_done:
            self._advance_epoch()

    def _advance_epoch(self) -> None:
        self._stop_pipeline()
        self._epoch += 1
        self._step = 0
        self._epoch_done = False

    # --- threads -----------------------------------------------------------------------

    def _start_pipeline(self) -> None:
        self._pipeline = _Pipeline(self, self._epoch, self._step)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _shutdown, [self._pipeline], self.pool, self._lookahead
        )

    def _stop_pipeline(self) -> None:
        if self._pipeline is not None:
            self._pipeline.stop()
            self._pipeline = None

    _restart = _stop_pipeline

    def _merge_stats(self, stats: IterStats) -> None:
        self.stats.decoded += stats.decoded
        self.stats.skipped += stats.skipped
        self.stats.replaced += stats.replaced
        for rid, error in stats.bad_records.items():
            if rid not in self.stats.bad_records:
                log.warning(
                    "recio: bad image, record id %d of %s: %s", rid, self.records.url, error
                )
            self.stats.bad_records[rid] = error

    def close(self) -> None:
        """Stop the threads and release the decoder and the file."""
        self._stop_pipeline()
        self._finalizer()  # also drops the next epoch's lookahead fetches
        self.records.close()


def _shutdown(pipeline_box: list, pool: DecodePool, lookahead: Lookahead) -> None:
    # A finalizer made after the pool's runs before it at exit: no thread is
    # left inside a decode call when the pool shuts down.
    if pipeline_box[0] is not None:
        pipeline_box[0].stop()
    lookahead.close()
    pool.close()


@dataclass
class _Failure:
    error: BaseException


@dataclass
class _RawBatch:
    epoch: int
    step: int
    positions: np.ndarray
    pad: int
    images: list  # encoded image bytes (memoryviews for local files)
    labels: np.ndarray
    ids: np.ndarray
    sizes: np.ndarray


class _Pipeline:
    """The reader and decode threads of one run from (epoch, step) on."""

    def __init__(self, it: ImageRecordIter, epoch: int, step: int) -> None:
        # Copy what the threads need; never keep the iterator itself.
        self.records = it.records
        self.sampler = it.sampler
        self.pool = it.pool
        self.crop = it.crop
        self.sizes = it._sizes
        self.label_width = it.label_width
        self.batch_shape = it.batch_shape
        self.dtype = it.dtype
        self.layout = it.layout
        self.on_error = it.on_error
        self.seed = it.seed
        self.part = it.part_index
        self.tracer = it.tracer
        self.lookahead = it._lookahead
        self.decode_kwargs = {
            "interpolation": it.interpolation,
            "mean": it.mean,
            "std": it.std,
            "layout": it.layout,
            "channel_order": it.channel_order,
        }
        self.epoch, self.first_step = epoch, step
        self.end_step = self.sampler.steps_in_epoch(epoch)
        self.stopping = threading.Event()
        self.read_q: queue.Queue = queue.Queue(maxsize=max(1, it.prefetch_buffer - 1))
        self.ready_q: queue.Queue = queue.Queue(maxsize=max(1, it.prefetch_buffer - 1))
        self.slots: list[np.ndarray] = []
        self.threads = [
            threading.Thread(
                target=self._guard, args=(self._read, self.read_q), name="recio-reader", daemon=True
            ),
            threading.Thread(
                target=self._guard,
                args=(self._decode, self.ready_q),
                name="recio-decoder",
                daemon=True,
            ),
        ]
        for t in self.threads:
            t.start()

    # consumer side

    def get(self):
        while True:
            try:
                return self.ready_q.get(timeout=_POLL)
            except queue.Empty:
                if not any(t.is_alive() for t in self.threads) and self.ready_q.empty():
                    return _Failure(RuntimeError("recio pipeline threads ended unexpectedly"))

    def stop(self) -> None:
        self.stopping.set()
        for q in (self.read_q, self.ready_q):
            _drain(q)
        for t in self.threads:
            if t is not threading.current_thread():
                t.join()

    # producer side

    def _put(self, q: queue.Queue, item) -> None:
        while True:
            if self.stopping.is_set():
                raise _Stop
            try:
                q.put(item, timeout=_POLL)
                return
            except queue.Full:
                continue

    def _get(self, q: queue.Queue):
        while True:
            if self.stopping.is_set():
                raise _Stop
            try:
                return q.get(timeout=_POLL)
            except queue.Empty:
                continue

    def _guard(self, work, out_q: queue.Queue) -> None:
        """Run a thread's loop; send any error on to the consumer, saying where it happened."""
        try:
            work()
        except _Stop:
            pass
        except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer
            if hasattr(exc, "add_note"):
                exc.add_note(f"(raised in recio's {threading.current_thread().name} thread)")
            with contextlib.suppress(_Stop):
                self._put(out_q, _Failure(exc))

    def _read(self) -> None:
        plans = self._plans(self.epoch, self.first_step)
        if isinstance(self.records.source, storage.MappedSource):
            # Local: zero-copy slices of the mmap, nothing to fetch ahead.
            fetched = ((p.positions, self.records.read_many(p.positions)) for p in plans)
            self._read_batches(plans, fetched)
            return
        # Remote: several batches' byte ranges coalesced and fetched concurrently, ahead;
        # with block shuffle, a whole window at a time (one window fetched while one is used).
        key = (self.epoch, self.first_step)
        prefetcher = self.lookahead.take(key) or self._prefetcher(plans, self.first_step)
        try:
            self._read_batches(plans, prefetcher)
        finally:
            prefetcher.close()
        # Every read of this epoch is issued: start the next epoch's first fetches while the
        # decoder finishes this one (taken if the consumer goes on to it, else closed).
        nxt = self._plans(self.epoch + 1, 0)
        if nxt:
            ahead = self._prefetcher(nxt, 0)
            ahead.start()
            self.lookahead.put((self.epoch + 1, 0), ahead)

    def _plans(self, epoch: int, first_step: int) -> list:
        steps = range(first_step, self.sampler.steps_in_epoch(epoch))
        return [self.sampler.plan(epoch, s) for s in steps]

    def _prefetcher(self, plans, first_step: int) -> Prefetcher:
        group = self.sampler.fetch_group()
        return Prefetcher(
            self.records,
            [p.positions for p in plans],
            depth=2 if group is None else 1,
            group_batches=group,
            first_batch=first_step,
        )

    def _read_batches(self, plans, fetched) -> None:
        for plan, (_, payloads) in zip(plans, _traced(self.tracer, "read", fetched), strict=False):
            step = plan.step
            labels, ids, starts = unpack_batch(
                self.records, plan.positions, payloads, self.label_width
            )
            images = [payload[start:] for payload, start in zip(payloads, starts, strict=True)]
            sizes = self.sizes[plan.positions]
            unknown = np.flatnonzero(sizes[:, 0] < 0)
            if len(unknown):
                with maybe_span(self.tracer, "read image headers"):
                    found = self.pool.image_sizes([images[j] for j in unknown])
                sizes[unknown] = found
                self.sizes[plan.positions[unknown]] = found
            raw = _RawBatch(self.epoch, step, plan.positions, plan.pad, images, labels, ids, sizes)
            with maybe_span(self.tracer, "queue wait (read queue full)"):
                self._put(self.read_q, raw)

    def _decode(self) -> None:
        for _ in range(self.first_step, self.end_step):
            with maybe_span(self.tracer, "queue wait (for reader)"):
                raw = self._get(self.read_q)
            if isinstance(raw, _Failure):
                self._put(self.ready_q, raw)
                return
            out = self._free_slot()
            rng = batch_rng(self.seed, raw.epoch, raw.step, self.part)
            windows, flips = draw(self.crop, np.maximum(raw.sizes, 1), rng)
            with maybe_span(self.tracer, "decode+augment", step=raw.step):
                status = self.pool.decode_batch(
                    raw.images, out, crops=windows, flips=flips, **self.decode_kwargs
                )
            stats = IterStats(decoded=int(np.count_nonzero(status == 0)))
            labels, ids = raw.labels, raw.ids
            if status.any():
                labels, ids = self._handle_errors(raw, out, status, stats)
            label = labels[:, 0] if self.label_width == 1 else labels
            batch = Batch(out, label, ids, raw.pad, raw.epoch, raw.step)
            with maybe_span(self.tracer, "queue wait (prefetch queue full)"):
                self._put(self.ready_q, (batch, stats))

    def _handle_errors(self, raw: _RawBatch, out: np.ndarray, status: np.ndarray, stats):
        errors = self.pool.last_errors()
        bad = np.flatnonzero(status)
        real_bad = int(np.count_nonzero(bad < len(status) - raw.pad))  # padding repeats records
        for j in bad:
            stats.bad_records[int(raw.ids[j])] = errors[j] or f"decode status {status[j]}"
        if self.on_error == "raise":
            j = int(bad[0])
            position = int(raw.positions[j])
            raise DecodeError(
                f"cannot decode record id {int(raw.ids[j])} (record {position}, at byte "
                f"{int(self.records.offsets[position])} of {self.records.url}): {errors[j]}",
                index=j,
                status=int(status[j]),
            )
        if self.on_error == "replace":
            out[bad] = 0
            stats.replaced += real_bad
            return raw.labels, raw.ids
        good = np.flatnonzero(status == 0)
        if len(good) == 0:
            raise DecodeError(
                f"no image of batch {raw.step} (epoch {raw.epoch}) of {self.records.url} "
                f"could be decoded; first error: {errors[bad[0]]}"
            )
        # Each bad slot takes the next valid image after it in the batch (wrapping),
        # so the batch stays full and the choice depends only on the data.
        labels, ids = raw.labels.copy(), raw.ids.copy()
        for j in bad:
            k = good[np.searchsorted(good, j) % len(good)]
            out[j] = out[k]
            labels[j], ids[j] = labels[k], ids[k]
        stats.skipped += real_bad
        return labels, ids

    def _free_slot(self) -> np.ndarray:
        """A batch array nobody outside the pipeline holds any more, else a new one.

        Reusing arrays saves allocation and page faults; an array the consumer
        still references (a kept batch, a torch tensor made from it) is never
        overwritten.
        """
        for i, slot in enumerate(self.slots):
            # references: the list, `slot`, and getrefcount's argument
            if sys.getrefcount(slot) <= 3:
                self.slots.append(self.slots.pop(i))
                return slot
        slot = np.empty(self.batch_shape, dtype=self.dtype)
        self.slots.append(slot)
        if len(self.slots) > self.ready_q.maxsize + 3:
            self.slots.pop(0)  # held by the consumer: forget it, it is theirs now
        return slot


def _traced(tracer: Tracer | None, name: str, items):
    """Yield from ``items``, recording the time each one took to arrive as a span."""
    items = iter(items)
    while True:
        with maybe_span(tracer, name):
            item = next(items, None)
        if item is None:
            return
        yield item


def _drain(q: queue.Queue) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return
