"""The measured stages: each is a factory of (step, close); ``timed`` runs a step."""

from __future__ import annotations

import concurrent.futures
import io
import statistics
import time
from collections.abc import Callable
from typing import Any

import numpy as np

from ..augment import CropSpec, KeyedDraw
from ..decode import DecodePool
from ..pipeline.iterator import ImageRecordIter
from ..records.format import unpack_labels
from ..records.shards import open_records

# --- measuring --------------------------------------------------------------------


def timed(step: Callable[[], tuple[int, int]], seconds: float, repeats: int) -> dict:
    """Call ``step`` (returns images, bytes done) until ``seconds`` pass; repeat; rates."""
    step()  # warm-up: page cache, size cache, pools started
    images_rates, byte_rates = [], []
    for _ in range(repeats):
        images = nbytes = 0
        start = time.perf_counter()
        while True:
            i, b = step()
            images += i
            nbytes += b
            elapsed = time.perf_counter() - start
            if elapsed >= seconds:
                break
        images_rates.append(images / elapsed)
        byte_rates.append(nbytes / elapsed)
    return {
        "images_per_s": summary(images_rates),
        "MB_per_s": summary([r / 1e6 for r in byte_rates]),
    }


def summary(values: list[float]) -> dict:
    """Median, min and max of ``values``."""
    return {"median": statistics.median(values), "min": min(values), "max": max(values)}


class Data:
    """The benchmark's records, read once into memory for the stages that skip I/O."""

    def __init__(self, rec: str, storage_options: dict | None, batch_size: int) -> None:
        self.rec = rec
        self.storage_options = storage_options
        self.batch_size = batch_size
        with open_records(rec, storage_options=storage_options) as rf:
            self.num_records = len(rf)
            payloads = [bytes(p) for p in rf.read_many(range(len(rf)))]
        self.images = []
        for payload in payloads:
            _, _, start = unpack_labels(payload)
            self.images.append(payload[start:])
        self.image_bytes = [len(b) for b in self.images]
        self._cursor = 0

    def next_batch(self) -> list[bytes]:
        """The image bytes of the next ``batch_size`` records, wrapping at the end."""
        return [self.images[i] for i in self.next_indices()]

    def next_indices(self) -> np.ndarray:
        """Positions of the next ``batch_size`` records, in file order, wrapping at the end."""
        n = self.num_records
        idx = (self._cursor + np.arange(self.batch_size)) % n
        self._cursor = (self._cursor + self.batch_size) % n
        return idx


def stage_read(rec: str, storage_options: dict | None, batch_size: int):
    """Record reads alone, batch by batch in file order: the storage's limit."""
    rf = open_records(rec, storage_options=storage_options)
    cursor = [0]

    def step() -> tuple[int, int]:
        start = cursor[0]
        positions = [(start + j) % len(rf) for j in range(batch_size)]
        cursor[0] = (start + batch_size) % len(rf)
        payloads = rf.read_many(positions)
        return len(payloads), sum(len(p) for p in payloads)

    return step, rf.close


def decode_full(jpeg: Any, buf: bytes) -> int:
    """Decode one image at full size; the bytes of its pixels (0: nothing decodes it).

    JPEGs through ``jpeg`` (a PyTurboJPEG ``TurboJPEG``); what it refuses (PNGs, CMYK
    JPEGs) through Pillow, as any loader must decode those too.
    """
    from PIL import Image

    try:
        return jpeg.decode(buf).size
    except OSError:
        try:
            with Image.open(io.BytesIO(buf)) as im:
                return np.asarray(im.convert("RGB")).size
        except OSError:  # damaged
            return 0


def stage_turbo_decode(data: Data, threads: int):
    """Full-size decode of every image on a thread pool: the physical limit.

    Every image the stages compared with it decode is decoded here too (:func:`decode_full`).
    """
    from turbojpeg import TurboJPEG

    jpeg = TurboJPEG()
    executor = concurrent.futures.ThreadPoolExecutor(threads)

    def decode(buf: bytes) -> int:
        return decode_full(jpeg, buf)

    def step() -> tuple[int, int]:
        batch = data.next_batch()
        list(executor.map(decode, batch))
        return len(batch), sum(len(b) for b in batch)

    return step, executor.shutdown


def stage_native_pool(data: Data, threads: int, spec: CropSpec, out_shape, dtype):
    """The native decode pool on in-memory images: decode, crop, resize and flip, no I/O."""
    pool = DecodePool(threads)
    out = np.empty(out_shape, dtype=dtype)
    # Each image's window drawn by the pool as it decodes, as in the iterator: this stage is
    # decode + augment alone, the yardstick for what the pipeline around it costs.
    draws = KeyedDraw(spec, 0, 0)

    def step() -> tuple[int, int]:
        idx = np.asarray(data.next_indices(), dtype=np.int64)
        batch = [data.images[i] for i in idx]
        pool.decode_batch(batch, out, draw=draws, records=idx, layout="NCHW")
        return len(batch), sum(len(b) for b in batch)

    return step, pool.close


#: The iterator's augmentation in the stages unless told otherwise: RandomResizedCrop + flip.
RRC_FLIP = {"random_resized_crop": True, "rand_mirror": True}


def stage_iterator(
    rec, storage_options, threads, batch_size, shape, dtype, tracer=None, augment=None
):
    """The whole ``ImageRecordIter``: reads, decode, augmentation; bytes are estimated.

    ``augment``: the iterator's crop and flip keywords (None: :data:`RRC_FLIP`; a centre
    crop is ``{"resize": 256}``). Counts real (non-pad) images, and their bytes at the
    file's mean record length.
    """
    it = ImageRecordIter(
        rec,
        shape,
        batch_size,
        shuffle=True,
        dtype=dtype,
        preprocess_threads=threads,
        storage_options=storage_options,
        tracer=tracer,
        **(RRC_FLIP if augment is None else augment),
    )
    mean_length = float(it.records.lengths.mean())
    stream = [iter(it)]

    def step() -> tuple[int, int]:
        try:
            batch = next(stream[0])
        except StopIteration:
            stream[0] = iter(it)
            batch = next(stream[0])
        n = batch_size - batch.pad
        return n, int(mean_length * n)

    return step, it.close


def stage_pillow(data: Data, threads: int, spec: CropSpec):
    """What a torchvision ImageFolder loader does: Pillow decode, crop+resize, flip, per image."""
    from PIL import Image

    executor = concurrent.futures.ThreadPoolExecutor(threads)
    size = (spec.out_width, spec.out_height)
    counter = [0]
    draws = KeyedDraw(spec, 0, 0)

    def one(args) -> None:
        buf, window, flip = args
        with Image.open(io.BytesIO(buf)) as img:
            img = img.convert("RGB")
            x, y, w, h = (int(v) for v in window)
            img = img.resize(size, Image.BILINEAR, box=(x, y, x + w, y + h))
            if flip:
                img = img.transpose(Image.FLIP_LEFT_RIGHT)
            np.asarray(img)

    def step() -> tuple[int, int]:
        batch = data.next_batch()
        sizes = np.array([Image.open(io.BytesIO(b)).size for b in batch], dtype=np.int32)
        records = np.arange(counter[0], counter[0] + len(batch))
        windows, flips = draws.windows(sizes, records)
        counter[0] += len(batch)
        list(executor.map(one, zip(batch, windows, flips, strict=True)))
        return len(batch), sum(len(b) for b in batch)

    return step, executor.shutdown
