"""A local file's batches, queued on the native pool by the consumer itself.

    __next__ ──submit──▶ native pool's queue (batches decoded back to back) ──▶ Batch

No Python thread of its own (NOTE [queued batches]); the common batch takes a short path
(NOTE [lean batches]); the next epoch's first batches are queued while an epoch's last ones
are taken (NOTE [epoch overlap]); a padded last batch copies its padding from the epoch's
first batch instead of decoding it again (NOTE [copied padding]).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import TYPE_CHECKING, Any, NamedTuple

import numpy as np

from .mxnet_inputs import ImageList
from .positioned import Batch
from .read_decode import BatchReader, DecodedBatch
from .run import DEFAULT_PREFETCH, POLL, Failure, PipelineRun, RawBatch, ready_depth

if TYPE_CHECKING:
    from .iterator import ImageRecordIter

__all__ = ["Queued", "QueuedPipeline"]


class QueuedPipeline(PipelineRun):
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
    every image, every record matched its checksum (where the file has a sidecar, the
    frames' CRCs the decode threads took compared with it: NOTE [one pass per record] in
    native/bind_pool.c) and nothing else is left to check, no status array for
    the stats to look at (:meth:`~recio.pipeline.read_decode.LocalPending.decoded`). Any
    other batch, and a lean one with a bad image, a checksum mismatch or several labels,
    goes the general way
    (:meth:`~recio.pipeline.read_decode.LocalPending.result`): the same batches either way.

    NOTE [epoch overlap]: a pipeline that ended with its epoch would leave the pool idle
    from the moment the epoch's last batch is decoded until the consumer's next ``iter()``
    queues the next epoch's first one, and the consumer would then wait for that batch's
    whole decode: about a batch per epoch, up to 1/n of an epoch of n batches where the
    consumer's step is about as long as a batch's decode. So once the consumer's epoch has
    had its last batch submitted, :meth:`_fill` gives the queue's room to the next epoch's
    first batches: planned from that epoch's order, drawn with its keys (a
    :class:`~recio.pipeline.read_decode.BatchReader` of its own), one epoch ahead at most
    and within ``depth`` (the same batch arrays in flight). The consumer still sees one
    epoch a pass: ``get`` is never asked past the epoch's last step
    (:class:`~recio.pipeline.positioned.PositionedIterator` raises StopIteration there),
    and the iterator keeps the pipeline over the epoch's end. When the consumer goes on to
    the next epoch from its first step (``iter()``, or ``reset()`` once every batch was
    taken), :meth:`carry_on` makes the queued batches that epoch's. Whatever else moves
    the position (``load_state_dict``, a ``reset()`` mid-epoch) or ends the iterator
    (``close()``, the finalizer) stops the pipeline, and :meth:`stop` waits for the pool to
    be done with every queued batch, the next epoch's too, before an array of theirs can
    be taken again; a failed submission ends the submissions and :meth:`carry_on` refuses,
    so the next epoch starts afresh. The position (``state_dict()``, ``len()``) is the
    consumer's, kept by the iterator; what is queued is never part of it, so a state saved
    during the overlap is the one saved without it, and a run resumed from it plans and
    draws exactly the batches that followed (tests/pipeline/test_epoch_overlap.py and the
    framework sweeps of tests/frameworks/test_resume_sweep.py compare their bytes). A
    remote file's pipeline (:class:`~recio.pipeline.remote.RemotePipeline`) does the
    same with its threads: the reader goes on from the epoch's last batches to the next
    epoch's, with the first fetches it started behind the epoch's last ones
    (:class:`~recio.storage.Lookahead`), and reads a further epoch only once the
    consumer has gone on to the one before; the decode threads number the batches in the
    order read (steps start again each epoch) and draw each with its epoch's keys; the
    ready queue holds the next epoch's first batches at the end of an epoch, within its
    bound.

    NOTE [copied padding]: under ``last_batch="pad"`` an epoch's last batch is completed
    with the first records of the epoch's order, drawn with the same epoch's keys: the
    same pixels, labels and ids as the first slots of the epoch's first batch (for one
    rank, its own first batch; the padding's positions are checked to be that batch's
    first ones). On a small file that is a share of the decode work (C800: 48 of every
    832 images). So when an epoch's first batch comes out of the lean path with every
    image decoded and that epoch ends in padding, :meth:`_keep_head` copies the images,
    labels and ids the padding will repeat before the consumer can touch them, and
    :meth:`_submit` queues only the last batch's real slots, the copies written into its
    padding once they are decoded (:class:`_CopiedPadding`). Any other case (a first
    batch with a bad image, a resumed epoch that starts past its first batch, a last
    batch submitted before the first was taken, a ``memory_budget`` that does not hold two
    more batch arrays beside those in flight) decodes the padding as it decodes any slot:
    the batches are the same either way.
    """

    def __init__(
        self,
        it: ImageRecordIter,
        epoch: int,
        step: int,
        *,
        imglist: ImageList | None,
        mean_img: np.ndarray | None,
    ) -> None:
        super().__init__(it, epoch, step, imglist=imglist, mean_img=mean_img)
        # one fewer than the threaded pipeline's two decoding and ready ones: the batch being
        # finished is the other (the same arrays in flight)
        self.depth = ready_depth(it.config) + 1
        self.blocked = 0.0  # the last get's wait for the pool (NOTE [stage times])
        self._queued: collections.deque[Queued] = collections.deque()  # in the consumer's order
        self._lock = threading.RLock()  # get against a stop() from another thread
        self._batch_shape = it.config.batch_shape
        # The common batch (NOTE [lean batches]): its small arrays reused, a set per batch
        # in flight and two more, in submission order (steps start again each epoch).
        reader = self._reader(epoch)
        self._rows = [reader.rows(it.config.batch_size) for _ in range(self.depth + 2)]
        self._submitted = 0
        self._head: _Head | None = None  # NOTE [copied padding]
        # the copies (fewer images than two batches) only where the memory budget holds
        # them beside the batch arrays in flight
        plan, prefetch = it.plan, it.config.prefetch_buffer or DEFAULT_PREFETCH
        self._copy_padding = plan.budget - (prefetch + 4) * plan.batch_bytes >= 0
        self._head_images: list[np.ndarray | None] = [None, None]
        self._ahead: _Submitting | None = _Submitting(epoch, step, self, reader)

    def _reader(self, epoch: int) -> BatchReader:
        """The batches of ``epoch`` as this pipeline queues them (its draws made once)."""
        return BatchReader(
            self.records,
            self.pool,
            self._batch_shape,
            self.buffers.dtype,
            label_width=self.read_label_width,
            draw=self.epoch_draw(epoch),
            options=self.decode_options,
            raise_bad_headers=self.raise_bad_headers,
            label_maps=self.label_maps,
        )

    def get(self):
        """The next batch's item (or a :class:`Failure`), the pool's next ones queued first."""
        with self._lock:
            if self.stopping.is_set():
                return Failure(ValueError("the ImageRecordIter was closed"))
            self._fill()
            epoch, step, raw, out, pending, t0 = self._queued[0]
            if isinstance(pending, Failure):
                self._queued.popleft()
                return pending
            self.blocked = 0.0  # the consumer's wait for the pool (NOTE [stage times])
            if not pending.wait(0):
                start = time.perf_counter()
                while not pending.wait(POLL):
                    if self.stopping.is_set():  # close() from another thread
                        return Failure(ValueError("the ImageRecordIter was closed"))
                self.blocked = time.perf_counter() - start
            self._queued.popleft()
            if self.tracer is not None:  # the pool's work on it, from submit to done
                end = self.tracer.now_us()
                self.tracer.add(
                    "decode+augment", t0, end, thread_name="recio-decoder", epoch=epoch, step=step
                )
            self._fill()  # the pool has the next ones before this one's Python runs
            try:
                if raw is None:  # a lean batch
                    got = pending.decoded()
                    if got is not None:
                        if step == self.sampler.first_step(epoch):
                            self._keep_head(epoch, pending.positions, out, *got)
                        return self._decoded(epoch, step, out, *got)
                    raw = RawBatch(epoch, step, pending.positions, 0, None, None)
                return self.consumer_item(raw, out, pending.result())
            except Exception as exc:  # noqa: BLE001 - raised by __next__, as the threads' are
                return Failure(exc)

    def _decoded(
        self, epoch: int, step: int, out: np.ndarray, labels: np.ndarray, ids: np.ndarray
    ) -> tuple:
        """:meth:`consumer_item` of a lean batch whose every image was decoded (status None)."""
        if self.imglist is not None:  # MXNet's path_imglist: the list's labels, by header id
            labels = self.imglist.lookup(ids)
        label = labels[:, 0] if self.label_width == 1 else labels
        return Batch(out, label, ids, 0, epoch, step), None, (), ids

    def _keep_head(
        self, epoch: int, positions: np.ndarray, out: np.ndarray, labels: np.ndarray, ids
    ) -> None:
        """What ``epoch``'s padding repeats of its first batch, copied (NOTE [copied padding])."""
        if not self._copy_padding:
            return
        last = self.sampler.plan(epoch, self.sampler.steps_in_epoch(epoch) - 1)
        pad = last.pad
        if not 0 < pad <= len(positions) or last.step == self.sampler.first_step(epoch):
            return
        padding = last.positions[-pad:]
        if last.keys is not None or not np.array_equal(padding, positions[:pad]):
            return
        # Two arrays, an epoch's each in turn, reused: a fresh one would cost its page
        # faults every epoch. Epoch e's padded batch is taken (or dropped) before epoch
        # e + 2's first batch is, so the array it copies from is not written meanwhile.
        images = self._head_images[epoch % 2]
        if images is None or len(images) != pad:
            images = self._head_images[epoch % 2] = np.empty_like(out[:pad])
        np.copyto(images, out[:pad])
        self._head = _Head(
            epoch, last.step, padding.copy(), images, labels[:pad].copy(), ids[:pad].copy()
        )

    def _fill(self) -> None:
        """Submit batches until ``depth`` are queued: the epoch's, then the next one's first.

        (NOTE [epoch overlap].)
        """
        while len(self._queued) < self.depth and self._ahead is not None:
            ahead = self._ahead
            if ahead.next >= ahead.end:
                if ahead.epoch != self.epoch:  # one epoch ahead at most
                    return
                following = ahead.epoch + 1
                first = self.sampler.first_step(following)
                self._ahead = _Submitting(following, first, self, self._reader(following))
                continue
            step = ahead.next
            ahead.next += 1
            t0 = self.tracer.now_us() if self.tracer is not None else 0.0
            try:
                self._queued.append(Queued(ahead.epoch, step, *self._submit(ahead, step), t0))
            except Exception as exc:  # noqa: BLE001 - delivered in its turn
                self._queued.append(Queued(ahead.epoch, step, None, None, Failure(exc), t0))
                self._ahead = None  # nothing after it
                return

    def _submit(self, ahead: _Submitting, step: int) -> tuple:
        """``(raw, out, pending)`` of step ``step`` of ``ahead``'s epoch, queued on the pool."""
        reader = ahead.reader
        sliced = None if ahead.slices is None else ahead.slices.get(step)
        rows = self._rows[self._submitted % len(self._rows)]
        self._submitted += 1
        if sliced is not None and sliced[1] is None:  # lean (NOTE [lean batches])
            out = self.buffers.take()
            return None, out, reader.submit_local(sliced[0], out, rows)
        raw = self.raw_batch(self.sampler.plan(ahead.epoch, step), None)
        out = self.buffers.take()
        head = self._head
        if head is not None and head.repeated_by(raw):  # NOTE [copied padding]
            real = len(raw.positions) - raw.pad
            pending = reader.submit(raw.positions[:real], out[:real])
            return raw, out, _CopiedPadding(pending, head, out, real)
        return raw, out, reader.submit(raw.positions, out, epochs=raw.epochs, keys=raw.keys)

    def carry_on(self, epoch: int, step: int) -> bool:
        """Whether the batches queued are ``epoch``'s from ``step`` on; if so, deliver them.

        (NOTE [epoch overlap].) Only the epoch that follows the one delivered, from its
        first step, and only with nothing of the delivered one left and no failure queued.
        """
        with self._lock:
            if self.stopping.is_set() or epoch != self.epoch + 1:
                return False
            if step != self.sampler.first_step(epoch):
                return False
            for queued in self._queued:
                if queued.epoch != epoch or isinstance(queued.pending, Failure):
                    return False
            ahead = self._ahead
            if ahead is None or (ahead.epoch == self.epoch and ahead.next < ahead.end):
                return False  # a failure ended the submissions; the epoch was not all taken
            self.begin_epoch(epoch, step)
            return True

    def ready_share(self) -> float:
        """The share of the queued batches the pool has finished (NOTE [thread tuner])."""
        queued = list(self._queued)
        done = sum(1 for q in queued if isinstance(q.pending, Failure) or q.pending.wait(0))
        return done / max(1, len(queued))

    def stop(self) -> None:
        """Wait for a running ``get``, then for the pool to be done with every queued batch."""
        self.stopping.set()
        with self._lock:
            queued, self._queued = self._queued, collections.deque()
            self._ahead = None
            for pending in (q.pending for q in queued):
                if not isinstance(pending, Failure):
                    with contextlib.suppress(RuntimeError):  # forked: the parent's, not ours
                        pending.wait()  # the pool is done with its buffers (close: cancelled)


