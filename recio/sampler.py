"""Which records each rank reads, in which order, batch by batch — as pure integer math.

An epoch's order is a permutation drawn from ``(seed, epoch)``, the same on
every rank. It is cut into *global steps* of ``num_parts × batch_size``
positions; rank ``r`` takes positions ``r, r + num_parts, r + 2·num_parts, …``
of each step. Every rank therefore gets the same number of batches, the ranks'
real samples are disjoint, and together they cover the epoch. The last-batch
policy says what happens to an incomplete final step:

- ``pad``: the step is completed by wrapping to the start of the epoch's
  order; those positions are marked as padding (``Batch.pad``).
- ``discard``: the incomplete step is dropped.
- ``rollover``: the leftover samples start the next epoch (MXNet's
  ``round_batch=False``): the epochs are one endless stream, and epoch ``e``
  owns the steps that end inside it.

The state needed to resume is ``(epoch, step)``.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass

import numpy as np


class LastBatch(str, enum.Enum):
    """What becomes of an epoch's incomplete last global step (see the module docstring)."""

    PAD = "pad"
    DISCARD = "discard"
    ROLLOVER = "rollover"


class Shuffle(str, enum.Enum):
    """How an epoch's order is drawn (see :func:`epoch_order`)."""

    NONE = "none"
    GLOBAL = "global"  # an exact permutation of all records
    BLOCK = "block"  # blocks of consecutive records, shuffled, then shuffled within a window


def epoch_order(
    n: int,
    seed: int,
    epoch: int,
    shuffle: Shuffle | str = Shuffle.GLOBAL,
    *,
    block_size: int = 256,
    window: int = 4,
    parts: int = 1,
) -> np.ndarray:
    """The order of record positions ``0..n-1`` for ``epoch`` (int64 array).

    ``block`` shuffle keeps runs of ``block_size`` consecutive records together
    (so remote reads stay large), shuffles the blocks globally, then shuffles
    records within windows of ``window`` blocks.

    With ``parts`` ranks (which take positions r, r + parts, ...), a window holds
    ``window`` blocks per rank, and rank r's positions in it are filled from its own
    ``window`` blocks: each rank reads whole blocks, as a single reader does, instead
    of a strided 1/parts of every block. (A window whose ranks would not get equal
    counts, the tail with the short last block, is shuffled as a whole.)
    """
    shuffle = Shuffle(shuffle)
    if shuffle is Shuffle.NONE:
        return np.arange(n, dtype=np.int64)
    rng = np.random.default_rng([seed, epoch])
    if shuffle is Shuffle.GLOBAL:
        return rng.permutation(n).astype(np.int64, copy=False)
    # The short last block (if any) stays last, in the tail window: the full windows then
    # split evenly between ranks.
    whole_blocks = n // block_size
    starts = rng.permutation(np.arange(0, whole_blocks * block_size, block_size))
    # The blocks' records in block order, block after block: a window is then a slice.
    order = np.empty(n, dtype=np.int64)
    laid = order[: whole_blocks * block_size].reshape(whole_blocks, block_size)
    np.add(starts[:, None], np.arange(block_size, dtype=np.int64), out=laid)
    order[whole_blocks * block_size :] = np.arange(whole_blocks * block_size, n)
    per_window = window * parts
    span = per_window * block_size  # records of a full window
    # Each window is shuffled in place, in the order of the windows, with the draws of
    # a shuffle of each window (or lane) apart: the same order, without a list of blocks.
    for lo in range(0, n, span):
        records = order[lo : lo + span]
        if parts > 1 and len(records) == span:
            # lane r: blocks r, r + parts, ... of the window; [i * parts + r] = its i-th
            lanes = records.reshape(window, parts, block_size).transpose(1, 0, 2)
            lanes = lanes.reshape(parts, window * block_size)  # a copy
            for lane in lanes:
                rng.shuffle(lane)
            records.reshape(window * block_size, parts)[:] = lanes.T
        else:
            rng.shuffle(records)
    return order


@dataclass(frozen=True)
class StepPlan:
    """One batch of one rank: record positions, and how many trailing ones are padding."""

    epoch: int
    step: int
    positions: np.ndarray  # int64, batch_size record positions (into the file's index)
    pad: int


