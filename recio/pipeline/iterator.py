"""ImageRecordIter: batches of decoded, augmented images, ready before the trainer asks.

    local:  __next__ ──submit──▶ native pool's queue (batches decoded back to back) ──▶ Batch
    remote: reader thread ──read_q──▶ 2 decode threads (native pool) ──ready_q──▶ __next__

A local file's batches are queued on the native pool by the consumer itself, a few ahead
(NOTE [queued batches] in :mod:`.queued`): the pool reads the records from the file's map,
draws each image's crop and flip (keyed per record, :class:`~recio.augment.KeyedDraw`) and
writes the pixels straight into a batch buffer (:class:`BatchBuffers`), in one native call
per batch (:mod:`recio.pipeline.read_decode`), with no Python thread in between. For a
remote file a reader thread fetches the upcoming batches' bytes ahead (coalesced ranged
reads) and two decode threads take the batches in turn (NOTE [two decode threads] in
:mod:`.remote`), each batch one native call over its records as fetched (NOTE [remote
batches on the pool]). Either way
``prefetch_buffer`` batches are decoded ahead (at least three), and memory stays at about
``prefetch_buffer + 1`` batches.

Threads belong to a :class:`~recio.pipeline.remote.RemotePipeline` (a local file's queued
batches to a :class:`~recio.pipeline.queued.QueuedPipeline`) that the iterator owns; they
never refer to the iterator itself, so an iterator dropped without ``close()`` is collected
and its finalizer stops them. Errors (in a thread, or in a batch's native call) travel in
turn with the batches and are raised by ``__next__`` with their origin. What both
strategies share is in :mod:`.run`; what the iterator shares with the DALI stage (batches,
stats, position, ``on_error``) in :mod:`.positioned`; its arguments are checked in
:mod:`.config`.
"""

from __future__ import annotations

import dataclasses
import time
import weakref
from typing import Any

import numpy as np

from ..decode import DecodePool, default_backend
from ..storage import FetchOptions, Lookahead
from .autotune import Governor, ThreadTuner
from .batch_buffers import BatchBuffers
from .config import IterConfig
from .mxnet_inputs import ImageList, load_mean_image
from .plan import ResourcePlan, log_once, make_plan
from .positioned import Batch, IterStats, PositionedIterator
from .queued import QueuedPipeline
from .remote import RemotePipeline
from .run import DEFAULT_PREFETCH, Failure, ready_depth
from .trace import Tracer

__all__ = ["Batch", "BatchBuffers", "ImageRecordIter", "IterStats"]


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
        super().__init__(_planned(config, self.plan))
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
            config.batch_shape, np.dtype(config.normalize.dtype), ready_depth(config) + 4
        )
        self._pipeline: RemotePipeline | QueuedPipeline | None = None
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
        if isinstance(item, Failure):
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
        # The pipeline goes on with the next epoch's first batches, and is kept if the
        # consumer goes on to that epoch (NOTE [epoch overlap] in .queued)
        self._governor.pause()

    def _start_next_epoch(self) -> None:
        if self._pipeline is None or not self._pipeline.carry_on(self.epoch, self.step):
            self._stop_pipeline()

    def _restart(self) -> None:
        self._stop_pipeline()

    def _sampler_changed(self) -> None:
        self._lookahead.close()  # fetched for the old sampler's plans

    # --- threads -----------------------------------------------------------------------

    def _start_pipeline(self) -> None:
        inputs = {"imglist": self._imglist, "mean_img": self._mean_img}
        if self.records.is_local:
            self._pipeline = QueuedPipeline(self, self.epoch, self.step, **inputs)
        else:
            self._pipeline = RemotePipeline(
                self, self.epoch, self.step, lookahead=self._lookahead, **inputs
            )
        self._governor.started()
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
    if config.prefetch_buffer is None and plan.depth != DEFAULT_PREFETCH:
        changes["prefetch_buffer"] = plan.depth
    if config.storage.fetch is None and plan.read_ahead != FetchOptions().read_ahead:
        fetch = FetchOptions(read_ahead=plan.read_ahead)
        changes["storage"] = dataclasses.replace(config.storage, fetch=fetch)
    return dataclasses.replace(config, **changes) if changes else config


def _shutdown(pipeline_box: list, pool: DecodePool, lookahead: Lookahead) -> None:
    # A finalizer made after the pool's runs before it at exit: no thread is
    # left inside a decode call when the pool shuts down.
    if pipeline_box[0] is not None:
        pipeline_box[0].stop()
    lookahead.close()
    pool.close()
