"""What every iterator gives its consumer, whatever decodes: batches, stats, position, bad images.

The CPU ``ImageRecordIter`` (:mod:`recio.iterator`) and the DALI stage (:mod:`recio.dali`)
both build on this module and on :mod:`recio.config`, and on nothing of each other:

* :class:`Batch` and :class:`IterStats`, the types they yield and count in;
* :class:`ErrorPolicy`, the one implementation of ``on_error`` (skip, raise, replace);
* :class:`PositionedIterator`, the epoch/step bookkeeping, ``len()``, ``reset()`` and the
  ``state_dict()`` / ``load_state_dict()`` protocol, over the records and the sampler that
  :meth:`PositionedIterator._open` builds from an :class:`~recio.config.IterConfig`.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .config import ON_ERROR, IterConfig, check_choice
from .decode.status import STATUS_NAMES
from .errors import DecodeError
from .layout import RecordLayout, detect_layout
from .reader import RecordFile
from .sampler import LastBatch, Sampler
from .shards import ShardedRecords, open_records
from .spans import take

log = logging.getLogger("recio")

__all__ = ["Batch", "ErrorPolicy", "ImageSizes", "IterStats", "PositionedIterator"]


@dataclass
class Batch:
    """One batch of images, their labels and record ids, and where it stands in the epochs.

    ``data`` is N×C×H×W or N×H×W×C, ``label`` float32 N or N×label_width, ``index`` the
    record ids from the headers, and ``pad`` how many trailing samples are padding.
    """

    data: Any  # numpy array; a torch tensor on the GPU from the DALI stage
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

    def count_batch(
        self,
        status: np.ndarray,
        ids: np.ndarray,
        reasons: Sequence[str | None],
        *,
        pad: int,
        on_error: str,
        url: str,
    ) -> None:
        """Count one batch's decoded and bad images (``status`` per slot, 0 = decoded).

        Padding slots repeat records of the batch: their images are not counted again.
        A record's first failure is logged as a warning.
        """
        real = len(status) - pad
        bad = np.flatnonzero(status)
        self.decoded += int(np.count_nonzero(status[:real] == 0))
        real_bad = int(np.count_nonzero(bad < real))
        if on_error == "replace":
            self.replaced += real_bad
        else:
            self.skipped += real_bad
        for j in bad:
            rid = int(ids[j])
            reason = reasons[j] or STATUS_NAMES.get(int(status[j]), "bad image")
            if rid not in self.bad_records:
                log.warning("recio: bad image, record id %d of %s: %s", rid, url, reason)
            self.bad_records[rid] = reason


class ImageSizes:
    """Each record's image size (width, height), read from its header once and then kept.

    Sizes never change, so only the first epoch parses the headers for them. An image
    whose header cannot be read stays unknown (-1, -1) and is asked again.
    """

    def __init__(self, num_records: int) -> None:
        self.known = np.full((num_records, 2), -1, dtype=np.int32)

    def of(self, pool: Any, positions: np.ndarray, images: Any) -> np.ndarray:
        """(N, 2) sizes of the records at ``positions``, whose images are ``images``."""
        sizes = self.known[positions]
        unknown = np.flatnonzero(sizes[:, 0] < 0)
        if len(unknown):
            found = pool.image_sizes(take(images, unknown))
            sizes[unknown] = found
            read = found[:, 0] >= 0
            self.known[positions[unknown[read]]] = found[read]
        return sizes


class ErrorPolicy:
    """What becomes of a batch slot whose image is bad (``on_error``).

    ``"skip"``: the slot takes the next valid image after it in the batch (wrapping), with
    its label and id, so the batch stays full and the choice depends only on the data.
    ``"replace"``: the slot keeps its label and id and gets a blank image. ``"raise"``: a
    :class:`~recio.errors.DecodeError` naming the record, its byte offset and the file.
    """

    def __init__(self, on_error: str) -> None:
        self.on_error = check_choice("on_error", on_error, ON_ERROR)

    def check_headers(self, problems: dict[int, Exception]) -> None:
        """Raise the first unreadable record header of a batch, under "raise".

        ``problems`` come from :func:`recio.reader.batch_headers` (``RecordIOError``s naming
        the file and byte offset); under "skip" and "replace" such records are bad images
        like any other.
        """
        if problems and self.on_error == "raise":
            raise problems[min(problems)]

    def fill_from(
        self,
        status: np.ndarray,
        reasons: Sequence[str | None],
        describe: Callable[[int], str],
        batch: str,
    ) -> np.ndarray | None:
        """Where each slot of a batch with bad slots (``status`` non-zero) takes its image from.

        Under "skip", the slot each slot takes its image, label and id from; None under
        "replace" (blank the bad slots).

        Args:
            status: per-slot decoder status, 0 for a good image.
            reasons: per-slot error text (None where good).
            describe: slot -> "record id N (record P, at byte B of URL)" for messages.
            batch: "batch S (epoch E) of URL", for the all-bad message.

        Raises:
            DecodeError: under "raise" for the first bad slot; under "skip" when no image
                of the batch is good.
        """
        bad = np.flatnonzero(status)
        if self.on_error == "raise":
            j = int(bad[0])
            raise DecodeError(
                f"cannot decode {describe(j)}: {reasons[j]}", index=j, status=int(status[j])
            )
        if self.on_error == "replace":
            return None
        good = np.flatnonzero(status == 0)
        if len(good) == 0:
            raise DecodeError(
                f"no image of {batch} could be decoded; first error: {reasons[bad[0]]}"
            )
        fill = np.arange(len(status))
        fill[bad] = good[np.searchsorted(good, bad) % len(good)]
        return fill


class PositionedIterator:
    """Where an iterator stands in its epochs, and everything that follows from that.

    Subclasses call :meth:`_open` with their config, and implement :meth:`_produce` (the
    batch at the current position), :meth:`_restart` (drop whatever runs ahead of the
    position), :meth:`_start_next_epoch` (the epoch counter has moved on) and
    :meth:`close`.
    """

    config: IterConfig
    records: RecordFile | ShardedRecords
    layout: RecordLayout
    sampler: Sampler
    stats: IterStats
    _epoch = 0
    _step = 0
    _epoch_done = False
    _closed = False

    def _open(self, config: IterConfig) -> None:
        """Open the records and plan their order and sharding for ``config``."""
        self.config = config
        world = config.sharding.resolve()
        self.part_index, self.num_parts = world.rank, world.size
        self.records = open_records(
            config.path_imgrec,
            config.storage.path_imgidx,
            storage_options=config.storage.storage_options,
        )
        try:
            # Header, identity and other label-only records are not samples.
            self.layout = detect_layout(self.records)
            samples = self.layout.samples
            self.sampler = Sampler(
                len(samples),
                config.batch_size,
                part_index=world.rank,
                num_parts=world.size,
                shuffle=config.shuffle_kind,
                seed=config.seed,
                last_batch=LastBatch(config.last_batch),
                positions=samples if len(self.layout.metadata) else None,
            )
        except BaseException:
            self.records.close()
            raise
        self.policy = ErrorPolicy(config.on_error)
        self.stats = IterStats()

    # --- what the MXNet names describe --------------------------------------------------

    @property
    def batch_size(self) -> int:
        """Samples per batch, on each rank."""
        return self.config.batch_size

    @property
    def seed(self) -> int:
        """The seed of the shuffle and of the augmentation draws."""
        return self.config.seed

    @property
    def label_width(self) -> int:
        """Labels per record: a batch's ``label`` is N (width 1) or N×label_width."""
        return self.config.label_width

    @property
    def epoch(self) -> int:
        """The epoch being iterated (or, between epochs, the one just finished)."""
        return self._epoch

    @property
    def batch_shape(self) -> tuple[int, ...]:
        """The shape of one batch's data, in the configured layout."""
        return self.config.batch_shape

    @property
    def provide_data(self) -> list[tuple[str, tuple[int, ...]]]:
        """MXNet's description of the data: [("data", shape)]."""
        return [("data", self.batch_shape)]

    @property
    def provide_label(self) -> list[tuple[str, tuple[int, ...]]]:
        """MXNet's description of the label: [("softmax_label", shape)]."""
        n, width = self.batch_size, self.label_width
        return [("softmax_label", (n,) if width == 1 else (n, width))]

    def __len__(self) -> int:
        """Batches in the current epoch."""
        return self.sampler.steps_in_epoch(self._epoch)

    # --- iteration ----------------------------------------------------------------------

    def __iter__(self) -> PositionedIterator:
        if self._epoch_done:
            self._epoch += 1
            self._step = 0
            self._epoch_done = False
            self._start_next_epoch()
        return self

    def __next__(self) -> Batch:
        if self._closed:
            raise ValueError(f"the {type(self).__name__} was closed")
        if self._epoch_done:
            raise StopIteration
        if self._step >= len(self):
            self._epoch_done = True
            self._end_epoch()
            raise StopIteration
        batch = self._produce()
        self._step += 1
        return batch

    next = __next__  # MXNet's DataIter spelling

    def reset(self) -> None:
        """Start the next epoch (MXNet's reset: reshuffles when shuffle is on)."""
        if self._step > 0 or self._epoch_done:
            if not self._epoch_done:
                self._restart()  # mid-epoch: what runs ahead belongs to this epoch
            self._epoch_done = True
            self.__iter__()

    # --- the saved position -------------------------------------------------------------

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator is: the next batch to yield is (epoch, step)."""
        epoch, step = self._epoch, self._step
        if self._epoch_done:
            epoch, step = epoch + 1, 0
        return {
            "epoch": epoch,
            "step": step,
            "seed": self.seed,
            "num_records": self.layout.num_samples,
            "batch_size": self.batch_size,
            "part_index": self.part_index,
            "num_parts": self.num_parts,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a ``state_dict()``: the same record ids and augmentation draws."""
        mine = self.state_dict()
        for key in ("seed", "num_records", "batch_size", "num_parts"):
            if key in state and state[key] != mine[key]:
                raise ValueError(
                    f"state was saved with {key}={state[key]}, this iterator has {mine[key]}"
                )
        self._restart()
        self._epoch, self._step = int(state["epoch"]), int(state["step"])
        self._epoch_done = False

    # --- for subclasses -----------------------------------------------------------------

    def _produce(self) -> Batch:
        raise NotImplementedError

    def _end_epoch(self) -> None:
        """The last batch of the epoch has been taken."""

    def _start_next_epoch(self) -> None:
        """The position moved on to (epoch + 1, 0)."""

    def _restart(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop whatever runs ahead of the position and close the records."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
