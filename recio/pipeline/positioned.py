"""What every iterator gives its consumer, whatever decodes: batches, stats, position, bad images.

The CPU ``ImageRecordIter`` (:mod:`recio.pipeline.iterator`) and the DALI stage (:mod:`recio.dali`)
both build on this module and on :mod:`recio.pipeline.config`, and on nothing of each other:

* :class:`Batch` and :class:`IterStats`, the types they yield and count in;
* :class:`ErrorPolicy`, the one implementation of ``on_error`` (skip, raise, replace);
* :class:`PositionedIterator`, the epoch/step bookkeeping, ``len()``, ``reset()`` and the
  ``state_dict()`` / ``load_state_dict()`` protocol, over the records and the sampler that
  its ``__init__`` builds from an :class:`~recio.pipeline.config.IterConfig`.

NOTE [resume state]: a state is the position in the global stream, ``(epoch, consumed)``
(NOTE [stream position] in :mod:`recio.sampling.sampler`), not a step of one world size, so it loads
into an iterator with another ``num_parts`` or ``batch_size``: the sampler is rebuilt to
start there, and the rest of the epoch is cut into the new geometry's steps. Beside it the
state records what the order depends on, checked on load: ``seed``, ``shuffle``, the
dataset (``num_records`` and ``fingerprint``, a hash of the index's offsets), whether
``last_batch`` is rollover (its epochs are one stream), and block shuffle's geometry
(``block_parts``, ``block_size``, ``window``), which a loading iterator adopts, since it was
chosen by the first run. ``step``, ``batch_size``, ``part_index`` and ``num_parts`` say
where the saving rank stood; a state without ``consumed`` (saved before it existed) is read
through them, with block shuffle's geometry of then (blocks of 256, windows of 4 per rank,
one partition per rank). Before any of that, every field is checked for its type and range
(:mod:`.resume_state`): a state from a checkpoint may have been written by hand or turned
into floats, and a truncated ``epoch`` or a ``step`` past its epoch's end would resume at
the wrong place without a word.
"""

from __future__ import annotations

import hashlib
import logging
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

import numpy as np

from .._checks import check_choice
from ..decode.status import STATUS_NAMES
from ..errors import DecodeError, ResumeStateError
from ..records.checksum import CHECKSUM_MISMATCH
from ..records.file import RecordFile
from ..records.samples import RecordLayout, detect_layout
from ..records.shards import ShardedRecords, open_records
from ..sampling.mixing import MixPlan, Mixture, open_mixture, plan_mixture
from ..sampling.sampler import LastBatch, Sampler, Shuffle
from .config import ON_ERROR, IterConfig
from .resume_state import check_state, check_step, refuse
from .stage_times import StageTimes

log = logging.getLogger("recio")

__all__ = ["Batch", "ErrorPolicy", "IterStats", "PositionedIterator"]

# Block shuffle's geometry before the canonical partitions, for states saved then.
_LEGACY_BLOCK = {"block_size": 256, "window": 4}


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
    checksum_mismatches: int = 0  # of those, records whose checksum did not match
    bad_records: dict[int, str] = field(default_factory=dict)  # record id -> error
    # a mixture (recio.sampling.mixing): samples delivered per source, padding left out
    sources: dict[str, int] = field(default_factory=dict)
    # seconds per stage (NOTE [stage times] in recio/pipeline/stage_times.py)
    stages: StageTimes = field(default_factory=StageTimes, compare=False)  # times: not compared

    def count_sources(self, tally: dict[str, int]) -> None:
        """Add one batch's samples per source (:meth:`recio.sampling.mixing.MixPlan.tally`)."""
        for name, count in tally.items():
            self.sources[name] = self.sources.get(name, 0) + count

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
        if not reasons and not status.any():  # every image decoded
            self.decoded += real
            return
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
            if j < real and reason.startswith(CHECKSUM_MISMATCH):
                self.checksum_mismatches += 1
            if rid not in self.bad_records:
                log.warning("recio: bad image, record id %d of %s: %s", rid, url, reason)
            self.bad_records[rid] = reason


