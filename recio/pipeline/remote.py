"""A remote file's batches: a reader thread fetching ahead, two decode threads.

    reader thread ──read_q──▶ 2 decode threads (native pool) ──ready_q──▶ __next__

The reader fetches the upcoming batches' bytes ahead (coalesced ranged reads, a whole block
window at a time with block shuffle); two decode threads take the batches in turn (NOTE
[two decode threads]), each batch one native call over its records as fetched (NOTE [remote
batches on the pool]). Errors in a thread travel in turn with the batches. The threads
go on into the next epoch's first batches while the last ones are taken (NOTE [epoch
overlap] in :mod:`.queued`).
"""

from __future__ import annotations

import contextlib
import dataclasses
import queue
import threading
import time
from typing import TYPE_CHECKING, Any

import numpy as np

from ..decode import Status
from ..errors import RecordIOError
from ..records.checksum import MismatchedPayload
from ..records.file import RecordFile
from ..storage import FetchOptions, Lookahead, Prefetcher, clock
from .mxnet_inputs import ImageList
from .read_decode import DecodedBatch
from .run import POLL, Failure, PipelineRun, RawBatch, queue_depth, ready_depth
from .trace import Tracer, maybe_span

if TYPE_CHECKING:
    from .iterator import ImageRecordIter

__all__ = ["RemotePipeline"]


class _Stop(Exception):
    """Raised inside a thread of a pipeline being stopped: ends it quietly."""


