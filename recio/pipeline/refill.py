"""Images for a batch none of whose own images is good (``on_error="skip"``).

NOTE [refill]: under "skip" a bad slot takes the next good image of its batch
(:class:`~recio.pipeline.positioned.ErrorPolicy`). A batch with no good image at all takes
them from the records that follow it in this rank's own stream: the stream positions
``s + num_parts, s + 2·num_parts, ...`` after the batch's last slot ``s`` (NOTE [stream
position] in :mod:`recio.sampling.sampler`), to the end of the slot's epoch; only if none
of those is good, the epoch's whole order from its start. Slot ``j`` takes the ``j``-th
good one found (found images repeat, in order, when fewer than the batch are good). The
records it takes are the same records their own batches deliver later (as skip's fills
within a batch always were): the batch is not shortened and no later batch changes, so

* every rank still yields the planned number of batches, with the planned records in
  every other batch (DDP's collectives stay in step: no rank runs an extra or a missing
  step);
* the fill is a function of the data, the seed, the epoch and the geometry alone, not of
  where the run started: a run resumed from a state on the same geometry refills the same
  batches with the same images, drawn as the records' own batches draw them (their keys
  and epochs); an elastic resume refills from its own rank's stream;
* the stats stay exact: the batch's own bad records are counted as skipped once, in this
  batch; the records read to refill it are counted in their own batches.

Only an epoch none of whose records is good cannot be delivered: that is a
:class:`~recio.errors.DecodeError` naming the batch and the first error. A tail of
consecutive all-bad batches searches once (:meth:`Refill.find` remembers the last search,
which covers every later batch whose search starts before what it found).
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Iterator
from typing import Any, NamedTuple

import numpy as np

from ..decode import DecodePool
from ..errors import DecodeError, RecordIOError
from ..sampling.sampler import LastBatch, Sampler, StepPlan
from .read_decode import submit_read_and_decode

__all__ = ["Candidates", "Refill", "Take", "decoded", "tolerant"]


class Candidates(NamedTuple):
    """A chunk of records to try: their positions, draw keys and epochs (one per slot)."""

    positions: np.ndarray  # int64 record positions
    keys: np.ndarray | None  # int64 draw keys (a mixture's copies); None: the positions
    epochs: np.ndarray  # int64, each slot's epoch (its draws)


#: ``take(candidates) -> [(slot of the chunk, item), ...]`` for the good ones among them,
#: in slot order; an item is whatever the caller fills a slot with.
Take = Callable[[Candidates], list[tuple[int, Any]]]


class _Search(NamedTuple):
    epoch: int
    start: int  # the first stream position tried in the rank's lane
    lane_first: int | None  # the stream position of the first good one found there; None: none
    items: list  # what was found


class Refill:
    """The good images that follow a batch in its rank's stream (NOTE [refill]).

    One per pipeline (an epoch's); :meth:`find` may be called from several threads.
    """

    def __init__(self, sampler: Sampler) -> None:
        self.sampler = sampler
        self._last: _Search | None = None
        self._lock = threading.Lock()

    def find(self, plan: StepPlan, take: Take, why: str, batch: str) -> list:
        """Up to ``batch_size`` good items for ``plan``'s batch, in stream order (at least one).

        Args:
            plan: the batch with no good image.
            take: reads and checks a chunk of candidates (see :data:`Take`).
            why: the batch's first error, for the message when nothing is found.
            batch: "batch S (epoch E) of URL", for that message.

        Raises:
            DecodeError: no record of the epoch is good.
        """
        s = self.sampler
        epoch, base, last = self._where(plan)
        start = last + s.num_parts
        with self._lock:
            known = self._last
        if (
            known is not None
            and known.epoch == epoch
            and known.start <= start
            and (start - known.start) % s.num_parts == 0
            and (known.lane_first is None or start <= known.lane_first)
        ):
            return known.items  # every record between the two starts was tried and is bad
        want = s.batch_size
        lane = np.arange(start, base + s.num_records, s.num_parts, dtype=np.int64)
        items, first = self._collect(epoch, lane - base, take, want)
        lane_first = None if first is None else int(lane[first])
        if not items:  # the rest of the rank's stream holds none: the epoch's whole order
            whole = np.arange(s.num_records, dtype=np.int64)
            items, _ = self._collect(epoch, whole, take, want)
        if not items:
            raise DecodeError(
                f"no image of {batch} could be decoded, nor of any record of epoch {epoch} "
                f"to take their place (NOTE [refill]); first error: {why}"
            )
        with self._lock:
            self._last = _Search(epoch, start, lane_first, items)
        return items

    def _where(self, plan: StepPlan) -> tuple[int, int, int]:
        """``(epoch, base, last)`` of ``plan``: the epoch whose order the refill reads.

        ``base``: where that order starts in the stream; ``last``: the stream position of
        the batch's last slot.
        """
        s = self.sampler
        assert plan.stream is not None
        last = int(plan.stream[-1])
        if s.last_batch is LastBatch.ROLLOVER:  # stream positions count from epoch 0's start
            epoch = last // s.num_records
            return epoch, epoch * s.num_records, last
        return plan.epoch, 0, last

    def _collect(
        self, epoch: int, indices: np.ndarray, take: Take, want: int
    ) -> tuple[list, int | None]:
        """Good items of ``epoch``'s order at ``indices``, and the first one's index.

        Tried a batch at a time, until ``want`` are found; the index is into ``indices``.
        """
        items: list = []
        first = None
        for done, chunk in _chunks(self.sampler, epoch, indices):
            for j, item in take(chunk):
                if first is None:
                    first = done + j
                items.append(item)
            if len(items) >= want:
                return items[:want], first
        return items, first


def _chunks(sampler: Sampler, epoch: int, indices: np.ndarray) -> Iterator[tuple[int, Candidates]]:
    """``indices`` of ``epoch``'s order as :class:`Candidates`, a batch's worth at a time."""
    order, keys = sampler.order(epoch), sampler.keys(epoch)
    step = sampler.batch_size
    for done in range(0, len(indices), step):
        at = indices[done : done + step]
        yield (
            done,
            Candidates(
                order[at], None if keys is None else keys[at], np.full(len(at), epoch, np.int64)
            ),
        )


def tolerant(take: Take) -> Take:
    """``take``, a chunk whose framing cannot be parsed tried a record at a time.

    A record that cannot be read even alone is left out, as a bad one is.
    """

    def tolerant_take(c: Candidates) -> list[tuple[int, Any]]:
        try:
            return take(c)
        except RecordIOError:
            if len(c.positions) == 1:
                return []
        found = []
        for j in range(len(c.positions)):
            one = slice(j, j + 1)
            keys = None if c.keys is None else c.keys[one]
            alone = Candidates(c.positions[one], keys, c.epochs[one])
            found += [(j, item) for _, item in tolerant_take(alone)]
        return found

    return tolerant_take


def decoded(records: Any, pool: DecodePool, shape: tuple[int, ...], dtype: Any, **how: Any) -> Take:
    """A :data:`Take` that decodes candidates as an iterator's batch does.

    ``how``: the keywords of :func:`~recio.pipeline.read_decode.submit_read_and_decode`
    but the positions, draws' keys and epochs. An item is ``(pixels, labels, id)``; bad
    candidates, unreadable headers among them, are left out (:func:`tolerant`).
    """

    def take(c: Candidates) -> list[tuple[int, Any]]:
        out = np.empty((len(c.positions), *shape), dtype=dtype)
        payloads = None if records.is_local else records.read_many(c.positions, bad="mark")
        got = submit_read_and_decode(
            records, c.positions, pool, out, payloads=payloads, raise_bad_headers=False,
            epochs=c.epochs, keys=c.keys, **how,
        ).result()  # fmt: skip
        return [(j, (out[j], got.labels[j], got.ids[j])) for j in np.flatnonzero(got.status == 0)]

    return tolerant(take)
