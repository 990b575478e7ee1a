"""Which records each rank reads, in which order, batch by batch — as pure integer math.

An epoch's order is a permutation drawn from ``(seed, epoch)``, the same on every rank and
for every world size. The ranks read it as one *global stream*: it is cut into *global
steps* of ``num_parts × batch_size`` positions, and rank ``r`` takes positions
``r, r + num_parts, r + 2·num_parts, …`` of each step. Every rank therefore gets the same
number of batches, the ranks' real samples are disjoint, and together they cover the
epoch. The last-batch policy says what happens to an incomplete final step:

- ``pad``: the step is completed by wrapping to the start of the epoch's
  order; those positions are marked as padding (``Batch.pad``).
- ``discard``: the incomplete step is dropped.
- ``rollover``: the leftover samples start the next epoch (MXNet's
  ``round_batch=False``): the epochs are one endless stream, and epoch ``e``
  owns the steps that end inside it.

NOTE [stream position]: what a resume needs is how far the global stream has got, not a
step number: ``(epoch, consumed)``, the samples of the stream taken before the next batch,
counted from the start of ``epoch``'s order (:meth:`Sampler.consumed_at`). A sampler built
with ``start=(epoch, consumed)`` (:meth:`Sampler.resumed`) cuts the rest of that epoch
into its own global steps, whatever its world size and batch size, with the last-batch
policy applied to the remainder; later epochs are whole. Under rollover ``consumed`` is
negative when the next batch begins with the previous epoch's leftovers. The resumed
epoch's steps keep the numbers they would have had (``first_step`` is
``consumed // global_batch``), so a resume on the same geometry plans exactly what an
uninterrupted run does, and remote fetch groups stay aligned with block-shuffle windows.
"""

from __future__ import annotations

import enum
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

if TYPE_CHECKING:
    from .mixing import MixPlan

