"""ImageRecordIter: batches of decoded, augmented images, ready before the trainer asks.

    local:  __next__ ──submit──▶ native pool's queue (batches decoded back to back) ──▶ Batch
    remote: reader thread ──read_q──▶ 2 decode threads (native pool) ──ready_q──▶ __next__

A local file's batches are queued on the native pool by the consumer itself, a few ahead
(NOTE [queued batches]): the pool reads the records from the file's map, draws each image's
crop and flip (keyed per record, :class:`~recio.augment.KeyedDraw`) and writes the pixels
straight into a batch buffer (:class:`BatchBuffers`), in one native call per batch
(:mod:`recio.pipeline.read_decode`), with no Python thread in between. For a remote file a reader
thread fetches the upcoming batches' bytes ahead (coalesced ranged reads) and two decode
threads take the batches in turn (NOTE [two decode threads]), each batch one native call
over its records as fetched (NOTE [remote batches on the pool]). Either way
``prefetch_buffer`` batches are decoded ahead (at least three), and memory stays at about
``prefetch_buffer + 1`` batches.

Threads belong to a ``_Pipeline`` (a local file's queued batches to a ``_QueuedPipeline``)
that the iterator owns; they never refer to the iterator itself, so an iterator dropped
without ``close()`` is collected and its finalizer stops them. Errors (in a thread, or in a
batch's native call) travel in turn with the batches and are raised by ``__next__`` with
their origin. What the iterator shares with the DALI stage (batches, stats, position,
``on_error``) is in :mod:`.positioned`; its arguments are checked in :mod:`.config`.
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import queue
import threading
import time
import weakref
from dataclasses import dataclass
from typing import Any

import numpy as np

from ..augment import KeyedDraw
from ..decode import DecodeOptions, DecodePool, Status, default_backend
from ..errors import RecordIOError
from ..records.checksum import MismatchedPayload
from ..records.file import RecordFile
from ..storage import FetchOptions, Lookahead, Prefetcher, clock
from .autotune import Governor, ThreadTuner
from .batch_buffers import BatchBuffers
from .config import IterConfig
from .mxnet_inputs import ImageList, load_mean_image
from .plan import ResourcePlan, log_once, make_plan
from .positioned import Batch, IterStats, PositionedIterator
from .read_decode import BatchReader, DecodedBatch, PendingBatch, submit_read_and_decode
from .refill import Refill, decoded
from .trace import Tracer, maybe_span

__all__ = ["Batch", "BatchBuffers", "ImageRecordIter", "IterStats"]

_POLL = 0.1  # seconds between checks of the stop flag while blocked on a queue
_DEFAULT_PREFETCH = 4


class ImageRecordIter(PositionedIterator):
    """Iterate over a RecordIO image dataset in decoded, augmented batches.

    Takes MXNet's ``mx.io.ImageRecordIter`` keywords (so ported code keeps its arguments):
    ``path_imgrec``, ``data_shape``, ``batch_size``, ``path_imgidx``, ``shuffle``, ``seed``,
    ``rand_crop``, ``random_resized_crop``, ``min_random_area``/``max_random_area``,
    ``min_aspect_ratio``/``max_aspect_ratio``, ``rand_mirror``, ``resize``, ``mean_r/g/b``,
    ``std_r/g/b``, ``dtype``, ``layout``, ``label_width``, ``preprocess_threads``,
    ``prefetch_buffer``, ``part_index``/``num_parts``, ``round_batch``, the colour
    augmentation (``random_h/s/l``, ``brightness``, ``contrast``, ``saturation``,
    ``pca_noise``, ``max_random_contrast``, ``max_random_illumination``: each image's own
    draws, keyed like its crop), MXNet's geometry (``max_rotate_angle``, ``rotate``,
    ``max_shear_ratio``, ``max/min_random_scale``, ``max/min_img_size``, ``pad``,
    ``fill_value``, ``max/min_crop_size``, ``inter_method``: one affine warp per image,
    :mod:`recio.augment.geometry`), ``mirror``, ``scale``, ``mean_img``, ``path_imglist``,
    ``seed_aug``, ``shuffle_chunk_size``/``shuffle_chunk_seed``, and every other MXNet
    1.9.1 keyword (docs/iterator.md, "MXNet's parameters"); and recio's own:
    ``last_batch`` ("pad" | "discard" | "rollover"; default from ``round_batch``),
    ``on_error`` ("skip" | "raise" | "replace"), ``kv`` (any object with ``.rank`` and
    ``.num_workers``), ``storage_options`` (fsspec), ``shuffle_mode`` ("global" | "block"),
    ``block_parts``, ``interpolation``, ``channel_order``, ``cache_dir`` and ``cache_limit``
    (remote blocks kept on local disk, at most that many bytes: NOTE [block cache]),
    ``fetch`` (:class:`~recio.storage.FetchOptions`), ``memory_budget`` (bytes the batches in
    flight and the read-ahead may take; NOTE [resource plan]), ``verify_checksums`` (True | False |
    "auto": check records against their checksum sidecar, by default wherever one exists; a record
    that does not match is a bad image for ``on_error``, counted in
    ``stats.checksum_mismatches``). ``path_imgrec`` may also be a
    :class:`~recio.sampling.mixing.Mixture` (or a list of ``Source`` objects): several
    datasets mixed per epoch by weight, repeat or count. They are checked once into an
    :class:`~recio.pipeline.config.IterConfig`; ``config=`` (or the groups ``crop=``,
    ``normalize=``, ``sharding=``, ``storage=``) may be given instead.

    Args:
        tracer: a :class:`recio.pipeline.trace.Tracer` that records read / decode / wait spans.

    Iterating yields one epoch; iterating again (or ``reset()``) starts the next.
    ``state_dict()``/``load_state_dict()`` resume mid-epoch, also on another world size
    (NOTE [resume state] in :mod:`recio.pipeline.positioned`); on the same one exactly: same record
    ids, same augmentation draws. ``stats`` counts decoded and bad images, and the seconds
    of each stage (``stats.stages``, NOTE [stage times]). ``preprocess_threads`` defaults to
    ``"auto"``: this rank's share of the cores, tuned while it runs (NOTE [thread tuner]);
    ``plan`` says what was chosen and why (NOTE [resource plan]).
    """

    def __init__(
        self,
        path_imgrec: str | None = None,
        data_shape: tuple[int, int, int] | None = None,
        batch_size: int | None = None,
        *,
        config: IterConfig | None = None,
        tracer: Tracer | None = None,
        **keywords: Any,
    ) -> None:
        config = IterConfig.given(config, path_imgrec, data_shape, batch_size, **keywords)
        # this rank's threads, prefetch and read-ahead (NOTE [resource plan])
        self.plan: ResourcePlan = make_plan(
            int(np.prod(config.batch_shape)) * np.dtype(config.normalize.dtype).itemsize,
            threads=config.preprocess_threads,
            prefetch=config.prefetch_buffer,
            memory_budget=config.memory_budget,
            fetch=config.storage.fetch,
        )
        self._open(_planned(config, self.plan))
        log_once(self.plan)
        config = self.config
        self.crop = config.crop
        norm = config.normalize
        self._mean_img = None
        if norm.mean_img is not None:  # (3, H, W) RGB: in the output's channel order
            self._mean_img = load_mean_image(norm.mean_img, config.data_shape)
            if norm.channel_order == "BGR":
                self._mean_img = np.ascontiguousarray(self._mean_img[::-1])
        self._imglist = None
        if config.path_imglist is not None:
            self._imglist = ImageList(config.path_imglist, config.label_width)
        # Tuned: the pool holds twice the plan's share, parked past it unless other jobs hold
        # the cores (NOTE [thread tuner]); a parked thread costs nothing.
        tuned = self.plan.tuned and default_backend() == "native" and self.plan.max_threads > 1
        burst = 2 * self.plan.max_threads if tuned else self.plan.max_threads
        self.pool = DecodePool(burst)
        self.pool.set_active_threads(self.plan.threads)
        tuner = None
        if tuned and self.pool.backend == "native":
            tuner = ThreadTuner(self.plan.max_threads, self.plan.threads, burst=burst)
        self._governor = Governor(self.pool, self.stats.stages, tuner)
        self.tracer = tracer
        # Batch arrays outlive each epoch's pipeline: two in decode, the queued ones, and the
        # one the consumer holds are in flight at once.
        self.buffers = BatchBuffers(
            config.batch_shape, np.dtype(config.normalize.dtype), _ready_depth(config) + 4
        )
        self._pipeline: _Pipeline | _QueuedPipeline | None = None
        self._lookahead = Lookahead()  # remote sources: the next epoch's first fetches
        self._finalizer = weakref.finalize(self, _shutdown, [None], self.pool, self._lookahead)

    # --- PositionedIterator ------------------------------------------------------------

    def _produce(self) -> Batch:
        if self._pipeline is None:
            self._start_pipeline()
        entered = time.perf_counter()
        if self.tracer is None:  # a context manager less per batch: small images feel it
            item = self._pipeline.get()
        else:
            with self.tracer.span("consumer wait"):
                item = self._pipeline.get()
        if isinstance(item, _Failure):
            self._stop_pipeline()
            raise item.error
        batch, status, reasons, record_ids = item
        # NOTE [stage times], NOTE [thread tuner]
        self._governor.batch(
            entered, time.perf_counter(), len(record_ids) - batch.pad, self._pipeline
        )
        if status is None:  # every image decoded (a lean batch)
            self.stats.decoded += len(record_ids) - batch.pad
            return batch
        self.stats.count_batch(
            status,
            record_ids,
            reasons,
            pad=batch.pad,
            on_error=self.config.on_error,
            url=self.records.url,
        )
        return batch

    def _end_epoch(self) -> None:
        self._stop_pipeline()

    def _start_next_epoch(self) -> None:
        self._stop_pipeline()

    def _restart(self) -> None:
        self._stop_pipeline()

    def _sampler_changed(self) -> None:
        self._lookahead.close()  # fetched for the old sampler's plans

    # --- threads -----------------------------------------------------------------------

    def _start_pipeline(self) -> None:
        kind = _QueuedPipeline if self.records.is_local else _Pipeline
        self._pipeline = kind(self, self._epoch, self._step)
        self._finalizer.detach()
        self._finalizer = weakref.finalize(
            self, _shutdown, [self._pipeline], self.pool, self._lookahead
        )

    def _stop_pipeline(self) -> None:
        if getattr(self, "_governor", None) is not None:
            self._governor.pause()
        if self._pipeline is not None:
            self._pipeline.stop()
            self._pipeline = None

    def close(self) -> None:
        """Stop the threads and release the decoder and the file (from any thread)."""
        self._closed = True
        self._stop_pipeline()
        self._finalizer()  # also drops the next epoch's lookahead fetches
        self.records.close()


def _planned(config: IterConfig, plan: ResourcePlan) -> IterConfig:
    """``config`` with the plan's prefetch and read-ahead where the budget lowered them."""
    changes: dict[str, Any] = {}
    if config.prefetch_buffer is None and plan.depth != _DEFAULT_PREFETCH:
        changes["prefetch_buffer"] = plan.depth
    if config.storage.fetch is None and plan.read_ahead != FetchOptions().read_ahead:
        fetch = FetchOptions(read_ahead=plan.read_ahead)
        changes["storage"] = dataclasses.replace(config.storage, fetch=fetch)
    return dataclasses.replace(config, **changes) if changes else config