class ErrorPolicy:
    """What becomes of a batch slot whose image is bad (``on_error``).

    ``"skip"``: the slot takes the next valid image after it in the batch (wrapping), with
    its label and id, so the batch stays full and the choice depends only on the data; a
    batch with no valid image takes those that follow it in the rank's stream (NOTE
    [refill] in :mod:`recio.pipeline.refill`).
    ``"replace"``: the slot keeps its label and id and gets a blank image. ``"raise"``: a
    :class:`~recio.errors.DecodeError` naming the record, its byte offset and the file.
    """

    def __init__(self, on_error: str) -> None:
        self.on_error = check_choice("on_error", on_error, ON_ERROR)

    def check_headers(self, problems: dict[int, Exception]) -> None:
        """Raise the first unreadable record header of a batch, under "raise".

        ``problems`` come from :func:`recio.records.batch.batch_headers` (``RecordIOError``s naming
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
    ) -> np.ndarray | None:
        """Where each slot of a batch with bad slots (``status`` non-zero) takes its image from.

        Under "skip", the slot each slot takes its image, label and id from, or -1 for
        every slot when no image of the batch is good: the caller then fills it from the
        records that follow (NOTE [refill] in :mod:`recio.pipeline.refill`); None under
        "replace" (blank the bad slots).

        Args:
            status: per-slot decoder status, 0 for a good image.
            reasons: per-slot error text (None where good).
            describe: slot -> "record id N (record P, at byte B of URL)" for messages.

        Raises:
            DecodeError: under "raise" for the first bad slot.
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
            return np.full(len(status), -1)
        fill = np.arange(len(status))
        fill[bad] = good[np.searchsorted(good, bad) % len(good)]
        return fill