# Block shuffle's geometry (epoch_order): records per block, blocks per canonical partition
# in a window, and the canonical partitions. None of them depends on the world size.
BLOCK_SIZE = 64
WINDOW = 4
BLOCK_PARTS = 8


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
    block_size: int = BLOCK_SIZE,
    window: int = WINDOW,
    parts: int = 1,
) -> np.ndarray:
    """The order of record positions ``0..n-1`` for ``epoch`` (int64 array).

    ``block`` shuffle keeps runs of ``block_size`` consecutive records together
    (so remote reads stay large), shuffles the blocks globally, then shuffles
    records within windows of ``window`` blocks.

    ``parts`` is the number of canonical partitions (lanes): a window holds ``window``
    blocks per lane, and lane q's positions in it (q, q + parts, ...) are filled from its
    own ``window`` blocks. A rank that takes positions r, r + P, ... of the stream with
    P dividing ``parts`` reads whole lanes, hence whole blocks, as a single reader does,
    instead of a strided 1/P of every block. The order depends on ``parts``, never on the
    world size. (A window whose lanes would not get equal counts, the tail with the short
    last block, is shuffled as a whole.)
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
    """One batch of one rank: record positions, and how many trailing ones are padding.

    ``stream`` holds each slot's position in the global stream (NOTE [stream position]):
    for pad and discard counted from the start of ``epoch``'s order (``>= num_records``
    for padding), for rollover from the start of epoch 0's, so that a slot's sample is
    ``order(stream // n)[stream % n]``. It is the same for a sample whatever the world size.
    """

    epoch: int
    step: int
    positions: np.ndarray  # int64, batch_size record positions (into the file's index)
    pad: int
    stream: np.ndarray | None = None  # int64, batch_size global stream positions
    keys: np.ndarray | None = None  # int64, the slots' draw keys (a mixture); None: positions


class Sampler:
    """Batches of record positions for one rank, epoch after epoch.

    Parameters are plain integers, so two ranks built with the same ``seed``
    agree on everything; tests need no processes. ``positions`` maps the samples
    ``0..num_records-1`` to record positions of the file (when some records are not
    samples, see :mod:`recio.records.samples`); plans then give record positions.

    Args:
        block_size, window, block_parts: block shuffle's geometry (:func:`epoch_order`'s
            ``block_size``, ``window`` and ``parts``); ``block_parts`` is the number of
            canonical partitions, fixed for a run whatever its world size.
        start: ``(epoch, consumed)``, where a resumed run begins (NOTE [stream position]):
            epoch ``epoch`` plans only the samples after the first ``consumed`` of its
            stream.
        mix: a :class:`recio.sampling.mixing.MixPlan`: each epoch's samples are its list for
            ``(seed, epoch)`` (``num_records`` of them, record positions with their draw
            keys), permuted as usual; instead of ``positions``.
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
        block_size: int = BLOCK_SIZE,
        window: int = WINDOW,
        block_parts: int = BLOCK_PARTS,
        positions: np.ndarray | None = None,
        start: tuple[int, int] = (0, 0),
        mix: MixPlan | None = None,
    ) -> None:
        if mix is not None:
            if positions is not None:
                raise ValueError("give positions or mix, not both")
            if mix.epoch_size != num_records:
                raise ValueError(f"a mixture of {mix.epoch_size} samples for {num_records} records")
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
        for name, value in (("block_size", block_size), ("window", window)):
            if value < 1:
                raise ValueError(f"{name} must be positive, not {value}")
        if block_parts < 1:
            raise ValueError(f"block_parts must be positive, not {block_parts}")
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
        self.block_parts = block_parts
        self.global_batch = batch_size * num_parts
        if self.last_batch is LastBatch.DISCARD and num_records < self.global_batch:
            raise ValueError(
                f"last_batch='discard' with {num_records} records and {num_parts} part(s) of "
                f"batch {batch_size} leaves no batch at all"
            )
        self.positions = positions
        self.mix = mix
        self.start = _check_start(start, num_records, self.last_batch)
        # epoch -> (record positions in order, their draw keys or None)
        self._order_cache: dict[int, tuple[np.ndarray, np.ndarray | None]] = {}
        self._steps_cache: dict[int, tuple[int, int, int]] = {}  # epoch -> _steps

    def resumed(self, epoch: int, consumed: int, **changes) -> Sampler:
        """This sampler (with ``changes`` to its arguments) starting at ``(epoch, consumed)``."""
        args = {
            "part_index": self.part_index,
            "num_parts": self.num_parts,
            "shuffle": self.shuffle,
            "seed": self.seed,
            "last_batch": self.last_batch,
            "block_size": self.block_size,
            "window": self.window,
            "block_parts": self.block_parts,
            "positions": self.positions,
            "mix": self.mix,
            **changes,
        }
        return Sampler(self.num_records, self.batch_size, start=(epoch, consumed), **args)

    def fetch_group(self) -> int | None:
        """Batches a remote reader should fetch together, or None for "by bytes".

        With block shuffle, a window's records (``window`` blocks of each of the
        ``block_parts`` lanes) are used up over ``block_size * window * block_parts /
        global_batch`` consecutive steps: fetched together, this rank's records of it are
        whole blocks (world sizes dividing ``block_parts``; else a share of its lanes'
        blocks): large reads, each byte once. Fetched a few batches at a time, the
        coalesced reads of every group span the window's blocks and read most of their
        bytes again and again.
        """
        if self.shuffle is not Shuffle.BLOCK:
            return None
        span = self.block_size * self.window * self.block_parts  # records of a window
        return max(1, -(-span // self.global_batch))

    def order(self, epoch: int) -> np.ndarray:
        """The record positions of ``epoch`` in order (:func:`epoch_order`), all ranks' alike.

        The last few epochs' orders are cached; treat the array as read-only.
        """
        return self._ordered(epoch)[0]

    def keys(self, epoch: int) -> np.ndarray | None:
        """The draw keys of :meth:`order`'s samples (a mixture's copies), or None: positions."""
        return self._ordered(epoch)[1]

    def _ordered(self, epoch: int) -> tuple[np.ndarray, np.ndarray | None]:
        cached = self._order_cache.get(epoch)  # one lookup: decode threads share the cache
        if cached is not None:
            return cached
        order = epoch_order(
            self.num_records,
            self.seed,
            epoch,
            self.shuffle,
            block_size=self.block_size,
            window=self.window,
            parts=self.block_parts,
        )
        if self.mix is not None:
            positions, keys = self.mix.epoch(self.seed, epoch)
            cached = positions[order], keys[order]
        else:
            cached = (order if self.positions is None else self.positions[order]), None
        if len(self._order_cache) > 2:
            self._order_cache.clear()
        self._order_cache[epoch] = cached
        return cached

    def _steps(self, epoch: int) -> tuple[int, int, int]:
        """``(first, end, base)``: the step numbers [first, end) of ``epoch``, and its stream.

        ``base`` is where step ``first`` begins in the stream (epoch-relative; rollover:
        from the start of epoch 0's order).
        """
        steps = self._steps_cache.get(epoch)  # asked once a batch (steps_in_epoch)
        if steps is None:
            if len(self._steps_cache) > 2:
                self._steps_cache.clear()
            steps = self._steps_cache[epoch] = self._count_steps(epoch)
        return steps

    def _count_steps(self, epoch: int) -> tuple[int, int, int]:
        n, g = self.num_records, self.global_batch
        e0, c0 = self.start
        if self.last_batch is LastBatch.ROLLOVER:
            if epoch < e0:
                first = epoch * n // g  # global step numbers of an uninterrupted stream
                return 0, (epoch + 1) * n // g - first, first * g
            origin = e0 * n + c0

            def ended(x: int) -> int:  # steps from the origin that end at or before x
                return max(0, (x - origin) // g)

            if epoch == e0:  # also what is left of the epochs before it
                first = max(0, origin // g - e0 * n // g)
                return first, first + ended((e0 + 1) * n), origin
            lo = ended(epoch * n)
            return 0, ended((epoch + 1) * n) - lo, origin + lo * g
        base = c0 if epoch == e0 else 0
        rest = n - base
        count = rest // g if self.last_batch is LastBatch.DISCARD else -(-rest // g)
        # Numbered as in an uninterrupted epoch; one that is used up ends where that does.
        first = base // g if base < n else -(-n // g)
        return first, first + count, base

    def first_step(self, epoch: int) -> int:
        """The number of ``epoch``'s first step: 0, except in the resumed epoch."""
        return self._steps(epoch)[0]

    def steps_in_epoch(self, epoch: int = 0) -> int:
        """The step number that ends ``epoch`` (exclusive), the same on every rank.

        It is the epoch's batch count, except in the resumed epoch, whose steps are
        ``first_step(epoch)`` .. this - 1 (rollover: epochs differ by at most one).
        """
        return self._steps(epoch)[1]

    def __len__(self) -> int:
        """Batches per epoch (for rollover, of epoch 0; later ones differ by at most one)."""
        first, end, _ = self._steps(0)
        return end - first

    def consumed_at(self, epoch: int, step: int) -> int:
        """Samples of the global stream taken before step ``step`` of ``epoch``.

        Counted from the start of ``epoch``'s order (NOTE [stream position]): at most
        ``num_records``; under rollover negative while the step begins in the epoch
        before. ``step`` may be the end of the epoch (everything taken).
        """
        first, end, base = self._steps(epoch)
        if not first <= step <= end:
            raise IndexError(f"epoch {epoch} has steps {first}..{end - 1}, not step {step}")
        stream = base + (step - first) * self.global_batch
        if self.last_batch is LastBatch.ROLLOVER:
            return stream - epoch * self.num_records
        return min(stream, self.num_records)

    def plan(self, epoch: int, step: int) -> StepPlan:
        """The ``step``-th batch (0-based within the epoch) of this rank."""
        first, end, base = self._steps(epoch)
        if not first <= step < end:
            raise IndexError(f"epoch {epoch} has steps {first}..{end - 1}, not step {step}")
        n = self.num_records
        stream = base + (step - first) * self.global_batch + self.part_index
        stream_positions = stream + self.num_parts * np.arange(self.batch_size, dtype=np.int64)
        if self.last_batch is LastBatch.ROLLOVER:
            # positions in the endless stream of epoch orders
            epochs = stream_positions // n
            positions = np.empty(self.batch_size, dtype=np.int64)
            keys = None if self.mix is None else np.empty(self.batch_size, dtype=np.int64)
            for e in np.unique(epochs):
                mask = epochs == e
                order, order_keys = self._ordered(int(e))
                positions[mask] = order[stream_positions[mask] % n]
                if keys is not None:
                    keys[mask] = order_keys[stream_positions[mask] % n]
            return StepPlan(epoch, step, positions, 0, stream_positions, keys)
        order, order_keys = self._ordered(epoch)
        positions = order[stream_positions % n]
        keys = None if order_keys is None else order_keys[stream_positions % n]
        pad = int(np.count_nonzero(stream_positions >= n))
        # Padding is always at the end of a batch: strided positions only grow.
        return StepPlan(epoch, step, positions, pad, stream_positions, keys)

    def slices(self, epoch: int) -> EpochSlices:
        """``epoch``'s batches of this rank as slices of its order, where they can be.

        NOTE [sliced plans]: a batch with no padding whose slots all lie in ``epoch``'s own
        order (every batch but a pad epoch's last, and under rollover the ones that reach
        into another epoch) is a run of this rank's lane of the order: positions ``r, r +
        P, ...`` of it. :meth:`EpochSlices.get` gives it as a slice of that lane, made once
        per epoch, instead of :meth:`plan`'s arrays and object per batch (the consumer of
        a local file plans each batch under the GIL). Its positions and keys are exactly
        :meth:`plan`'s, and its draws are ``epoch``'s (:meth:`slot_epochs` would say so).
        """
        first, end, base = self._steps(epoch)
        n, parts = self.num_records, self.num_parts
        # where step ``first``'s first slot is in epoch's order (rollover: may be before it)
        local = base + self.part_index - (epoch * n if self.last_batch is LastBatch.ROLLOVER else 0)
        lane = local % parts
        order, keys = self._ordered(epoch)
        if parts > 1:  # this rank's lane, contiguous: a batch is then a plain slice of it
            order = np.ascontiguousarray(order[lane::parts])
            keys = None if keys is None else np.ascontiguousarray(keys[lane::parts])
        return EpochSlices(
            first, end, local, parts, self.batch_size, self.global_batch, n, order, keys
        )

    def slot_epochs(self, plan: StepPlan) -> np.ndarray | None:
        """Each slot's epoch, where a rollover batch reaches into another epoch's order.

        The augmentation draws of a sample are its epoch's (``recio.augment.KeyedDraw``),
        whatever batch it lands in. None when every slot is of ``plan.epoch``.
        """
        if self.last_batch is not LastBatch.ROLLOVER:
            return None
        return plan.stream // self.num_records

    def shard_positions(self, epoch: int) -> np.ndarray:
        """All real (non-pad) record positions this rank reads in ``epoch``, in order.

        The positions of its plans (:meth:`plan`) one after another, without the padding.
        """
        first, end, base = self._steps(epoch)
        n, parts = self.num_records, self.num_parts
        count = (end - first) * self.batch_size
        stream = base + self.part_index
        if self.last_batch is not LastBatch.ROLLOVER:
            # Its stream positions are stream + k * num_parts, the real ones below n.
            stop = min(n, base + (end - first) * self.global_batch)
            return self.order(epoch)[stream:stop:parts].copy()
        # positions in the endless stream of epoch orders (see plan)
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


class EpochSlices:
    """One epoch's batches of one rank as slices of its lane of the order (NOTE [sliced plans]).

    Made by :meth:`Sampler.slices`; :meth:`get` is its only use.
    """

    __slots__ = ("_batch", "_end", "_first", "_global", "_keys", "_local", "_n", "_order", "_parts")

    def __init__(
        self,
        first: int,
        end: int,
        local: int,
        parts: int,
        batch: int,
        global_batch: int,
        n: int,
        order: np.ndarray,
        keys: np.ndarray | None,
    ) -> None:
        self._first, self._end, self._local, self._parts = first, end, local, parts
        self._batch, self._global, self._n = batch, global_batch, n
        self._order, self._keys = order, keys

    def get(self, step: int) -> tuple[np.ndarray, np.ndarray | None] | None:
        """``(positions, keys)`` of ``plan(epoch, step)`` as slices, or None where it is not one.

        None: the step has padding, reaches into another epoch's order, or is not one of
        the epoch's; :meth:`Sampler.plan` gives it (or its ``IndexError``). The arrays are
        views of the sampler's cached order: read-only.
        """
        if not self._first <= step < self._end:
            return None
        lo = self._local + (step - self._first) * self._global  # its first slot, in the order
        if lo < 0 or lo + self._parts * (self._batch - 1) >= self._n:
            return None
        i = lo // self._parts  # in the lane: lo is lane + i * parts
        j = i + self._batch
        return self._order[i:j], None if self._keys is None else self._keys[i:j]


def _check_start(start: tuple[int, int], n: int, last_batch: LastBatch) -> tuple[int, int]:
    """``start`` as two ints, or a ValueError saying which bound it breaks."""
    epoch, consumed = (int(v) for v in start)
    if epoch < 0:
        raise ValueError(f"a resumed epoch must be >= 0, not {epoch}")
    # rollover: a step may begin epochs before (when a global batch exceeds the epoch)
    low = -epoch * n if last_batch is LastBatch.ROLLOVER else 0
    if not low <= consumed <= n:
        raise ValueError(
            f"consumed={consumed} is outside {low}..{n} for {n} samples "
            f"(last_batch={last_batch.value!r}, epoch {epoch})"
        )
    return epoch, consumed