def _queue_depth(config: IterConfig) -> int:
    """Read batches (encoded images, headers parsed) the read queue holds for the decoders."""
    return max(1, (config.prefetch_buffer or _DEFAULT_PREFETCH) - 1)


def _ready_depth(config: IterConfig) -> int:
    """Decoded batches the ready queue holds.

    With the two being decoded, ``prefetch_buffer`` batches ahead (at least three).
    """
    return max(1, (config.prefetch_buffer or _DEFAULT_PREFETCH) - 2)


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
    payloads: list | None  # the records' bytes, fetched ahead (remote); None: read from the map
    epochs: np.ndarray | None  # each slot's epoch (rollover), for its draws; None: ``epoch``
    keys: np.ndarray | None = None  # each slot's draw key (a mixture's copies); None: positions


class _Stop(Exception):
    pass


class _Run:
    """What both pipelines need of the iterator, copied (never the iterator itself)."""

    def __init__(self, it: ImageRecordIter, epoch: int, step: int) -> None:
        config = it.config
        self.records = it.records
        self.sampler = it.sampler
        self.pool = it.pool
        self.policy = it.policy
        geometry = config.geometry if config.geometry.enabled else None
        self.draw = KeyedDraw(config.crop, config.draw_seed, epoch, config.colour, geometry)
        self.imglist = it._imglist
        self.label_width = config.label_width
        # With an image list the records' own labels are not used: read as one wide
        self.read_label_width = 1 if it._imglist is not None else config.label_width
        self.label_maps = it.mix.label_maps if it.mix is not None else ()
        self.raise_bad_headers = config.on_error == "raise"
        self.tracer = it.tracer
        self.describe = it.records.describe
        norm = config.normalize
        self.decode_options = DecodeOptions(
            interpolation=config.interpolation,
            mean=norm.channel_mean_std[0] if norm.enabled else None,
            std=norm.channel_mean_std[1] if norm.enabled else None,
            layout=norm.layout,
            channel_order=norm.channel_order,
            scale=norm.scale,
            mean_img=it._mean_img,
        )
        self.epoch, self.first_step = epoch, step
        self.end_step = self.sampler.steps_in_epoch(epoch)
        self.stopping = threading.Event()
        self.buffers = it.buffers
        self.refill = Refill(self.sampler)  # NOTE [refill]
        self._take = decoded(
            self.records, self.pool, config.batch_shape[1:], it.buffers.dtype,
            label_width=self.read_label_width, draw=self.draw, options=self.decode_options,
            label_maps=self.label_maps,
        )  # fmt: skip

    def _raw(self, plan, payloads) -> _RawBatch:
        epochs = self.sampler.slot_epochs(plan)
        return _RawBatch(
            self.epoch, plan.step, plan.positions, plan.pad, payloads, epochs, plan.keys
        )

    def _submit(self, raw: _RawBatch, out: np.ndarray) -> PendingBatch:
        return submit_read_and_decode(
            self.records, raw.positions, self.pool, out, label_width=self.read_label_width,
            draw=self.draw, options=self.decode_options, payloads=raw.payloads,
            raise_bad_headers=self.raise_bad_headers, epochs=raw.epochs, keys=raw.keys,
            label_maps=self.label_maps,
        )  # fmt: skip

    def _batch(self, raw: _RawBatch, out: np.ndarray, got) -> tuple:
        """The consumer's item of a decoded batch: the Batch, and what the stats count."""
        status, labels, ids, reasons = got.status, got.labels, got.ids, got.reasons or ()
        if got.reasons is not None:
            labels, ids = self._bad_images(raw, got, out)
        if self.imglist is not None:  # MXNet's path_imglist: the list's labels, by header id
            labels = self.imglist.lookup(ids)
        label = labels[:, 0] if self.label_width == 1 else labels
        batch = Batch(out, label, ids, raw.pad, raw.epoch, raw.step)
        return batch, status, reasons, got.ids

    def _bad_images(self, raw: _RawBatch, got, out: np.ndarray):
        """Apply ``on_error`` to a batch with bad slots (the decoder zeroed them)."""
        fill = self.policy.fill_from(
            got.status,
            got.reasons,
            lambda j: self.describe(int(raw.positions[j]), int(got.ids[j])),
        )
        if fill is None:  # replace: blank images, their own labels
            return got.labels, got.ids
        if fill[0] < 0:  # skip, and no image of the batch is good (NOTE [refill])
            return self._refilled(raw, got, out)
        bad = np.flatnonzero(got.status)
        out[bad] = out[fill[bad]]
        return got.labels[fill], got.ids[fill]

    def _refilled(self, raw: _RawBatch, got, out: np.ndarray):
        """A batch with no good image, filled from the good ones that follow it."""
        found = self.refill.find(
            self.sampler.plan(raw.epoch, raw.step),
            self._take,
            got.reasons[int(np.flatnonzero(got.status)[0])],
            f"batch {raw.step} (epoch {raw.epoch}) of {self.records.url}",
        )
        labels, ids = np.empty_like(got.labels), np.empty_like(got.ids)
        for j in range(len(out)):
            out[j], labels[j], ids[j] = found[j % len(found)]
        return labels, ids