class Sampler:
    """Batches of record positions for one rank, epoch after epoch.

    Parameters are plain integers, so two ranks built with the same ``seed``
    agree on everything; tests need no processes. ``positions`` maps the samples
    ``0..num_records-1`` to record positions of the file (when some records are not
    samples, see :mod:`recio.layout`); plans then give record positions.
    """

    def __init__(
        self,
        num_records: int,
        batch_size: int,
        *,
        part_index: int = 0,
        num_parts: int = 1,
        shuffle: Shuffle | str | bool = Shuffle.NONE,
        seed: int = 0,
        last_batch: LastBatch | str = LastBatch.PAD,
        block_size: int = 256,
        window: int = 4,
        positions: np.ndarray | None = None,
    ) -> None:
        if positions is not None:
            positions = np.asarray(positions, dtype=np.int64)
            if len(positions) != num_records:
                raise ValueError(f"{len(positions)} positions for {num_records} records")
        if num_records <= 0:
            raise ValueError("the dataset has no records")
        if batch_size <= 0:
            raise ValueError(f"batch_size must be positive, not {batch_size}")
        if not 0 <= part_index < num_parts:
            raise ValueError(f"part_index {part_index} is outside 0..num_parts-1 ({num_parts})")
        if isinstance(shuffle, bool):
            shuffle = Shuffle.GLOBAL if shuffle else Shuffle.NONE
        self.num_records = num_records
        self.batch_size = batch_size
        self.part_index = part_index
        self.num_parts = num_parts
        self.shuffle = Shuffle(shuffle)
        self.seed = seed
        self.last_batch = LastBatch(last_batch)
        self.block_size = block_size
        self.window = window
        self.global_batch = batch_size * num_parts
        if self.last_batch is LastBatch.DISCARD and num_records < self.global_batch:
            raise ValueError(
                f"last_batch='discard' with {num_records} records and {num_parts} part(s) of "
                f"batch {batch_size} leaves no batch at all"
            )
        self.positions = positions
        self._order_cache: dict[int, np.ndarray] = {}

    def fetch_group(self) -> int | None:
        """Batches a remote reader should fetch together, or None for "by bytes".

        With block shuffle, this rank's ``window`` blocks of a window are used up over
        ``block_size * window / batch_size`` consecutive batches: fetched together, its
        records are one contiguous run of each block (large reads, each byte once);
        fetched a few batches at a time, the coalesced reads of every group span the
        window's blocks and read most of their bytes again and again.
        """
        if self.shuffle is not Shuffle.BLOCK:
            return None
        # a window holds `window` blocks per rank (epoch_order)
        return max(1, -(-self.block_size * self.window // self.batch_size))

    def order(self, epoch: int) -> np.ndarray:
        """The record positions of ``epoch`` in order (:func:`epoch_order`), all ranks' alike.

        The last few epochs' orders are cached; treat the array as read-only.
        """
        if epoch not in self._order_cache:
            if len(self._order_cache) > 2:
                self._order_cache.clear()
            order = epoch_order(
                self.num_records,
                self.seed,
                epoch,
                self.shuffle,
                block_size=self.block_size,
                window=self.window,
                parts=self.num_parts,
            )
            self._order_cache[epoch] = order if self.positions is None else self.positions[order]
        return self._order_cache[epoch]

    def _step_range(self, epoch: int) -> tuple[int, int]:
        """Global step numbers [first, end) of ``epoch`` (rollover: in the endless stream)."""
        n, g = self.num_records, self.global_batch
        if self.last_batch is LastBatch.ROLLOVER:
            return epoch * n // g, (epoch + 1) * n // g
        steps = n // g if self.last_batch is LastBatch.DISCARD else -(-n // g)
        return 0, steps

    def steps_in_epoch(self, epoch: int = 0) -> int:
        """Batches of ``epoch``, the same on every rank (rollover: epochs differ by at most one)."""
        first, end = self._step_range(epoch)
        return end - first

    def __len__(self) -> int:
        """Batches per epoch (for rollover, of epoch 0; later ones differ by at most one)."""
        return self.steps_in_epoch(0)

    def plan(self, epoch: int, step: int) -> StepPlan:
        """The ``step``-th batch (0-based within the epoch) of this rank."""
        first, end = self._step_range(epoch)
        if not 0 <= step < end - first:
            raise IndexError(f"epoch {epoch} has {end - first} steps, not step {step}")
        n = self.num_records
        stream = (first + step) * self.global_batch + self.part_index
        stream_positions = stream + self.num_parts * np.arange(self.batch_size, dtype=np.int64)
        if self.last_batch is LastBatch.ROLLOVER:
            # positions in the endless stream of epoch orders
            epochs = stream_positions // n
            positions = np.empty(self.batch_size, dtype=np.int64)
            for e in np.unique(epochs):
                mask = epochs == e
                positions[mask] = self.order(int(e))[stream_positions[mask] % n]
            return StepPlan(epoch, step, positions, 0)
        order = self.order(epoch)
        positions = order[stream_positions % n]
        pad = int(np.count_nonzero(stream_positions >= n))
        # Padding is always at the end of a batch: strided positions only grow.
        return StepPlan(epoch, step, positions, pad)

    def shard_positions(self, epoch: int) -> np.ndarray:
        """All real (non-pad) record positions this rank reads in ``epoch``, in order.

        The positions of its plans (:meth:`plan`) one after another, without the padding.
        """
        first, end = self._step_range(epoch)
        n, parts = self.num_records, self.num_parts
        count = (end - first) * self.batch_size
        if self.last_batch is not LastBatch.ROLLOVER:
            # Its stream positions are part_index + k * num_parts, the real ones below n.
            stop = min(n, (end - first) * self.global_batch)
            return self.order(epoch)[self.part_index : stop : parts].copy()
        # positions in the endless stream of epoch orders (see plan)
        stream = first * self.global_batch + self.part_index
        positions = np.empty(count, dtype=np.int64)
        done = 0
        while done < count:
            e = (stream + parts * done) // n
            # this rank's positions in epoch e's order: from done up to the first in e + 1
            upto = min(count, -(-((e + 1) * n - stream) // parts))
            local = stream + parts * np.arange(done, upto, dtype=np.int64) - e * n
            positions[done:upto] = self.order(int(e))[local]
            done = upto
        return positions
