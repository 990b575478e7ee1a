"""The training core's input: ImageRecordIter (or the DALI stage on the GPU), timed."""

from __future__ import annotations

import logging
import time
from collections.abc import Iterator
from typing import Any

import numpy as np

from .._install import install_hint
from ..pipeline.iterator import ImageRecordIter
from ..records.shards import open_records
from .config import MEAN, STD, TrainConfig

log = logging.getLogger("recio.train")

# --- data -------------------------------------------------------------------------------


def count_classes(rec: str, storage_options: dict[str, Any] | None = None) -> int:
    """The largest label in ``rec`` (a file or shards) plus one (reads every record header)."""
    largest = 0
    with open_records(rec, storage_options=storage_options) as rf:
        for i in range(len(rf)):
            payload = rf.read(i)
            largest = max(largest, int(np.frombuffer(payload, np.float32, 1, 4)[0]))
    return largest + 1


def make_iterator(config: TrainConfig, rec: str, train: bool) -> Any:
    """ImageRecordIter for training (shuffled, augmented) or validation (centre crop, padded)."""
    layout = "NHWC" if config.channels_last else "NCHW"
    size = config.image_size
    kwargs = dict(
        path_imgrec=rec,
        data_shape=(3, size, size),
        batch_size=config.batch_size,
        mean_r=MEAN[0],
        mean_g=MEAN[1],
        mean_b=MEAN[2],
        std_r=STD[0],
        std_g=STD[1],
        std_b=STD[2],
        layout=layout,
        seed=config.seed,
        preprocess_threads=config.preprocess_threads,
        prefetch_buffer=config.prefetch_buffer,
        storage_options=config.storage_options,
        last_batch="pad",
    )
    if train:
        augment = config.augment
        kwargs.update(
            shuffle=True,
            random_resized_crop=augment,
            min_random_area=config.min_random_area,
            rand_mirror=augment,
            resize=-1 if augment else size,
        )
    else:
        kwargs.update(shuffle=False, resize=size)
    if config.device == "cuda":
        return _dali_iterator(kwargs)
    return ImageRecordIter(**kwargs)


def _dali_iterator(kwargs: dict[str, Any]) -> Any:
    # The GPU path: raw bytes from the .rec, nvJPEG decode and augmentation in DALI.
    try:
        from recio.dali import DALIImageRecordIter
    except ImportError as exc:
        raise RuntimeError(
            "--device cuda feeds the model through the DALI stage, which is not available "
            f"here ({exc}); {install_hint('dali')}, or use --device cpu"
        ) from exc
    return DALIImageRecordIter(**kwargs)


def timed(it: Any) -> Iterator[tuple[Any, float]]:
    """Yield (batch, seconds spent waiting for it)."""
    iterator = iter(it)
    while True:
        start = time.perf_counter()
        try:
            batch = next(iterator)
        except StopIteration:
            return
        yield batch, time.perf_counter() - start