class RemotePipeline(PipelineRun):
    """A remote file's reader and decode threads, from (epoch, step) on."""

    def __init__(
        self,
        it: ImageRecordIter,
        epoch: int,
        step: int,
        *,
        imglist: ImageList | None,
        mean_img: np.ndarray | None,
        lookahead: Lookahead,
    ) -> None:
        super().__init__(it, epoch, step, imglist=imglist, mean_img=mean_img)
        config = it.config
        self.lookahead = lookahead
        self.read_q: queue.Queue = queue.Queue(maxsize=queue_depth(config))
        self.ready_q: queue.Queue = queue.Queue(maxsize=ready_depth(config))
        # NOTE [two decode threads]: a remote file's decode thread holds the GIL between two
        # of its batches (taking the next one from the reader, the output array, the
        # statuses, the hand-off), and waits for the reader too. With one decode thread the
        # pool idles meanwhile, a tenth of the time on small images. With two, the second
        # one's batch is queued in the pool (NOTE [job queue] in native/pool.c, GIL
        # released) and starts the moment the first one's ends. They take the batches in
        # the order the reader queued them (under _take_lock) and hand them on in that
        # order (_put_in_turn), errors included, so the consumer sees exactly what one
        # thread would give it; one more batch array is in flight. (A local file needs no
        # thread: NOTE [queued batches].)
        self.blocked = self.fetch_wait = 0.0  # NOTE [stage times]
        # Batches are numbered in the order the reader queues them, over the epochs it
        # reads (NOTE [epoch overlap] in .queued: the next epoch's follow this one's).
        self._taken = 0  # the number of the next batch a decode thread takes from read_q
        self._take_lock = threading.Lock()
        self._turn = 0  # the number of the batch that goes into ready_q next
        self._turn_cv = threading.Condition()
        self._delivering = threading.Condition()  # carry_on: the reader may go on
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
        # per epoch, the options checked and the draw's parameters made once, not per batch
        self._jobs: dict[int, Any] = {}
        self._batch_shape = config.batch_shape
        self._starts: dict[int, np.ndarray] = {}  # n -> n zeros: a record starts each extent
        work = [
            (self._read, self.read_q, "recio-reader"),
            (self._decode, self.ready_q, "recio-decoder"),
            (self._decode, self.ready_q, "recio-decoder-2"),
        ]
        self.threads = [
            threading.Thread(target=self._guard, args=(fn, out_q), name=name, daemon=True)
            for fn, out_q, name in work
        ]
        for t in self.threads:
            t.start()

    # consumer side

    def get(self):
        """The next batch's item (or a :class:`Failure`), in the order they were read."""
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
                return self.ready_q.get(timeout=POLL)
            except queue.Empty:
                if self.stopping.is_set():  # close() from another thread
                    return Failure(ValueError("the ImageRecordIter was closed"))
                if not any(t.is_alive() for t in self.threads) and self.ready_q.empty():
                    return Failure(RuntimeError("recio pipeline threads ended unexpectedly"))

    def ready_share(self) -> float:
        """The share of the ready queue's room that decoded batches fill (NOTE [thread tuner])."""
        return self.ready_q.qsize() / max(1, self.ready_q.maxsize)

    def carry_on(self, epoch: int, step: int) -> bool:
        """Whether the batches read ahead are ``epoch``'s from ``step`` on; if so, deliver them.

        (NOTE [epoch overlap] in :mod:`.queued`.) Only the epoch that follows the one
        delivered, from its first step, with every thread still at work (a failure ends
        the thread that met it).
        """
        if self.stopping.is_set() or epoch != self.epoch + 1:
            return False
        if step != self.sampler.first_step(epoch) or not all(t.is_alive() for t in self.threads):
            return False
        with self._delivering:
            self.begin_epoch(epoch, step)
            self._delivering.notify_all()
        return True

    def stop(self) -> None:
        """Stop the threads and join them (from any thread but theirs)."""
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
                q.put(item, timeout=POLL)
                return
            except queue.Full:
                continue

    def _get(self, q: queue.Queue):
        while True:
            if self.stopping.is_set():
                raise _Stop
            try:
                return q.get(timeout=POLL)
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
                self._put(out_q, Failure(exc))

    def _read(self) -> None:
        """Fetch a remote file's batches ahead and queue them for the decode threads.

        The epoch delivered, then the next one's (NOTE [epoch overlap] in :mod:`.queued`),
        one epoch ahead of the consumer at most: each further epoch once the consumer has
        gone on to the one before it (:meth:`carry_on`).
        """
        epoch, step = self.epoch, self.first_step
        while True:
            self._read_epoch(epoch, step)
            epoch += 1
            step = self.sampler.first_step(epoch)
            with self._delivering:
                while self.epoch < epoch - 1:
                    if self.stopping.is_set():
                        raise _Stop
                    self._delivering.wait(POLL)

    def _read_epoch(self, epoch: int, first_step: int) -> None:
        """Queue ``epoch``'s batches from ``first_step`` on for the decode threads."""
        plans = self._plans(epoch, first_step)
        following = self.sampler.first_step(epoch + 1)
        nxt = self._plans(epoch + 1, following)
        if self.records.cached:
            # The block cache keeps what is needed soonest (NOTE [block cache]): the rest
            # of this epoch and all of the next are known now.
            self.records.schedule_reads(
                [(clock(epoch, p.step), p.positions) for p in plans]
                + [(clock(epoch + 1, p.step), p.positions) for p in nxt]
            )
        # Several batches' byte ranges coalesced and fetched concurrently, ahead; with block
        # shuffle, a whole window at a time (one window fetched while one is used).
        prefetcher = self.lookahead.take((epoch, first_step)) or self._prefetcher(
            plans, first_step, epoch
        )

        def ahead() -> None:
            # Every fetch of this epoch is issued: the next epoch's first window goes out
            # now, while this epoch's last jobs are fetched and used, so that it is there
            # when the next epoch starts (taken by this reader or the next run's, else closed).
            if nxt and not self.stopping.is_set():
                first = self._prefetcher(nxt, following, epoch + 1, lead=False)
                first.start()
                self.lookahead.put((epoch + 1, following), first)

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
            raw = self.raw_batch(plan, payloads)
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
            with self._take_lock:  # batches are taken in order: number k is read_q's k-th
                number = self._taken
                with maybe_span(self.tracer, "queue wait (for reader)"):
                    raw = self._get(self.read_q)
                self._taken += 1
            if isinstance(raw, Failure):
                self._put_in_turn(number, raw)
                return
            try:
                item = self._decode_one(raw)
            except _Stop:
                raise
            except BaseException as exc:  # noqa: BLE001 - re-raised in the consumer, in turn
                if hasattr(exc, "add_note"):
                    exc.add_note(f"(raised in recio's {threading.current_thread().name} thread)")
                self._put_in_turn(number, Failure(exc))
                return
            self._put_in_turn(number, item)

    def _decode_one(self, raw: RawBatch) -> tuple:
        out = self.buffers.take()
        with maybe_span(self.tracer, "decode+augment", epoch=raw.epoch, step=raw.step):
            got = self._decode_extents(raw, out) if self.extents else None
            if got is None:
                if self.extents:  # the exact way: the payloads parsed from the extents
                    raw = dataclasses.replace(raw, payloads=self._payloads(raw))
                got = self.submit(raw, out).result()
        return self.consumer_item(raw, out, got)

    def _decode_extents(self, raw: RawBatch, out: np.ndarray) -> DecodedBatch | None:
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
        job = self._job(raw.epoch)
        pending = job.submit(extents, starts, out, records=np.asarray(keys, dtype=np.int64))
        got = pending.result()
        if pending.failed and (got.status == _RECORD).any():
            return None
        reasons = self.pool.last_errors() if pending.failed else None
        return DecodedBatch(got.status, got.labels, got.ids, reasons)

    def _job(self, epoch: int) -> Any:
        """``epoch``'s records job: its options checked and draws made once, not per batch."""
        job = self._jobs.get(epoch)
        if job is None:  # (two threads may both make one: the same job)
            job = self.pool.records_job(
                self._batch_shape,
                self.buffers.dtype,
                draw=self.epoch_draw(epoch),
                options=self.decode_options,
            )
            self._jobs = {e: j for e, j in self._jobs.items() if e >= epoch - 1} | {epoch: job}
        return job

    def _payloads(self, raw: RawBatch) -> list:
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

    def _put_in_turn(self, number: int, item) -> None:
        """Put the item of batch ``number`` into ready_q once those before it are in."""
        with self._turn_cv:
            while self._turn != number:
                if self.stopping.is_set():
                    raise _Stop
                self._turn_cv.wait(POLL)
        with maybe_span(self.tracer, "queue wait (prefetch queue full)"):
            self._put(self.ready_q, item)
        with self._turn_cv:
            self._turn += 1
            self._turn_cv.notify_all()


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
