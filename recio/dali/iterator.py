"""``DALIImageRecordIter``: ImageRecordIter's interface over a DALI pipeline fed by recio."""

from __future__ import annotations

from typing import Any

import numpy as np

from ..pipeline.config import IterConfig
from ..pipeline.positioned import Batch, PositionedIterator
from ..records.checksum import CHECKSUM_MISMATCH
from ._device import resolve_device
from .pipeline import build_pipeline
from .source import CROP_SOURCES, RecioSource, readable_bytes

_DEFAULT_THREADS = 2
_DEFAULT_PREFETCH = 2


class DALIImageRecordIter(PositionedIterator):
    """``ImageRecordIter``'s interface over a DALI pipeline fed by recio.

    Takes the same keywords as :class:`recio.pipeline.iterator.ImageRecordIter` (checked into the
    same :class:`~recio.pipeline.config.IterConfig`, or ``config=`` given whole), plus DALI's
    ``shard_id``/``num_shards`` for ``part_index``/``num_parts``, and gives the same record
    ids per rank and step, and the same ``state_dict()``. ``preprocess_threads`` is DALI's
    ``num_threads`` (default 2); ``prefetch_buffer`` its ``prefetch_queue_depth`` (2).

    Args:
        device: ``"gpu"`` (nvJPEG, GPU operators), ``"cpu"`` (the same graph as a DALI CPU
            pipeline) or ``"auto"`` (the GPU when DALI sees one).
        device_id: the GPU.
        crop_source: ``"recio"`` (default) crops the windows ImageRecordIter would draw, so
            augmentation repeats exactly after a resume; ``"dali"`` uses DALI's own random
            operators.
        validate: how bad images are found before DALI sees them: ``"none"``, ``"header"``,
            ``"structure"`` (default) or ``"decode"`` (see :mod:`recio.dali.source`).
        parallel, py_num_workers: run the source in DALI's parallel external source workers.
        cut: with ``crop_source="recio"``, hand DALI each restart-marked JPEG cut to its
            crop's segments (NOTE [restart cut]): less entropy decoding, the same pixels.

    Yields :class:`recio.pipeline.positioned.Batch` whose ``data`` is a torch tensor on the GPU
    (``device="gpu"``; copied out of DALI's buffer, so it stays valid) or a numpy array
    (``device="cpu"``).
    """

    def __init__(
        self,
        path_imgrec: str | None = None,
        data_shape: tuple[int, int, int] | None = None,
        batch_size: int | None = None,
        *,
        config: IterConfig | None = None,
        shard_id: int | None = None,
        num_shards: int | None = None,
        device: str = "auto",
        device_id: int = 0,
        crop_source: str = "recio",
        validate: str = "structure",
        parallel: bool = False,
        py_num_workers: int = 1,
        cut: bool = False,
        **keywords: Any,
    ) -> None:
        self.device = resolve_device(device)  # first: a missing GPU is the clearest error
        if crop_source not in CROP_SOURCES:
            raise ValueError(f"crop_source must be 'recio' or 'dali', not {crop_source!r}")
        if shard_id is not None:  # DALI's names for the shard
            keywords.setdefault("part_index", shard_id)
        if num_shards is not None:
            keywords.setdefault("num_parts", num_shards)
        super().__init__(IterConfig.given(config, path_imgrec, data_shape, batch_size, **keywords))
        config = self.config
        unsupported = config.dali_unsupported()
        if unsupported:
            raise ValueError(
                f"not supported by the DALI stage yet: {', '.join(unsupported)}: use "
                "recio.ImageRecordIter (the CPU decoder) for them"
            )
        self.crop = config.crop
        self.validate = validate
        self.crop_source = crop_source
        self.cut = cut
        self._pipe_args = {
            "batch_size": config.batch_size,
            "device": self.device,
            "device_id": device_id,
            "num_threads": (
                config.preprocess_threads
                if isinstance(config.preprocess_threads, int)
                else _DEFAULT_THREADS  # None or "auto": DALI's own default
            ),
            "prefetch_queue_depth": config.prefetch_buffer or _DEFAULT_PREFETCH,
            "seed": config.seed,
            "normalize": config.normalize,
            "interpolation": config.interpolation,
            "parallel": parallel,
            "py_num_workers": py_num_workers,
        }
        self._pipe: Any = None
        self._built_readable = 0  # readable_bytes as the pipeline was built
        self._torch: Any = None
        # Checked up front: a bad validate value fails here, not in DALI's first run.
        self.source()

    def source(self, start_epoch: int = 0, start_step: int = 0) -> RecioSource:
        """A source for this iterator's settings that starts at ``(start_epoch, start_step)``."""
        return RecioSource(
            self.records,
            self.sampler,
            label_width=self.label_width,
            on_error=self.config.on_error,
            validate=self.validate,
            crop=self.crop,
            windows=self.crop_source == "recio",
            seed=self.seed,
            start_epoch=start_epoch,
            start_step=start_step,
            label_maps=() if self.mix is None else self.mix.label_maps,
            cut=self.cut,
        )

    # --- PositionedIterator ------------------------------------------------------------

    def _produce(self) -> Batch:
        images, labels, meta = self._run()
        labels = labels.as_array().reshape(len(meta), self.label_width)
        epoch, step, pad = (int(v) for v in meta[0, 1:4])
        if (epoch, step) != (self.epoch, self.step):
            raise RuntimeError(
                f"recio.dali: got batch {epoch}/{step}, expected {self.epoch}/{self.step}"
            )
        # The source (maybe in a worker process) sends each bad slot's record id and status,
        # and whether its checksum did not match.
        bad = meta[:, 4] >= 0
        status = np.where(bad, meta[:, 5], 0)
        reasons = [CHECKSUM_MISMATCH if m else None for m in (bad & (meta[:, 6] == 1)).tolist()]
        self.stats.count_batch(
            status,
            np.where(bad, meta[:, 4], meta[:, 0]),
            reasons,
            pad=pad,
            on_error=self.config.on_error,
            url=self.records.url,
        )
        label = labels[:, 0] if self.label_width == 1 else labels
        return Batch(self._to_output(images), label, meta[:, 0].copy(), pad, epoch, step)

    def _run(self) -> tuple[Any, Any, np.ndarray]:
        """One run of the pipeline: images, labels, meta (as an array).

        Run again from a new pipeline where the files lost bytes after the source read the
        batch (NOTE [dali map check] in recio.dali.source): DALI then copied zeros. The new
        source sees the loss and applies on_error. Each rerun needs a further loss, so this
        ends (the readable bytes only go down).
        """
        while True:
            if self._pipe is None:
                # The pipeline starts where the iterator stands: a resume is a new source start.
                self._built_readable = readable_bytes(self.records)
                self._pipe = build_pipeline(self.source(self.epoch, self.step), **self._pipe_args)
            try:
                images, labels, meta = self._pipe.run()
            except StopIteration:  # cannot happen while step < len; keep the pipeline honest
                self._restart()
                raise RuntimeError("recio.dali: the source ended before the epoch did") from None
            except Exception:
                self._restart()  # DALI's pipeline is invalid after an error
                if readable_bytes(self.records) < self._built_readable:
                    continue  # DALI refused the zeros of a lost record: the batch again
                raise
            meta = meta.as_array()
            if readable_bytes(self.records, meta[:, 8]) >= meta[0, 7]:
                return images, labels, meta
            self._restart()  # lost under DALI's copy: the batch again

    def _to_output(self, images: Any) -> Any:
        if self.device == "cpu":
            return images.as_array()
        if self._torch is None:
            import torch

            self._torch = torch
        # Copy out of DALI's buffer (reused after prefetch_queue_depth runs) on torch's stream.
        return self._torch.from_dlpack(images.as_tensor()).clone()

    def _end_epoch(self) -> None:
        # The source raises StopIteration at the end; DALI wants that seen before reset().
        if self._pipe is None:
            return
        try:
            while True:
                self._pipe.run()
        except StopIteration:
            pass

    def _start_next_epoch(self) -> None:
        if self._pipe is not None:
            self._pipe.reset()  # DALI's next epoch is the source's next epoch

    def _restart(self) -> None:
        self._pipe = None  # DALI frees the pipeline (and its workers) when it is collected

    def close(self) -> None:
        """Drop the pipeline and close the file."""
        self._closed = True
        self._restart()
        self.records.close()