class _Pipeline(_Run):
    """A remote file's reader and decode threads, from (epoch, step) on."""

    def __init__(self, it: ImageRecordIter, epoch: int, step: int) -> None:
        super().__init__(it, epoch, step)
        config = it.config
        self.lookahead = it._lookahead
        self.read_q: queue.Queue = queue.Queue(maxsize=_queue_depth(config))
        self.ready_q: queue.Queue = queue.Queue(maxsize=_ready_depth(config))
        # NOTE [two decode threads]: a remote file's decode thread holds the GIL between two
        # of its batches (taking the next one from the reader, the output array, the
        # statuses, the hand-off), and waits for the reader too. With one decode thread the
        # pool idles meanwhile, a tenth of the time on small images. With two, the second
        # one's batch is queued in the pool (NOTE [job queue] in native/pool.c, GIL
        # released) and starts the moment the first one's ends. They take the batches in
        # step order (under _take_lock) and hand them on in that order (_put_in_turn),
        # errors included, so the consumer sees exactly what one thread would give it; one
        # more batch array is in flight. (A local file needs no thread: NOTE [queued
        # batches].)
        self.blocked = self.fetch_wait = 0.0  # NOTE [stage times]
        self._taken = self.first_step  # the next step a decode thread takes from read_q
        self._take_lock = threading.Lock()
        self._turn = self.first_step  # the step whose batch goes into ready_q next
        self._turn_cv = threading.Condition()
        # NOTE [remote batches on the pool]: one file, one label, no mapped labels, the
        # native decoder: the prefetcher fetches the records' extents as stored (checked
        # against the sidecar, not parsed in Python), and a decode thread queues each batch
        # on the pool as one native call over them (NOTE [unjoined extents]): the call a
        # local batch makes over its map (frames, headers, crop draws and pixels in C). A
        # batch the native call leaves records of (several frames, a checksum mismatch)
        # goes the exact way, from the same extents.
        self.extents = (
            isinstance(self.records, RecordFile)
            and self.pool.backend == "native"
            and self.read_label_width == 1
            and not self.label_maps
        )
        # the options checked and the draw's parameters made once, not per batch
        self._job = None
        if self.extents:
            self._job = self.pool.records_job(
                config.batch_shape, it.buffers.dtype, draw=self.draw, options=self.decode_options
            )
        self._starts: dict[int, np.ndarray] = {}  # n -> n zeros: a record starts each extent
        work = [(self._read, self.read_q, "recio-reader"),
                (self._decode, self.ready_q, "recio-decoder"),
                (self._decode, self.ready_q, "recio-decoder-2")]  # fmt: skip
        self.threads = [
            threading.Thread(target=self._guard, args=(fn, out_q), name=name, daemon=True)
            for fn, out_q, name in work
        ]
        for t in self.threads:
            t.start()

    # consumer side

    def get(self):
        self.blocked = 0.0  # the consumer's wait for the decoders (NOTE [stage times])
        with contextlib.suppress(queue.Empty):
            return self.ready_q.get_nowait()
        start = time.perf_counter()
        try:
            return self._get_blocking()
        finally:
            self.blocked = time.perf_counter() - start

    def _get_blocking(self):
        while True:
            try:
                return self.ready_q.get(timeout=_POLL)
            except queue.Empty:
                if self.stopping.is_set():  # close() from another thread
                    return _Failure(ValueError("the ImageRecordIter was closed"))
                if not any(t.is_alive() for t in self.threads) and self.ready_q.empty():
                    return _Failure(RuntimeError("recio pipeline threads ended unexpectedly"))

    def ready_share(self) -> float:
        """The share of the ready queue's room that decoded batches fill (NOTE [thread tuner])."""
        return self.ready_q.qsize() / max(1, self.ready_q.maxsize)

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
        """Fetch a remote file's batches ahead and queue them for the decode threads."""
        plans = self._plans(self.epoch, self.first_step)
        nxt = self._plans(self.epoch + 1, 0)
        if self.records.cached:
            # The block cache keeps what is needed soonest (NOTE [block cache]): the rest
            # of this epoch and all of the next are known now.
            self.records.schedule_reads(
                [(clock(self.epoch, p.step), p.positions) for p in plans]
                + [(clock(self.epoch + 1, p.step), p.positions) for p in nxt]
            )
        # Several batches' byte ranges coalesced and fetched concurrently, ahead; with block
        # shuffle, a whole window at a time (one window fetched while one is used).
        key = (self.epoch, self.first_step)
        prefetcher = self.lookahead.take(key) or self._prefetcher(
            plans, self.first_step, self.epoch
        )

        def ahead() -> None:
            # Every fetch of this epoch is issued: the next epoch's first window goes out
            # now, while this epoch's last jobs are fetched and used, so that it is there
            # when the next epoch starts (taken if the consumer goes on to it, else closed).
            if nxt and not self.stopping.is_set():
                first = self._prefetcher(nxt, 0, self.epoch + 1, lead=False)
                first.start()
                self.lookahead.put((self.epoch + 1, 0), first)

        prefetcher.when_issued(ahead)
        try:
            self._read_batches(plans, (payloads for _, payloads in prefetcher))
        finally:
            prefetcher.close()

    def _plans(self, epoch: int, first_step: int) -> list:
        steps = range(first_step, self.sampler.steps_in_epoch(epoch))
        return [self.sampler.plan(epoch, s) for s in steps]

    def _prefetcher(self, plans, first_step: int, epoch: int, lead: bool = True) -> Prefetcher:
        group = self.sampler.fetch_group()
        fetch = self.records.fetch or FetchOptions()
        return Prefetcher(
            (_Extents if self.extents else _MarkMismatches)(self.records),
            [p.positions for p in plans],
            depth=2 if group is None else 1,
            # global shuffle: a job of half the memory bound (NOTE [adaptive fetch])
            group_bytes=fetch.read_ahead // 2 if fetch.adaptive else _GLOBAL_JOB,
            group_batches=group,
            first_batch=first_step,
            epoch=epoch if self.records.cached else None,
            read_ahead=fetch.read_ahead if fetch.adaptive else None,
            lead=lead,
        )

    def _read_batches(self, plans, fetched) -> None:
        """Queue each plan's batch for the decoders (``fetched``: its payloads)."""
        fetched = self._timed(_traced(self.tracer, "read", fetched))
        for plan, payloads in zip(plans, fetched, strict=False):
            raw = self._raw(plan, payloads)
            with maybe_span(self.tracer, "queue wait (read queue full)"):
                self._put(self.read_q, raw)

    def _timed(self, items):
        """Yield from ``items``, adding the time each took to come to ``fetch_wait``."""
        items = iter(items)
        while True:
            start = time.perf_counter()
            try:
                item = next(items)
            except StopIteration:
                return
            finally:
                self.fetch_wait += time.perf_counter() - start  # NOTE [stage times]
            yield item

    def _decode(self) -> None:
        while True:
            with self._take_lock:  # steps are taken in order: step k is read_q's k-th item
                if self._taken >= self.end_step:
                    return
                step = self._taken
                with maybe_span(self.tracer, "queue wait (for reader)"):
                    raw = self._get(self.read_q)
                self._taken += 1
            if isinstance(raw, _Failure):
                self._put_in_turn(step, raw)
                return
            try:
                item = self._decode_one(raw)
            except _Stop:
                raise
            except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer, in turn
                if hasattr(exc, "add_note"):
                    exc.add_note(f"(raised in recio's {threading.current_thread().name} thread)")
                self._put_in_turn(step, _Failure(exc))
                return
            self._put_in_turn(step, item)

    def _decode_one(self, raw: _RawBatch) -> tuple:
        out = self.buffers.take()
        with maybe_span(self.tracer, "decode+augment", step=raw.step):
            got = self._decode_extents(raw, out) if self.extents else None
            if got is None:
                if self.extents:  # the exact way: the payloads parsed from the extents
                    raw = dataclasses.replace(raw, payloads=self._payloads(raw))
                got = self._submit(raw, out).result()
        return self._batch(raw, out, got)

    def _decode_extents(self, raw: _RawBatch, out: np.ndarray) -> DecodedBatch | None:
        """One native call over the batch's extents (NOTE [remote batches on the pool]).

        None where it leaves records to the exact way (then nothing of it is used).
        """
        extents = raw.payloads
        if raw.epochs is not None or MismatchedPayload in map(type, extents):
            return None
        n = len(extents)
        starts = self._starts.get(n)
        if starts is None:  # (two threads may both make one: the same zeros)
            starts = self._starts[n] = np.zeros(n, dtype=np.int64)
        # NOTE [unjoined extents]: the extents go to the pool as they were fetched (views of
        # the requests' buffers, of a block cache's entries), a record at the start of each:
        # joined into one buffer they would be copied once more, a pass over every byte of
        # the batch from memory the CPU's caches no longer hold.
        keys = raw.positions if raw.keys is None else raw.keys
        pending = self._job.submit(extents, starts, out, records=np.asarray(keys, dtype=np.int64))
        got = pending.result()
        if pending.failed and (got.status == _RECORD).any():
            return None
        reasons = self.pool.last_errors() if pending.failed else None
        return DecodedBatch(got.status, got.labels, got.ids, reasons)

    def _payloads(self, raw: _RawBatch) -> list:
        """The records' payloads, parsed from their fetched extents (mismatches as they are).

        A record whose frames are damaged is marked, a bad slot for ``on_error``.
        """
        return [
            e if type(e) is MismatchedPayload else self._framed(int(i), e)
            for i, e in zip(raw.positions.tolist(), raw.payloads, strict=True)
        ]

    def _framed(self, i: int, extent) -> Any:
        try:
            return self.records.framed(i, extent)
        except RecordIOError as exc:
            return MismatchedPayload(self.records.bad_record(i, exc))

    def _put_in_turn(self, step: int, item) -> None:
        """Put the item of ``step`` into ready_q once those of the steps before it are in."""
        with self._turn_cv:
            while self._turn != step:
                if self.stopping.is_set():
                    raise _Stop
                self._turn_cv.wait(_POLL)
        with maybe_span(self.tracer, "queue wait (prefetch queue full)"):
            self._put(self.ready_q, item)
        with self._turn_cv:
            self._turn += 1
            self._turn_cv.notify_all()


