"""A local file's batches, queued on the native pool by the consumer itself.

    __next__ ──submit──▶ native pool's queue (batches decoded back to back) ──▶ Batch

No Python thread of its own (NOTE [queued batches]); the common batch takes a short path
(NOTE [lean batches]).
"""

from __future__ import annotations

import collections
import contextlib
import threading
import time
from typing import TYPE_CHECKING

import numpy as np

from .mxnet_inputs import ImageList
from .positioned import Batch
from .read_decode import BatchReader
from .run import POLL, Failure, PipelineRun, RawBatch, ready_depth

if TYPE_CHECKING:
    from .iterator import ImageRecordIter

__all__ = ["QueuedPipeline"]


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
    every image, every record matched its checksum (one native call over the batch's
    frames, where the file has a sidecar: NOTE [checksums by default] in
    :mod:`recio.records.checksum`) and nothing else is left to check, no status array for
    the stats to look at (:meth:`~recio.pipeline.read_decode.LocalPending.decoded`). Any
    other batch, and a lean one with a bad image, a checksum mismatch or several labels,
    goes the general way
    (:meth:`~recio.pipeline.read_decode.LocalPending.result`): the same batches either way.
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
        self._next = self.first_step  # the next step to submit
        self.blocked = 0.0  # the last get's wait for the pool (NOTE [stage times])
        self._queued: collections.deque = collections.deque()  # (step, raw, out, pending, t0)
        self._lock = threading.RLock()  # get against a stop() from another thread
        self.reader = BatchReader(
            self.records,
            self.pool,
            it.config.batch_shape,
            it.buffers.dtype,
            label_width=self.read_label_width,
            draw=self.draw,
            options=self.decode_options,
            raise_bad_headers=self.raise_bad_headers,
            label_maps=self.label_maps,
        )
        # The common batch (NOTE [lean batches]): its plan a slice, its small arrays reused.
        self._slices = self.sampler.slices(epoch) if self.reader.local else None
        self._rows = [self.reader.rows(it.config.batch_size) for _ in range(self.depth + 2)]

    def get(self):
        """The next batch's item (or a :class:`Failure`), the pool's next ones queued first."""
        with self._lock:
            if self.stopping.is_set():
                return Failure(ValueError("the ImageRecordIter was closed"))
            self._fill()
            step, raw, out, pending, t0 = self._queued[0]
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
                self.tracer.add("decode+augment", t0, end, thread_name="recio-decoder", step=step)
            self._fill()  # the pool has the next ones before this one's Python runs
            try:
                if raw is None:  # a lean batch
                    got = pending.decoded()
                    if got is not None:
                        return self._decoded(step, out, *got)
                    raw = RawBatch(self.epoch, step, pending.positions, 0, None, None)
                return self.consumer_item(raw, out, pending.result())
            except Exception as exc:  # noqa: BLE001 - raised by __next__, as the threads' are
                return Failure(exc)

    def _decoded(self, step: int, out: np.ndarray, labels: np.ndarray, ids: np.ndarray) -> tuple:
        """:meth:`consumer_item` of a lean batch whose every image was decoded (status None)."""
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
                raw = self.raw_batch(self.sampler.plan(self.epoch, step), None)
                out = self.buffers.take()
                pending = self.reader.submit(raw.positions, out, epochs=raw.epochs, keys=raw.keys)
            except Exception as exc:  # noqa: BLE001 - delivered in its turn
                self._queued.append((step, None, None, Failure(exc), t0))
                self._next = self.end_step
                return
            self._queued.append((step, raw, out, pending, t0))

    def ready_share(self) -> float:
        """The share of the queued batches the pool has finished (NOTE [thread tuner])."""
        queued = list(self._queued)
        done = sum(1 for q in queued if isinstance(q[3], Failure) or q[3].wait(0))
        return done / max(1, len(queued))

    def stop(self) -> None:
        """Wait for a running ``get``, then for the pool to be done with every queued batch."""
        self.stopping.set()
        with self._lock:
            queued, self._queued = self._queued, collections.deque()
            for _, _, _, pending, _ in queued:
                if not isinstance(pending, Failure):
                    with contextlib.suppress(RuntimeError):  # forked: the parent's, not ours
                        pending.wait()  # the pool is done with its buffers (close: cancelled)