class Queued(NamedTuple):
    """A batch queued on the pool, in the order the consumer takes them."""

    epoch: int
    step: int
    raw: RawBatch | None  # None: a lean batch (NOTE [lean batches])
    out: np.ndarray | None  # the batch array the pool writes; None with a failure
    pending: Any  # the read_decode pending batch, or the Failure to deliver in its turn
    t0: float  # when it was submitted (the tracer's clock)


class _Head(NamedTuple):
    """What an epoch's padding repeats of its first batch (NOTE [copied padding])."""

    epoch: int
    step: int  # the epoch's last step, the one padded
    positions: np.ndarray  # the padding's records, in its order
    images: np.ndarray
    labels: np.ndarray  # as the records hold them (before an image list's)
    ids: np.ndarray

    def repeated_by(self, raw: RawBatch) -> bool:
        """Whether ``raw`` is the padded batch whose padding these are."""
        return (
            raw.epoch == self.epoch
            and raw.step == self.step
            and raw.pad == len(self.positions)
            and raw.epochs is None
            and raw.keys is None
            and np.array_equal(raw.positions[-raw.pad :], self.positions)
        )


class _CopiedPadding:
    """A padded batch's real slots queued on the pool; its padding copied from the head.

    (NOTE [copied padding].) Gives what the whole batch's pending batch gives.
    """

    __slots__ = ("head", "out", "pending", "real")

    def __init__(self, pending: Any, head: _Head, out: np.ndarray, real: int) -> None:
        self.pending, self.head, self.out, self.real = pending, head, out, real

    def wait(self, timeout: float | None = None) -> bool:
        return self.pending.wait(timeout)

    def result(self) -> DecodedBatch:
        got = self.pending.result()
        head, pad = self.head, len(self.head.ids)
        self.out[self.real :] = head.images
        reasons = None if got.reasons is None else [*got.reasons, *([None] * pad)]
        return DecodedBatch(
            np.concatenate([got.status, np.zeros(pad, got.status.dtype)]),
            np.concatenate([got.labels, head.labels]),
            np.concatenate([got.ids, head.ids]),
            reasons,
        )


class _Submitting:
    """The epoch whose batches a :class:`QueuedPipeline` submits: the next step, its reader."""

    def __init__(self, epoch: int, step: int, run: PipelineRun, reader: BatchReader) -> None:
        self.epoch, self.next, self.reader = epoch, step, reader
        self.end = run.sampler.steps_in_epoch(epoch)
        # NOTE [sliced plans]: the common batch's positions as a slice of the epoch's order
        self.slices = run.sampler.slices(epoch) if reader.local else None
