"""ImageRecordIter's MXNet-named arguments, checked once and turned into what they describe.

Both iterators — the CPU ``ImageRecordIter`` and the DALI stage — take the same
arguments and must read the same records in the same order with the same
crops; they build all of that here.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

import numpy as np

from . import dist
from .augment import CropSpec
from .errors import RecordIOError
from .format import IR_HEADER_SIZE, unpack_labels
from .recordio import RecordFile
from .sampler import LastBatch, Sampler, Shuffle


@dataclass
class ReadPlan:
    """The records, which of them this rank reads in which order, and how they are cropped."""

    records: RecordFile
    sampler: Sampler
    crop: CropSpec
    data_shape: tuple[int, int, int]
    part_index: int
    num_parts: int
    mean: tuple[float, float, float] | None  # None: no normalisation
    std: tuple[float, float, float] | None


def read_plan(
    path_imgrec: str,
    data_shape: Sequence[int],
    batch_size: int,
    *,
    path_imgidx: str | None,
    shuffle: bool,
    seed: int,
    rand_crop: bool,
    random_resized_crop: bool,
    min_random_area: float,
    max_random_area: float,
    min_aspect_ratio: float,
    max_aspect_ratio: float,
    rand_mirror: bool,
    resize: int,
    mean: tuple[float, float, float],
    std: tuple[float, float, float],
    dtype: str,
    layout: str,
    label_width: int,
    part_index: int | None,
    num_parts: int | None,
    round_batch: bool,
    last_batch: str | None,
    on_error: str,
    kv: Any,
    storage_options: dict[str, Any] | None,
    shuffle_mode: str,
) -> ReadPlan:
    """Check the arguments (clear ValueErrors naming the bad one), then open and plan."""
    shape = tuple(int(v) for v in data_shape)
    if len(shape) != 3 or min(shape) <= 0:
        raise ValueError(f"data_shape must be (channels, height, width), not {data_shape}")
    if shape[0] != 3:
        raise ValueError(f"data_shape must have 3 channels (RGB), not {shape[0]}")
    if batch_size <= 0:
        raise ValueError(f"batch_size must be positive, not {batch_size}")
    if dtype not in ("uint8", "float32", "float16"):
        raise ValueError(f"dtype must be uint8, float32 or float16, not {dtype!r}")
    if layout not in ("NCHW", "NHWC"):
        raise ValueError(f"layout must be NCHW or NHWC, not {layout!r}")
    if on_error not in ("skip", "raise", "replace"):
        raise ValueError(f"on_error must be 'skip', 'raise' or 'replace', not {on_error!r}")
    if label_width < 1:
        raise ValueError(f"label_width must be at least 1, not {label_width}")
    if min(std) <= 0:
        raise ValueError(f"std_r/g/b must be positive, not {std}")
    normalize = mean != (0.0, 0.0, 0.0) or std != (1.0, 1.0, 1.0)
    if dtype == "uint8" and normalize:
        raise ValueError("mean/std normalisation needs dtype float32 or float16, not uint8")
    if not 0 < min_random_area <= max_random_area <= 1:
        raise ValueError("need 0 < min_random_area <= max_random_area <= 1")
    if not 0 < min_aspect_ratio <= max_aspect_ratio:
        raise ValueError("need 0 < min_aspect_ratio <= max_aspect_ratio")
    if last_batch is None:  # MXNet's round_batch: pad the last batch, or roll over
        last_batch = "pad" if round_batch else "rollover"

    world = dist.discover(kv, part_index, num_parts)
    records = RecordFile(path_imgrec, path_imgidx, storage_options=storage_options)
    sampler = Sampler(
        len(records),
        batch_size,
        part_index=world.rank,
        num_parts=world.size,
        shuffle=Shuffle(shuffle_mode) if shuffle else Shuffle.NONE,
        seed=seed,
        last_batch=LastBatch(last_batch),
    )
    crop = CropSpec(
        out_height=shape[1],
        out_width=shape[2],
        resize=resize,
        rand_crop=rand_crop,
        random_resized_crop=random_resized_crop,
        min_area=min_random_area,
        max_area=max_random_area,
        min_aspect=min_aspect_ratio,
        max_aspect=max_aspect_ratio,
        rand_mirror=rand_mirror,
    )
    return ReadPlan(
        records, sampler, crop, shape, world.rank, world.size,
        mean if normalize else None, std if normalize else None,
    )  # fmt: skip


def unpack_batch(
    records: RecordFile, positions: np.ndarray, payloads: Sequence[Any], label_width: int
) -> tuple[np.ndarray, np.ndarray, list[int]]:
    """Labels (float32, ``label_width`` each), record ids (int64) and where each payload's
    image starts, for one batch read from ``records`` at ``positions``.

    Raises:
        RecordIOError: a record too short for its IRHeader, naming the file and byte offset.
    """
    n = len(payloads)
    labels = np.zeros((n, label_width), dtype=np.float32)
    ids = np.zeros(n, dtype=np.int64)
    starts = []
    for j, payload in enumerate(payloads):
        if len(payload) < IR_HEADER_SIZE:
            raise RecordIOError(
                f"record of {len(payload)} bytes has no image header",
                path=records.url,
                offset=int(records.offsets[positions[j]]),
                record_index=int(positions[j]),
            )
        labels[j], ids[j], start = unpack_labels(payload, label_width)
        starts.append(start)
    return labels, ids, starts


class PlannedIterator:
    """What both iterators share: where they stand in the plan, and its saved form.

    Subclasses set ``records``, ``sampler``, ``seed``, ``batch_size``, ``part_index`` and
    ``num_parts``, and implement ``_restart()`` (drop whatever runs ahead of the position)
    and ``close()``.
    """

    records: RecordFile
    sampler: Sampler
    seed: int
    batch_size: int
    part_index: int
    num_parts: int
    _epoch = 0
    _step = 0
    _epoch_done = False

    def __len__(self) -> int:
        """Batches in the current epoch."""
        return self.sampler.steps_in_epoch(self._epoch)

    @property
    def epoch(self) -> int:
        return self._epoch

    def state_dict(self) -> dict[str, Any]:
        """Where the iterator is: the next batch to yield is (epoch, step)."""
        epoch, step = self._epoch, self._step
        if self._epoch_done:
            epoch, step = epoch + 1, 0
        return {
            "epoch": epoch,
            "step": step,
            "seed": self.seed,
            "num_records": len(self.records),
            "batch_size": self.batch_size,
            "part_index": self.part_index,
            "num_parts": self.num_parts,
        }

    def load_state_dict(self, state: dict[str, Any]) -> None:
        """Continue from a ``state_dict()``: the same record ids and augmentation draws."""
        for key in ("seed", "num_records", "batch_size", "num_parts"):
            mine = self.state_dict()[key]
            if key in state and state[key] != mine:
                raise ValueError(
                    f"state was saved with {key}={state[key]}, this iterator has {mine}"
                )
        self._restart()
        self._epoch, self._step = int(state["epoch"]), int(state["step"])
        self._epoch_done = False

    def _restart(self) -> None:
        raise NotImplementedError

    def close(self) -> None:
        raise NotImplementedError

    def __enter__(self):
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()