class _QueuedPipeline(_Run):
    """A local file's batches, queued on the pool by the consumer itself.

    NOTE [queued batches]: a local file has nothing to fetch ahead, so no Python thread of
    its own: ``get`` (the consumer's ``__next__``) plans and submits the next batches until
    ``depth`` are queued on the native pool (:func:`~recio.pipeline.read_decode.
    submit_read_and_decode`), waits for the oldest one with the GIL released, and finishes
    it (the exact parse of the records the pool leaves, Pillow's formats, ``on_error``).
    The pool's threads go from one queued batch to the next on their own (NOTE [job queue]
    in native/pool.c), so no Python thread has to wake up between two batches, and the only
    Python per batch is the consumer's: no hand-off between threads, no queue. As many
    batches are in flight as in the threaded pipeline (``prefetch_buffer``, at least
    three: those queued and the one being finished). A batch that cannot be submitted (the
    file closed, say) is delivered as a failure in its turn, after the batches before it.
    ``stop`` (from any thread) waits for a running ``get`` to return, then for the pool to
    be done with every queued batch, so
    nothing writes into a batch buffer or reads the file's map once it returns.

    NOTE [lean batches]: on small images the consumer's Python per batch is what one
    process can feed (two pool threads and the consumer share the cores), so the common
    batch (a local file, one epoch's draws, no padding, no mixture) takes a short path: its
    positions a slice of the epoch's order (NOTE [sliced plans] in :mod:`recio.sampling.sampler`),
    its status, span, crop and flip arrays a set reused in turn (``depth + 2`` sets: a set
    comes round again only after its batch was counted), and, when the native call decoded
    every image, every record matched its checksum (one native call over the batch's
    frames, where the file has a sidecar: NOTE [checksums by default] in
    :mod:`recio.records.checksum`) and nothing else is left to check, no status array for
    the stats to look at (:meth:`~recio.pipeline.read_decode.LocalPending.decoded`). Any
    other batch, and a lean one with a bad image, a checksum mismatch or several labels,
    goes the general way
    (:meth:`~recio.pipeline.read_decode.LocalPending.result`): the same batches either way.
    """

    def __init__(self, it: ImageRecordIter, epoch: int, step: int) -> None:
        super().__init__(it, epoch, step)
        # one fewer than the threaded pipeline's two decoding and ready ones: the batch being
        # finished is the other (the same arrays in flight)
        self.depth = _ready_depth(it.config) + 1
        self._next = self.first_step  # the next step to submit
        self.blocked = 0.0  # the last get's wait for the pool (NOTE [stage times])
        self._queued: collections.deque = collections.deque()  # (step, raw, out, pending, t0)
        self._lock = threading.RLock()  # get against a stop() from another thread
        self.reader = BatchReader(
            self.records, self.pool, it.config.batch_shape, it.buffers.dtype,
            label_width=self.read_label_width, draw=self.draw, options=self.decode_options,
            raise_bad_headers=self.raise_bad_headers, label_maps=self.label_maps,
        )  # fmt: skip
        # The common batch (NOTE [lean batches]): its plan a slice, its small arrays reused.
        self._slices = self.sampler.slices(epoch) if self.reader.local else None
        self._rows = [self.reader.rows(it.config.batch_size) for _ in range(self.depth + 2)]

    def get(self):
        with self._lock:
            if self.stopping.is_set():
                return _Failure(ValueError("the ImageRecordIter was closed"))
            self._fill()
            step, raw, out, pending, t0 = self._queued[0]
            if isinstance(pending, _Failure):
                self._queued.popleft()
                return pending
            self.blocked = 0.0  # the consumer's wait for the pool (NOTE [stage times])
            if not pending.wait(0):
                start = time.perf_counter()
                while not pending.wait(_POLL):
                    if self.stopping.is_set():  # close() from another thread
                        return _Failure(ValueError("the ImageRecordIter was closed"))
                self.blocked = time.perf_counter() - start
            self._queued.popleft()
            if self.tracer is not None:  # the pool's work on it, from submit to done
                end = self.tracer.now_us()
                self.tracer.add("decode+augment", t0, end, thread_name="recio-decoder", step=step)
            self._fill()  # the pool has the next ones before this one's Python runs
            try:
                if raw is None:  # a lean batch
                    got = pending.decoded()
                    if got is not None:
                        return self._decoded(step, out, *got)
                    raw = _RawBatch(self.epoch, step, pending.positions, 0, None, None)
                return self._batch(raw, out, pending.result())
            except Exception as exc:  # noqa: BLE001 - raised by __next__, as the threads' are
                return _Failure(exc)

    def _decoded(self, step: int, out: np.ndarray, labels: np.ndarray, ids: np.ndarray) -> tuple:
        """:meth:`_batch` of a lean batch whose every image was decoded (status None)."""
        if self.imglist is not None:  # MXNet's path_imglist: the list's labels, by header id
            labels = self.imglist.lookup(ids)
        label = labels[:, 0] if self.label_width == 1 else labels
        return Batch(out, label, ids, 0, self.epoch, step), None, (), ids

    def _fill(self) -> None:
        """Submit batches until ``depth`` are queued or the epoch's last one is."""
        while len(self._queued) < self.depth and self._next < self.end_step:
            step = self._next
            self._next += 1
            t0 = self.tracer.now_us() if self.tracer is not None else 0.0
            try:
                sliced = None if self._slices is None else self._slices.get(step)
                if sliced is not None and sliced[1] is None:  # lean (NOTE [lean batches])
                    out = self.buffers.take()
                    rows = self._rows[step % len(self._rows)]
                    pending = self.reader.submit_local(sliced[0], out, rows)
                    self._queued.append((step, None, out, pending, t0))
                    continue
                raw = self._raw(self.sampler.plan(self.epoch, step), None)
                out = self.buffers.take()
                pending = self.reader.submit(raw.positions, out, epochs=raw.epochs, keys=raw.keys)
            except Exception as exc:  # noqa: BLE001 - delivered in its turn
                self._queued.append((step, None, None, _Failure(exc), t0))
                self._next = self.end_step
                return
            self._queued.append((step, raw, out, pending, t0))

    def ready_share(self) -> float:
        """The share of the queued batches the pool has finished (NOTE [thread tuner])."""
        queued = list(self._queued)
        done = sum(1 for q in queued if isinstance(q[3], _Failure) or q[3].wait(0))
        return done / max(1, len(queued))

    def stop(self) -> None:
        self.stopping.set()
        with self._lock:
            queued, self._queued = self._queued, collections.deque()
            for _, _, _, pending, _ in queued:
                if not isinstance(pending, _Failure):
                    with contextlib.suppress(RuntimeError):  # forked: the parent's, not ours
                        pending.wait()  # the pool is done with its buffers (close: cancelled)