class PositionedIterator:
    """Where an iterator stands in its epochs, and everything that follows from that.

    Subclasses call ``super().__init__`` with their config, and implement :meth:`_produce` (the
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
    _fingerprint: str | None = None
    mix: MixPlan | None = None

    def __init__(self, config: IterConfig) -> None:
        """Open the records and plan their order and sharding for ``config``."""
        self.config = config
        world = config.sharding.resolve()
        self.part_index, self.num_parts = world.rank, world.size
        st = config.storage
        options = st.open_options()
        mixture = config.path_imgrec if isinstance(config.path_imgrec, Mixture) else None
        if mixture is not None:
            self.records, shards = open_mixture(mixture, options=options)
        else:
            self.records = open_records(config.path_imgrec, st.path_imgidx, options=options)
        try:
            # Header, identity and other label-only records are not samples.
            self.layout = detect_layout(self.records)
            samples = self.layout.samples
            if mixture is not None:
                self.mix = plan_mixture(mixture, self.records, shards, samples, config.label_width)
            self.sampler = Sampler(
                len(samples) if self.mix is None else self.mix.epoch_size,
                config.batch_size,
                part_index=world.rank,
                num_parts=world.size,
                shuffle=config.shuffle_kind,
                seed=config.seed,
                last_batch=LastBatch(config.last_batch),
                positions=samples if len(self.layout.metadata) and self.mix is None else None,
                mix=self.mix,
                **({} if config.block_parts is None else {"block_parts": config.block_parts}),
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
    def step(self) -> int:
        """The step of the next batch in :attr:`epoch` (past its last: the epoch is done)."""
        return self._step

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
        """Batches in the current epoch (in a resumed epoch, those left after the state)."""
        return self.sampler.steps_in_epoch(self._epoch) - self.sampler.first_step(self._epoch)

    # --- iteration ----------------------------------------------------------------------

    def __iter__(self) -> PositionedIterator:
        if self._epoch_done:
            self._epoch += 1
            self._step = self.sampler.first_step(self._epoch)
            self._epoch_done = False
            self._start_next_epoch()
        return self

    def __next__(self) -> Batch:
        if self._closed:
            raise ValueError(f"the {type(self).__name__} was closed")
        if self._epoch_done:
            raise StopIteration
        if self._step >= self.sampler.steps_in_epoch(self._epoch):
            self._epoch_done = True
            self._end_epoch()
            raise StopIteration
        batch = self._produce()
        if self.mix is not None:  # the planned samples (a skipped bad image's too)
            plan = self.sampler.plan(self._epoch, self._step)
            real = len(plan.positions) - plan.pad
            self.stats.count_sources(self.mix.tally(plan.positions[:real]))
        self._step += 1
        return batch

    next = __next__  # MXNet's DataIter spelling

    def reset(self) -> None:
        """Start the next epoch (MXNet's reset: reshuffles when shuffle is on)."""
        if self._step > 0 or self._epoch_done:
            if not self._epoch_done:
                if self._step >= self.sampler.steps_in_epoch(self._epoch):
                    self._end_epoch()  # every batch taken: ended as __next__ would end it
                else:
                    self._restart()  # mid-epoch: what runs ahead belongs to this epoch
            self._epoch_done = True
            self.__iter__()

    # --- the saved position (NOTE [resume state]) ---------------------------------------

    @property
    def fingerprint(self) -> str:
        """A hash of the dataset's index (record offsets, file size, which are samples)."""
        if self._fingerprint is None:
            digest = hashlib.sha256()  # with SHA extensions, ~0.2 s for 40M records
            digest.update(np.ascontiguousarray(self.records.offsets, dtype="<i8"))
            digest.update(int(self.records.size).to_bytes(8, "little"))
            if len(self.layout.metadata):
                digest.update(np.ascontiguousarray(self.layout.samples, dtype="<i8"))
            if self.mix is not None:  # which records are whose, and the counts per epoch
                digest.update(np.ascontiguousarray(self.mix.bounds, dtype="<i8"))
                digest.update(np.asarray(self.mix.counts, dtype="<i8"))
            self._fingerprint = digest.hexdigest()[:16]
        return self._fingerprint

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator is, and what that depends on (NOTE [resume state]).

        The next batch follows the first ``consumed`` samples of ``epoch``'s global stream;
        on this rank it is step ``step``.
        """
        epoch, step = self._epoch, self._step
        if self._epoch_done:
            epoch, step = epoch + 1, self.sampler.first_step(epoch + 1)
        s = self.sampler
        return {
            "epoch": epoch,
            "consumed": s.consumed_at(epoch, step),
            "step": step,
            "seed": self.seed,
            "shuffle": s.shuffle.value,
            "last_batch": s.last_batch.value,
            "block_parts": s.block_parts,
            "block_size": s.block_size,
            "window": s.window,
            "num_records": self.layout.num_samples,
            "fingerprint": self.fingerprint,
            "batch_size": self.batch_size,
            "part_index": self.part_index,
            "num_parts": self.num_parts,
            **({} if self.mix is None else {"mixture": self.mix.describe()}),
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue the global stream from a ``state_dict()``, saved on any world size.

        With the same ``num_parts`` and ``batch_size`` this rank gets the same record ids
        (and augmentation draws) as the uninterrupted run; with others, the rest of the
        epoch is shared between this run's ranks, each remaining sample once.

        Raises:
            ResumeStateError: the state cannot be honoured (another dataset, seed, shuffle,
                ...; a field out of range or missing); the message names the field and
                both values. A ``ValueError``.
            ResumeStateTypeError: ``state`` is no dict, or a field is not a whole number
                (also a ``TypeError``).
        """
        check_state(state)
        epoch, consumed, changes = self._resume_point(state)
        try:
            sampler = self.sampler.resumed(epoch, consumed, **changes)
        except ValueError as exc:
            raise ResumeStateError(f"cannot resume from this state: {exc}") from None
        self._restart()
        self.sampler = sampler
        self._sampler_changed()
        self._epoch, self._step = epoch, sampler.first_step(epoch)
        self._epoch_done = False

    def _resume_point(self, state: dict[str, Any]) -> tuple[int, int, dict[str, int]]:
        """``(epoch, consumed, changes to the sampler)`` for ``state``, checked."""
        s = self.sampler
        mine = {
            "seed": self.seed,
            "shuffle": s.shuffle.value,
            "num_records": self.layout.num_samples,
            "fingerprint": self.fingerprint,
        }
        if self.mix is not None or "mixture" in state:  # first: it says what differs
            mine = {"mixture": None if self.mix is None else self.mix.describe(), **mine}
        for key, value in mine.items():
            if key in state and state[key] != value:
                refuse(key, state[key], value)
        theirs = state.get("last_batch", s.last_batch.value)
        if (theirs == LastBatch.ROLLOVER.value) != (s.last_batch is LastBatch.ROLLOVER):
            refuse("last_batch", theirs, s.last_batch.value, "rollover's epochs are one stream")
        epoch = int(state["epoch"])
        legacy = "consumed" not in state
        changes: dict[str, int] = {}
        if s.shuffle is Shuffle.BLOCK:
            # the geometry the first run chose (NOTE [resume state])
            if legacy:
                geometry = {**_LEGACY_BLOCK, "block_parts": state.get("num_parts", self.num_parts)}
            else:
                geometry = {
                    k: state[k] for k in ("block_parts", "block_size", "window") if k in state
                }
            wanted = self.config.block_parts
            if wanted is not None and geometry.get("block_parts", wanted) != wanted:
                refuse("block_parts", geometry["block_parts"], wanted)
            changes = {k: int(v) for k, v in geometry.items() if v != getattr(s, k)}
        if not legacy:
            return epoch, int(state["consumed"]), changes
        # (epoch, step) of the saving run's geometry, which began at (0, 0)
        saved = Sampler(
            s.num_records,
            int(state.get("batch_size", self.batch_size)),
            num_parts=int(state.get("num_parts", self.num_parts)),
            last_batch=s.last_batch,
        )
        step = int(state["step"])
        check_step(step, saved.steps_in_epoch(epoch), epoch)  # at the end: nothing left
        return epoch, saved.consumed_at(epoch, step), changes

    # --- for subclasses -----------------------------------------------------------------

    def _produce(self) -> Batch:
        raise NotImplementedError

    def _end_epoch(self) -> None:
        """The last batch of the epoch has been taken."""

    def _start_next_epoch(self) -> None:
        """The position moved on to (epoch + 1, 0)."""

    def _sampler_changed(self) -> None:
        """A loaded state replaced the sampler: plans made ahead with the old one are stale."""

    def _restart(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        """Stop whatever runs ahead of the position and close the records."""
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
