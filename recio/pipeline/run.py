"""What an iterator's two strategies share: a pipeline run from (epoch, step) on.

An :class:`~recio.pipeline.iterator.ImageRecordIter` hands its batches to one of two
strategies: a local file's batches queued on the pool by the consumer
(:class:`~recio.pipeline.queued.QueuedPipeline`), a remote file's reader and decode threads
(:class:`~recio.pipeline.remote.RemotePipeline`). :class:`PipelineRun` holds what both copy
of the iterator (never the iterator itself, so a dropped iterator is collected) and turns a
decoded batch into the consumer's item, ``on_error`` applied.
"""

from __future__ import annotations

import threading
from dataclasses import dataclass
from typing import TYPE_CHECKING

import numpy as np

from ..augment import KeyedDraw
from ..decode import DecodeOptions
from .config import IterConfig
from .mxnet_inputs import ImageList
from .positioned import Batch
from .read_decode import PendingBatch, submit_read_and_decode
from .refill import Refill, decoded

if TYPE_CHECKING:
    from .iterator import ImageRecordIter

__all__ = [
    "DEFAULT_PREFETCH",
    "POLL",
    "Failure",
    "PipelineRun",
    "RawBatch",
    "queue_depth",
    "ready_depth",
]

POLL = 0.1  # seconds between checks of the stop flag while blocked on a queue
DEFAULT_PREFETCH = 4


def queue_depth(config: IterConfig) -> int:
    """Read batches (encoded images, headers parsed) the read queue holds for the decoders."""
    return max(1, (config.prefetch_buffer or DEFAULT_PREFETCH) - 1)


def ready_depth(config: IterConfig) -> int:
    """Decoded batches the ready queue holds.

    With the two being decoded, ``prefetch_buffer`` batches ahead (at least three).
    """
    return max(1, (config.prefetch_buffer or DEFAULT_PREFETCH) - 2)


@dataclass
class Failure:
    """An error on its way to the consumer, raised by ``__next__`` in its batch's turn."""

    error: BaseException


@dataclass
class RawBatch:
    """One batch to decode: its plan's step, positions and draws, its records' bytes."""

    epoch: int
    step: int
    positions: np.ndarray
    pad: int
    payloads: list | None  # the records' bytes, fetched ahead (remote); None: read from the map
    epochs: np.ndarray | None  # each slot's epoch (rollover), for its draws; None: ``epoch``
    keys: np.ndarray | None = None  # each slot's draw key (a mixture's copies); None: positions


class PipelineRun:
    """What both pipelines need of the iterator, copied (never the iterator itself)."""

    def __init__(
        self,
        it: ImageRecordIter,
        epoch: int,
        step: int,
        *,
        imglist: ImageList | None,
        mean_img: np.ndarray | None,
    ) -> None:
        config = it.config
        self.records = it.records
        self.sampler = it.sampler
        self.pool = it.pool
        self.policy = it.policy
        self._config = config
        self.imglist = imglist
        self.label_width = config.label_width
        # With an image list the records' own labels are not used: read as one wide
        self.read_label_width = 1 if imglist is not None else config.label_width
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
            mean_img=mean_img,
        )
        self.stopping = threading.Event()
        self.buffers = it.buffers
        self.refill = Refill(self.sampler)  # NOTE [refill]
        self.begin_epoch(epoch, step)

    def begin_epoch(self, epoch: int, step: int) -> None:
        """Deliver ``epoch``'s batches from ``step`` on: its draws, its last step."""
        self.epoch, self.first_step = epoch, step
        self.end_step = self.sampler.steps_in_epoch(epoch)
        self.draw = self.epoch_draw(epoch)
        self._take = decoded(
            self.records,
            self.pool,
            self._config.batch_shape[1:],
            self.buffers.dtype,
            label_width=self.read_label_width,
            draw=self.draw,
            options=self.decode_options,
            label_maps=self.label_maps,
        )

    def epoch_draw(self, epoch: int) -> KeyedDraw:
        """The crop, flip, colour and geometry draws of ``epoch``'s records."""
        config = self._config
        geometry = config.geometry if config.geometry.enabled else None
        return KeyedDraw(config.crop, config.draw_seed, epoch, config.colour, geometry)

    def raw_batch(self, plan, payloads) -> RawBatch:
        """The :class:`RawBatch` of a sampler's ``plan`` (``payloads``: fetched ahead, or None)."""
        epochs = self.sampler.slot_epochs(plan)
        return RawBatch(
            plan.epoch, plan.step, plan.positions, plan.pad, payloads, epochs, plan.keys
        )

    def carry_on(self, epoch: int, step: int) -> bool:
        """Whether this run goes on to deliver ``epoch`` from ``step`` (NOTE [epoch overlap]).

        True when the batches it decoded ahead are exactly those; it then delivers them.
        False: the caller stops it and starts another run there.
        """
        return False

    def submit(self, raw: RawBatch, out: np.ndarray) -> PendingBatch:
        """``raw``'s records read and decoded into ``out``: its native calls queued."""
        draw = self.draw  # the delivered epoch's; a batch read ahead is the next one's
        if draw.epoch != raw.epoch:
            draw = self.epoch_draw(raw.epoch)
        return submit_read_and_decode(
            self.records,
            raw.positions,
            self.pool,
            out,
            label_width=self.read_label_width,
            draw=draw,
            options=self.decode_options,
            payloads=raw.payloads,
            raise_bad_headers=self.raise_bad_headers,
            epochs=raw.epochs,
            keys=raw.keys,
            label_maps=self.label_maps,
        )

    def consumer_item(self, raw: RawBatch, out: np.ndarray, got) -> tuple:
        """The consumer's item of a decoded batch: the Batch, and what the stats count."""
        status, labels, ids, reasons = got.status, got.labels, got.ids, got.reasons or ()
        if got.reasons is not None:
            labels, ids = self._bad_images(raw, got, out)
        if self.imglist is not None:  # MXNet's path_imglist: the list's labels, by header id
            labels = self.imglist.lookup(ids)
        label = labels[:, 0] if self.label_width == 1 else labels
        batch = Batch(out, label, ids, raw.pad, raw.epoch, raw.step)
        return batch, status, reasons, got.ids

    def _bad_images(self, raw: RawBatch, got, out: np.ndarray):
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

    def _refilled(self, raw: RawBatch, got, out: np.ndarray):
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