class _MarkMismatches:
    """The records as the prefetcher reads them: checksum mismatches marked, not raised.

    ``read_many(bad="mark")``: such a record is a bad slot for ``on_error``, not an error
    that stops the reader thread.
    """

    def __init__(self, records) -> None:
        self.records = records

    def __getattr__(self, name: str):  # lengths, cached, ...: the records'
        return getattr(self.records, name)

    def read_many(self, indices, **kwargs):
        return self.records.read_many(indices, bad="mark", **kwargs)


class _Extents(_MarkMismatches):
    """The records as stored, for one native call a batch (NOTE [remote batches on the pool]).

    ``read_many`` returns each record's extent (its frames, as the ``.idx`` bounds them),
    checked against the sidecar where there is one (a mismatch fetched once more, then a
    :class:`~recio.records.checksum.MismatchedPayload`), without parsing them.
    """

    def read_many(self, indices, *, until: int | None = None):
        return self.records.read_extents(indices, until=until)


_RECORD = int(Status.RECORD)
_GLOBAL_JOB = 32 << 20  # record bytes a global-shuffle fetch job holds (not adaptive)


def _traced(tracer: Tracer | None, name: str, items):
    """Yield from ``items``, recording the time each one took to arrive as a span."""
    items, end = iter(items), object()
    while True:
        with maybe_span(tracer, name):
            item = next(items, end)
        if item is end:
            return
        yield item


def _drain(q: queue.Queue) -> None:
    while True:
        try:
            q.get_nowait()
        except queue.Empty:
            return
